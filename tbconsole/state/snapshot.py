"""Reducer snapshots: the ``RunState`` folded from the first N bytes of a run's ``events.jsonl``,
kept in ``<log_path>/events.snapshot`` so that attaching to a day-long run reads only the events
after it instead of every event since the start (156k events: seconds; the tail: milliseconds).

Who writes it: the runner, through ``SnapshotWriter`` (a thread of its own that follows
``events.jsonl`` as any reader does and writes after each step starts), and a console that had
to read a long run from the start (``restore``), so the next attach is fast even for a run whose
runner wrote none. A snapshot is only ever a shortcut: any doubt and the events are read from
the start, and a write that fails is logged, never raised (a snapshot never fails a run).

The file: one header line of JSON, then the payload (the state, as JSON). A snapshot is used only
if every check holds (otherwise ``SnapshotProblem`` says which failed):
- ``format``: this module's layout of the file and of the payload (``FORMAT``);
- ``code``: a hash of the sources of the events, the enums, the model (with its ledger and
  pipeline), the reducer and this module: a state folded by other code (another version, a
  changed reducer) could differ from what this code folds, so it is not used (``code_version``);
- ``device``/``inode``: the events file it covers is the one there now (not a copy, not a file
  written anew after the run folder was reused);
- ``offset``: how many bytes of the events file it covers (no more than the file holds), and
  ``events_sha256``: a hash of the file's first 4 KiB and of the 64 KiB just before ``offset``
  (a truncated or rewritten file, on the same inode, shows there);
- ``payload_bytes``/``payload_sha256``: the payload is whole and unaltered (a torn write, a disk
  error), and it decodes into the model's types, each checked as it is rebuilt.

Why JSON: a snapshot is a file anyone who can write the run folder could have written. Unpickling
such a file can run any code; decoding JSON cannot. The decoder builds only the model's own
dataclasses (found from ``RunState``'s type annotations, not named by the file) and events
through their registry, and checks each value's type against the annotation as it goes.

(Over 400 lines: the file's format, the codec of its payload and its reader and writer stay
together: each check on reading is a promise of the writing.)
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import hashlib
import json
import logging
import os
import shutil
import threading
import types
import typing
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbconsole.common import inert
from tbconsole.common.atomic import write_bytes
from tbconsole.record import enums, events
from tbconsole.record.enums import SnapshotProblem
from tbconsole.record.events import BatchStarted, Event, EventsReader, from_body
from tbconsole.record.runfolder import RunFolder
from tbconsole.state import batches, ledger, model, pipeline, reducer
from tbconsole.state.model import PANELS, RunState
from tbconsole.state.reducer import reduce

FORMAT = 1
HEAD_BYTES = 4096  # the events file's first bytes, hashed: the run.started line, its run's identity
WINDOW_BYTES = 64 * 1024  # the bytes just before the offset, hashed: what the state's last events were
# A console that read this much of a run from the start writes a snapshot for the next attach
# (below it, reading from the start takes well under a second anyway).
WRITE_AFTER_BYTES = 8 << 20
# The runner writes after each step starts, and also after this many bytes of events (a step of
# a very large batch): the events after the snapshot stay few, however long a step is.
EVERY_BYTES = 8 << 20
KEEP_FREE_BYTES = 64 << 20  # no snapshot is written where it would leave less free than this

_log = logging.getLogger(__name__)


class Rejected(Exception):
    def __init__(self, problem: SnapshotProblem, detail: str = ""):
        super().__init__(f"{problem}: {detail}" if detail else str(problem))
        self.problem = problem


@functools.cache
def code_version() -> str:
    """A hash of the code whose behaviour a snapshot records: the events, their vocabularies, the
    model (its ledger and pipeline included), the reducer (and the inert text it folds), and this
    codec. Any change to them, comments included, retires every snapshot written before it:
    rereading a run once is cheaper than trusting a state that the changed code would not have folded."""
    digest = hashlib.sha256()
    try:
        sources = (enums, events, inert, model, ledger, pipeline, batches, reducer)
        for source in (*(m.__file__ for m in sources), __file__):
            digest.update(Path(source or "").read_bytes())
    except OSError:  # sources that cannot be read (a zipped install): no snapshot is trusted or written
        return ""
    return digest.hexdigest()[:32]


# -- the payload: RunState as JSON, driven by the model's type annotations ----------------------

# What the UI has still to draw: not part of what the events say. A restored state redraws all.
_NOT_KEPT = frozenset({"changed_panels", "changed_trials"})
_PLAIN = (str, int, float, bool, type(None))

Encode = Callable[[Any], Any] | None  # None: the value goes into JSON as it is
Decode = Callable[[Any], Any]


def _same(value: Any) -> Any:
    return value


@functools.cache
def _codec(tp: Any) -> tuple[Encode, Decode]:
    """(to JSON, from JSON) for values of the annotated type ``tp``. Decoders check each value
    they rebuild: a payload that decodes is one of the model's own states."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:  # a run's config: JSON from an event, kept as it came
        return None, _same
    if tp in _PLAIN:
        return _plain_codec(tp)
    if origin in (typing.Union, types.UnionType):
        return _optional_codec(tp, args)
    if isinstance(tp, type) and issubclass(tp, Event):
        return _event_codec(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_codec(tp)
    if origin in (list, set, deque):
        return _collection_codec(origin, args[0])
    if origin is tuple:
        return _tuple_codec(tp, args)
    if origin is dict:
        return _dict_codec(args[0], args[1])
    raise TypeError(f"no snapshot codec for {tp!r}")


def _plain_codec(tp: type) -> tuple[Encode, Decode]:
    """A str, int, float, bool or None: JSON as it is, its type checked on the way back."""
    # bool is an int to Python: a float field may hold an int (JSON drops ".0"), not a str.
    wanted = (int, float) if tp is float else tp

    def check_plain(value: Any) -> Any:
        if not isinstance(value, wanted):
            raise TypeError(f"{value!r} is not a {tp.__name__}")
        return value

    return None, check_plain


def _optional_codec(tp: Any, args: tuple) -> tuple[Encode, Decode]:
    """``X | None``: None, or X's JSON (a union of two types other than None has no codec)."""
    inner = [a for a in args if a is not type(None)]
    if len(inner) != 1:
        raise TypeError(f"no snapshot codec for {tp!r}")
    enc, dec = _codec(inner[0])

    def optional_from(value: Any) -> Any:
        return None if value is None else dec(value)

    if enc is None:
        return None, optional_from
    inner_to = enc  # a name mypy knows is not None inside the lambda
    return (lambda v: None if v is None else inner_to(v)), optional_from


def _collection_codec(origin: type, item: Any) -> tuple[Encode, Decode]:
    """A list, set or deque of ``item``: a JSON list (a set's sorted, a deque's with its bound)."""
    enc, dec = _codec(item)

    def items_to(values: Any) -> list:
        return list(values) if enc is None else [enc(v) for v in values]

    def items_from(values: Any) -> list:
        if not isinstance(values, list):
            raise TypeError(f"{type(values).__name__} is not a list")
        return [dec(v) for v in values]

    if origin is list:
        return items_to, items_from
    if origin is set:  # sorted: a set's order differs between processes, a snapshot's must not
        return lambda v: sorted(items_to(v)), lambda v: set(items_from(v))
    return (  # a deque keeps its bound: trends, logs, a trial's turns
        lambda v: [v.maxlen, items_to(v)],
        lambda v: deque(items_from(v[1]), maxlen=_bound(v[0])),
    )


def _tuple_codec(tp: Any, args: tuple) -> tuple[Encode, Decode]:
    """A tuple: a JSON list of its parts, each part's type checked on the way back."""
    plain = [_plain_types(a) for a in args]
    if all(t is not None for t in plain):  # a trial's turns: thousands, checked in one pass
        wanted = tuple(t for t in plain if t is not None)

        def plain_tuple_from(values: Any) -> tuple:
            if not isinstance(values, list) or len(values) != len(wanted):
                raise TypeError(f"{values!r} is not a {tp!r}")
            if not all(map(isinstance, values, wanted)):
                raise TypeError(f"{values!r} is not a {tp!r}")
            return tuple(values)

        return None, plain_tuple_from
    parts = [_codec(a) for a in args]

    def tuple_from(values: Any) -> tuple:
        if not isinstance(values, list) or len(values) != len(parts):
            raise TypeError(f"{values!r} is not a {tp!r}")
        return tuple(d(v) for (_, d), v in zip(parts, values, strict=True))

    return (lambda v: [e(x) if e is not None else x for (e, _), x in zip(parts, v, strict=True)]), tuple_from


def _dict_codec(key: Any, value: Any) -> tuple[Encode, Decode]:
    """A dict: a JSON object when its keys are str, else a list of [key, value] pairs."""
    kenc, kdec = _codec(key)
    venc, vdec = _codec(value)
    if key is str:  # a JSON object
        return (
            None if venc is None else lambda d: {k: venc(v) for k, v in d.items()},
            lambda d: {kdec(k): vdec(v) for k, v in _as_dict(d).items()},
        )
    return (  # other keys (a step, a (step, group)): a list of pairs, in the dict's order
        lambda d: [[k if kenc is None else kenc(k), v if venc is None else venc(v)] for k, v in d.items()],
        lambda pairs: {kdec(k): vdec(v) for k, v in (_pair(p) for p in _as_list(pairs))},
    )


def _event_codec(cls: type[Event]) -> tuple[Encode, Decode]:
    """An event the state keeps (a checkpoint, a pending decision) as its events.jsonl line has it."""

    def to_json(event: Event) -> dict:
        return {"kind": event.kind, **{f.name: getattr(event, f.name) for f in dataclasses.fields(event)}}

    def from_json(body: Any) -> Event:
        event = from_body(dict(_as_dict(body)))
        if not isinstance(event, cls):
            raise TypeError(f"not a {cls.kind} event")
        return event

    return to_json, from_json


def _plain_types(tp: Any) -> tuple[type, ...] | None:
    """The types a JSON value of a plain annotated type may have (None: not a plain type)."""
    if tp in _PLAIN:
        return (int, float) if tp is float else (tp,)
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        parts = [_plain_types(a) for a in typing.get_args(tp)]
        if all(p is not None for p in parts):
            return tuple(t for p in parts if p is not None for t in p)
    return None


def _dataclass_codec(cls: type) -> tuple[Encode, Decode]:
    """A model dataclass as the list of its fields' values, in their order. Its plain fields
    (numbers, strings, None) are checked in one pass: a trial's turns are thousands of these."""
    hints = typing.get_type_hints(cls)
    kept = [f.name for f in dataclasses.fields(cls) if f.name not in _NOT_KEPT]
    encoders = [(n, _codec(hints[n])[0]) for n in kept]
    plain = [(i, _plain_types(hints[n])) for i, n in enumerate(kept)]
    checked = [i for i, t in plain if t is not None]
    wanted = tuple(t for _, t in plain if t is not None)
    rebuilt = [(i, n, _codec(hints[n])[1]) for i, n in enumerate(kept) if i not in checked]

    def to_json(obj: Any) -> list:
        return [getattr(obj, n) if e is None else e(getattr(obj, n)) for n, e in encoders]

    def from_json(values: Any) -> Any:
        if not isinstance(values, list) or len(values) != len(kept):
            raise TypeError(f"not a {cls.__name__}")
        if not all(map(isinstance, [values[i] for i in checked], wanted)):
            raise TypeError(f"a {cls.__name__} with a value of the wrong type")
        fields = dict(zip(kept, values, strict=True))
        for i, name, decode_field in rebuilt:
            fields[name] = decode_field(values[i])
        return cls(**fields)

    return to_json, from_json


def _bound(value: Any) -> int | None:
    if value is not None and (not isinstance(value, int) or value < 0):
        raise TypeError(f"{value!r} is not a deque's bound")
    return value


def _as_dict(value: Any) -> dict:
    if not isinstance(value, dict):
        raise TypeError(f"{type(value).__name__} is not an object")
    return value


def _as_list(value: Any) -> list:
    if not isinstance(value, list):
        raise TypeError(f"{type(value).__name__} is not a list")
    return value


def _pair(value: Any) -> tuple[Any, Any]:
    if not isinstance(value, list) or len(value) != 2:
        raise TypeError(f"{value!r} is not a key and a value")
    return value[0], value[1]


def encode(state: RunState) -> bytes:
    """The state as JSON: the same state gives the same bytes (a canonical dump, for comparing)."""
    to_json, _ = _codec(RunState)
    assert to_json is not None
    return json.dumps(to_json(state), separators=(",", ":"), ensure_ascii=False).encode()


def decode(payload: bytes) -> RunState:
    """``encode``'s bytes back into a RunState, every panel to be drawn. Raises ValueError or
    TypeError for bytes that are not a state of this model."""
    _, from_json = _codec(RunState)
    state = from_json(json.loads(payload))
    state.changed_panels = set(PANELS)
    state.changed_trials = set(state.trials)
    return state


# -- the file ------------------------------------------------------------------------------------


def _events_mark(fd: int, offset: int) -> dict[str, Any]:
    """What ties a snapshot to the events file open as ``fd``, at ``offset``."""
    info = os.fstat(fd)
    digest = hashlib.sha256(os.pread(fd, min(HEAD_BYTES, offset), 0))
    start = max(0, offset - WINDOW_BYTES)
    digest.update(os.pread(fd, offset - start, start))
    return {"device": info.st_dev, "inode": info.st_ino, "offset": offset, "events_sha256": digest.hexdigest()}


def write_snapshot(state: RunState, reader: EventsReader) -> Path:
    """``state``, folded from every event ``reader`` has read, as the snapshot of its file at
    ``reader.offset``, written whole (``tbconsole.common.atomic``). Raises OSError."""
    handle = reader.open()
    if handle is None:
        raise FileNotFoundError(reader.path)
    if not code_version():
        raise OSError("the reducer's sources cannot be read: a snapshot could not be checked")
    payload = encode(state)
    header = {
        "format": FORMAT,
        "code": code_version(),
        **_events_mark(handle.fileno(), reader.offset),
        "payload_bytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    path = RunFolder(reader.path.parent).snapshot
    data = json.dumps(header).encode() + b"\n" + payload
    if shutil.disk_usage(path.parent).free < 2 * len(data) + KEEP_FREE_BYTES:
        # The last space on a filling disk is the run's: its events (the bus's reserve) come first.
        raise OSError(errno.ENOSPC, f"less than {KEEP_FREE_BYTES >> 20} MiB would be left free", str(path))
    return write_bytes(path, data)


def read_snapshot(reader: EventsReader) -> RunState:
    """The snapshot of ``reader``'s events file, checked against the file ``reader`` has open;
    moves ``reader`` to the offset it covers. Raises ``Rejected`` saying which check failed."""
    handle = reader.open()
    if handle is None:
        raise Rejected(SnapshotProblem.MISSING, f"no {reader.path.name}")
    path = RunFolder(reader.path.parent).snapshot
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise Rejected(SnapshotProblem.MISSING) from None
    except OSError as exc:
        raise Rejected(SnapshotProblem.DAMAGED, str(exc)) from None
    head, _, payload = data.partition(b"\n")
    try:
        header = _as_dict(json.loads(head))
    except (ValueError, TypeError) as exc:
        raise Rejected(SnapshotProblem.DAMAGED, f"header: {exc}") from None
    if header.get("format") != FORMAT:
        raise Rejected(SnapshotProblem.FORMAT, f"format {header.get('format')!r}, not {FORMAT}")
    if not code_version() or header.get("code") != code_version():
        raise Rejected(SnapshotProblem.CODE, "written by other code")
    fd = handle.fileno()
    info = os.fstat(fd)
    if (header.get("device"), header.get("inode")) != (info.st_dev, info.st_ino):
        raise Rejected(SnapshotProblem.IDENTITY, "another events file")
    offset = header.get("offset")
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 < offset <= info.st_size:
        raise Rejected(SnapshotProblem.OFFSET, f"offset {offset!r} of {info.st_size} bytes")
    if _events_mark(fd, offset)["events_sha256"] != header.get("events_sha256"):
        raise Rejected(SnapshotProblem.EVENTS, "the events it covers changed")
    if len(payload) != header.get("payload_bytes") or hashlib.sha256(payload).hexdigest() != header.get(
        "payload_sha256"
    ):
        raise Rejected(SnapshotProblem.PAYLOAD, "cut or altered")
    try:
        state = decode(payload)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        raise Rejected(SnapshotProblem.PAYLOAD, f"{type(exc).__name__}: {exc}") from None
    reader.offset = offset
    return state


@dataclass
class Restored:
    """A run's state as far as its events file went: ``reader`` is where it stopped."""

    state: RunState
    reader: EventsReader
    snapshot: int | None  # bytes the snapshot used covered (None: read from the start)
    problem: SnapshotProblem | None  # why no snapshot was used


def restore(log_path: Path, *, write_after: int | None = WRITE_AFTER_BYTES) -> Restored:
    """The run's state now: its snapshot and the events after it, or, when the snapshot cannot
    be used, every event. Having read at least ``write_after`` bytes from the start (None:
    never), it writes a snapshot for the next reader (a failure is logged)."""
    reader = EventsReader(RunFolder(log_path).events)
    problem: SnapshotProblem | None = None
    try:
        state = read_snapshot(reader)
    except Rejected as rejected:
        problem = rejected.problem
        if problem is not SnapshotProblem.MISSING:
            _log.info("snapshot of %s not used (%s): reading its events from the start", log_path, rejected)
        state = RunState()
    start = reader.offset
    while True:
        for event in reader.read():
            reduce(state, event)
        if not reader.more:
            break
    if problem is not None and write_after is not None and reader.offset - start >= write_after:
        try:
            write_snapshot(state, reader)
        except OSError as exc:  # a run folder this user cannot write, a full disk: next time again
            _log.info("cannot write a snapshot of %s: %s", log_path, exc)
    return Restored(state, reader, None if problem is not None else start, problem)


class SnapshotWriter:
    """Keeps ``<log_path>/events.snapshot`` close behind the run, for the runner: a thread that
    reads ``events.jsonl`` as it grows (every ``interval_s``), folds it into a state of its own
    and writes a snapshot once a step has started since the last one (or ``every_bytes`` came),
    and once more when stopped. Reading the file, not the bus, ties each snapshot to exactly the
    bytes it folded. Nothing here can fail the run: a write that fails is logged (once) and tried
    again at the next step; any other error is logged and ends only the snapshots (one already
    written stays valid: it covers the bytes it covers)."""

    def __init__(self, log_path: Path, *, interval_s: float = 2.0, every_bytes: int = EVERY_BYTES):
        self.log_path = Path(log_path)
        self.interval_s = interval_s
        self.every_bytes = every_bytes
        self.covered = 0  # bytes of events.jsonl the latest snapshot covers
        self.written = 0  # snapshots written
        self.failures = 0  # writes that failed
        self.resumed_from: int | None = None  # the snapshot the first poll went on from (bytes it covered)
        self._state: RunState | None = None
        self._reader: EventsReader | None = None
        self._boundary = False  # a step started since the latest snapshot
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        try:
            self._thread = threading.Thread(target=self._run, name="tbconsole-snapshots", daemon=True)
            self._thread.start()
        except RuntimeError as exc:  # no thread to be had: the run goes on without snapshots
            _log.warning("reducer snapshots off: %s", exc)

    def stop(self, timeout: float = 10.0) -> None:
        """Write what came since the latest snapshot, then stop (waits at most ``timeout``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def poll(self, final: bool = False) -> None:
        """Fold what was appended since the last call; write a snapshot if one is due (``final``:
        whenever there is anything new). The first call reads the run so far (a resumed run:
        from its snapshot, when it has a usable one)."""
        if self._reader is None:
            restored = restore(self.log_path, write_after=None)
            self._state, self._reader, self.covered = restored.state, restored.reader, restored.snapshot or 0
            self.resumed_from = restored.snapshot
            self._boundary = self._reader.offset > self.covered  # events no snapshot covers yet
        state, reader = self._state, self._reader
        assert state is not None
        while True:
            for event in reader.read():
                reduce(state, event)
                self._boundary = self._boundary or isinstance(event, BatchStarted)
            if not reader.more:
                break
        state.changed_panels.clear()  # nobody draws this state: what to redraw is no concern here
        state.changed_trials.clear()
        due = final or self._boundary or reader.offset - self.covered >= self.every_bytes
        if not due or reader.offset <= self.covered:
            return
        try:
            write_snapshot(state, reader)
        except OSError as exc:  # a full disk, say: tried again at the next step
            self.failures += 1
            # Info, not a warning: the run's log keeps it, but the console's stays for what needs
            # the user (a full disk is reported once, by the event log that meets it).
            if self.failures == 1:
                _log.info("cannot write the reducer snapshot (attach reads more events): %s", exc)
            return
        self.covered, self._boundary = reader.offset, False
        self.written += 1

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()

    def _run(self) -> None:
        try:
            while True:
                stopping = self._stop.wait(self.interval_s)
                self.poll(final=stopping)
                if stopping:
                    return
        except Exception:  # noqa: BLE001 - a snapshot is a shortcut for readers, never the run's failure
            _log.warning("reducer snapshots stopped", exc_info=True)
        finally:
            self.close()
