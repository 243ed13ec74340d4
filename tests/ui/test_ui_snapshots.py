"""Snapshots (pytest-textual-snapshot) of the main screen in the dark and light themes at 120×36
and 80×24, the error modal and the paused state (the transcript's are in test_transcript_snapshots.py).
A fake clock and recorded events keep them deterministic.
Update after an intended change: pytest tests/ui --snapshot-update"""

import pytest

from tbconsole.record.events import ControlChanged
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import ListSource, LocalControls, Replay

from tests_support.ui import T_FIXED, settle

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


class _Control:
    """Accepts every command (the snapshot only shows what the console offers)."""

    def apply(self, command, argument=None):
        pass


@pytest.mark.parametrize("theme", ["dark", "light"])
@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
def test_main_screen(snap_compare, finished_events, theme, size):
    app = ConsoleApp(replay=Replay(finished_events), mode="replay", theme=theme, clock=lambda: T_FIXED)
    assert snap_compare(app, terminal_size=size, run_before=settle)


def test_paused(snap_compare, finished_events):
    end = next(i for i, e in enumerate(finished_events) if isinstance(e, ControlChanged) and e.state == "paused")
    events = finished_events[: end + 1]
    app = ConsoleApp(source=ListSource(events), controls=LocalControls(_Control()), clock=lambda: events[-1].ts + 12)
    assert snap_compare(app, terminal_size=(120, 36), run_before=settle)


def test_error_modal(snap_compare, awaiting_events):
    app = ConsoleApp(
        source=ListSource(awaiting_events), controls=LocalControls(_Control()), clock=lambda: awaiting_events[-1].ts + 3
    )
    assert snap_compare(app, terminal_size=(120, 36), run_before=settle)
