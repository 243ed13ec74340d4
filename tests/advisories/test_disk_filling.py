"""A run folder on a small real filesystem filling up: the disk advisory is in events.jsonl
before the first capture write fails (real tmpfs, real capture writer, real bus and watcher)."""

import asyncio
import contextlib
import errno
import itertools

import pytest

from tbconsole.advisories import Thresholds
from tbconsole.advisories.disk import FILLING
from tbconsole.proxy.capture import CapturedTurn, CaptureWriter
from tbconsole.record import events as ev
from tbconsole.record.events import EventBus, read_events
from tbconsole.record.runfolder import RunFolder
from tbconsole.runner.advise import AdvisoryWatcher

from tests_support.advisories import raised

TRIALS = 4
TURNS = 4
TOKENS = 4000  # per reply: with its log-probs about 50 KB a turn, about 0.8 MiB a step


def _turn(turn: int) -> CapturedTurn:
    return CapturedTurn(
        turn=turn,
        prompt_tokens=list(range(2000 + turn)),
        output_tokens=[50_000 + i for i in range(TOKENS)],
        logprobs=[-0.123456] * TOKENS,
        stop_reason="stop",
        api="openai",
        started_at=0.0,
        sample_ms=1.0,
        max_tokens=TOKENS,
        temperature=1.0,
    )


@pytest.mark.e2e
async def test_the_disk_advisory_comes_before_the_capture_write_fails(tmpfs):
    log = tmpfs("16m") / "run"
    folder = RunFolder(log)
    bus = EventBus(log)
    thresholds = Thresholds(disk_warn_mib=4, disk_error_mib=2, disk_steps_left=6)
    watcher = AdvisoryWatcher(bus.publish, thresholds, log, interval=0.05)
    bus.subscribe(watcher)
    task = asyncio.create_task(watcher.run())
    bus.publish(
        ev.RunStarted(
            run_id="r", log_path=str(log), model_name="m", base_url=None, renderer_name=None, total_steps=1000,
            groups_per_batch=1, group_size=TRIALS, tasks=["t"], config={},
        )
    )  # fmt: skip
    failed = None
    for step in itertools.count():
        for k in range(TRIALS):
            trial = f"t.s{step}g0t{k}"
            writer = CaptureWriter(folder.capture_file(step, 0, trial), trial)
            for turn in range(TURNS):
                try:
                    writer.write(_turn(turn))
                except OSError as exc:
                    failed = exc
                    bus.publish(ev.CaptureLost(step=step, group=0, trial=trial, error=str(exc)))
                    break
                bus.publish(
                    ev.ProxyRequest(
                        step=step, group=0, trial=trial, api="openai", stream=False, status=200, captured=True,
                        turn=turn, prompt_tokens=2000 + turn, output_tokens=TOKENS,
                    )
                )  # fmt: skip
            with contextlib.suppress(OSError):  # its fsync on a full disk
                writer.close()
            if failed:
                break
        if failed:
            break
        bus.publish(ev.StepMetrics(step=step, metrics={"progress/batch": float(step)}))
        bus.publish(ev.BatchEnded(step=step))
        await asyncio.sleep(0.15)  # the run's pace: the watcher's timer samples the disk between steps
        assert step < 100, "the filesystem never filled"
    on_disk_then = list(read_events(bus.path))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    bus.close()

    assert failed.errno == errno.ENOSPC
    disk = raised(on_disk_then, "disk")
    assert disk, "no disk advisory was written before the capture write failed"
    # First the run folder's own growth (measured at each step's end): it will not fit its 1000 steps.
    assert disk[0].severity == "warning" and disk[0].threshold == FILLING
    assert "the run folder grows" in disk[0].message and "full in about" in disk[0].message
    assert [e.severity for e in disk][-1] == "error"  # then under disk_error_mib, still before the failure
    assert disk[-1].message.endswith("before captures and events cannot be written")
    print("\n".join(f"{e.severity}: {e.message}" for e in disk))
