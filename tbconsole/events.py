"""Typed run events: the only data the console reads, live or from ``events.jsonl``.

Every state change of a run is one of these. Producers (runner, proxy, health probe) publish
them on an ``EventBus``; the bus appends each to ``<log_path>/events.jsonl`` (one JSON object
per line, flushed as it happens) and hands it to in-process subscribers. Replay and attach
read the file back with ``read_events`` / ``decode``: the same objects, the same reducer.

Wire format: ``{"v": SCHEMA_VERSION, "kind": "<kind>", "ts": <unix seconds>, ...fields}``.
Readers skip kinds they do not know (newer writer) and lines that are cut short (a crash
mid-write), so an old console can read a newer run and a partial file never breaks replay.
Secrets never enter an event: configs pass through ``redact`` first.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

SCHEMA_VERSION = 1
EVENTS_FILE = "events.jsonl"

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
    run_id: str
    log_path: str
    model_name: str
    base_url: str | None
    renderer_name: str | None
    total_steps: int
    start_step: int = 0
    groups_per_batch: int
    group_size: int
    tasks: list[str]
    config: dict[str, Any]  # redacted


@dataclass(frozen=True, kw_only=True)
class RunEnded(Event):
    kind: ClassVar[str] = "run.ended"
    status: str  # done | stopped | aborted | failed
    step: int
    message: str | None = None


@dataclass(frozen=True, kw_only=True)
class ControlChanged(Event):
    """The run's control state: running, pausing (after this batch), paused, stopping,
    aborting, awaiting_decision, done, failed."""

    kind: ClassVar[str] = "control.changed"
    state: str
    reason: str | None = None


# -- gateway ----------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class GatewayHealth(Event):
    kind: ClassVar[str] = "gateway.health"
    base_url: str
    ok: bool
    latency_ms: float | None
    error: str | None = None
    sampler_path: str | None = None  # weights the proxy currently samples from


# -- batches, groups, trials -------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class BatchStarted(Event):
    kind: ClassVar[str] = "batch.started"
    step: int
    groups: list[dict[str, Any]]  # [{"group": i, "task": name, "trials": n}]


@dataclass(frozen=True, kw_only=True)
class BatchEnded(Event):
    kind: ClassVar[str] = "batch.ended"
    step: int


@dataclass(frozen=True, kw_only=True)
class GroupStarted(Event):
    kind: ClassVar[str] = "group.started"
    step: int
    group: int
    task: str
    trials: list[str]  # trial ids, in order
    proxy_url: str


@dataclass(frozen=True, kw_only=True)
class GroupEnded(Event):
    kind: ClassVar[str] = "group.ended"
    step: int
    group: int
    rewards: list[float | None]
    ok: bool
    error: str | None = None


TRIAL_PHASES = ("queued", "environment", "agent_setup", "agent", "verifying", "done")


@dataclass(frozen=True, kw_only=True)
class TrialPhase(Event):
    kind: ClassVar[str] = "trial.phase"
    step: int
    group: int
    trial: str
    phase: str  # one of TRIAL_PHASES
    task: str | None = None
    trial_dir: str | None = None


@dataclass(frozen=True, kw_only=True)
class TrialEnded(Event):
    kind: ClassVar[str] = "trial.ended"
    step: int
    group: int
    trial: str
    outcome: str  # Submitted | TimeLimitExceeded | SequenceLengthLimitExceeded | AgentError | Cancelled
    scored: bool
    reward: float | None
    turns: int
    output_tokens: int
    trial_dir: str | None
    timings: dict[str, float]
    exception_type: str | None = None
    exception_message: str | None = None


# -- the capture proxy ------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ProxyRequest(Event):
    """One model call through the proxy: captured (a training sample) or rejected."""

    kind: ClassVar[str] = "proxy.request"
    step: int
    group: int
    trial: str
    api: str  # openai | anthropic
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
    # For the console's live transcript (optional; a writer may leave them out): the reply's
    # text, and the request's messages that are new since the trial's previous request (tool
    # output, user turns) as [{"role": ..., "content": str}]. Plain text, cut to a few KB.
    output_text: str | None = None
    messages: list[dict[str, Any]] | None = None


@dataclass(frozen=True, kw_only=True)
class CaptureLost(Event):
    """A turn that was sampled but could not be persisted: the trial cannot be trained on."""

    kind: ClassVar[str] = "proxy.capture_lost"
    step: int
    group: int
    trial: str
    error: str


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
        it reports on ``step`` updates but trains nothing."""
        return bool(self.metrics) and all(k.startswith(("eval/", "test/")) for k in self.metrics)


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
    trial: str | None
    exception_type: str
    message: str
    trial_dir: str | None = None
    decision_needed: bool = False


@dataclass(frozen=True, kw_only=True)
class DecisionMade(Event):
    kind: ClassVar[str] = "decision.made"
    step: int | None
    group: int | None
    decision: str  # abort | retry_group
    by: str  # headless-default | console | control-file


@dataclass(frozen=True, kw_only=True)
class LogLine(Event):
    kind: ClassVar[str] = "log"
    level: str
    message: str


# -- encoding ---------------------------------------------------------------------------------

def decode(line: str) -> Event | None:
    """One events.jsonl line → Event, or None for an unknown kind or a damaged line."""
    try:
        body = json.loads(line)
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    cls = _REGISTRY.get(body.get("kind", ""))
    if cls is None:
        return None
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        return cls(**{k: v for k, v in body.items() if k in names})
    except TypeError:
        return None


def read_events(path: Path) -> Iterator[Event]:
    """Every decodable event in an events.jsonl file, in order."""
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            event = decode(line)
            if event is not None:
                yield event


SECRET_KEY = re.compile(r"(api[_-]?key|token|secret|password|authorization)", re.IGNORECASE)
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


class EventBus:
    """Fan-out of events to subscribers and to events.jsonl. Thread-safe; publish never
    blocks on a subscriber's work (subscribers must be quick: post a message, append to a
    queue)."""

    def __init__(self, log_path: Path | None = None):
        self._lock = threading.Lock()
        self._subscribers: list[Subscriber] = []
        self._file = None
        if log_path is not None:
            Path(log_path).mkdir(parents=True, exist_ok=True)
            self._file = open(Path(log_path) / EVENTS_FILE, "a", encoding="utf-8")

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        with self._lock:
            self._subscribers.append(subscriber)

        def unsubscribe() -> None:
            with self._lock:
                if subscriber in self._subscribers:
                    self._subscribers.remove(subscriber)

        return unsubscribe

    def publish(self, event: Event) -> None:
        line = event.to_json()
        with self._lock:
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            subscriber(event)

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
                self._file = None
