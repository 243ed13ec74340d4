import time
from pathlib import Path

import pytest

from tbconsole.record.events import read_events

FIXTURES = Path(__file__).parent / "fixtures"
T_FIXED = 1_767_225_600.0 + 400  # the fake clock of app tests (the synthetic run starts at T0)


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


def recorded_runs() -> list[Path]:
    """Every recorded events.jsonl under fixtures/ (synthetic ones and real runs' files)."""
    return sorted(FIXTURES.glob("*/events.jsonl"))


async def wait_for(pilot, predicate, timeout=10.0, step=0.05):
    """Let the app run until ``predicate()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await pilot.pause(step)
    raise AssertionError("condition not reached in time")


def rendered(widget, width=120) -> str:
    """A widget's content as plain text."""
    from rich.console import Console

    console = Console(width=width, record=True, file=open("/dev/null", "w"))
    console.print(widget.content)
    return console.export_text()
