"""Where the console's events come from and where its commands go. Plain Python, no Textual.

Sources append events to an ``Inbox`` (a thread-safe deque) from whatever thread or loop they
live on; the app drains it on a timer, folds the events into its ``RunState`` and redraws the
panels that changed. Nothing here blocks the UI.

- ``BusSource``: a live run in this process: its events.jsonl so far, then ``EventBus.subscribe``.
- ``TailSource``: another process's ``events.jsonl``, followed as it grows (a thread).
- ``Replay``: a finished run's events in memory, with a position that moves through time.
- ``FileReplay``: the same moves over a finished run's ``events.jsonl``, never whole in memory:
  it opens at the end (the reducer snapshot and the events after it) and folds the file again
  from a kept state when it moves.
- ``LeaseWatch``: whether another process's runner is still alive (its lease), read by a thread.

Controls: ``LocalControls`` calls a ``RunControl`` on the runner's loop (directly when the
runner runs in the app's loop, through ``call_soon_threadsafe`` when it runs in another
thread); ``FileControls`` drops commands into the run's control inbox (``ControlClient``);
``NoControls`` is replay.
"""

from __future__ import annotations

import asyncio
import bisect
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tbconsole.common.jsonl import whole_lines
from tbconsole.record.control import ControlClient, ControlError, RunControl
from tbconsole.record.enums import ControlCommand, ControlState, RunnerState, RunStatus
from tbconsole.record.events import (
    BatchStarted,
    Event,
    EventBus,
    EventsReader,
    GroupStarted,
    RunEnded,
    decode,
    split_events,
)
from tbconsole.record.lease import LeaseView, read_lease
from tbconsole.record.runfolder import EVENTS_FILE
from tbconsole.state import RunState, reduce
from tbconsole.state.snapshot import Restored, encode, restore
from tbconsole.state.snapshot import decode as decode_state


class Inbox:
    """Events waiting for the UI. ``put`` is safe from any thread and never blocks."""

    def __init__(self) -> None:
        self._queue: deque[Event] = deque()
        self.received = 0

    def put(self, event: Event) -> None:
        self._queue.append(event)
        self.received += 1

    def put_many(self, events: Iterable[Event]) -> None:
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


# What the app takes its events from: a run in this process, a fixed list, a run's events file.
EventSource = BusSource | ListSource | TailSource


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


class _Moves:
    """Step-wise moves over ``marks`` (positions where batches start), shared by both replays:
    each takes ``at`` (a move asked while another is still being made goes on from where that
    one goes) and defaults to the position."""

    marks: list[int]
    position: int
    state: RunState

    @property
    def length(self) -> int:
        raise NotImplementedError

    def step_index(self) -> int:
        """How many batch starts are at or before the position (0 before the first batch)."""
        return bisect.bisect_left(self.marks, self.position)

    def next_mark(self, at: int | None = None) -> int:
        at = self.position if at is None else at
        i = bisect.bisect_right(self.marks, at)
        return self.marks[i] if i < len(self.marks) else self.length

    def previous_mark(self, at: int | None = None) -> int:
        at = self.position if at is None else at
        i = bisect.bisect_left(self.marks, at)
        return self.marks[i - 1] if i else 0

    def mark_for_step(self, index: int) -> int:
        """Position at the end of the index-th batch (0 = before the first one)."""
        if index <= 0:
            return self.marks[0] if self.marks else 0
        if index >= len(self.marks):
            return self.length
        return self.marks[index]

    def target(self, move: str | int, at: int | None = None) -> int:
        """Where a move (``prev``, ``next``, ``first``, ``last``, or a position) goes from ``at``."""
        if move == "prev":
            return self.previous_mark(at)
        if move == "next":
            return self.next_mark(at)
        if move == "first":
            return self.mark_for_step(0)
        if move == "last":
            return self.length
        return max(0, min(self.length, int(move)))


class Replay(_Moves):
    """A finished run in memory; ``seek(i)`` gives the state after the first ``i`` events.

    Forward moves fold the events in between; backward moves rebuild from the start (fast
    enough: the reducer folds ~100k events/s). ``marks`` are the positions where batches start,
    for step-wise moves. For lists already in memory (a synthetic run, tests, benchmarks); a
    run's file is replayed by ``FileReplay``."""

    live = False
    lazy = False  # seek is quick: made on the UI thread

    def __init__(self, events: list[Event]):
        self.events = events
        self.marks = step_marks(events)
        self.position = 0
        self.state = RunState()

    @property
    def length(self) -> int:
        return len(self.events)

    def seek(self, position: int) -> RunState:
        position = max(0, min(len(self.events), position))
        if position < self.position:
            self.state = RunState()
            self.position = 0
        for event in self.events[self.position : position]:
            reduce(self.state, event)
        self.position = position
        return self.state

    def final_state(self) -> RunState:
        return self.seek(len(self.events))


# -- a finished run's file, replayed without keeping its events --------------------------------

# Where a step starts: a batch.started line, or a group.started one (a runner that sends no
# batch.started). The writer puts v, kind, ts, then the event's fields, step first for both;
# inside a JSON string a quote is escaped, so the kind's text is found only at a line's head.
_START_KINDS = (b'"kind":"batch.started"', b'"kind":"group.started"')
_START_HEAD = re.compile(rb'\{"v":\d+,"kind":"(?:batch|group)\.started","ts":[-+0-9.eE]+,"step":(-?\d+)')
INDEX_CHUNK = 4 << 20


@dataclass
class StepIndex:
    """Where each step starts in an events file, found without decoding a line (a day-long
    run's 100 MB: a fraction of a second): positions count lines, as ``Replay`` counts events."""

    marks: list[int]  # line numbers where steps start, as ``step_marks`` finds them
    offsets: list[int]  # the byte offset of each of those lines
    lines: int  # whole lines in the first ``end`` bytes
    end: int


def index_steps(path: Path, end: int, chunk: int = INDEX_CHUNK) -> StepIndex:
    """The steps' starts among the whole lines of ``path``'s first ``end`` bytes."""
    marks: list[int] = []
    offsets: list[int] = []
    seen: set[int] = set()
    lines = offset = 0
    with open(path, "rb") as handle:
        while offset < end:
            data, _ = whole_lines(handle, offset, chunk, end)  # a line longer than a chunk: read whole
            if not data:
                break  # the file ends in a line without its newline
            counted = 0
            for at, step in _line_starts(data):
                lines += data.count(b"\n", counted, at)
                counted = at
                if step not in seen:
                    seen.add(step)
                    marks.append(lines)
                    offsets.append(offset + at)
            lines += data.count(b"\n", counted)
            offset += len(data)
    return StepIndex(marks, offsets, lines, offset)


def _line_starts(data: bytes) -> list[tuple[int, int]]:
    """(offset of the line, its step) of each step-starting line in ``data``, in order."""
    found: list[tuple[int, int]] = []
    for kind in _START_KINDS:
        at = data.find(kind)
        while at != -1:
            head = data.rfind(b"\n", 0, at) + 1
            match = _START_HEAD.match(data, head)
            if match is not None and match.end() > at:
                found.append((head, int(match.group(1))))
            at = data.find(kind, at + 1)
    return sorted(found)


def fold_file(path: Path, state: RunState, start: int, end: int | None = None) -> int:
    """Fold the events of ``path``'s whole lines from byte ``start`` (a line's start) to ``end``
    (None: the file's end) into ``state``; returns where they ended."""
    with EventsReader(path, start) as reader:
        while end is None or reader.offset < end:
            for event in reader.read(end=end):
                reduce(state, event)
            if not reader.more:
                break
        return reader.offset


def restore_file(path: Path) -> tuple[RunState, int]:
    """A finished run's state at the end of its file and how many bytes that is: from the run's
    reducer snapshot and the events after it (``restore``: it writes one after a long read from
    the start), or, for an events file under another name, from every event."""
    path = Path(path)
    if path.name != EVENTS_FILE:
        state = RunState()
        return state, fold_file(path, state, 0)
    restored = restore(path.parent)
    restored.reader.close()
    return restored.state, restored.reader.offset


class FileReplay(_Moves):
    """A finished run replayed from its events file: the moves of ``Replay`` (positions count
    the file's lines), with no event kept in memory.

    It opens at the end with the state ``restore_file`` gives (the snapshot: milliseconds).
    ``seek`` folds the file from the nearest state it has at or before the target: the one on
    view when moving forward (copied: the UI keeps drawing it meanwhile), else one of the states
    kept, encoded as snapshots are (under 1 MB each), at every few steps it has passed and at the
    end. So going back costs a few steps' events, not the run's. ``seek`` takes a while on a long
    run: call it off the UI thread (``lazy``), one call at a time."""

    live = False
    lazy = True
    KEPT_STATES = 16  # states kept along the run, besides the end's

    def __init__(self, path: Path, state: RunState, index: StepIndex):
        self.path = Path(path)
        self.state = state
        self.marks = index.marks
        self._offsets = index.offsets
        self._lines = index.lines
        self.position = index.lines
        self._offset = index.end
        self._stride = max(1, -(-len(self.marks) // self.KEPT_STATES))
        self._kept: dict[int, tuple[int, bytes]] = {index.lines: (index.end, encode(state))}

    @classmethod
    def open(cls, path: Path) -> FileReplay:
        state, end = restore_file(path)
        return cls(path, state, index_steps(path, end))

    @property
    def length(self) -> int:
        return self._lines

    @property
    def events(self) -> range:
        """The positions of its events (their count, for what draws a replay's place)."""
        return range(self._lines)

    def final_state(self) -> RunState:
        """The state at the end, whatever the position (the kept copy: no reading)."""
        if self.position == self._lines:
            return self.state
        return decode_state(self._kept[self._lines][1])

    def seek(self, position: int) -> RunState:
        position = max(0, min(self._lines, position))
        if position == self.position:
            return self.state
        at, offset, state = self._base(position)
        for i in range(bisect.bisect_right(self.marks, at), bisect.bisect_right(self.marks, position)):
            if i % self._stride == 0:  # passing a step to keep a state at
                fold_file(self.path, state, offset, self._offsets[i])
                at, offset = self.marks[i], self._offsets[i]
                self._kept[at] = (offset, encode(state))
        end = self._offset_of(position, at, offset)
        fold_file(self.path, state, offset, end)
        self.state, self.position, self._offset = state, position, end
        return state

    def _base(self, position: int) -> tuple[int, int, RunState]:
        """The nearest state at or before ``position``, as a new object: (its position, its
        offset, the state)."""
        kept = max((p for p in self._kept if p <= position), default=None)
        if self.position <= position and (kept is None or kept < self.position):
            return self.position, self._offset, decode_state(encode(self.state))
        if kept is None:
            return 0, 0, RunState()
        offset, payload = self._kept[kept]
        return kept, offset, decode_state(payload)

    def _offset_of(self, position: int, at: int, offset: int) -> int:
        """The byte offset of line ``position``, counting lines on from line ``at`` (at ``offset``)."""
        if position == self._lines:
            return self._kept[self._lines][0]
        i = bisect.bisect_left(self.marks, position)
        if i < len(self.marks) and self.marks[i] == position:
            return self._offsets[i]
        if i and self.marks[i - 1] > at:
            at, offset = self.marks[i - 1], self._offsets[i - 1]
        with open(self.path, "rb") as handle:
            handle.seek(offset)
            while at < position:
                data = handle.read(INDEX_CHUNK)
                if not data:
                    break
                cut = 0
                while at < position:
                    found = data.find(b"\n", cut)
                    if found == -1:
                        break
                    cut, at = found + 1, at + 1
                offset += cut if at == position else len(data)
        return offset


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

    def __init__(self, control: RunControl, loop: asyncio.AbstractEventLoop | None = None):
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


# Where the app's commands go: nowhere (a replay), a run in this process, another process's run.
Controls = NoControls | LocalControls | FileControls


def allowed_commands(state: RunState, controls_available: bool) -> set[str]:
    """Which run commands make sense now (the footer and palette show only these)."""
    if not controls_available or state.finished or state.control == ControlState.WAITING:
        return set()
    s = state.control
    ended = (RunStatus.DONE, RunStatus.FAILED)
    out: set[str] = set()
    if s == ControlState.RUNNING:
        out.add(ControlCommand.PAUSE)
    if s in (ControlState.PAUSING, ControlState.PAUSED):
        out.add(ControlCommand.RESUME)
    if s not in (ControlState.STOPPING, ControlState.ABORTING, *ended):
        out.add(ControlCommand.STOP)
    if s not in (ControlState.ABORTING, *ended):
        out.add(ControlCommand.ABORT)
    if state.pending_decision is not None:
        out.add(ControlCommand.DECIDE)
    return out
