"""The console's state: a pure function of the event stream.

``reduce(state, event)`` folds one ``tbconsole.events`` event into a ``RunState`` and returns
it (the same object, updated in place: a flood of events must not copy the world each time).
Live, attach and replay all build their view with it; widgets only render what is here.

No Textual, no I/O, no wall clock: anything time-dependent (elapsed, ETA, a trial's time in its
phase) is a function of ``now`` that the caller passes in (the wall clock live, the last event's
time in replay, a fixed value in tests). Memory is bounded: per-trial detail is kept for the
last ``KEEP_STEPS`` steps, trends and logs are ring buffers, so a long run stays flat.

Which panels an event touched is recorded in ``state.dirty`` (and which trials in
``state.dirty_trials``) so the UI redraws only those, at its own pace.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tbconsole.events import (
    BatchEnded,
    BatchStarted,
    CaptureLost,
    CheckpointSaved,
    ControlChanged,
    DecisionMade,
    ErrorRaised,
    Event,
    GatewayHealth,
    GroupEnded,
    GroupStarted,
    LogLine,
    ProxyRequest,
    RunEnded,
    RunStarted,
    StepMetrics,
    TrialEnded,
    TrialPhase,
)

KEEP_STEPS = 3  # steps whose trials (and their turn lists) stay in memory
MAX_TURNS = 400  # turns kept per trial (the oldest are dropped; counts stay exact)
MAX_TEXT = 8000  # characters of any one text kept from an event
TREND_LEN = 500  # points kept per metric / reward trend
LATENCY_LEN = 60  # gateway probes kept for the sparkline
LOG_LEN = 300

PANELS = ("header", "gateway", "trials", "captures", "rewards", "metrics", "log", "decision")

PHASE_LABELS = {
    "queued": "queued",
    "environment": "env",
    "agent_setup": "setup",
    "agent": "agent",
    "verifying": "verify",
    "done": "done",
}

CONTROL_LABELS = {
    "running": "running",
    "pausing": "pausing after batch",
    "paused": "paused",
    "stopping": "stopping",
    "aborting": "aborting",
    "awaiting_decision": "awaiting decision",
    "done": "done",
    "failed": "failed",
    "stopped": "stopped",
    "aborted": "aborted",
    "waiting": "waiting for run",
}

# (label, metric keys in order of preference). The cookbook's names (metrics.jsonl) first.
METRIC_ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("KL v1", ("optim/kl_sample_train_v1",)),
    ("KL v2", ("optim/kl_sample_train_v2",)),
    ("entropy", ("optim/entropy",)),
    ("loss", ("loss:sum", "loss:mean", "optim/loss", "train/loss", "loss")),
    ("grad norm", ("grad_norm:mean", "optim/grad_norm", "grad_norm")),
    ("lr", ("optim/lr",)),
    ("tokens", ("env/all/total_ac_tokens", "env/all/ac_tokens_per_turn")),
    ("step time", ("time/total", "time/step", "time/train")),
    ("KL ref", ("kl_policy_base",)),  # drift from the reference model (config.kl_penalty_coef > 0)
    ("held-out", ("eval/heldout/reward",)),  # reward on held-out tasks (harbor.eval_tasks_dir)
)
# Rows shown only once a run reports them. The cookbook's RL loop does not log forward_backward's
# loss, so on it an always-empty "loss" row would only take space.
OPTIONAL_METRIC_ROWS = frozenset({"loss", "KL ref", "held-out"})


def clip(text: str | None, limit: int = MAX_TEXT) -> str | None:
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


@dataclass
class Counters:
    """Capture counters (per trial, per group, totals)."""

    requests: int = 0
    captured: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    rejected: int = 0
    lost: int = 0

    def add_request(self, event: ProxyRequest) -> None:
        self.requests += 1
        if event.captured:
            self.captured += 1
            self.prompt_tokens += event.prompt_tokens
            self.output_tokens += event.output_tokens
        else:
            self.rejected += 1


@dataclass
class Turn:
    """One model call of a trial, as the proxy reported it."""

    index: int  # order of arrival within the trial
    turn: int | None  # the proxy's captured-turn index (None when not captured)
    ts: float
    captured: bool
    status: int
    prompt_tokens: int
    output_tokens: int
    stop_reason: str | None
    sample_ms: float | None
    total_ms: float | None
    error: str | None
    output_text: str | None = None
    messages: list[dict[str, Any]] | None = None


@dataclass
class TrialState:
    trial: str
    step: int
    group: int
    index: int  # position in its group
    task: str
    phase: str = "queued"
    phase_since: float | None = None
    started: float | None = None
    ended: float | None = None
    phase_times: dict[str, float] = field(default_factory=dict)
    trial_dir: str | None = None
    outcome: str | None = None
    scored: bool | None = None
    reward: float | None = None
    turns: int = 0
    output_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    exception_type: str | None = None
    exception_message: str | None = None
    counters: Counters = field(default_factory=Counters)
    transcript: deque = field(default_factory=lambda: deque(maxlen=MAX_TURNS))
    lost: str | None = None  # why a capture was lost

    @property
    def done(self) -> bool:
        return self.outcome is not None

    @property
    def live_turns(self) -> int:
        """Turns so far: the final count when ended, else the proxy's requests seen."""
        return self.turns if self.done else self.counters.requests

    @property
    def live_tokens(self) -> int:
        return self.output_tokens if self.done else self.counters.output_tokens

    def elapsed(self, now: float) -> float | None:
        if self.started is None:
            return None
        return max(0.0, (self.ended if self.ended is not None else now) - self.started)

    def phase_elapsed(self, now: float) -> float | None:
        if self.phase_since is None:
            return None
        return max(0.0, (self.ended if self.ended is not None else now) - self.phase_since)


@dataclass
class GroupState:
    step: int
    group: int
    task: str
    trials: list[str] = field(default_factory=list)
    proxy_url: str | None = None
    started: float | None = None
    ended: float | None = None
    rewards: list[float | None] | None = None
    ok: bool | None = None
    error: str | None = None
    counters: Counters = field(default_factory=Counters)
    retired: set[str] = field(default_factory=set)  # trials of an earlier attempt (retry)

    def trial_rewards(self, trials: dict[str, TrialState]) -> list[float | None]:
        if self.rewards is not None:
            return list(self.rewards)
        return [trials[t].reward if t in trials else None for t in self.trials]

    def all_same(self, trials: dict[str, TrialState]) -> bool:
        """Every trial finished, scored, with one and the same reward: the group trains nothing."""
        if len(self.trials) < 2 and not (self.rewards and len(self.rewards) >= 2):
            return False
        if self.rewards is None and not all(t in trials and trials[t].done for t in self.trials):
            return False
        rewards = self.trial_rewards(trials)
        if len(rewards) < 2 or any(r is None for r in rewards):
            return False
        return max(rewards) - min(rewards) < 1e-12


@dataclass
class StepSummary:
    step: int
    started: float | None = None
    ended: float | None = None  # metrics arrived (trained)
    batch_ended: float | None = None
    trial_rewards: dict[str, tuple[str, float]] = field(default_factory=dict)  # trial -> (task, reward)
    groups: int = 0
    all_same_groups: int = 0

    @property
    def rewards(self) -> list[float]:
        return [r for _, r in self.trial_rewards.values()]

    @property
    def by_task(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for task, r in self.trial_rewards.values():
            out.setdefault(task, []).append(r)
        return out

    @property
    def mean(self) -> float | None:
        rewards = self.rewards
        return sum(rewards) / len(rewards) if rewards else None

    @property
    def std(self) -> float | None:
        rewards = self.rewards
        if not rewards:
            return None
        m = sum(rewards) / len(rewards)
        return math.sqrt(sum((r - m) ** 2 for r in rewards) / len(rewards))

    @property
    def duration(self) -> float | None:
        end = self.ended if self.ended is not None else self.batch_ended
        if self.started is None or end is None:
            return None
        return max(0.0, end - self.started)


@dataclass
class TaskStats:
    task: str
    trials: int = 0
    scored: int = 0
    reward_sum: float = 0.0
    solved: int = 0  # reward >= 1
    errors: int = 0
    last_mean: float | None = None
    last_step: int | None = None

    @property
    def mean(self) -> float | None:
        return self.reward_sum / self.scored if self.scored else None


@dataclass
class GatewayState:
    base_url: str | None = None
    ok: bool | None = None
    latency_ms: float | None = None
    error: str | None = None
    last_error: str | None = None
    last_error_ts: float | None = None
    sampler_path: str | None = None
    checked: float | None = None
    probes: int = 0
    failures: int = 0
    latencies: deque = field(default_factory=lambda: deque(maxlen=LATENCY_LEN))


@dataclass
class RunState:
    run_id: str | None = None
    log_path: str | None = None
    model_name: str | None = None
    base_url: str | None = None
    renderer_name: str | None = None
    total_steps: int = 0
    start_step: int = 0
    groups_per_batch: int = 0
    group_size: int = 0
    tasks: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)

    started: float | None = None  # RunStarted ts
    last_ts: float | None = None  # newest event ts
    ended: float | None = None
    end_status: str | None = None  # done | stopped | aborted | failed
    end_message: str | None = None

    control: str = "waiting"
    control_reason: str | None = None

    step: int | None = None  # the current (or last) batch's step
    batch_active: bool = False
    completed_steps: int = 0  # steps trained (StepMetrics seen)
    last_completed: int | None = None

    gateway: GatewayState = field(default_factory=GatewayState)
    groups: dict[tuple[int, int], GroupState] = field(default_factory=dict)
    trials: dict[str, TrialState] = field(default_factory=dict)
    totals: Counters = field(default_factory=Counters)
    steps: dict[int, StepSummary] = field(default_factory=dict)
    task_stats: dict[str, TaskStats] = field(default_factory=dict)
    metrics_latest: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, deque] = field(default_factory=dict)  # key -> deque[(step, value)]
    checkpoints: list[CheckpointSaved] = field(default_factory=list)
    pending_decision: ErrorRaised | None = None
    errors: deque = field(default_factory=lambda: deque(maxlen=50))
    decisions: list[DecisionMade] = field(default_factory=list)
    logs: deque = field(default_factory=lambda: deque(maxlen=LOG_LEN))  # (ts, level, message)

    events: int = 0
    dirty: set[str] = field(default_factory=set)
    dirty_trials: set[str] = field(default_factory=set)

    # -- derived views -------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return self.end_status is not None

    @property
    def status(self) -> str:
        """What the header shows: the control state, or how the run ended."""
        if self.end_status is not None:
            return self.end_status
        return self.control

    @property
    def status_label(self) -> str:
        return CONTROL_LABELS.get(self.status, self.status)

    def elapsed(self, now: float) -> float | None:
        if self.started is None:
            return None
        end = self.ended if self.ended is not None else now
        return max(0.0, end - self.started)

    def step_durations(self) -> list[float]:
        return [s.duration for s in sorted(self.steps.values(), key=lambda s: s.step)
                if s.ended is not None and s.duration is not None]

    def eta(self, now: float) -> float | None:
        """Seconds to the last step: mean of the last five trained steps' durations times the
        steps left, less the time already spent on the current one."""
        if self.finished or not self.total_steps:
            return None
        durations = self.step_durations()[-5:]
        if not durations:
            return None
        per_step = sum(durations) / len(durations)
        done = (self.last_completed + 1) if self.last_completed is not None else self.start_step
        remaining = max(0, self.total_steps - done)
        spent = 0.0
        current = self.steps.get(self.step) if self.step is not None else None
        if current is not None and current.ended is None and current.started is not None:
            spent = min(per_step, max(0.0, now - current.started))
        return max(0.0, remaining * per_step - spent)

    @property
    def step_display(self) -> str:
        """'i/N' with i 1-based; '–/N' before the first batch."""
        total = self.total_steps or "?"
        if self.step is None:
            return f"–/{total}"
        return f"{self.step + 1}/{total}"

    def batch_groups(self, step: int | None = None) -> list[GroupState]:
        step = self.step if step is None else step
        if step is None:
            return []
        return sorted((g for (s, _), g in self.groups.items() if s == step), key=lambda g: g.group)

    def batch_counters(self, step: int | None = None) -> Counters:
        out = Counters()
        for g in self.batch_groups(step):
            for name in ("requests", "captured", "prompt_tokens", "output_tokens", "rejected", "lost"):
                setattr(out, name, getattr(out, name) + getattr(g.counters, name))
        return out

    def histogram_rewards(self) -> tuple[int | None, list[float]]:
        """The rewards to histogram: the current batch's, or the last batch that has any."""
        for step in sorted(self.steps, reverse=True):
            summary = self.steps[step]
            if summary.rewards:
                return step, list(summary.rewards)
            if step == self.step:
                continue
        return None, []

    def reward_trend(self) -> list[tuple[int, float, float]]:
        """(step, mean, std) for every step with rewards, in order."""
        out = []
        for step in sorted(self.steps):
            s = self.steps[step]
            if s.rewards:
                out.append((step, s.mean, s.std))
        return out[-TREND_LEN:]

    def metric(self, candidates: tuple[str, ...]) -> tuple[str | None, float | None, list[float]]:
        """(key used, latest value, trend) for the first candidate key seen."""
        for key in candidates:
            if key in self.metrics_latest:
                return key, self.metrics_latest[key], [v for _, v in self.metrics.get(key, ())]
        return None, None, []

    def trials_of(self, group: GroupState) -> list[TrialState]:
        return [self.trials[t] for t in group.trials if t in self.trials]

    def mark(self, *panels: str) -> None:
        self.dirty.update(panels)


# -- the reducer ------------------------------------------------------------------------------

def reduce(state: RunState, event: Event) -> RunState:
    """Fold one event into the state (in place) and return it."""
    handler = _HANDLERS.get(type(event))
    state.events += 1
    if event.ts is not None and (state.last_ts is None or event.ts > state.last_ts):
        state.last_ts = event.ts
    if handler is not None:
        handler(state, event)
    state.dirty.add("header")
    return state


def reduce_all(events, state: RunState | None = None) -> RunState:
    state = state if state is not None else RunState()
    for event in events:
        reduce(state, event)
    return state


def _run_started(state: RunState, e: RunStarted) -> None:
    state.run_id = e.run_id
    state.log_path = e.log_path
    state.model_name = e.model_name
    state.base_url = e.base_url
    state.renderer_name = e.renderer_name
    state.total_steps = e.total_steps
    state.start_step = e.start_step
    state.groups_per_batch = e.groups_per_batch
    state.group_size = e.group_size
    state.tasks = list(e.tasks)
    state.config = dict(e.config)
    state.started = e.ts
    state.ended = None
    state.end_status = None
    state.end_message = None
    if state.control in ("waiting", "done", "failed"):
        state.control = "running"
    if state.gateway.base_url is None:
        state.gateway.base_url = e.base_url
    state.mark(*PANELS)


def _run_ended(state: RunState, e: RunEnded) -> None:
    state.ended = e.ts
    state.end_status = e.status
    state.end_message = clip(e.message, 2000)
    state.batch_active = False
    state.pending_decision = None
    state.mark("header", "decision", "trials")
    _log(state, e.ts, "info" if e.status in ("done", "stopped") else "error",
         f"run {e.status} at step {e.step}" + (f": {e.message}" if e.message else ""))


def _control(state: RunState, e: ControlChanged) -> None:
    state.control = e.state
    state.control_reason = clip(e.reason, 500)
    if e.state not in ("awaiting_decision",) and state.pending_decision is not None and e.state in (
            "aborting", "done", "failed", "running", "stopping"):
        state.pending_decision = None
        state.mark("decision")
    state.mark("header")
    _log(state, e.ts, "info", f"control: {e.state}" + (f" ({e.reason})" if e.reason else ""))


def _gateway(state: RunState, e: GatewayHealth) -> None:
    g = state.gateway
    g.base_url = e.base_url
    g.ok = e.ok
    g.latency_ms = e.latency_ms
    g.error = clip(e.error, 1000)
    g.checked = e.ts
    g.probes += 1
    if e.sampler_path:
        g.sampler_path = e.sampler_path
    if not e.ok:
        g.failures += 1
        g.last_error = clip(e.error or "probe failed", 1000)
        g.last_error_ts = e.ts
    g.latencies.append(e.latency_ms if e.latency_ms is not None else 0.0)
    state.mark("gateway")


def _summary(state: RunState, step: int) -> StepSummary:
    summary = state.steps.get(step)
    if summary is None:
        summary = state.steps[step] = StepSummary(step=step)
        if len(state.steps) > TREND_LEN:
            for old in sorted(state.steps)[: len(state.steps) - TREND_LEN]:
                del state.steps[old]
    return summary


def _evict(state: RunState, current: int) -> None:
    """Drop per-trial detail of steps older than KEEP_STEPS (their summaries stay)."""
    cutoff = current - KEEP_STEPS + 1
    old_groups = [key for key in state.groups if key[0] < cutoff]
    for key in old_groups:
        del state.groups[key]
    old_trials = [t for t, tr in state.trials.items() if tr.step < cutoff]
    for t in old_trials:
        del state.trials[t]
        state.dirty_trials.discard(t)


def _batch_started(state: RunState, e: BatchStarted) -> None:
    state.step = e.step
    state.batch_active = True
    summary = _summary(state, e.step)
    summary.started = e.ts
    summary.ended = None
    summary.trial_rewards = {}
    summary.groups = len(e.groups)
    summary.all_same_groups = 0
    for key in [k for k in state.groups if k[0] == e.step]:  # a retried batch starts afresh
        for t in state.groups[key].trials:
            state.trials.pop(t, None)
        del state.groups[key]
    for spec in e.groups:
        try:
            gi = int(spec.get("group", 0))
        except (TypeError, ValueError):
            continue
        state.groups[(e.step, gi)] = GroupState(step=e.step, group=gi, task=str(spec.get("task", "?")))
    _evict(state, e.step)
    state.mark("trials", "captures", "rewards", "header")
    _log(state, e.ts, "info", f"step {e.step}: batch of {len(e.groups)} groups started")


def _batch_ended(state: RunState, e: BatchEnded) -> None:
    if e.step == state.step:
        state.batch_active = False
    _summary(state, e.step).batch_ended = e.ts
    state.mark("header", "rewards")


def _group(state: RunState, step: int, gi: int, task: str | None = None) -> GroupState:
    g = state.groups.get((step, gi))
    if g is None:
        g = state.groups[(step, gi)] = GroupState(step=step, group=gi, task=task or "?")
        if state.step is None or step > state.step:
            state.step = step
            state.batch_active = True
    elif task and g.task == "?":
        g.task = task
    return g


def _trial(state: RunState, step: int, gi: int, trial: str, task: str | None = None) -> TrialState | None:
    """The trial's state, created on first sight; None for a trial of a retried group's earlier
    attempt (its late events are ignored)."""
    t = state.trials.get(trial)
    if t is None:
        g = _group(state, step, gi, task)
        if trial in g.retired:
            return None
        if trial not in g.trials:
            g.trials.append(trial)
        t = state.trials[trial] = TrialState(trial=trial, step=step, group=gi, index=g.trials.index(trial),
                                             task=task or g.task)
    return t


def _group_started(state: RunState, e: GroupStarted) -> None:
    g = _group(state, e.step, e.group, e.task)
    g.task = e.task
    g.proxy_url = e.proxy_url
    g.ended = None
    g.rewards = None
    g.ok = None
    g.error = None
    retry = g.started is not None
    g.started = e.ts
    g.counters = Counters()
    summary = _summary(state, e.step)
    if summary.started is None:  # a runner that sends no BatchStarted: the step starts with its first group
        summary.started = e.ts
    if retry:  # a retried group: its old trials, their rewards and counts are replaced
        for old in g.trials:
            if old not in e.trials:
                g.retired.add(old)
            _forget_trial(state, summary, old)
    g.trials = list(e.trials)
    for i, name in enumerate(e.trials):
        t = state.trials.get(name)
        if t is None or t.step != e.step or t.group != e.group:
            t = TrialState(trial=name, step=e.step, group=e.group, index=i, task=e.task)
            state.trials[name] = t
        t.index = i
        t.phase_since = t.phase_since or e.ts
        state.dirty_trials.add(name)
    state.mark("trials", "captures")


def _forget_trial(state: RunState, summary: StepSummary, trial: str) -> None:
    old = state.trials.pop(trial, None)
    entry = summary.trial_rewards.pop(trial, None)
    if old is None or not old.done:
        return
    stats = state.task_stats.get(old.task)
    if stats is not None:
        stats.trials -= 1
        if entry is not None:
            stats.scored -= 1
            stats.reward_sum -= entry[1]
            stats.solved -= 1 if entry[1] >= 1.0 else 0
        elif old.exception_type:
            stats.errors -= 1


def _group_ended(state: RunState, e: GroupEnded) -> None:
    g = _group(state, e.step, e.group)
    g.ended = e.ts
    g.rewards = list(e.rewards)
    g.ok = e.ok
    g.error = clip(e.error, 2000)
    summary = _summary(state, e.step)
    if e.ok and g.all_same(state.trials):
        summary.all_same_groups += 1
    state.mark("trials", "rewards")


def _trial_phase(state: RunState, e: TrialPhase) -> None:
    t = _trial(state, e.step, e.group, e.trial, e.task)
    if t is None:
        return
    if e.task:
        t.task = e.task
    if e.trial_dir:
        t.trial_dir = e.trial_dir
    t.phase = e.phase
    t.phase_since = e.ts
    t.phase_times.setdefault(e.phase, e.ts)
    if t.started is None and e.phase != "queued":
        t.started = e.ts
    if e.phase == "done" and t.ended is None:
        t.ended = e.ts
    state.dirty_trials.add(e.trial)
    state.mark("trials")


def _trial_ended(state: RunState, e: TrialEnded) -> None:
    t = _trial(state, e.step, e.group, e.trial)
    if t is None:
        return
    t.outcome = e.outcome
    t.scored = e.scored
    t.reward = e.reward
    t.turns = e.turns
    t.output_tokens = e.output_tokens
    t.trial_dir = e.trial_dir or t.trial_dir
    t.timings = dict(e.timings or {})
    t.exception_type = e.exception_type
    t.exception_message = clip(e.exception_message, 4000)
    t.phase = "done"
    t.phase_times.setdefault("done", e.ts)
    t.ended = e.ts
    if t.started is None:
        t.started = e.ts - sum(v for v in t.timings.values() if isinstance(v, (int, float))) if t.timings else e.ts
    t.phase_since = t.phase_since or e.ts
    stats = state.task_stats.get(t.task)
    if stats is None:
        stats = state.task_stats[t.task] = TaskStats(task=t.task)
    stats.trials += 1
    if e.scored and e.reward is not None and math.isfinite(e.reward):
        summary = _summary(state, e.step)
        summary.trial_rewards[e.trial] = (t.task, float(e.reward))
        stats.scored += 1
        stats.reward_sum += e.reward
        if e.reward >= 1.0:
            stats.solved += 1
        rewards = [r for task, r in summary.trial_rewards.values() if task == t.task]
        stats.last_mean = sum(rewards) / len(rewards)
        stats.last_step = e.step
    else:
        stats.errors += 1 if e.exception_type else 0
    state.dirty_trials.add(e.trial)
    state.mark("trials", "rewards")


def _proxy_request(state: RunState, e: ProxyRequest) -> None:
    t = _trial(state, e.step, e.group, e.trial)
    if t is None:
        state.totals.add_request(e)
        return
    g = _group(state, e.step, e.group)
    for c in (t.counters, g.counters, state.totals):
        c.add_request(e)
    t.transcript.append(Turn(
        index=t.counters.requests - 1, turn=e.turn, ts=e.ts, captured=e.captured, status=e.status,
        prompt_tokens=e.prompt_tokens, output_tokens=e.output_tokens, stop_reason=e.stop_reason,
        sample_ms=e.sample_ms, total_ms=e.total_ms, error=clip(e.error, 2000),
        output_text=clip(getattr(e, "output_text", None)),
        messages=_clip_messages(getattr(e, "messages", None)),
    ))
    state.dirty_trials.add(e.trial)
    state.mark("captures", "trials")


def _clip_messages(messages: Any) -> list[dict[str, Any]] | None:
    if not messages or not isinstance(messages, list):
        return None
    out = []
    for m in messages[-20:]:
        if isinstance(m, dict):
            out.append({"role": str(m.get("role", "?"))[:40], "content": clip(str(m.get("content", "")))})
    return out


def _capture_lost(state: RunState, e: CaptureLost) -> None:
    t = _trial(state, e.step, e.group, e.trial)
    if t is None:
        state.totals.lost += 1
        return
    g = _group(state, e.step, e.group)
    for c in (t.counters, g.counters, state.totals):
        c.lost += 1
    t.lost = clip(e.error, 1000)
    state.dirty_trials.add(e.trial)
    state.mark("captures", "trials")
    _log(state, e.ts, "error", f"capture lost: trial {e.trial}: {e.error}")


def _step_metrics(state: RunState, e: StepMetrics) -> None:
    for key, value in (e.metrics or {}).items():
        try:
            v = float(value)
        except (TypeError, ValueError):
            continue
        state.metrics_latest[key] = v
        trend = state.metrics.get(key)
        if trend is None:
            trend = state.metrics[key] = deque(maxlen=TREND_LEN)
        if trend and trend[-1][0] == e.step:
            trend[-1] = (e.step, v)
        else:
            trend.append((e.step, v))
    if e.evaluation_only:
        state.mark("metrics")
        return
    summary = _summary(state, e.step)
    summary.ended = e.ts
    if state.last_completed is None or e.step > state.last_completed:
        state.last_completed = e.step
    state.completed_steps = len([s for s in state.steps.values() if s.ended is not None])
    state.mark("metrics", "header", "rewards")


def _checkpoint(state: RunState, e: CheckpointSaved) -> None:
    state.checkpoints.append(e)
    del state.checkpoints[:-20]
    _log(state, e.ts, "info", f"checkpoint {e.name} saved at step {e.step}")


def _error(state: RunState, e: ErrorRaised) -> None:
    state.errors.append(e)
    if e.decision_needed:
        state.pending_decision = e
        state.mark("decision")
    _log(state, e.ts, "error", f"{e.exception_type}: {e.message}")


def _decision(state: RunState, e: DecisionMade) -> None:
    state.decisions.append(e)
    del state.decisions[:-50]
    state.pending_decision = None
    state.mark("decision", "header")
    _log(state, e.ts, "info", f"decision: {e.decision} (by {e.by})")


def _log_line(state: RunState, e: LogLine) -> None:
    _log(state, e.ts, e.level, e.message)


def _log(state: RunState, ts: float, level: str, message: str) -> None:
    state.logs.append((ts, str(level), clip(message, 2000)))
    state.mark("log")


_HANDLERS = {
    RunStarted: _run_started,
    RunEnded: _run_ended,
    ControlChanged: _control,
    GatewayHealth: _gateway,
    BatchStarted: _batch_started,
    BatchEnded: _batch_ended,
    GroupStarted: _group_started,
    GroupEnded: _group_ended,
    TrialPhase: _trial_phase,
    TrialEnded: _trial_ended,
    ProxyRequest: _proxy_request,
    CaptureLost: _capture_lost,
    StepMetrics: _step_metrics,
    CheckpointSaved: _checkpoint,
    ErrorRaised: _error,
    DecisionMade: _decision,
    LogLine: _log_line,
}


# -- small pure helpers the panels use ----------------------------------------------------------

def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, s = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{s:02d}s"
    hours, m = divmod(minutes, 60)
    return f"{hours}h{m:02d}m"


def format_count(n: float | int | None) -> str:
    if n is None:
        return "–"
    n = float(n)
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.1f}{unit}"
    return str(int(n)) if n == int(n) else f"{n:.2f}"


def format_value(v: float | None) -> str:
    if v is None:
        return "–"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e4:
        return format_count(v)
    if a < 1e-3:
        return f"{v:.2e}"
    if a >= 100:
        return f"{v:.0f}"
    return f"{v:.4g}"


def trial_matches(trial: TrialState, query: str) -> bool:
    """The `/` filter: every word must match the task, the outcome, the phase or the trial id
    (``ok``/``fail``/``same`` and ``reward=1`` style words too)."""
    words = query.lower().split()
    if not words:
        return True
    hay = " ".join(filter(None, (trial.task, trial.outcome, trial.phase, trial.trial,
                                  trial.exception_type))).lower()
    for word in words:
        if word.startswith("reward="):
            try:
                if trial.reward is None or abs(trial.reward - float(word[7:])) > 1e-9:
                    return False
            except ValueError:
                return False
        elif word in ("fail", "failed", "error"):
            if not (trial.exception_type or (trial.outcome and trial.outcome not in (
                    "Submitted", "TimeLimitExceeded", "SequenceLengthLimitExceeded"))):
                return False
        elif word in ("ok", "solved"):
            if not (trial.reward is not None and trial.reward >= 1.0):
                return False
        elif word not in hay:
            return False
    return True
