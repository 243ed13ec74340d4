"""What the console knows about a run: plain dataclasses, filled by ``tbconsole.state.reducer``.

No Textual, no I/O, no wall clock: anything time-dependent (elapsed, ETA, a trial's time in its
phase) is a function of ``now`` that the caller passes in. Memory is bounded: per-trial detail
is kept for the last ``KEEP_STEPS`` steps, trends and logs are ring buffers.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tbconsole.record.enums import ControlState, PanelName, TrialPhase
from tbconsole.record.events import CheckpointSaved, DecisionMade, ErrorRaised, ProxyRequest
from tbconsole.state.ledger import Ledger, family_by_name
from tbconsole.state.pipeline import PipelineState, staleness_of

KEEP_STEPS = 3  # steps whose trials (and their turn lists) stay in memory
MAX_TURNS = 400  # turns kept per trial (the oldest are dropped; counts stay exact)
MAX_TEXT = 8000  # characters of any one text kept from an event
TREND_LEN = 500  # points kept per metric / reward trend
LATENCY_LEN = 60  # gateway probes kept for the sparkline
LOG_LEN = 300
ADVISORY_LOG_LEN = 200  # advisory changes (raised, replaced, cleared) kept, newest last

# The main screen's panels (and the advisories' strip and screen), by the names the reducer records
# in ``RunState.changed_panels``.
PANELS = tuple(PanelName)


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

    def add(self, other: Counters) -> None:
        self.requests += other.requests
        self.captured += other.captured
        self.prompt_tokens += other.prompt_tokens
        self.output_tokens += other.output_tokens
        self.rejected += other.rejected
        self.lost += other.lost


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
    weights: int | None = None  # the update whose weights sampled it (None: not recorded)


@dataclass
class TrialState:
    trial: str
    step: int
    group: int
    index: int  # position in its group
    task: str
    phase: str = TrialPhase.QUEUED
    phase_since: float | None = None
    started: float | None = None
    ended: float | None = None
    trial_dir: str | None = None
    outcome: str | None = None  # a TrialOutcome value, once trial.ended arrived
    scored: bool | None = None
    reward: float | None = None
    turns: int = 0
    output_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    exception_type: str | None = None
    exception_message: str | None = None
    counters: Counters = field(default_factory=Counters)
    transcript: deque[Turn] = field(default_factory=lambda: deque(maxlen=MAX_TURNS))
    lost: str | None = None  # why a capture was lost
    # Stopped before it ended: its group failed (a sibling's failure, the gateway going down) or
    # the run ended. The runner sends no trial.ended for such a trial: it has no outcome.
    cancelled: bool = False
    # A held-out evaluation trial (``RunState.heldout``): scored, never trained on, in no
    # training figure; its step is the number of updates behind the weights it ran.
    evaluation: bool = False
    # The updates whose weights sampled its turns, oldest first (trial.ended; empty: not
    # recorded), and the update that trained its group (group.trained).
    weights: list[int] = field(default_factory=list)
    update: int | None = None

    @property
    def staleness(self) -> int | None:
        """How many updates its first turn's weights lag the update that trained it."""
        return staleness_of(self.update, self.weights)

    def turn_weights(self, capture_turn: int) -> int | None:
        """The update whose weights sampled its captured turn ``capture_turn`` (None: unknown)."""
        for turn in self.transcript:
            if turn.turn == capture_turn:
                return turn.weights
        return None

    @property
    def done(self) -> bool:
        return self.outcome is not None

    @property
    def failed(self) -> bool:
        """Nothing of it is trained on: it ended unscored (an AgentError outcome) or was cancelled."""
        return self.cancelled or (self.done and not self.scored)

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
    # Which update trained it and the weights that sampled it (group.trained), or why it was
    # dropped (group.dropped: a DropReason value).
    update: int | None = None
    weights: list[int] = field(default_factory=list)
    dropped: str | None = None

    @property
    def staleness(self) -> int | None:
        return staleness_of(self.update, self.weights)

    def trial_rewards(self, trials: dict[str, TrialState]) -> list[float | None]:
        if self.rewards is not None:
            return list(self.rewards)
        return [trials[t].reward if t in trials else None for t in self.trials]

    def all_same(self, trials: dict[str, TrialState]) -> bool:
        """Every trial finished, scored, with one and the same reward: the group trains nothing."""
        return self.uniform_reward(trials) is not None

    def uniform_reward(self, trials: dict[str, TrialState]) -> float | None:
        """The one reward every trial got, once all are finished and scored (None: they differ,
        or not all are in). All solved and all failed both train nothing, but mean opposite things."""
        if len(self.trials) < 2 and not (self.rewards and len(self.rewards) >= 2):
            return None
        if self.rewards is None and not all(t in trials and trials[t].done for t in self.trials):
            return None
        rewards = self.trial_rewards(trials)
        if len(rewards) < 2 or any(r is None for r in rewards):
            return None
        known = [r for r in rewards if r is not None]
        return known[0] if max(known) - min(known) < 1e-12 else None


@dataclass(frozen=True)
class TrialData:
    """What one scored trial's turns cost to train (``runner.datums``)."""

    datums: int
    trained_tokens: int
    context_tokens: int
    new_datum: dict[str, int]


@dataclass
class StepSummary:
    step: int
    started: float | None = None
    ended: float | None = None  # metrics arrived (trained)
    batch_ended: float | None = None
    trial_rewards: dict[str, tuple[str, float]] = field(default_factory=dict)  # trial -> (task, reward)
    groups: int = 0
    # Training cost of its scored trials (trial.ended's datum figures), by trial.
    trial_data: dict[str, TrialData] = field(default_factory=dict)

    @property
    def datums_per_trial(self) -> float | None:
        data = self.trial_data.values()
        return sum(d.datums for d in data) / len(data) if data else None

    @property
    def amplification(self) -> float | None:
        """Trained tokens ÷ the trials' final contexts (``runner.datums``): about 1 when each
        trial trains as one datum."""
        context = sum(d.context_tokens for d in self.trial_data.values())
        return sum(d.trained_tokens for d in self.trial_data.values()) / context if context else None

    def new_datum_reasons(self) -> dict[str, int]:
        """Why turns began a datum, over the step's trials (NewDatum value → count)."""
        out: dict[str, int] = {}
        for data in self.trial_data.values():
            for why, count in data.new_datum.items():
                out[why] = out.get(why, 0) + count
        return out

    @property
    def rewards(self) -> list[float]:
        return [r for _, r in self.trial_rewards.values()]

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


def task_family(task: str) -> str:
    """The family a task belongs to by name alone (``ledger.family_by_name``): the demo's variants
    are ``<family>-<number>`` (``count-errors-003``), materialized with the run's order in front
    (``014-count-errors-003``); any other task is a family of its own. A run's views use
    ``RunState.ledger.family`` instead: the runner's rule, task.toml's category first."""
    return family_by_name(task)


@dataclass
class TaskStats:
    task: str
    trials: int = 0
    scored: int = 0
    reward_sum: float = 0.0
    solved: int = 0  # reward >= 1
    last_mean: float | None = None
    last_step: int | None = None

    @property
    def mean(self) -> float | None:
        return self.reward_sum / self.scored if self.scored else None


def family_stats(stats: list[TaskStats], family: Callable[[str], str] = task_family) -> list[TaskStats]:
    """Per-task stats rolled up by ``family`` (a run's: ``RunState.ledger.family``): totals added;
    ``last_mean`` is the mean over the family's tasks that ran in its latest step (each ran one
    group of equal size there)."""
    families: dict[str, list[TaskStats]] = {}
    for s in stats:
        families.setdefault(family(s.task), []).append(s)
    out = []
    for name, members in families.items():
        last_step = max((m.last_step for m in members if m.last_step is not None), default=None)
        lasts = [m.last_mean for m in members if m.last_step == last_step and m.last_mean is not None]
        out.append(
            TaskStats(
                task=name,
                trials=sum(m.trials for m in members),
                scored=sum(m.scored for m in members),
                reward_sum=sum(m.reward_sum for m in members),
                solved=sum(m.solved for m in members),
                last_mean=sum(lasts) / len(lasts) if lasts else None,
                last_step=last_step,
            )
        )
    return out


@dataclass
class GatewayState:
    base_url: str | None = None
    ok: bool | None = None  # the last probe's answer (None: no probe yet)
    latency_ms: float | None = None
    error: str | None = None
    last_error: str | None = None
    last_error_ts: float | None = None
    sampler_path: str | None = None
    checked: float | None = None  # when the last probe answered
    probes: int = 0  # health probes sent (gateway.health events)
    failures: int = 0  # probes that failed
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_LEN))
    starting: bool = False  # the last probe got 503: up, still starting (not dead)
    down_since: float | None = None  # the outage under way began (its first failed probe)
    outage_limit_s: float | None = None  # how long the run rides that outage out


@dataclass
class EvaluationState:
    """One held-out evaluation: the weights after ``after_updates`` updates on held-out tasks.
    Its groups and trials (``heldout.event``) are kept here, apart from training's: they count
    in no training figure (rewards, per-task stats, totals, no-signal groups)."""

    after_updates: int
    started: float
    trials: int
    ended: float | None = None
    reward: float | None = None
    scored: int = 0
    failed_tasks: int = 0
    groups: dict[int, GroupState] = field(default_factory=dict)  # by group (= held-out task index)
    trial_states: dict[str, TrialState] = field(default_factory=dict)
    counters: Counters = field(default_factory=Counters)  # its model calls (not in RunState.totals)

    @property
    def running(self) -> bool:
        return self.ended is None

    def ordered_groups(self) -> list[GroupState]:
        return [self.groups[k] for k in sorted(self.groups)]


@dataclass
class Advisory:
    """One advisory as it stands: the latest ``advisory.raised`` under its key (a raise with the
    same key replaces the earlier one) and, once ``advisory.cleared``, what cleared it."""

    key: str
    rule: str
    severity: str  # a LogLevel value (one a newer writer added is kept as it came)
    message: str
    threshold: str
    value: float | None = None
    step: int | None = None
    group: int | None = None
    trial: str | None = None
    metric: str | None = None
    raised: float = 0.0  # when it was first raised (a replacement keeps this)
    updated: float = 0.0  # when it was last raised
    raises: int = 1  # raises under this key since it became active (2 and more: replaced)
    cleared: float | None = None
    cleared_by: str | None = None  # the clear's message: what cleared it
    seq: int = 0  # the ``RunState.advisory_seq`` of the change that made it so

    @property
    def active(self) -> bool:
        return self.cleared is None


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
    evaluation: EvaluationState | None = None  # the held-out evaluation running now
    last_evaluation: EvaluationState | None = None  # the newest one that ended
    heldout: EvaluationState | None = None  # the newest one started (running or not): its trials

    started: float | None = None  # RunStarted ts (of the latest start, when a run was resumed)
    first_run_id: str | None = None  # the run's identity: its first start's id (a resume gets a new run_id)
    starts: int = 0  # how many times the run was started in this folder (1 + resumes)
    earlier_starts_s: float = 0.0  # run time of the starts before the latest (each: start to its last event)
    last_ts: float | None = None  # newest event ts
    ended: float | None = None
    end_status: str | None = None  # a RunStatus value
    end_message: str | None = None

    control: str = ControlState.WAITING  # a ControlState, or the RunStatus it finished with

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
    ledger: Ledger = field(default_factory=Ledger)  # the difficulty ledger (``state.ledger``)
    pipeline: PipelineState = field(default_factory=PipelineState)  # sampling and training (``state.pipeline``)
    metrics_latest: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, deque[tuple[int, float]]] = field(default_factory=dict)  # key -> (step, value)
    checkpoints: list[CheckpointSaved] = field(default_factory=list)
    pending_decision: ErrorRaised | None = None
    decisions: list[DecisionMade] = field(default_factory=list)
    logs: deque[tuple[float, str, str]] = field(default_factory=lambda: deque(maxlen=LOG_LEN))  # (ts, level, text)
    # Advisories: the active ones by key (oldest raise first), every change as it stood then
    # (bounded), and how many changes were folded (a reader keeps it to find what is new).
    advisories: dict[str, Advisory] = field(default_factory=dict)
    advisory_log: deque[Advisory] = field(default_factory=lambda: deque(maxlen=ADVISORY_LOG_LEN))
    advisory_seq: int = 0

    events: int = 0
    # What the events folded since the UI last drew: panel names (PANELS) and trial ids.
    changed_panels: set[str] = field(default_factory=set)
    changed_trials: set[str] = field(default_factory=set)

    def mark_changed(self, *panels: str) -> None:
        self.changed_panels.update(panels)

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
    def trained_steps(self) -> int:
        """How many steps are trained: steps count from 0, so also the step that samples next."""
        return self.last_completed + 1 if self.last_completed is not None else self.start_step

    def elapsed(self, now: float) -> float | None:
        """The run's time so far, over all its starts: a resumed run goes on from where its earlier
        starts left off (the gaps between a crash and its resume do not count)."""
        if self.started is None:
            return None
        end = self.ended if self.ended is not None else now
        return self.earlier_starts_s + max(0.0, end - self.started)

    def step_durations(self) -> list[float]:
        return [
            s.duration
            for s in sorted(self.steps.values(), key=lambda s: s.step)
            if s.ended is not None and s.duration is not None
        ]

    def eta(self, now: float) -> float | None:
        """Seconds to the last step: mean of the last five trained steps' durations times the
        steps left, less the time already spent on the current one. None once every step is
        trained (what is left, a final evaluation, has no known length)."""
        if self.finished or not self.total_steps:
            return None
        durations = self.step_durations()[-5:]
        remaining = self.total_steps - self.trained_steps
        if not durations or remaining <= 0:
            return None
        per_step = sum(durations) / len(durations)
        spent = 0.0
        current = self.steps.get(self.step) if self.step is not None else None
        if current is not None and current.ended is None and current.started is not None:
            spent = min(per_step, max(0.0, now - current.started))
        return max(0.0, remaining * per_step - spent)

    def heldout_running_since(self) -> float | None:
        """When the held-out evaluation running now began (``evaluation.started``); None when none
        is running."""
        return None if self.finished else self.evaluation.started if self.evaluation else None

    def find_trial(self, trial: str) -> TrialState | None:
        """A trial by id: training's, else one of the newest held-out evaluation's."""
        t = self.trials.get(trial)
        if t is None and self.heldout is not None:
            t = self.heldout.trial_states.get(trial)
        return t

    def heldout_shown(self) -> EvaluationState | None:
        """The held-out evaluation the trials grid shows: the one running, or the newest one
        until the next batch starts (the final evaluation, after the last step, stays)."""
        ev = self.heldout
        if ev is None or not ev.groups:
            return None
        if ev.running:
            return ev
        current = self.steps.get(self.step) if self.step is not None else None
        if current is None or current.started is None or current.started <= ev.started:
            return ev
        return None

    def batch_groups(self, step: int | None = None) -> list[GroupState]:
        step = self.step if step is None else step
        if step is None:
            return []
        return sorted((g for (s, _), g in self.groups.items() if s == step), key=lambda g: g.group)

    def batch_counters(self, step: int | None = None) -> Counters:
        out = Counters()
        for g in self.batch_groups(step):
            out.add(g.counters)
        return out

    def histogram_rewards(self) -> tuple[int | None, list[float]]:
        """The rewards to histogram: the newest step that has any."""
        for step in sorted(self.steps, reverse=True):
            rewards = self.steps[step].rewards
            if rewards:
                return step, rewards
        return None, []

    def reward_trend(self) -> list[tuple[int, float, float]]:
        """(step, mean, std) for every step with rewards, in order."""
        out = []
        for step in sorted(self.steps):
            s = self.steps[step]
            if s.mean is not None and s.std is not None:
                out.append((step, s.mean, s.std))
        return out[-TREND_LEN:]

    def metric(self, candidates: tuple[str, ...]) -> tuple[str | None, float | None, list[float]]:
        """(key used, latest value, trend) for the first candidate key seen."""
        for key in candidates:
            if key in self.metrics_latest:
                return key, self.metrics_latest[key], [v for _, v in self.metrics.get(key, ())]
        return None, None, []

    # -- advisories ----------------------------------------------------------------------

    def advisory_counts(self) -> dict[str, int]:
        """Active advisories per severity (only the severities that have any)."""
        counts: dict[str, int] = {}
        for advisory in self.advisories.values():
            counts[advisory.severity] = counts.get(advisory.severity, 0) + 1
        return counts

    def cleared_advisories(self) -> list[Advisory]:
        """The cleared advisories still in the log, newest first, the latest clear of each key
        (a key raised again is listed with the active ones instead)."""
        out: list[Advisory] = []
        seen: set[str] = set(self.advisories)
        for advisory in reversed(self.advisory_log):
            if advisory.cleared is not None and advisory.key not in seen:
                seen.add(advisory.key)
                out.append(advisory)
        return out

    def advisory_changes_since(self, seq: int) -> list[Advisory]:
        """The changes folded after change number ``seq``, oldest first (those still in the log)."""
        return [a for a in self.advisory_log if a.seq > seq]
