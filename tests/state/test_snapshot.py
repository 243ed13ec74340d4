"""Reducer snapshots (``tbconsole.state.snapshot``): a snapshot and the events after it give the
same state as every event read from the start; a snapshot that is missing, damaged or stale (each
of its checks in turn) is not used, and the state read from the start is the one attach shows; a
snapshot that cannot be written never reaches the run."""

import dataclasses
import json
import logging
import math
import os
import shutil
from collections import deque

import pytest

from tbconsole.record.enums import SnapshotProblem
from tbconsole.record.events import (
    AdvisoryCleared,
    AdvisoryRaised,
    BatchStarted,
    EvaluationEnded,
    EvaluationStarted,
    EventsReader,
    StepMetrics,
    read_events,
)
from tbconsole.record.runfolder import RunFolder
from tbconsole.state import reduce_all
from tbconsole.state.snapshot import (
    FORMAT,
    SnapshotWriter,
    decode,
    encode,
    read_snapshot,
    restore,
)
from tbconsole.synthetic.run import synthetic_run, write_jsonl

STEPS = 10


def run_events(log_path) -> list:
    """A run in flight of every kind of event the state keeps: retried group and decision, pause,
    checkpoints, advisories raised and cleared, a held-out evaluation, a NaN metric (written as
    ``NaN``, which strict JSON has not), hostile text."""
    events = list(
        synthetic_run(
            steps=STEPS, groups=2, group_size=4, error_at=(3, 1), pause_after=1, end=False, log_path=str(log_path)
        )
    )
    at = next(i for i, e in enumerate(events) if isinstance(e, BatchStarted) and e.step == 4)
    ts = events[at].ts
    extra = [
        AdvisoryRaised(ts=ts, key="no-signal:step=3", rule="no-signal", severity="warning", message="m", threshold="t"),
        AdvisoryRaised(ts=ts, key="stalled:x", rule="stalled", severity="error", message="\x1b[31mred", threshold="t"),
        AdvisoryCleared(ts=ts, key="no-signal:step=3", message="cleared"),
        EvaluationStarted(ts=ts, after_updates=4, tasks=2, trials=4),
        EvaluationEnded(ts=ts, after_updates=4, reward=0.5, trials=4, failed_tasks=0),
        StepMetrics(ts=ts, step=3, metrics={"loss:sum": float("nan"), "eval/reward": 0.25}),
    ]
    return events[:at] + extra + events[at:]


def full_read(log_path):
    return reduce_all(read_events(RunFolder(log_path).events))


def append(log_path, events) -> None:
    with open(RunFolder(log_path).events, "a", encoding="utf-8") as handle:
        handle.writelines(e.to_json() + "\n" for e in events)


def step_start(events, step: int) -> int:
    return next(i for i, e in enumerate(events) if isinstance(e, BatchStarted) and e.step == step)


@pytest.fixture
def run(tmp_path):
    """A run folder whose runner wrote snapshots as its steps started, up to the middle of step 7;
    then the run went on (its events appended, no snapshot since). Returns (folder, events, the
    bytes the snapshot covers)."""
    log_path = tmp_path / "run"
    events = run_events(log_path)
    write_jsonl([], RunFolder(log_path).events)
    writer = SnapshotWriter(log_path)
    cut = (step_start(events, 7) + step_start(events, 8)) // 2
    done = 0
    for end in (step_start(events, 2) + 5, step_start(events, 5) + 3, cut):
        append(log_path, events[done:end])
        done = end
        writer.poll()
    writer.close()
    assert writer.written == 3 and writer.failures == 0
    assert writer.covered == RunFolder(log_path).events.stat().st_size
    append(log_path, events[cut:])
    return log_path, events, writer.covered


def test_a_snapshot_and_the_events_after_it_give_the_state_of_a_full_read(run):
    log_path, events, covered = run
    restored = restore(log_path)
    assert restored.problem is None and restored.snapshot == covered
    assert restored.reader.offset == RunFolder(log_path).events.stat().st_size
    full = reduce_all(events)
    assert restored.state.events == len(events) == full.events
    assert encode(restored.state) == encode(full)
    assert restored.state.pending_decision is None and restored.state.advisories.keys() == {"stalled:x"}
    # what the snapshot holds is the state of the bytes it covers, exactly
    with EventsReader(RunFolder(log_path).events) as reader:
        from_snapshot = read_snapshot(reader)
    covered_events = [e for e in read_events(RunFolder(log_path).events)][: from_snapshot.events]
    assert encode(from_snapshot) == encode(reduce_all(covered_events))


def same(a, b, where="state") -> None:
    """``a`` and ``b`` are equal and of the same types all the way down (the JSON of a tuple and
    of a list is the same: a canonical dump alone would not see one become the other). A StrEnum
    member and its plain string are the same value; NaN equals NaN."""
    if isinstance(a, str):
        assert isinstance(b, str) and a == b, where
        return
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            if f.name not in ("changed_panels", "changed_trials"):
                same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, dict):
        assert list(a) == list(b), where  # the same keys in the same order
        for k in a:
            same(k, next(x for x in b if x == k), f"{where} key {k!r}")
            same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple, deque)):
        assert len(a) == len(b) and getattr(a, "maxlen", None) == getattr(b, "maxlen", None), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_the_codec_keeps_every_part_of_the_state(run):
    _, events, _ = run
    state = reduce_all(events)
    again = decode(encode(state))
    same(state, again)
    assert state.groups and state.steps and state.checkpoints and state.decisions and state.advisory_log
    assert any(g.retired for g in reduce_all(events[: step_start(events, 4)]).groups.values())
    same(reduce_all(events[: step_start(events, 4)]), decode(encode(reduce_all(events[: step_start(events, 4)]))))
    assert again.changed_trials == set(again.trials)  # a restored state draws everything


def _header(log_path) -> tuple[dict, bytes]:
    head, _, payload = RunFolder(log_path).snapshot.read_bytes().partition(b"\n")
    return json.loads(head), payload


def _rewrite(log_path, header: dict, payload: bytes) -> None:
    RunFolder(log_path).snapshot.write_bytes(json.dumps(header).encode() + b"\n" + payload)


def _set(field, value):
    def corrupt(log_path):
        header, payload = _header(log_path)
        header[field] = value(header) if callable(value) else value
        _rewrite(log_path, header, payload)

    return corrupt


def _earlier_line(log_path):
    """The offset moved back to the start of an earlier line: the bytes before it are not the ones
    whose state the snapshot holds."""
    header, payload = _header(log_path)
    data = RunFolder(log_path).events.read_bytes()[: header["offset"] - 1]
    header["offset"] = data.rfind(b"\n") + 1
    _rewrite(log_path, header, payload)


def _rewritten_events(log_path):
    """The events file changed in place (same inode, same size) before the offset: one reward."""
    header, _ = _header(log_path)
    path = RunFolder(log_path).events
    data = path.read_bytes()
    at = data.rfind(b'"reward":1.0', 0, header["offset"])
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(b'"reward":0.0')


def _replaced_events(log_path):
    """The same bytes in another file put in its place (a copy, a restore from backup)."""
    path = RunFolder(log_path).events
    shutil.copy(path, path.with_name("copy"))
    os.replace(path.with_name("copy"), path)


def _truncated_events(log_path):
    header, _ = _header(log_path)
    path = RunFolder(log_path).events
    data = path.read_bytes()[: header["offset"] - 1]
    os.truncate(path, data.rfind(b"\n") + 1)


def _payload_cut(log_path):
    path = RunFolder(log_path).snapshot
    path.write_bytes(path.read_bytes()[:-100])


def _payload_garbage(log_path):
    header, payload = _header(log_path)
    middle = len(payload) // 2
    _rewrite(log_path, header, payload[:middle] + b"\x00garbage\xff" + payload[middle + 10 :])


def _payload_of_another_shape(log_path):
    """Whole and hashed as the header says, but not a state of this model (the checks of the
    payload's own hash pass: the decoder's checks of each value must catch it)."""
    import hashlib

    header, payload = _header(log_path)
    state = json.loads(payload)
    state[0] = {"run_id": state[0]}  # run_id: a str, not an object
    payload = json.dumps(state).encode()
    header["payload_bytes"], header["payload_sha256"] = len(payload), hashlib.sha256(payload).hexdigest()
    _rewrite(log_path, header, payload)


def _header_garbage(log_path):
    RunFolder(log_path).snapshot.write_bytes(b"\x00\x01 not json\n[1, 2]")


def _missing(log_path):
    RunFolder(log_path).snapshot.unlink()


CORRUPTIONS = {
    "format": (_set("format", FORMAT + 1), SnapshotProblem.FORMAT),
    "code": (_set("code", "0" * 32), SnapshotProblem.CODE),
    "inode": (_set("inode", lambda h: h["inode"] + 1), SnapshotProblem.IDENTITY),
    "device": (_set("device", lambda h: h["device"] + 1), SnapshotProblem.IDENTITY),
    "events replaced": (_replaced_events, SnapshotProblem.IDENTITY),
    "offset past the end": (_set("offset", lambda h: h["offset"] + (10 << 20)), SnapshotProblem.OFFSET),
    "offset not a number": (_set("offset", "12"), SnapshotProblem.OFFSET),
    "events truncated": (_truncated_events, SnapshotProblem.OFFSET),
    "offset moved": (_earlier_line, SnapshotProblem.EVENTS),
    "events hash": (_set("events_sha256", "0" * 64), SnapshotProblem.EVENTS),
    "events rewritten": (_rewritten_events, SnapshotProblem.EVENTS),
    "payload cut": (_payload_cut, SnapshotProblem.PAYLOAD),
    "payload garbage": (_payload_garbage, SnapshotProblem.PAYLOAD),
    "payload hash": (_set("payload_sha256", "0" * 64), SnapshotProblem.PAYLOAD),
    "payload of another shape": (_payload_of_another_shape, SnapshotProblem.PAYLOAD),
    "header garbage": (_header_garbage, SnapshotProblem.DAMAGED),
    "missing": (_missing, SnapshotProblem.MISSING),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_a_bad_snapshot_is_not_used_and_the_run_is_read_from_its_start(run, name):
    log_path, _, _ = run
    corrupt, problem = CORRUPTIONS[name]
    corrupt(log_path)
    restored = restore(log_path)
    assert restored.problem == problem and restored.snapshot is None
    assert encode(restored.state) == encode(full_read(log_path))


def test_a_stale_snapshot_would_have_shown_another_state(run):
    """Why the events' hash matters: the snapshot of a rewritten file, trusted, disagrees with it."""
    log_path, _, covered = run
    _rewritten_events(log_path)
    trusted = decode(_header(log_path)[1])
    with EventsReader(RunFolder(log_path).events, covered) as reader:
        reduce_all(reader.read(limit=1 << 30), trusted)
    assert encode(trusted) != encode(full_read(log_path))
    assert encode(restore(log_path).state) == encode(full_read(log_path))


def test_a_console_that_read_from_the_start_leaves_a_snapshot_for_the_next(run):
    log_path, _, _ = run
    _set("code", "0" * 32)(log_path)
    first = restore(log_path, write_after=1)
    assert first.problem is SnapshotProblem.CODE
    second = restore(log_path)
    assert second.problem is None and second.snapshot == RunFolder(log_path).events.stat().st_size
    assert encode(second.state) == encode(first.state)


def test_a_snapshot_that_cannot_be_written_is_logged_and_never_raised(tmp_path, caplog):
    log_path = tmp_path / "run"
    events = run_events(log_path)
    write_jsonl(events[: step_start(events, 2) + 1], RunFolder(log_path).events)
    RunFolder(log_path).snapshot.mkdir()  # the rename over it fails
    writer = SnapshotWriter(log_path)
    with caplog.at_level(logging.INFO, logger="tbconsole.state.snapshot"):
        writer.poll()
        append(log_path, events[step_start(events, 2) + 1 : step_start(events, 3) + 1])
        writer.poll()
    assert writer.written == 0 and writer.failures == 2
    failed = [r for r in caplog.records if "cannot write the reducer snapshot" in r.message]
    assert len(failed) == 1  # logged once
    # to the run's log, not the console (which shows warnings): a full disk is reported once, by
    # the event log that meets it
    assert failed[0].levelno == logging.INFO
    assert not [p for p in log_path.iterdir() if p.name.startswith(".events.snapshot.tmp")]
    RunFolder(log_path).snapshot.rmdir()
    append(log_path, events[step_start(events, 3) + 1 : step_start(events, 4) + 1])
    writer.poll()
    writer.close()
    assert writer.written == 1 and restore(log_path).problem is None


def test_the_runner_thread_writes_a_last_snapshot_when_stopped(tmp_path):
    log_path = tmp_path / "run"
    write_jsonl(run_events(log_path), RunFolder(log_path).events)
    writer = SnapshotWriter(log_path, interval_s=3600)  # only the stop wakes it
    writer.start()
    writer.stop()
    assert writer.written == 1
    restored = restore(log_path)
    assert restored.problem is None and restored.snapshot == RunFolder(log_path).events.stat().st_size


def test_a_resumed_runner_goes_on_from_the_snapshot(run):
    """A runner started again on the same folder reads the snapshot, not every event, and its next
    snapshot still equals a full read."""
    log_path, events, covered = run
    writer = SnapshotWriter(log_path)
    writer.poll()
    writer.close()
    assert writer.resumed_from == covered and writer.written == 1
    restored = restore(log_path)
    assert restored.snapshot == RunFolder(log_path).events.stat().st_size > covered
    assert encode(restored.state) == encode(reduce_all(events))
