"""Snapshots (pytest-textual-snapshot) of a transcript built from capture files, in the dark
and light themes at 120×36: instruction, turns with their new messages (tool output with
hostile strings shown inert), reasoning and replies, a rejected request, the verifier.
Update after an intended change: pytest tests/ui/test_transcript_snapshots.py --snapshot-update"""

import pytest

from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import Replay

from tests_support.recorded import record_finished
from tests_support.ui import T_FIXED

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


async def open_transcript(pilot):
    await pilot.pause(0.2)
    pilot.app.tick()
    await pilot.press("right", "down", "enter")
    await pilot.pause(0.2)
    await pilot.app.workers.wait_for_complete()
    await pilot.press("home")
    await pilot.pause(0.2)
    pilot.app.tick()
    await pilot.pause(0.1)


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_transcript(snap_compare, tmp_path, theme):
    events = record_finished(tmp_path / "run")
    app = ConsoleApp(replay=Replay(events), mode="replay", theme=theme, clock=lambda: T_FIXED)
    assert snap_compare(app, terminal_size=(120, 36), run_before=open_transcript)
