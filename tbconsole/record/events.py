"""Typed run events: the only data the console reads, live or from ``events.jsonl``.

(Over 400 lines: the wire format and its one writer stay together; the writer's whole-line
guarantees below are part of the format every reader relies on.)

Every state change of a run is one of these. Producers (runner, proxy, health probe) publish
them on an ``EventBus``; the bus appends each to ``<log_path>/events.jsonl`` (one JSON object
per line, flushed as it happens) and hands it to in-process subscribers. Replay and attach
read the file back with ``read_events`` / ``decode``: the same objects, the same reducer.

Wire format: ``{"v": SCHEMA_VERSION, "kind": "<kind>", "ts": <unix seconds>, ...fields}``.
Readers skip kinds they do not know (newer writer) and lines that are cut short (a crash
mid-write), so an old console can read a newer run and a partial file never breaks replay.
Secrets never enter an event: configs pass through ``redact`` first.

Writing survives a full or failing disk (``EventBus``):
- Each line is appended with one ``os.write`` on an ``O_APPEND`` descriptor. A write that fails
  or comes up short is cut back (``ftruncate``) to the end of the last whole line, so readers
  only ever see whole lines, plus at most one cut line where a writer died mid-write; a bus that
  opens a file ending in a cut line starts its first line on a new line.
- ``publish`` never raises because of the file: subscribers (console, progress log) still get
  every event. The first OSError is reported once, through ``on_write_error``, and as one
  ``LogLine(level=LogLevel.ERROR)`` to subscribers and the file; later failures are only counted.
- The reserve: with the file, the bus makes ``<log_path>/.events-reserve``, RESERVE_BYTES
  (256 KiB) allocated with ``posix_fallocate`` (real blocks, not a sparse file). The first
  "no room" error (ENOSPC, EDQUOT, EFBIG) deletes it and retries the failed line in the space
  it gave back. After any write error, only run-level kinds (KEPT_WHEN_FAILING) are written, so the
  freed space is left for the end of the run — error, control.changed, run.ended — instead of
  trial and request chatter. Anything else that writes to the same filesystem can still take
  that space first: the reserve makes the final lines likely, not certain. ``close()`` deletes
  the reserve. If the reserve cannot be made (less than 256 KiB free), the bus does not raise:
  it reports that error at the first publish, like any other write error.
- One bus writes a given events.jsonl: the bus tracks the file's end itself. Events published
  after ``close()`` (e.g. after run.ended) still reach subscribers and are appended.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from tbconsole.common import jsonl
from tbconsole.common.inert import RAW
from tbconsole.record import enums
from tbconsole.record.runfolder import RunFolder

SCHEMA_VERSION = 1

_REGISTRY: dict[str, type[Event]] = {}


@dataclass(frozen=True, kw_only=True)
class Event:
    kind: ClassVar[str] = ""
    ts: float = field(default_factory=time.time)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.kind:
            _REGISTRY[cls.kind] = cls

    def to_json(self) -> str:
        body = {"v": SCHEMA_VERSION, "kind": self.kind}
        body.update(dataclasses.asdict(self))
        return json.dumps(body, separators=(",", ":"), default=str)


# -- run lifecycle ---------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run.started"
    run_id: str = field(metadata=RAW)
    log_path: str = field(metadata=RAW)
    model_name: str
    base_url: str | None
    renderer_name: str | None
    total_steps: int
    start_step: int = 0
    groups_per_batch: int
    group_size: int
    tasks: list[str] = field(metadata=RAW)
    config: dict[str, Any]  # redacted
    # The difficulty ledger's families: task -> its task.toml [metadata] category, or its name by
    # the run's name rule (ledger.family_pattern). Empty in runs recorded before it was.
    task_families: dict[str, str] = field(default_factory=dict, metadata=RAW)
    # How sampling and training take turns (a TrainingMode value; "sync" in runs recorded before),
    # and in the off-policy mode the configured max_steps_off_policy.
    training_mode: str = "sync"
    max_steps_off_policy: int | None = None


@dataclass(frozen=True, kw_only=True)
class RunEnded(Event):
    kind: ClassVar[str] = "run.ended"
    status: str  # a RunStatus value
    step: int
    message: str | None = None


@dataclass(frozen=True, kw_only=True)
class ControlChanged(Event):
    """The run's control state: a ControlState value (pausing: after this batch), or the RunStatus
    it finished with (done, failed)."""

    kind: ClassVar[str] = "control.changed"
    state: str
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class OffPolicyLimit(Event):
    """The most updates a group's sampling weights may lag the update that trains it
    (``config.async_config.max_steps_off_policy``), from update ``from_update`` on: at the run's
    start, and each time someone lowers it."""

    kind: ClassVar[str] = "off_policy.limit"
    max_steps_off_policy: int
    from_update: int
    by: str  # "config" at the start, or a DecisionBy value (console) when lowered live


# -- gateway ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class GatewayHealth(Event):
    kind: ClassVar[str] = "gateway.health"
    base_url: str
    ok: bool
    latency_ms: float | None
    error: str | None = None
    sampler_path: str | None = None  # weights the proxy currently samples from
    # healthz answered 503: the gateway is up but still starting (loading its model), not dead.
    starting: bool = False
    # The outage this probe belongs to: when its first failed probe was (wall clock), and how long
    # the run rides one out before it stops (gateway.outage_limit); None while the gateway answers.
    down_since: float | None = None
    outage_limit_s: float | None = None


# -- batches, groups, trials -------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class BatchStarted(Event):
    kind: ClassVar[str] = "batch.started"
    step: int
    groups: list[dict[str, Any]] = field(metadata=RAW)  # [{"group": i, "task": name, "trials": n}]


@dataclass(frozen=True, kw_only=True)
class BatchEnded(Event):
    kind: ClassVar[str] = "batch.ended"
    step: int


@dataclass(frozen=True, kw_only=True)
class TaskAdmission(Event):
    """A task's place in the training batches changed, from batch ``step`` on: ``weight`` 0 drops
    it, 1 is the default share, 2 twice as many groups (``runner.schedule``). The held-out
    evaluation's tasks are never changed. ``until`` (the policy's skips): the batch it comes back
    in, as another task.admission."""

    kind: ClassVar[str] = "task.admission"
    task: str = field(metadata=RAW)
    weight: float
    step: int
    by: str  # an AdmissionBy value
    reason: str | None = None
    until: int | None = None


@dataclass(frozen=True, kw_only=True)
class GroupStarted(Event):
    kind: ClassVar[str] = "group.started"
    step: int
    group: int
    task: str = field(metadata=RAW)
    trials: list[str] = field(metadata=RAW)  # trial ids, in order
    proxy_url: str
    # A digest of the task's instruction.md (``runner.replies.instruction_digest``): tasks with the
    # same one are variants of one task (the one-reply-many-tasks sign). None in runs recorded
    # before it was, or when the file cannot be read.
    instruction: str | None = None


@dataclass(frozen=True, kw_only=True)
class GroupEnded(Event):
    kind: ClassVar[str] = "group.ended"
    step: int
    group: int
    rewards: list[float | None]
    ok: bool
    error: str | None = None


TRIAL_PHASES = tuple(enums.TrialPhase)


@dataclass(frozen=True, kw_only=True)
class TrialPhaseChanged(Event):
    kind: ClassVar[str] = "trial.phase"
    step: int
    group: int
    trial: str = field(metadata=RAW)
    phase: str  # an enums.TrialPhase value (TRIAL_PHASES)
    task: str | None = field(default=None, metadata=RAW)
    trial_dir: str | None = field(default=None, metadata=RAW)


@dataclass(frozen=True, kw_only=True)
class TrialEnded(Event):
    kind: ClassVar[str] = "trial.ended"
    step: int
    group: int
    trial: str = field(metadata=RAW)
    outcome: str  # a TrialOutcome value; a trial cancelled with its group sends no trial.ended
    scored: bool
    reward: float | None
    turns: int
    output_tokens: int
    trial_dir: str | None = field(metadata=RAW)
    timings: dict[str, float]
    exception_type: str | None = None
    exception_message: str | None = None
    # What its captured turns cost to train (``runner.datums``): the datums the cookbook makes of
    # them, the tokens those hold, the trial's final context, and why turns began a datum
    # (NewDatum value → count). None in runs recorded before these were.
    datums: int | None = None
    trained_tokens: int | None = None
    context_tokens: int | None = None
    new_datum: dict[str, int] = field(default_factory=dict)
    # What its replies did (``runner.replies``, the reward-hacking watch): each command that touched
    # the verifier's files ({"turn", "access": "write" | "read", "path", "command"}, writes first),
    # and the replies' fingerprint (their commands, whitespace collapsed): its digest, length in
    # characters and first characters. Empty / None in runs recorded before these were and for a
    # trial with no captured text. Commands are text: shown, never run.
    verifier_touches: list[dict[str, Any]] = field(default_factory=list)
    reply_digest: str | None = None
    reply_chars: int | None = None
    reply_text: str | None = None
    # The updates whose weights sampled its turns, oldest first (one unless a trial ran across an
    # update on a gateway serving only its latest weights). Empty where unknown.
    weights: list[int] = field(default_factory=list)


# -- the capture proxy ------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ProxyRequest(Event):
    """One model call through the proxy: captured (a training sample) or rejected."""

    kind: ClassVar[str] = "proxy.request"
    step: int
    group: int
    trial: str = field(metadata=RAW)
    api: str  # openai | anthropic | responses
    stream: bool
    status: int  # HTTP status returned to the agent
    captured: bool
    turn: int | None = None  # 0-based index of the captured turn within the trial
    prompt_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    sample_ms: float | None = None
    total_ms: float | None = None
    error: str | None = None  # why it was rejected / failed
    # The update whose weights sampled it (0: the initial weights); None where unknown (replays
    # of runs recorded before it was, a stand-in sampler).
    weights: int | None = None


@dataclass(frozen=True, kw_only=True)
class CaptureLost(Event):
    """A turn that was sampled but could not be persisted: the trial cannot be trained on."""

    kind: ClassVar[str] = "proxy.capture_lost"
    step: int
    group: int
    trial: str = field(metadata=RAW)
    error: str


@dataclass(frozen=True, kw_only=True)
class GroupTrained(Event):
    """A group's trials went into update ``update`` (the training step; in the synchronous mode
    the same as the group's ``step``). ``weights``: the updates its turns were sampled with,
    oldest first (one, unless the gateway serves only its latest weights and a trial ran across
    an update); its staleness is ``update - weights[0]``."""

    kind: ClassVar[str] = "group.trained"
    step: int  # the batch the group was drawn from (its trials' step)
    group: int
    update: int
    weights: list[int] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class GroupDropped(Event):
    """A group whose trials ran but which no update will train: why (a DropReason value), the
    weights it sampled with, the update the run had reached, and what it cost."""

    kind: ClassVar[str] = "group.dropped"
    step: int
    group: int
    reason: str  # a DropReason value
    weights: list[int] = field(default_factory=list)
    update: int  # the update being filled when it was dropped
    trials: int = 0
    sandbox_seconds: float = 0.0  # the trials' wall time in their sandboxes, summed
    datums: int = 0


@dataclass(frozen=True, kw_only=True)
class TrainingStarted(Event):
    """Update ``update`` began: its first forward-backward went to the trainer. It ends with
    ``batch.ended`` of the same step (the cookbook's metrics row)."""

    kind: ClassVar[str] = "training.started"
    update: int


# -- training -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StepMetrics(Event):
    """The cookbook's metrics.jsonl row for one step."""

    kind: ClassVar[str] = "step.metrics"
    step: int
    metrics: dict[str, float]

    @property
    def evaluation_only(self) -> bool:
        """A row of evaluation results alone (the final weights scored after the last step):
        it reports on ``step`` updates but trains nothing. The off-policy loop's evaluation rows
        also carry the evaluation's timings (``time/…``)."""
        evaluated = any(k.startswith(("eval/", "test/")) for k in self.metrics)
        return evaluated and all(k.startswith(("eval/", "test/", "time/")) for k in self.metrics)


@dataclass(frozen=True, kw_only=True)
class EvaluationStarted(Event):
    """The held-out evaluation began: the current weights on tasks never trained on. Its trials'
    own events come wrapped (``HeldOutEvent``); this pair marks the evaluation."""

    kind: ClassVar[str] = "evaluation.started"
    after_updates: int  # updates behind the weights evaluated
    tasks: int
    trials: int


@dataclass(frozen=True, kw_only=True)
class EvaluationEnded(Event):
    kind: ClassVar[str] = "evaluation.ended"
    after_updates: int
    reward: float | None  # mean over the scored trials; None when none was scored
    trials: int  # scored trials
    failed_tasks: int  # tasks whose group failed for infrastructure reasons (not scored)


@dataclass(frozen=True, kw_only=True)
class HeldOutEvent(Event):
    """One event of a held-out evaluation's trials (group.started, trial.phase, trial.ended,
    proxy.request, proxy.capture_lost, group.ended), wrapped whole. Wrapped, not the same kinds
    with a flag: every reader of training's kinds (the reducer's training stats, the advisories,
    the timeline, the progress log, an older console that would drop an unknown flag) must never
    count a held-out trial as training, and a kind it does not know it skips by design. Its
    step is the number of updates behind the weights evaluated (``after_updates``)."""

    kind: ClassVar[str] = "heldout.event"
    after_updates: int
    event: dict[str, Any] = field(metadata=RAW)  # the wrapped event's own line: {"kind": "trial.ended", ...fields}

    @classmethod
    def wrap(cls, inner: Event, after_updates: int) -> HeldOutEvent:
        body = json.loads(inner.to_json())
        body.pop("v", None)
        return cls(ts=inner.ts, after_updates=after_updates, event=body)

    def unwrap(self) -> Event | None:
        """The wrapped event (None: a kind this reader does not know, or fields that do not fit)."""
        if not isinstance(self.event, dict) or self.event.get("kind") == self.kind:
            return None  # never a wrapper in a wrapper
        return from_body(dict(self.event))


@dataclass(frozen=True, kw_only=True)
class CheckpointSaved(Event):
    kind: ClassVar[str] = "checkpoint.saved"
    step: int
    name: str
    state_path: str | None
    sampler_path: str | None


@dataclass(frozen=True, kw_only=True)
class ErrorRaised(Event):
    """Something that stops the run unless someone decides otherwise (abort or retry group)."""

    kind: ClassVar[str] = "error.raised"
    step: int | None
    group: int | None
    trial: str | None = field(metadata=RAW)
    exception_type: str
    message: str
    trial_dir: str | None = field(default=None, metadata=RAW)
    decision_needed: bool = False


@dataclass(frozen=True, kw_only=True)
class DecisionMade(Event):
    kind: ClassVar[str] = "decision.made"
    step: int | None
    group: int | None
    decision: str  # an enums.Decision value
    by: str  # an enums.DecisionBy value


# -- advisories ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class AdvisoryRaised(Event):
    """A condition the user should look at before it costs the run (``tbconsole.advisories``).
    Raised again with the same key, it replaces the earlier one (a new value, a new message)."""

    kind: ClassVar[str] = "advisory.raised"
    key: str  # stable identity of the condition, e.g. "no-signal:step=3"
    rule: str  # the rule that fired, e.g. "no-signal"
    severity: str  # a LogLevel value
    message: str  # one line: what is wrong and what to look at
    threshold: str  # the threshold that fired, as a user sets it, e.g. "no_signal_share >= 0.5"
    value: float | None = None  # the measured value the threshold was compared with
    step: int | None = None
    group: int | None = None
    trial: str | None = field(default=None, metadata=RAW)
    metric: str | None = None


@dataclass(frozen=True, kw_only=True)
class AdvisoryCleared(Event):
    """A raised advisory whose condition no longer holds."""

    kind: ClassVar[str] = "advisory.cleared"
    key: str
    message: str  # one line: what cleared it


@dataclass(frozen=True, kw_only=True)
class LogLine(Event):
    kind: ClassVar[str] = "log"
    level: str  # an enums.LogLevel value
    message: str


# -- encoding ---------------------------------------------------------------------------------


def decode(line: str | bytes) -> Event | None:
    """One events.jsonl line → Event, or None for an unknown kind or a damaged line."""
    try:
        body = jsonl.loads(line)  # orjson, or the standard parser for NaN (a diverged loss) and bad UTF-8
    except ValueError:
        return None
    return from_body(body)


def from_body(body: Any) -> Event | None:
    """A decoded line's object → Event, or None for an unknown kind or fields that do not fit
    (``body`` is consumed)."""
    if not isinstance(body, dict):
        return None
    kind = body.pop("kind", None)
    cls = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return None
    body.pop("v", None)
    plan = _PLANS.get(cls) or _plan(cls)
    if body.keys() <= plan.names and plan.required <= body.keys():
        # The usual line: exactly the class's fields, filled in directly. A frozen dataclass's
        # __init__ sets each field through object.__setattr__, and with the per-line dict walk it
        # replaces, that was most of decoding a day-long run (5.0 s of 156k lines → 1.9 s, with
        # orjson). The names are checked above and the defaults filled here; no event has a
        # __post_init__.
        event = object.__new__(cls)
        for name, factory in plan.factories:
            if name not in body:
                body[name] = factory()
        event.__dict__.update(plan.defaults)
        event.__dict__.update(body)
        return event
    try:  # a newer writer's extra fields are dropped; a missing required field fails
        return cls(**{k: v for k, v in body.items() if k in plan.names})
    except TypeError:
        return None


@dataclass(frozen=True)
class _Plan:
    names: frozenset[str]
    required: frozenset[str]
    defaults: dict[str, Any]
    factories: tuple[tuple[str, Callable[[], Any]], ...]


_PLANS: dict[type[Event], _Plan] = {}


def _plan(cls: type[Event]) -> _Plan:
    fields = dataclasses.fields(cls)
    plan = _PLANS[cls] = _Plan(
        names=frozenset(f.name for f in fields),
        required=frozenset(
            f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ),
        defaults={f.name: f.default for f in fields if f.default is not dataclasses.MISSING},
        factories=tuple((f.name, f.default_factory) for f in fields if f.default_factory is not dataclasses.MISSING),
    )
    return plan


def split_events(data: bytes) -> tuple[list[Event], bytes]:
    """The events of the complete lines in ``data``, and the rest (a line still being written)."""
    lines = data.split(b"\n")
    rest = lines.pop()
    events = [decode(raw) for raw in lines]
    return [e for e in events if e is not None], rest


def read_events(path: Path) -> Iterator[Event]:
    """Every decodable event in an events.jsonl file, in order."""
    with open(path, "rb") as handle:
        for line in handle:
            event = decode(line)
            if event is not None:
                yield event


def read_events_of(path: Path, kinds: Iterable[str], end: int | None = None) -> Iterator[Event]:
    """The decodable events of ``kinds`` in an events.jsonl file (up to byte ``end``), in order.
    Lines of other kinds are skipped by their ``"kind":"…"`` text before any JSON is decoded: a
    day-long run's file is mostly proxy requests, and a resume reads the few kinds it needs."""
    marks = tuple(f'"kind":"{kind}"'.encode() for kind in kinds)
    with open(path, "rb") as handle:
        read = 0
        for line in handle:
            read += len(line)
            if end is not None and read > end:
                break
            if any(mark in line for mark in marks):
                event = decode(line)
                if event is not None:
                    yield event


class EventsReader:
    """The whole lines of an events.jsonl from ``offset`` on, as they are appended: each ``read``
    decodes the lines that came since the last one (a line still being written waits for its
    newline), so ``offset`` is always at a line's start: the events returned so far are exactly
    those of the file's first ``offset`` bytes. ``more`` says a read stopped at its limit.
    Memory: one read's bytes. The one reader of events.jsonl from an offset (attach, the
    snapshot writer, a live console's backlog); the lines come from ``jsonl.whole_lines``."""

    def __init__(self, path: Path, offset: int = 0):
        self.path = Path(path)
        self.offset = offset
        self.more = False
        self._handle: BinaryIO | None = None

    def open(self) -> BinaryIO | None:
        """The file, opened at the first call that finds it (then kept: a reader follows one file,
        the one it opened, even if the path is later given to another)."""
        if self._handle is None:
            try:
                self._handle = open(self.path, "rb")  # noqa: SIM115 - kept open between reads; close()
            except FileNotFoundError:
                return None
        return self._handle

    def read(self, limit: int = 1 << 20, end: int | None = None) -> list[Event]:
        """The events of the whole lines in the next ``limit`` bytes (before ``end`` when given);
        none while the file does not exist."""
        handle = self.open()
        if handle is None:
            self.more = False
            return []
        data, self.more = jsonl.whole_lines(handle, self.offset, limit, end)
        events, _ = split_events(data)
        self.offset += len(data)
        return events

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def __enter__(self) -> EventsReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# "token(?!s)": a proxy or access token is secret; max_tokens (a count) is not.
SECRET_KEY = re.compile(r"(api[_-]?key|token(?!s)|secret|password|authorization)", re.IGNORECASE)
SECRET_VALUE = re.compile(r"\b(tml-[A-Za-z0-9_-]{6,}|e2b_[A-Za-z0-9]{6,}|sk-[A-Za-z0-9_-]{6,})")


def redact(value: Any, _key: str = "") -> Any:
    """A deep copy with secret-looking keys' values and known key formats replaced."""
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, _key) for v in value]
    if isinstance(value, str):
        if SECRET_KEY.search(_key) and value and not value.startswith("{"):
            return "***"
        return SECRET_VALUE.sub("***", value)
    return value


Subscriber = Callable[[Event], None]

RESERVE_FILE = ".events-reserve"
RESERVE_BYTES = 256 * 1024  # room for a few hundred run-level lines: error, control, run.ended
# What is still written once the file has failed: how the run went and how it ended. Per-trial
# and per-request events (the bulk of a run) would use up the freed reserve before run.ended.
KEPT_WHEN_FAILING = frozenset(
    {
        "run.started",
        "run.ended",
        "control.changed",
        "error.raised",
        "decision.made",
        "checkpoint.saved",
        "step.metrics",
        "batch.ended",
        "group.ended",
        "log",
        # Few (one per condition, raised again only when it changes) and short; the disk
        # advisory explains the end of a run whose disk filled, and a raise kept without its
        # clear would leave a condition standing in replay.
        "advisory.raised",
        "advisory.cleared",
    }
)
# "This filesystem has no room": reported through on_write_error, never raised.
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})

_log = logging.getLogger(__name__)


class EventBus:
    """Fan-out of events to subscribers and to events.jsonl. Thread-safe; publish never
    blocks on a subscriber's work (subscribers must be quick: post a message, append to a
    queue) and never raises because of the file (see the module docstring).

    ``on_write_error(exc)`` is called once, on the publishing thread and outside the bus's
    lock (it may publish), with the first OSError the file met; later failures are only
    counted in ``write_failures``. ``write_error`` keeps that first error, ``unwritten``
    counts events that are not in the file."""

    def __init__(self, log_path: Path | None = None, on_write_error: Callable[[OSError], None] | None = None):
        self._lock = threading.Lock()
        self._subscribers: list[Subscriber] = []
        self._on_write_error = on_write_error
        self.path = RunFolder(log_path).events if log_path is not None else None
        self._fd: int | None = None
        self._end = 0  # offset just past the last whole line: where a failed write is cut back to
        self._cut = False  # the file ends in a cut line: the next write starts with "\n"
        self._reserve: Path | None = None  # the reserve file, while it holds its space
        self.write_error: OSError | None = None
        self._unreported: OSError | None = None
        self.write_failures = 0
        self.unwritten = 0
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._open()
            self._reserve = _make_reserve(self.path.parent / RESERVE_FILE)
        except OSError as exc:
            # A full disk at start: the bus still works for subscribers and reports the error
            # through on_write_error at the first publish (the runner's control exists by then).
            if exc.errno not in NO_ROOM:
                raise
            self._failed(exc)

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        return self.subscribe_after_file(subscriber)[0]

    def subscribe_after_file(self, subscriber: Subscriber) -> tuple[Callable[[], None], int]:
        """Subscribe, and say how far ``events.jsonl`` reaches at that moment (0 without a file).
        The events in those bytes are not delivered to ``subscriber``; every later one is. A
        reader that takes the file up to that offset, then the subscription, sees each event
        once (a resumed run's folder already holds the earlier run's events)."""
        with self._lock:
            self._subscribers.append(subscriber)
            end = self._end if self.path is not None else 0

        def unsubscribe() -> None:
            with self._lock:
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)

        return unsubscribe, end

    def publish(self, event: Event) -> None:
        data = (event.to_json() + "\n").encode()
        note: LogLine | None = None
        with self._lock:
            self._write(event.kind, data)
            error, self._unreported = self._unreported, None
            if error is not None:
                note = LogLine(level=enums.LogLevel.ERROR, message=self._describe(error))
                self._write(note.kind, (note.to_json() + "\n").encode())
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            subscriber(event)
        if note is None or error is None:
            return
        for subscriber in subscribers:
            subscriber(note)
        if self._on_write_error is not None:
            try:
                self._on_write_error(error)
            except Exception as exc:  # e.g. a stop that is already under way: not the bus's to raise
                _log.warning("on_write_error(%r) raised %r", error, exc)

    def close(self) -> None:
        """Flush events.jsonl to disk and give back the reserve. Never raises for the disk.
        The bus stays usable: later events still reach subscribers and are appended."""
        with self._lock:
            fd, self._fd = self._fd, None
            if fd is not None:
                with contextlib.suppress(OSError):  # nothing left to do about it at the end
                    os.fsync(fd)
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._release_reserve()

    # -- the file (all under self._lock) ------------------------------------------------------

    def _open(self) -> None:
        assert self.path is not None  # only a bus with a file opens it
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            end = os.fstat(fd).st_size
            # An earlier writer that died mid-line left a cut line: the next line must not be
            # glued to it.
            cut = end > 0 and os.pread(fd, 1, end - 1) != b"\n"
        except OSError:
            os.close(fd)
            raise
        self._fd, self._end, self._cut = fd, end, cut

    def _write(self, kind: str, data: bytes) -> None:
        if self.path is None:
            return
        if self.write_error is not None and kind not in KEPT_WHEN_FAILING:
            self.unwritten += 1
            return
        transient = self._fd is None  # after close() (or a failed open): open, append, close
        try:
            if transient:
                self._open()
            try:
                self._append(data)
            except OSError as exc:
                if exc.errno not in NO_ROOM or not self._release_reserve():
                    raise
                self._failed(exc)
                self._append(data)  # into the space the reserve held
        except OSError as exc:
            self._failed(exc)
            self.unwritten += 1
        finally:
            if transient and self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None

    def _append(self, data: bytes) -> None:
        """One line, whole or not at all: a failed or short write is cut back to the last whole
        line (should even that fail, the next line starts with a newline of its own)."""
        fd = self._fd
        assert fd is not None  # _write opened it
        if self._cut:
            data = b"\n" + data
        done = 0
        try:
            while done < len(data):  # one write, unless the disk fills midway or a signal lands
                done += os.write(fd, data[done:])
        except OSError:
            if done:
                try:
                    os.ftruncate(fd, self._end)
                except OSError:
                    self._end += done
                    self._cut = True
            raise
        self._end += done
        self._cut = False

    def _failed(self, exc: OSError) -> None:
        self.write_failures += 1
        if self.write_error is None:
            self.write_error = self._unreported = exc

    def _release_reserve(self) -> bool:
        reserve, self._reserve = self._reserve, None
        if reserve is None:
            return False
        try:
            reserve.unlink()
        except OSError:
            return False
        return True

    def _describe(self, exc: OSError) -> str:
        name = errno.errorcode.get(exc.errno or 0, "")
        text = f"cannot write {self.path}: {exc.strerror or exc}" + (f" ({name})" if name else "")
        text += "; from now on only run-level events are written there"
        if exc.errno in NO_ROOM:
            text += "; free space or point config.log_path elsewhere"
        return text


def _make_reserve(path: Path) -> Path | None:
    """RESERVE_BYTES of disk held by a file of their own; None where the filesystem cannot
    preallocate. Raises OSError when there is no room for it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        os.posix_fallocate(fd, 0, RESERVE_BYTES)  # real blocks, not a sparse file
    except OSError as exc:
        os.close(fd)
        path.unlink(missing_ok=True)
        if exc.errno in NO_ROOM:
            raise
        return None
    os.close(fd)
    return path
