"""The runner's watcher: a real event bus and run folder, real capture files, the SDK's real
loggers; advisories land in events.jsonl and the headless log."""

import asyncio
import io
import logging
import time

from tbconsole.advisories import Thresholds
from tbconsole.proxy.capture import CapturedTurn, CaptureWriter
from tbconsole.record import events as ev
from tbconsole.record.events import EventBus, read_events
from tbconsole.record.runfolder import RunFolder
from tbconsole.runner.advise import AdvisoryWatcher, RetrySpy, read_capture_file
from tbconsole.runner.progress import ProgressLog

from tests_support.advisories import Stream, cleared, raised


async def _until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def _turn(turn: int, tokens: int, logprobs: int | None = None) -> CapturedTurn:
    return CapturedTurn(
        turn=turn,
        prompt_tokens=list(range(1000)),
        output_tokens=list(range(tokens)),
        logprobs=[-0.5] * (tokens if logprobs is None else logprobs),
        stop_reason="stop",
        api="openai",
        started_at=0.0,
        sample_ms=1.0,
        max_tokens=256,
        temperature=1.0,
    )


async def test_advisories_reach_events_jsonl_and_the_headless_log(tmp_path, recorded):
    bus = EventBus(tmp_path)
    out = io.StringIO()
    bus.subscribe(ProgressLog(out))
    # The recording's capture files are not here, and this host's free space is not the test's.
    watcher = AdvisoryWatcher(bus.publish, Thresholds(off="captures,disk"), tmp_path, interval=0.05)
    bus.subscribe(watcher)
    task = asyncio.create_task(watcher.run())
    for event in recorded:
        bus.publish(event)
    await _until(lambda: len(raised(read_events(bus.path))) >= 4)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    bus.close()
    written = list(read_events(bus.path))
    assert {e.key for e in raised(written)} == {"no-signal", "limits:cut-replies"}
    log = out.getvalue()
    assert "advisory info [no-signal]: step 1: 2 of 2 (100%) groups had no signal (2 all failed)" in log
    assert "(advise.no_signal_p=0.01)" in log
    assert "rewards [0 0 0 0] (all failed: no signal)" in log  # the group line says which, too


async def test_the_last_events_are_fed_when_the_watcher_stops(tmp_path, recorded):
    seen = []
    watcher = AdvisoryWatcher(seen.append, Thresholds(), tmp_path, interval=3600)
    task = asyncio.create_task(watcher.run())
    await asyncio.sleep(0)
    for event in recorded:
        watcher(event)
    task.cancel()  # before the watcher's task ran again: the final drain feeds them
    await asyncio.gather(task, return_exceptions=True)
    assert [e.step for e in raised(seen, "no-signal")] == [0, 1]


async def test_capture_files_are_read_for_scored_trials(tmp_path):
    folder = RunFolder(tmp_path)
    stream = Stream()
    stream.run_started()
    trials = stream.group(0, 0, [0.0, 1.0, 0.0, 1.0], turns=2, output_tokens=100)
    for trial in trials:
        writer = CaptureWriter(folder.capture_file(0, 0, trial), trial)
        writer.write(_turn(0, 100))
        writer.write(_turn(1, 100, logprobs=100 if trial != trials[2] else 99))  # one turn cut short
        writer.close()
    seen = []
    watcher = AdvisoryWatcher(seen.append, Thresholds(), tmp_path, interval=3600)
    task = asyncio.create_task(watcher.run())
    stream.step_end(0)
    for item in stream.items:
        watcher(item)
    await _until(lambda: raised(seen, "captures"))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    (advice,) = raised(seen, "captures")
    assert advice.trial == trials[2] and "1 of its 2 turns lack log-probs" in advice.message
    whole = read_capture_file(folder, next(e for e in stream.items if isinstance(e, ev.TrialEnded)))
    assert (whole.records, whole.with_logprobs, whole.output_tokens, whole.error) == (2, 2, 200, None)


def test_a_missing_capture_file_of_a_trial_with_turns_is_a_fact(tmp_path):
    ended = ev.TrialEnded(
        step=0, group=0, trial="x", outcome="Submitted", scored=True, reward=1.0, turns=2, output_tokens=9,
        trial_dir=None, timings={},
    )  # fmt: skip
    fact = read_capture_file(RunFolder(tmp_path), ended)
    assert fact is not None and fact.error is not None and "is missing" in fact.error
    assert read_capture_file(RunFolder(tmp_path), ev.TrialEnded(**{**ended.__dict__, "turns": 0})) is None


async def test_a_stall_is_found_by_the_watchers_timer(tmp_path):
    seen = []
    watcher = AdvisoryWatcher(seen.append, Thresholds(stall_floor_s=0.2, stall_min_peers=1), tmp_path, interval=0.05)
    task = asyncio.create_task(watcher.run())
    now = time.time()
    for trial, since in (("done", now - 2.0), ("slow", now)):
        watcher(ev.TrialPhaseChanged(ts=since, step=0, group=0, trial=trial, phase="agent"))
    watcher(ev.TrialPhaseChanged(ts=now - 1.95, step=0, group=0, trial="done", phase="verifying"))  # a 50 ms peer
    await _until(lambda: raised(seen, "stalled"))
    watcher(ev.TrialPhaseChanged(ts=time.time(), step=0, group=0, trial="slow", phase="verifying"))
    await _until(lambda: cleared(seen))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert [e.key for e in raised(seen)] == ["stalled:slow"]


def test_the_retry_spy_sees_the_sdks_retries_and_logs_nothing_more():
    noted = []
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    keep = Keep(level=logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(keep)
    sdk = logging.getLogger("tinker._base_client")
    before = sdk.level
    spy = RetrySpy(noted.append)
    spy.install()
    try:
        sdk.debug("Retrying request to %s in %f seconds", "/api/v1/asample", 0.8)
        sdk.debug("1 retry left")
        logging.getLogger("tinker.lib.api_future_impl").warning(
            "Retrying request self.request_id='r' because of try_again"
        )
    finally:
        spy.remove()
        root.removeHandler(keep)
    assert [n.message for n in noted] == [
        "Retrying request to /api/v1/asample in 0.800000 seconds",
        "Retrying request self.request_id='r' because of try_again",
    ]
    assert [r.getMessage() for r in records] == ["Retrying request self.request_id='r' because of try_again"]
    assert sdk.level == before and spy not in sdk.filters
