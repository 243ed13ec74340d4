"""events.jsonl on a full disk: real (small) tmpfs mounts, no fakes of the writes.

publish never raises, subscribers get every event, the error is reported once, the file holds
only whole JSON lines, and the run's last events land thanks to the reserve."""

import errno
import io
import json
from pathlib import Path

import pytest

from tbconsole.record.events import (
    RESERVE_FILE,
    ControlChanged,
    ErrorRaised,
    EventBus,
    LogLine,
    ProxyRequest,
    RunEnded,
    TrialPhaseChanged,
    read_events,
)
from tbconsole.record.runfolder import EVENTS_FILE
from tbconsole.runner.progress import ProgressLog

from tests_support.diskfill import fill_disk

pytestmark = pytest.mark.e2e


def whole_lines(path: Path) -> list[dict]:
    """Every line of the file, each required to be complete JSON (no cut lines at all)."""
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), "the file ends in a cut line"
    return [json.loads(line) for line in raw.decode().splitlines()]


def request(i: int, text_bytes: int = 1000) -> ProxyRequest:
    return ProxyRequest(
        step=0,
        group=0,
        trial=f"t{i % 4}",
        api="openai",
        stream=False,
        status=200,
        captured=True,
        turn=i,
        error="x" * text_bytes,  # a long field: the event's size is what the disk sees
    )


FINAL = [
    ErrorRaised(step=None, group=None, trial=None, exception_type="OSError", message="disk full"),
    ControlChanged(state="stopping", reason="disk full"),
    RunEnded(status="stopped", step=0, message="disk full"),
]


@pytest.mark.parametrize("filled_by", ["the bus", "another writer"])
def test_a_disk_that_fills_mid_stream(tmpfs, filled_by, capfd):
    fs = tmpfs("2m")
    errors, seen = [], []
    bus = EventBus(fs / "run", on_write_error=errors.append)
    bus.subscribe(seen.append)
    assert (fs / "run" / RESERVE_FILE).stat().st_blocks * 512 >= 256 * 1024  # real blocks
    published = []

    def publish(event):
        published.append(event)
        bus.publish(event)  # must never raise

    for i in range(10):
        publish(request(i))
    if filled_by == "another writer":
        fill_disk(fs)
    for i in range(10, 3000):  # about 4 MiB of events: more than the whole filesystem
        publish(request(i))
    for event in FINAL:
        publish(event)
    bus.close()

    assert len(errors) == 1 and errors[0].errno == errno.ENOSPC
    assert bus.write_failures >= 1 and bus.unwritten > 0
    notes = [e for e in seen if isinstance(e, LogLine)]
    assert [e for e in seen if not isinstance(e, LogLine)] == published  # every event, in order
    assert len(notes) == 1 and notes[0].level == "error"
    assert "No space left on device (ENOSPC)" in notes[0].message and EVENTS_FILE in notes[0].message

    path = fs / "run" / EVENTS_FILE
    lines = whole_lines(path)
    written = list(read_events(path))
    assert len(written) == len(lines)
    assert written[-3:] == FINAL  # the reserve kept room for the end of the run
    assert notes[0] in written
    requests = [e for e in written if isinstance(e, ProxyRequest)]
    assert requests == published[: len(requests)] and len(requests) >= 10  # a prefix: no gaps, no repeats
    assert not (fs / "run" / RESERVE_FILE).exists()
    assert "Traceback" not in capfd.readouterr().err


def test_a_line_that_does_not_fit_is_cut_back_to_the_last_whole_line(tmpfs):
    fs = tmpfs("2m")
    errors = []
    bus = EventBus(fs / "run", on_write_error=errors.append)
    first = request(0)
    bus.publish(first)
    fill_disk(fs, leave=16 * 1024)
    bus.publish(request(1, text_bytes=1 << 20))  # bigger than what is free plus the reserve: short writes
    bus.publish(FINAL[-1])
    bus.close()

    assert len(errors) == 1 and errors[0].errno == errno.ENOSPC
    path = fs / "run" / EVENTS_FILE
    lines = whole_lines(path)
    assert [line["kind"] for line in lines] == ["proxy.request", "log", "run.ended"]
    assert list(read_events(path))[0] == first


def test_a_bus_on_a_full_disk_reports_once_and_keeps_delivering(tmpfs, capfd):
    fs = tmpfs("1m")
    filler = fill_disk(fs)
    assert filler is not None
    errors, seen = [], []
    bus = EventBus(fs / "run", on_write_error=errors.append)  # decided: no raise, reported at first publish
    bus.subscribe(seen.append)
    log = io.StringIO()
    bus.subscribe(ProgressLog(log))
    published = [TrialPhaseChanged(step=0, group=0, trial=f"t{i}", phase="agent") for i in range(50)] + FINAL[:2]
    for event in published:
        bus.publish(event)
    assert len(errors) == 1 and errors[0].errno == errno.ENOSPC
    assert [e for e in seen if not isinstance(e, LogLine)] == published
    whole_lines(fs / "run" / EVENTS_FILE)

    filler.unlink()  # space comes back: run-level events are written again, chatter is not
    bus.publish(TrialPhaseChanged(step=0, group=0, trial="t", phase="done"))
    bus.publish(FINAL[-1])
    bus.close()
    assert len(errors) == 1
    assert [line["kind"] for line in whole_lines(fs / "run" / EVENTS_FILE)][-1] == "run.ended"

    printed = log.getvalue().splitlines()
    disk = [line for line in printed if "No space left" in line]
    assert len(disk) == 1 and "error: cannot write" in disk[0] and "config.log_path" in disk[0]
    assert any(line.endswith("ERROR: OSError: disk full") for line in printed)  # no "step None"
    assert "Traceback" not in capfd.readouterr().err


def test_the_callback_may_publish_and_may_raise(tmpfs):
    fs = tmpfs("1m")
    fill_disk(fs)
    seen, calls = [], []

    def on_write_error(exc):
        calls.append(exc)
        bus.publish(ControlChanged(state="stopping", reason=str(exc)))  # outside the bus's lock
        raise RuntimeError("cannot stop while stopping")

    bus = EventBus(fs / "run", on_write_error=on_write_error)
    bus.subscribe(seen.append)
    bus.publish(FINAL[0])
    bus.publish(FINAL[1])
    bus.close()
    assert len(calls) == 1
    assert [e.kind for e in seen] == ["error.raised", "log", "control.changed", "control.changed"]


def test_the_progress_log_survives_a_full_stdout(tmpfs):
    fs = tmpfs("1m")
    fill_disk(fs)
    out = open(fs / "stdout.log", "w")
    log = ProgressLog(out)
    for event in FINAL:
        log(event)  # must not raise
    assert log.lost == len(FINAL)
    with pytest.raises(OSError):  # what it still buffers cannot be written either
        out.close()
