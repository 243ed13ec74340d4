"""Where the console's events come from and where its commands go. Plain Python, no Textual.

Sources append events to an ``Inbox`` (a thread-safe deque) from whatever thread or loop they
live on; the app drains it on a timer, folds the events into its ``RunState`` and redraws the
panels that changed. Nothing here blocks the UI.

- ``BusSource``: a live run in this process: its events.jsonl so far, then ``EventBus.subscribe``.
- ``TailSource``: another process's ``events.jsonl``, followed as it grows (a thread).
- ``Replay``: a finished run's events in memory, with a position that moves through time.
- ``LeaseWatch``: whether another process's runner is still alive (its lease), read by a thread.

Controls: ``LocalControls`` calls a ``RunControl`` on the runner's loop (directly when the
runner runs in the app's loop, through ``call_soon_threadsafe`` when it runs in another
thread); ``FileControls`` drops commands into the run's control inbox (``ControlClient``);
``NoControls`` is replay.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from tbconsole.control import ControlClient, ControlError
from tbconsole.enums import ControlState, RunStatus
from tbconsole.events import (
    EVENTS_FILE,
    BatchStarted,
    Event,
    EventBus,
    EventsReader,
    GroupStarted,
    RunEnded,
    decode,
    split_events,
)
from tbconsole.lease import LeaseView, RunnerState, read_lease
from tbconsole.state import RunState, reduce
from tbconsole.state.snapshot import Restored, restore


class Inbox:
    """Events waiting for the UI. ``put`` is safe from any thread and never blocks."""

    def __init__(self) -> None:
        self._queue: deque[Event] = deque()
        self.received = 0

    def put(self, event: Event) -> None:
        self._queue.append(event)
        self.received += 1

    def put_many(self, events) -> None:
        for event in events:
            self._queue.append(event)
            self.received += 1

    def drain(self, state: RunState, budget_s: float = 0.03, clock: Callable[[], float] = time.perf_counter) -> int:
        """Fold queued events into the state for at most ``budget_s``; returns how many."""
        queue = self._queue
        n = 0
        deadline = clock() + budget_s
        while queue:
            reduce(state, queue.popleft())
            n += 1
            if n % 64 == 0 and clock() > deadline:
                break
        return n

    def __len__(self) -> int:
        return len(self._queue)


class BusSource:
    """A live run in this process. What its ``events.jsonl`` already holds comes first (a run
    resumed into the same folder: the earlier run's events, so the whole run's trends show),
    read by a thread; then the bus's events. Each event arrives once: the file is read up to
    where it stood when the subscription began (``EventBus.subscribe_after_file``), and live
    events that come meanwhile wait until it is read."""

    live = True

    def __init__(self, bus: EventBus, history: list[Event] | None = None):
        self.bus = bus
        self.history = history or []  # events published before the console opened, on a bus without a file
        self._unsubscribe: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._held: list[Event] | None = None  # live events waiting for the file's
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, inbox: Inbox) -> None:
        inbox.put_many(self.history)
        self._held = []
        self._unsubscribe, end = self.bus.subscribe_after_file(lambda event: self._deliver(inbox, event))
        if self.bus.path is None or end == 0:
            self._release(inbox)
            return
        self._thread = threading.Thread(
            target=self._read_file, args=(inbox, self.bus.path, end), name="tbconsole-backlog", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _deliver(self, inbox: Inbox, event: Event) -> None:
        with self._lock:
            if self._held is not None:
                self._held.append(event)
                return
        inbox.put(event)

    def _release(self, inbox: Inbox) -> None:
        with self._lock:
            held, self._held = self._held, None
            inbox.put_many(held or [])

    def _read_file(self, inbox: Inbox, path: Path, end: int) -> None:
        reader = EventsReader(path)
        try:
            while reader.offset < end and not self._stop.is_set():
                inbox.put_many(reader.read(end=end))
                if not reader.more:
                    break
        except OSError:
            pass  # the file is the bus's to report; the live events still come
        finally:
            reader.close()
            self._release(inbox)


class ListSource:
    """A fixed list of events, delivered at once (tests, ``--demo-events``)."""

    live = False

    def __init__(self, events: list[Event]):
        self.events = events

    def start(self, inbox: Inbox) -> None:
        inbox.put_many(self.events)

    def stop(self) -> None:
        pass


class TailSource:
    """Follows ``<log_path>/events.jsonl``: ``catch_up`` gives the run's state as far as the file
    goes (its reducer snapshot and the events after it, or every event: ``tbconsole.state.snapshot``),
    then ``start`` follows it from there: complete lines only (a line being written is kept until
    its newline arrives), waiting for the file to appear."""

    live = True

    def __init__(self, log_path: Path, poll_s: float = 0.1):
        self.log_path = Path(log_path)
        self.path = self.log_path / EVENTS_FILE
        self.poll_s = poll_s
        self.reader = EventsReader(self.path)
        self.restored: Restored | None = None  # what catch_up found
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def catch_up(self) -> RunState:
        """The run's state up to the end of its events file now; ``start`` goes on from there.
        Off the UI thread: a run without a usable snapshot is read from its start."""
        self.restored = restore(self.log_path)
        self.reader = self.restored.reader
        return self.restored.state

    def start(self, inbox: Inbox) -> None:
        self._thread = threading.Thread(target=self._run, args=(inbox,), name="tbconsole-tail", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _run(self, inbox: Inbox) -> None:
        try:
            while not self._stop.is_set():
                inbox.put_many(self.reader.read())
                if not self.reader.more:
                    self._stop.wait(self.poll_s)
        finally:
            self.reader.close()


class LeaseWatch:
    """The runner's lease on ``log_path``, read every ``interval_s`` by a thread (a read is a
    small file and a non-blocking lock, but a shared folder can still make it wait). ``view``
    is the latest read; the app picks it up on its own timer."""

    def __init__(self, log_path: Path, interval_s: float = 1.0):
        self.log_path = Path(log_path)
        self.interval_s = interval_s
        self.view = LeaseView(RunnerState.NONE)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tbconsole-lease-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _run(self) -> None:
        while True:
            view = read_lease(self.log_path)
            if view != self.view:
                self.view = view  # one reference swap: the UI thread reads it without a lock
            if self._stop.wait(self.interval_s):
                return


def read_all(log_path: Path) -> list[Event]:
    """Every event of a run's file, the last line too even without its newline. Read a slice at
    a time: a day-long run's file is never in memory whole beside its events."""
    path = Path(log_path) / EVENTS_FILE if Path(log_path).is_dir() else Path(log_path)
    events: list[Event] = []
    with EventsReader(path) as reader:
        while True:
            events += reader.read(limit=4 << 20)
            if not reader.more:
                break
        handle = reader.open()
        if handle is None:
            raise FileNotFoundError(path)
        handle.seek(reader.offset)
        rest = handle.read()
    return events + split_events(rest + b"\n")[0]


def run_has_ended(log_path: Path) -> bool:
    """True when the events file's last complete event is a RunEnded (read from the end)."""
    path = Path(log_path) / EVENTS_FILE
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            handle.seek(max(0, size - 65536))
            tail = handle.read().split(b"\n")
    except OSError:
        return False
    for raw in reversed(tail):
        if raw.strip():
            event = decode(raw.decode("utf-8", errors="replace"))
            if event is not None:
                return isinstance(event, RunEnded)
    return False


def step_marks(events: list[Event]) -> list[int]:
    """Where each step starts: its BatchStarted, or (a runner that sends none) its first
    GroupStarted."""
    marks, seen = [], set()
    for i, e in enumerate(events):
        if isinstance(e, (BatchStarted, GroupStarted)) and e.step not in seen:
            seen.add(e.step)
            marks.append(i)
    return marks


class Replay:
    """A finished run in memory; ``seek(i)`` gives the state after the first ``i`` events.

    Forward moves fold the events in between; backward moves rebuild from the start (fast
    enough: the reducer folds ~100k events/s). ``marks`` are the positions where batches start,
    for step-wise moves."""

    live = False

    def __init__(self, events: list[Event]):
        self.events = events
        self.marks = step_marks(events)
        self.position = 0
        self.state = RunState()

    def seek(self, position: int) -> RunState:
        position = max(0, min(len(self.events), position))
        if position < self.position:
            self.state = RunState()
            self.position = 0
        for event in self.events[self.position : position]:
            reduce(self.state, event)
        self.position = position
        return self.state

    def step_index(self) -> int:
        """How many batch starts are at or before the position (0 before the first batch)."""
        return sum(1 for m in self.marks if m < self.position)

    def next_mark(self) -> int:
        for m in self.marks:
            if m > self.position:
                return m
        return len(self.events)

    def previous_mark(self) -> int:
        before = [m for m in self.marks if m < self.position]
        return before[-1] if before else 0

    def mark_for_step(self, index: int) -> int:
        """Position at the end of the index-th batch (0 = before the first one)."""
        if index <= 0:
            return self.marks[0] if self.marks else 0
        if index >= len(self.marks):
            return len(self.events)
        return self.marks[index]


# -- controls -------------------------------------------------------------------------------


class NoControls:
    available = False
    where = "replay: read-only"

    def send(self, command: str, argument: str | None = None) -> None:
        raise ControlError("this is a replay of a finished run: nothing to control")


class LocalControls:
    """The runner's ``RunControl`` in this process. ``loop`` is the runner's loop when it runs
    in another thread (commands are handed to it thread-safely); None when it runs in the app's
    own loop (commands are applied directly)."""

    available = True
    where = "in-process"

    def __init__(self, control, loop: asyncio.AbstractEventLoop | None = None):
        self.control = control
        self.loop = loop

    def send(self, command: str, argument: str | None = None) -> None:
        if self.loop is None:
            self.control.apply(command, argument)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.control.apply(command, argument)
            return

        async def apply() -> None:
            self.control.apply(command, argument)

        future = asyncio.run_coroutine_threadsafe(apply(), self.loop)
        future.result(timeout=2.0)  # re-raises ControlError


class FileControls:
    """Another process's run, through its control inbox."""

    where = "control inbox"

    def __init__(self, log_path: Path):
        self.client = ControlClient(log_path)

    @property
    def available(self) -> bool:
        return self.client.available()

    def send(self, command: str, argument: str | None = None) -> None:
        self.client.send(command, argument)


def allowed_commands(state: RunState, controls_available: bool) -> set[str]:
    """Which run commands make sense now (the footer and palette show only these)."""
    if not controls_available or state.finished or state.control == ControlState.WAITING:
        return set()
    s = state.control
    ended = (RunStatus.DONE, RunStatus.FAILED)
    out: set[str] = set()
    if s == ControlState.RUNNING:
        out.add("pause")
    if s in (ControlState.PAUSING, ControlState.PAUSED):
        out.add("resume")
    if s not in (ControlState.STOPPING, ControlState.ABORTING, *ended):
        out.add("stop")
    if s not in (ControlState.ABORTING, *ended):
        out.add("abort")
    if state.pending_decision is not None:
        out.add("decide")
    return out
