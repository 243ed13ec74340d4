from pathlib import Path

import pytest

from tbconsole.events import read_events

FIXTURES = Path(__file__).parent / "fixtures"
T_FIXED = 1_767_225_600.0 + 400  # the fake clock of app tests (the synthetic run starts at T0)


@pytest.fixture
def finished_events():
    return list(read_events(FIXTURES / "finished" / "events.jsonl"))


@pytest.fixture
def awaiting_events():
    return list(read_events(FIXTURES / "awaiting" / "events.jsonl"))


def recorded_runs() -> list[Path]:
    """Every recorded events.jsonl under fixtures/ (synthetic ones and real runs' files)."""
    return sorted(FIXTURES.glob("*/events.jsonl"))
