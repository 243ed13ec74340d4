"""Event streams for the advisory rules: the recorded demo run, and a builder for constructed
ones (tests_support.advisories.Stream)."""

from __future__ import annotations

import pytest

from tbconsole.record import events as ev
from tbconsole.record.events import read_events

from tests_support.advisories import Stream, cleared, raised
from tests_support.recorded import DEMO_RUN_EVENTS


@pytest.fixture(scope="session")
def recorded() -> list[ev.Event]:
    """A real 2-step demo run's events (recorded; 2 groups × 4 trials per step)."""
    return list(read_events(DEMO_RUN_EVENTS))


@pytest.fixture
def stream() -> Stream:
    return Stream()


@pytest.fixture
def advisories():
    """(raised, cleared) filters over a list of advisory events."""
    return raised, cleared
