"""The run's advisories, live: the watcher feeds the run's events and its own measurements to the
rules (``tbconsole.advisories``) and publishes what they raise and clear on the bus, so they land
in ``events.jsonl`` (attach and replay see them) and in the headless log.

Never a danger to the run: the bus hands events to ``__call__``, which only queues them; the
rules run in the watcher's own task, between the run's awaits; a rule that crashes is turned off
by the Advisor (one log line), and anything else that goes wrong here is logged once and the
watcher carries on. Every CHECK_EVERY_SEC it also samples the run folder's free disk space and
runs the time-based checks (stalled trials, trials past their agent timeout, retry windows); at
each step's end it measures what the run folder takes on disk (``diskspace.run_size``: only the
newest steps' folders are walked), so that the disk rule projects from the run's own growth.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tbconsole.advisories import Advisor, Thresholds
from tbconsole.advisories.base import step_done
from tbconsole.advisories.facts import AgentTimeout, CaptureFile, DiskSample, RunFolderSize, SdkRetry
from tbconsole.record.capturefile import CaptureTail
from tbconsole.record.events import AdvisoryCleared, AdvisoryRaised, Event, TrialEnded
from tbconsole.record.runfolder import RunFolder
from tbconsole.runs import diskspace

CHECK_EVERY_SEC = 5.0
READ_CHUNK = 8 << 20  # bytes of a capture file read at a time (only counts are kept)
# The Tinker SDK logs each retry ("Retrying …"), most at DEBUG, from these modules.
RETRY_LOGGERS = ("tinker._base_client", "tinker.lib.retry_handler", "tinker.lib.api_future_impl")

_log = logging.getLogger(__name__)


class AdvisoryWatcher:
    def __init__(
        self,
        publish: Callable[[Event], None],
        thresholds: Thresholds,
        log_path: Path,
        *,
        interval: float = CHECK_EVERY_SEC,
        free_bytes: Callable[[Path], int] = diskspace.free_bytes,
    ):
        self.publish = publish
        self.advisor = Advisor(thresholds)
        self.folder = RunFolder(log_path)
        self.interval = interval
        self.free_bytes = free_bytes
        self._sized = -1  # the newest step whose end the run folder was measured at
        self._inbox: deque[Any] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._failed = False

    # -- inputs (any thread) --------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        """The bus subscriber: queue and wake the watcher, nothing more."""
        if not isinstance(event, AdvisoryRaised | AdvisoryCleared):
            self.note(event)

    def note(self, item: Any) -> None:
        """An event or a fact (``tbconsole.advisories.facts``) for the rules."""
        self._inbox.append(item)
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop has closed: the watcher is done
                pass

    def trial_created(self, trial_id: str, trial: Any) -> None:
        """Harbor made a trial: its resolved agent timeout (None: the task sets none)."""
        seconds = getattr(trial, "agent_timeout_sec", None)
        if isinstance(seconds, int | float):
            self.note(AgentTimeout(trial=trial_id, seconds=float(seconds)))

    # -- the watcher's task -------------------------------------------------------------------------

    async def run(self) -> None:
        """Until cancelled; then the events still queued are fed (the last step's metrics)."""
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        spy = RetrySpy(self.note)
        spy.install()
        next_check = time.monotonic()
        try:
            while True:
                try:
                    await asyncio.wait_for(self._wake.wait(), max(0.0, next_check - time.monotonic()))
                except TimeoutError:
                    pass
                self._wake.clear()
                await self._guarded(self._drain())
                if time.monotonic() >= next_check:
                    await self._guarded(self._check())
                    next_check = time.monotonic() + self.interval
        finally:
            spy.remove()
            self._loop = None
            self._drain_now()

    async def _guarded(self, work) -> None:
        try:
            await work
        except Exception:  # noqa: BLE001 - advisories must never stop the run
            if not self._failed:
                self._failed = True
                _log.exception("the advisory watcher failed; it carries on")

    async def _drain(self) -> None:
        while self._inbox:
            item = self._inbox.popleft()
            self._emit(self.advisor.feed(item))
            if _scored(item):  # its capture file is read off the event loop
                fact = await asyncio.to_thread(read_capture_file, self.folder, item)
                if fact is not None:
                    self._emit(self.advisor.feed(fact, now=item.ts))
            step = step_done(item)
            if step is not None and step > self._sized:  # measured off the event loop, once a step
                self._sized = step
                size = await asyncio.to_thread(diskspace.run_size, self.folder, step)
                self._emit(self.advisor.feed(RunFolderSize(ts=time.time(), step=step, bytes=size)))

    def _drain_now(self) -> None:
        try:
            while self._inbox:
                item = self._inbox.popleft()
                self._emit(self.advisor.feed(item))
                fact = read_capture_file(self.folder, item) if _scored(item) else None
                if fact is not None:
                    self._emit(self.advisor.feed(fact, now=item.ts))
        except Exception:  # noqa: BLE001 - the run is ending; never in its way
            _log.exception("the advisory watcher failed at the end of the run")

    async def _check(self) -> None:
        now = time.time()
        try:
            free = await asyncio.to_thread(self.free_bytes, self.folder.root)
        except OSError as exc:
            _log.info("free space of %s unknown: %s", self.folder.root, exc)
        else:
            self._emit(self.advisor.feed(DiskSample(ts=now, free_bytes=free)))
        self._emit(self.advisor.tick(now))

    def _emit(self, events: list[Event]) -> None:
        for event in events:
            self.publish(event)


def _scored(item: Any) -> bool:
    return isinstance(item, TrialEnded) and item.scored


def read_capture_file(folder: RunFolder, ended: TrialEnded) -> CaptureFile | None:
    """Count a trial's capture file: turns, turns with a log-prob per token, reply tokens. None
    when the trial made no captured turn and has no file (an agent that calls no model)."""
    path = folder.capture_file(ended.step, ended.group, ended.trial)

    def fact(records: int = 0, with_logprobs: int = 0, tokens: int = 0, damaged: int = 0, error: str | None = None):
        return CaptureFile(
            step=ended.step,
            group=ended.group,
            trial=ended.trial,
            records=records,
            with_logprobs=with_logprobs,
            output_tokens=tokens,
            damaged=damaged,
            error=error,
        )

    if not path.exists():
        if ended.turns == 0:
            return None
        return fact(error=f"{path} is missing")
    tail = CaptureTail(path)
    records = with_logprobs = tokens = 0
    while batch := tail.read_new(READ_CHUNK):
        for record in batch:
            records += 1
            with_logprobs += len(record.logprobs) == len(record.output)
            tokens += len(record.output)
    if tail.unreadable and records == 0 and path.stat().st_size > 0:
        return fact(error=f"{path} cannot be read")
    return fact(records, with_logprobs, tokens, tail.damaged)


class RetrySpy(logging.Filter):
    """Sees the SDK's retry log records (``SdkRetry`` facts) without changing what is logged:
    its loggers are opened to DEBUG for the spy, which passes on only what they let through
    before."""

    def __init__(self, note: Callable[[Any], None]):
        super().__init__()
        self.note = note
        self._before: dict[str, tuple[int, int]] = {}  # logger → (its level, its effective level)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is the logging module's business
            return True
        if message.startswith("Retrying"):
            self.note(SdkRetry(ts=record.created, message=message))
        before = self._before.get(record.name)
        return before is None or record.levelno >= before[1]

    def install(self) -> None:
        for name in RETRY_LOGGERS:
            logger = logging.getLogger(name)
            self._before[name] = (logger.level, logger.getEffectiveLevel())
            logger.setLevel(min(logging.DEBUG, logger.getEffectiveLevel()))
            logger.addFilter(self)

    def remove(self) -> None:
        for name, (level, _) in self._before.items():
            logger = logging.getLogger(name)
            logger.removeFilter(self)
            logger.setLevel(level)
        self._before.clear()
