"""`tbconsole attach` on a finished run (issue 21): the console opens at the run's end from its
reducer snapshot and the events after it, keeps none of the run's events in memory, and moves
through the steps (`[ ] { }`) by folding the file again: each move gives the state a fresh fold
of the events before it gives. The summary printed on closing is the run's end, wherever the
replay was. And `w` keeps its index of the steps between opens."""

import threading

import pytest

from tbconsole.entry.attach import closing_summary
from tbconsole.record.events import BatchStarted, Event, EventsReader
from tbconsole.record.lease import read_lease
from tbconsole.record.runfolder import RunFolder
from tbconsole.state import reduce_all
from tbconsole.state import snapshot as snapshot_module
from tbconsole.state.snapshot import encode, write_snapshot
from tbconsole.state.timeline import StepReader
from tbconsole.synthetic.run import synthetic_run, write_jsonl
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import FileReplay, Replay, index_steps, step_marks
from tbconsole.ui.present.wording import exit_summary

from tests_support.ui import wait_for

pytestmark = pytest.mark.timeout(120)
WAIT_S = 60.0  # a loaded machine: conditions, never sleeps, so only an upper bound


def finished_run(log_path, *, snapshot: bool = True, steps: int = 8) -> list[Event]:
    """A finished run's folder; with the snapshot its runner leaves (at the last step's start:
    the events after it are the last step's, folded on opening)."""
    events = list(synthetic_run(steps=steps, groups=3, group_size=3, turns=(3, 8), log_path=str(log_path)))
    path = write_jsonl(events, RunFolder(log_path).events)
    if snapshot:
        last = max(i for i, e in enumerate(events) if isinstance(e, BatchStarted))
        with EventsReader(path, _offset_of_line(path, last)) as reader:
            write_snapshot(reduce_all(events[:last]), reader)
    return events


def _offset_of_line(path, line: int) -> int:
    data = path.read_bytes()
    offset = 0
    for _ in range(line):
        offset = data.index(b"\n", offset) + 1
    return offset


def holds_no_events(replay) -> bool:
    """Structurally: no attribute of the replay is a collection of events."""
    for value in vars(replay).values():
        if isinstance(value, (list, tuple)) and any(isinstance(v, Event) for v in value):
            return False
    return not isinstance(getattr(replay, "events", range(0)), list)


async def open_finished(pilot, app) -> FileReplay:
    await wait_for(pilot, lambda: not app.loading and app.replay is not None, WAIT_S)
    assert isinstance(app.replay, FileReplay)
    return app.replay


async def press(pilot, app, key: str) -> None:
    await pilot.press(key)
    await wait_for(pilot, lambda: app.replay_settled, WAIT_S)
    await pilot.pause()


def test_index_finds_the_steps_as_step_marks_does(tmp_path):
    events = finished_run(tmp_path / "run", snapshot=False)
    path = RunFolder(tmp_path / "run").events
    size = path.stat().st_size
    for chunk in (256, 4096, 1 << 20):  # lines cut across chunks, and one chunk
        index = index_steps(path, size, chunk=chunk)
        assert index.marks == step_marks(events) and index.lines == len(events) and index.end == size
        assert all(path.read_bytes()[o:].startswith(b'{"v":1,"kind":"batch.started"') for o in index.offsets)


@pytest.mark.e2e
@pytest.mark.parametrize("snapshot", [True, False])
async def test_a_finished_run_opens_at_its_end_from_the_snapshot(tmp_path, monkeypatch, snapshot):
    log_path = tmp_path / "run"
    events = finished_run(log_path, snapshot=snapshot)
    folded = []
    real_reduce = snapshot_module.reduce
    monkeypatch.setattr(snapshot_module, "reduce", lambda s, e: folded.append(1) or real_reduce(s, e))
    app = ConsoleApp(replay_path=RunFolder(log_path).events)
    async with app.run_test(size=(120, 36)) as pilot:
        replay = await open_finished(pilot, app)
        assert app.mode == "replay" and not app.controllable and not app.check_action("pause", ())
        assert encode(app.state) == encode(reduce_all(events))
        assert replay.position == replay.length == len(events) and replay.marks == step_marks(events)
        assert holds_no_events(replay)
        last_step = len(events) - step_marks(events)[-1]
        # With its snapshot only the last step's events were read; without, every one of them.
        assert len(folded) == (last_step if snapshot else len(events))
        assert app.screen.grid.border_title == f"trials · step {events[-1].step}"


@pytest.mark.e2e
async def test_step_moves_give_the_state_of_a_fresh_fold(tmp_path):
    log_path = tmp_path / "run"
    events = finished_run(log_path)
    marks = step_marks(events)
    app = ConsoleApp(replay_path=RunFolder(log_path).events)
    async with app.run_test(size=(120, 36)) as pilot:
        replay = await open_finished(pilot, app)

        def shows(position: int) -> None:
            assert replay.position == position
            assert app.state is replay.state
            assert encode(app.state) == encode(reduce_all(events[:position]))

        await press(pilot, app, "left_curly_bracket")
        shows(marks[0])
        for mark in [*marks[1:], len(events)]:  # forward, step by step, to the end
            await press(pilot, app, "right_square_bracket")
            shows(mark)
        for mark in reversed(marks[2:]):  # back again
            await press(pilot, app, "left_square_bracket")
            shows(mark)
        await press(pilot, app, "right_square_bracket")  # and forward from there
        shows(marks[3])
        await pilot.press("left_square_bracket", "left_square_bracket", "right_square_bracket")  # asked at once
        await wait_for(pilot, lambda: app.replay_settled, WAIT_S)
        shows(marks[2])
        app.replay_seek(marks[4] + 5)  # a click on the bar: any position, not only a step's start
        await wait_for(pilot, lambda: app.replay_settled and replay.position == marks[4] + 5, WAIT_S)
        shows(marks[4] + 5)
        await press(pilot, app, "right_curly_bracket")
        shows(len(events))
        await press(pilot, app, "left_square_bracket")
        shows(marks[-1])
        assert holds_no_events(replay)
    # Closed in the middle of the run: the summary is the run's end, as a full fold gives it.
    assert closing_summary(app, log_path) == exit_summary(reduce_all(events), read_lease(log_path), log_path)


@pytest.mark.e2e
async def test_moves_asked_while_opening_are_made_once_open(tmp_path):
    log_path = tmp_path / "run"
    events = finished_run(log_path)
    app = ConsoleApp(replay_path=RunFolder(log_path).events)
    async with app.run_test(size=(120, 36)) as pilot:
        app.replay_move("first")  # before the replay is open: kept, then made
        app.replay_move("next")
        replay = await open_finished(pilot, app)
        await wait_for(pilot, lambda: app.replay_settled and replay.position == step_marks(events)[1], WAIT_S)
        assert encode(app.state) == encode(reduce_all(events[: step_marks(events)[1]]))


def test_file_replay_equals_the_replay_in_memory_at_any_position(tmp_path):
    log_path = tmp_path / "run"
    events = finished_run(log_path, steps=20)  # more steps than states kept: a stride between them
    replay, in_memory = FileReplay.open(RunFolder(log_path).events), Replay(events)
    for position in [0, 7, *step_marks(events)[::3], len(events), 3, *reversed(step_marks(events)), 1000, 2]:
        assert encode(replay.seek(position)) == encode(in_memory.seek(position)), position
    assert encode(replay.final_state()) == encode(reduce_all(events))
    assert len(replay._kept) <= FileReplay.KEPT_STATES + 1


def test_timeline_index_is_kept_and_read_on(tmp_path):
    """The second reader of a file starts from the first's index: it reads no byte it read, only
    what the file gained; its timeline is a fresh reader's."""
    log_path = tmp_path / "run"
    events = finished_run(log_path, snapshot=False)
    path = RunFolder(log_path).events
    half = len(events) // 2
    write_jsonl(events[:half], path)
    first = StepReader.for_file(path)
    while first.refresh():
        pass
    assert first.index.offset == path.stat().st_size
    with open(path, "a", encoding="utf-8") as handle:
        handle.writelines(e.to_json() + "\n" for e in events[half:])
    second = StepReader.for_file(path)
    assert second.index is first.index
    before = second.index.offset
    second.select(first.steps[-1])  # the step in progress when the first read stopped
    while second.refresh():
        pass
    assert second.index.offset == path.stat().st_size > before
    fresh = StepReader(path)
    while fresh.refresh():
        pass
    assert second.steps == fresh.steps
    for step in fresh.steps:
        fresh.select(step)
        second.select(step)
        assert second.timeline() == fresh.timeline()


@pytest.mark.e2e
async def test_a_long_move_shows_a_notice_and_the_console_keeps_answering(tmp_path, monkeypatch):
    log_path = tmp_path / "run"
    events = finished_run(log_path)
    release = threading.Event()
    real_seek = FileReplay.seek

    def slow_seek(replay, position):  # a long run's fold: held until the test lets it go
        release.wait(WAIT_S)
        return real_seek(replay, position)

    monkeypatch.setattr(FileReplay, "seek", slow_seek)
    app = ConsoleApp(replay_path=RunFolder(log_path).events)
    async with app.run_test(size=(120, 36)) as pilot:
        replay = await open_finished(pilot, app)
        await pilot.press("left_square_bracket")
        notices = lambda: [n.message for n in app._notifications]  # noqa: E731
        await wait_for(pilot, lambda: any("moving through the run" in m for m in notices()), WAIT_S)
        assert app.state is replay.state and replay.position == len(events)  # the end, on view meanwhile
        await pilot.press("question_mark")  # keys are answered meanwhile
        await wait_for(pilot, lambda: type(app.screen).__name__ == "HelpScreen", WAIT_S)
        release.set()
        await wait_for(pilot, lambda: app.replay_settled, WAIT_S)
        assert replay.position == step_marks(events)[-1]
        assert encode(app.state) == encode(reduce_all(events[: replay.position]))
