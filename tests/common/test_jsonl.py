"""tbconsole.common.jsonl: whole lines from a byte offset, as a file is appended to."""

import math

import pytest

from tbconsole.bench.soak import _Events
from tbconsole.common.jsonl import loads, new_lines, whole_lines
from tbconsole.record.capturefile import CaptureTail
from tbconsole.record.events import LogLine, TrialPhaseChanged
from tbconsole.state.timeline import StepReader


def test_whole_lines_keep_a_partial_last_line_for_the_next_read(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":2}\n{"a":')  # the last line still being written
    with open(path, "rb") as handle:
        data, more = whole_lines(handle, 0)
        assert data == b'{"a":1}\n{"a":2}\n' and not more
        offset = len(data)
        assert whole_lines(handle, offset) == (b"", False)  # nothing whole yet: the offset stays
    with open(path, "ab") as handle:
        handle.write(b"3}\n")
    with open(path, "rb") as handle:
        assert whole_lines(handle, offset) == (b'{"a":3}\n', False)


def test_whole_lines_honour_the_limit_and_the_end_and_read_a_long_line_whole(tmp_path):
    path = tmp_path / "a.jsonl"
    lines = [b"x" * 30 + b"\n", b"y\n", b"z\n"]
    path.write_bytes(b"".join(lines))
    with open(path, "rb") as handle:
        assert whole_lines(handle, 0, limit=8) == (lines[0], True)  # longer than the limit: whole
        assert whole_lines(handle, 31, limit=2) == (b"y\n", True)
        assert whole_lines(handle, 31, limit=100) == (b"y\nz\n", False)
        assert whole_lines(handle, 31, limit=100, end=33) == (b"y\n", True)  # stopped at end
        assert whole_lines(handle, 31, end=34) == (b"y\n", False)  # cut at end: z's line is not whole
        assert whole_lines(handle, 33, limit=10, end=33) == (b"", False)


def test_a_long_line_still_being_written_does_not_stall_a_reader(tmp_path):
    """A line longer than the limit and without its newline yet: nothing, and no 'more' (a
    caller that reads while ``more`` would otherwise spin)."""
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"x" * 100)
    with open(path, "rb") as handle:
        assert whole_lines(handle, 0, limit=8) == (b"", False)


def test_new_lines_resume_from_the_offset_and_follow_the_path(tmp_path):
    path = tmp_path / "a.jsonl"
    assert new_lines(path, 0) == ([], 0)  # not there yet
    path.write_bytes(b'{"a":1}\n\n{"a"')
    lines, offset = new_lines(path, 0)
    assert lines == [b'{"a":1}', b""] and offset == 9  # an empty line is a line; the cut one waits
    with open(path, "ab") as handle:
        handle.write(b":2}\n")
    assert new_lines(path, offset) == ([b'{"a":2}'], path.stat().st_size)
    assert new_lines(path, path.stat().st_size) == ([], path.stat().st_size)
    path.write_bytes(b'{"b":1}\n')  # replaced by a shorter file: read again from its start
    assert new_lines(path, offset) == ([b'{"b":1}'], 8)


def test_new_lines_take_a_limit_and_leave_other_errors_to_the_caller(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"1\n2\n3\n")
    assert new_lines(path, 0, limit=4) == ([b"1", b"2"], 4)
    with pytest.raises(IsADirectoryError):
        new_lines(tmp_path, 0)


def test_loads_takes_what_json_dumps_writes_and_rejects_a_torn_line():
    assert loads(b'{"a":[1,2]}') == {"a": [1, 2]}
    assert math.isnan(loads('{"loss": NaN}')["loss"])  # json.dumps's NaN: not strict JSON
    assert loads(b'{"m":"cut \xff"}') == {"m": "cut \ufffd"}  # bad UTF-8 replaced, as events are read
    for torn in (b'{"a":1', b"", b"not json"):
        with pytest.raises(ValueError):
            loads(torn)


def test_the_timeline_reader_takes_a_line_longer_than_its_slice(tmp_path):
    """``StepReader.refresh`` reads through ``whole_lines``: a line longer than the slice is read
    whole, and ``while reader.refresh()`` (the timeline screen's loop) ends."""
    path = tmp_path / "events.jsonl"
    started = TrialPhaseChanged(ts=1.0, step=0, group=0, trial="t", phase="agent")
    path.write_text(LogLine(ts=0.5, level="info", message="x" * 4000).to_json() + "\n" + started.to_json() + "\n")
    reader = StepReader(path)
    reads = 1
    while reader.refresh(limit=512):
        reads += 1
        assert reads < 100
    assert reader.steps == [0] and reader.index.offset == path.stat().st_size


def test_the_capture_tail_counts_damaged_lines_and_waits_for_a_cut_one(tmp_path):
    path = tmp_path / "capture.jsonl"
    line = b'{"turn":0,"prompt_len":3,"output":[1,2],"logprobs":[-0.1,-0.2]}'
    path.write_bytes(line + b"\n" + b'{"turn":1,' + b"\n" + line.replace(b'"turn":0', b'"turn":2')[:20])
    tail = CaptureTail(path)
    assert [r.turn for r in tail.read_new()] == [0] and tail.damaged == 1 and not tail.unreadable
    with open(path, "ab") as handle:
        handle.write(line.replace(b'"turn":0', b'"turn":2')[20:] + b"\n")
    assert [r.turn for r in tail.read_new()] == [2] and tail.offset == path.stat().st_size
    assert CaptureTail(tmp_path / "none.jsonl").read_new() == []
    unreadable = CaptureTail(tmp_path)  # a folder: there, but cannot be read as a file
    assert unreadable.read_new() == [] and unreadable.unreadable


def test_the_soak_reads_events_as_dicts_and_a_damaged_line_stops_it(tmp_path):
    path = tmp_path / "events.jsonl"
    events = _Events(path)
    assert events.new() == []
    path.write_text('{"kind":"batch.started","step":0,"loss":NaN}\n{"kind":"batch')
    got = events.new()
    assert got[0]["kind"] == "batch.started" and math.isnan(got[0]["loss"])
    with open(path, "a") as handle:
        handle.write('.ended","step":0}\n')
    assert events.new() == [{"kind": "batch.ended", "step": 0}]
    with open(path, "a") as handle:
        handle.write("{damaged\n")
    with pytest.raises(ValueError):
        events.new()
