import pytest

from tbconsole.record.events import read_events

from tests_support.paths import FIXTURES


@pytest.fixture(autouse=True)
def own_config_home(tmp_path_factory, monkeypatch):
    """The user's tbconsole settings (the theme kept between consoles) in a folder of the test's
    own: a console test never reads or writes the real ~/.config/tbconsole."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))


@pytest.fixture
def finished_events():
    return list(read_events(FIXTURES / "finished" / "events.jsonl"))


@pytest.fixture
def awaiting_events():
    return list(read_events(FIXTURES / "awaiting" / "events.jsonl"))
