"""The key-latency harness of `tbconsole bench console --live`: its terminal reads Textual's
frames, and every key of its cycle shows the screen it waits for (or the benchmark would only
time out)."""

import pytest

from tbconsole.runfolder import RunFolder
from tbconsole.ui.bench import KEY_CYCLE, Terminal, in_flight, press_keys
from tbconsole.ui.synthetic import synthetic_run, write_jsonl


def test_the_terminal_places_text_where_the_cursor_moves():
    screen = Terminal(20, 3)
    screen.feed("\x1b[2;3H\x1b[1;31mhello\x1b[0m\x1b[?25l\x1b[3;1H界x\x1b]0;title\x07")
    lines = ["".join(line) for line in screen.lines]
    assert lines[1] == "  hello" + " " * 13
    assert lines[2].startswith("界x")  # a wide character takes two cells
    assert screen.shows("hello") and not screen.shows("title")


@pytest.mark.timeout(120)
def test_every_key_of_the_cycle_shows_its_screen(tmp_path):
    run = RunFolder(tmp_path / "run")
    write_jsonl(in_flight(synthetic_run(steps=2, end=False, hostile=False, log_path=str(run.root))), run.events)
    times = press_keys(run.root, cycles=1)
    assert list(times) == [label for label, *_ in KEY_CYCLE]
    assert all(t is not None for samples in times.values() for t in samples), times
