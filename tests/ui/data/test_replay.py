"""A replay's step marks over a real runner's events."""

from tbconsole.record.events import read_events

from tests_support.paths import FIXTURES


def test_replay_marks_without_batch_events():
    """The real runner's demo run (fixtures/demo-run) sends no BatchStarted: steps start at their
    first GroupStarted."""
    from tbconsole.ui.data.source import Replay

    events = list(read_events(FIXTURES / "demo-run" / "events.jsonl"))
    replay = Replay(events)
    assert len(replay.marks) == 2
    state = replay.seek(replay.marks[1])
    assert state.step == 0 and state.completed_steps == 1
    assert replay.seek(len(events)).finished
