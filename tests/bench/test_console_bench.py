"""The key-latency harness of `tbconsole bench console --live`: its terminal reads Textual's
frames, and every key of its cycle shows the screen it waits for (or the benchmark would only
time out)."""

import pytest

from tbconsole.bench.console import KEY_CYCLE, Terminal, in_flight, press_keys
from tbconsole.bench.day import DAY_CYCLE, REPLAY_CYCLE, REPLAY_FIRST, Shape, run_folder
from tbconsole.record.events import BatchStarted, read_events
from tbconsole.record.runfolder import RunFolder
from tbconsole.state.snapshot import restore
from tbconsole.synthetic.run import synthetic_run, write_jsonl


def test_the_terminal_places_text_where_the_cursor_moves():
    screen = Terminal(20, 3)
    screen.feed("\x1b[2;3H\x1b[1;31mhello\x1b[0m\x1b[?25l\x1b[3;1H界x\x1b]0;title\x07")
    lines = ["".join(line) for line in screen.lines]
    assert lines[1] == "  hello" + " " * 13
    assert lines[2].startswith("界x")  # a wide character takes two cells
    assert screen.shows("hello") and not screen.shows("title")


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_every_key_of_the_cycle_shows_its_screen(tmp_path):
    run = RunFolder(tmp_path / "run")
    write_jsonl(in_flight(synthetic_run(steps=2, end=False, hostile=False, log_path=str(run.root))), run.events)
    times = press_keys(run.root, cycles=1)
    assert list(times) == [label for label, *_ in KEY_CYCLE]
    assert all(t is not None for samples in times.values() for t in samples), times


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_the_day_bench_builds_a_run_in_flight_with_its_runners_snapshot_and_every_key_shows(tmp_path):
    """`--day`'s folder (here a small one of the same making) is a run halfway through its last
    step whose snapshot covers the steps before it; the keys of its cycles (find, the timeline, a
    replay's step-0 trial) each show their screen on a real `tbconsole attach`."""
    shape = Shape(steps=3, groups=2, group_size=2, turns=(3, 6))
    folder = run_folder(tmp_path, shape)
    assert run_folder(tmp_path, shape) == folder  # cached: not built again
    restored = restore(folder)
    last = max(e.step for e in read_events(RunFolder(folder).events) if isinstance(e, BatchStarted))
    assert restored.problem is None and last == shape.steps - 1
    assert 0 < restored.snapshot < restored.reader.offset  # the last step's events come after it
    assert restored.state.step == last and any(RunFolder(folder).root.glob("capture/step_000000/*/*.jsonl"))
    times = press_keys(folder, 1, DAY_CYCLE)
    replay = press_keys(folder, 1, REPLAY_CYCLE, args=("--replay",), first=REPLAY_FIRST)
    assert all(t is not None for samples in [*times.values(), *replay.values()] for t in samples), (times, replay)
