"""The reducer's part for batches, groups and trials: what the grid, the captures and the
rewards panels show. ``tbconsole.state.reducer`` dispatches events here; each handler folds one
event into the ``RunState`` in place and records what changed."""

from __future__ import annotations

import math
from collections.abc import Iterable

from tbconsole.common.inert import inert_event, inert_value
from tbconsole.record.enums import LogLevel, PanelName, TrialOutcome
from tbconsole.record.enums import TrialPhase as Phase
from tbconsole.record.events import (
    BatchEnded,
    BatchStarted,
    CaptureLost,
    GroupEnded,
    GroupStarted,
    HeldOutEvent,
    ProxyRequest,
    TrialEnded,
    TrialPhaseChanged,
)
from tbconsole.state.model import (
    KEEP_STEPS,
    MAX_TEXT,
    TREND_LEN,
    Counters,
    EvaluationState,
    GroupState,
    RunState,
    StepSummary,
    TaskStats,
    TrialData,
    TrialState,
    Turn,
)


def clip(text: str | None, limit: int = MAX_TEXT) -> str | None:
    """At most ``limit`` characters of an event's text (memory stays bounded), saying how many were cut."""
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more chars]"


def updates_of(value: object, limit: int = 16) -> list[int]:
    """A list of update numbers from an event (outside data: anything but non-negative whole
    numbers is left out)."""
    if not isinstance(value, list):
        return []
    return [v for v in value[:limit] if isinstance(v, int) and not isinstance(v, bool) and v >= 0]


def update_of(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def step_summary(state: RunState, step: int) -> StepSummary:
    """The step's summary, created on first sight; only the newest TREND_LEN steps are kept."""
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
    for key in [key for key in state.groups if key[0] < cutoff]:
        del state.groups[key]
    for t in [t for t, tr in state.trials.items() if tr.step < cutoff]:
        del state.trials[t]
        state.changed_trials.discard(t)


def cancel_unfinished(state: RunState, trials: Iterable[str], ts: float) -> None:
    """Trials that will never send trial.ended (their group failed, the run ended): their clocks stop."""
    for name in trials:
        t = state.trials.get(name)
        if t is not None and not t.done and not t.cancelled:
            t.cancelled = True
            t.ended = ts
            state.changed_trials.add(name)


def batch_started(state: RunState, e: BatchStarted) -> None:
    state.step = e.step
    state.batch_active = True
    summary = step_summary(state, e.step)
    summary.started = e.ts
    summary.ended = None
    summary.trial_rewards = {}
    summary.groups = len(e.groups)
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
    state.mark_changed(PanelName.TRIALS, PanelName.CAPTURES, PanelName.REWARDS, PanelName.HEADER)
    add_log(state, e.ts, LogLevel.INFO, f"step {e.step}: batch of {len(e.groups)} groups started")


def batch_ended(state: RunState, e: BatchEnded) -> None:
    if e.step == state.step:
        state.batch_active = False
    step_summary(state, e.step).batch_ended = e.ts
    state.mark_changed(PanelName.HEADER, PanelName.REWARDS)


def update_ended(state: RunState, ts: float, update: int) -> None:
    """Update ``update`` ended (its metrics row, just before its batch.ended): in a run that does not say which
    groups an update trained, its step's returned groups are taken as trained by it."""
    for key in state.pipeline.update_ended(ts, update):
        group_trained_by(state, key, update, [])


def group_trained_by(state: RunState, key: tuple[int, int], update: int, weights: list[int]) -> None:
    """The group (when still in memory) and its trials learn which update trained them."""
    g = state.groups.get(key)
    if g is None:
        return
    g.update, g.dropped = update, None
    if weights:
        g.weights = list(weights)
    for name in g.trials:
        t = state.trials.get(name)
        if t is not None:
            t.update = update
            if not t.weights and weights:
                t.weights = [weights[0]]
            state.changed_trials.add(name)
    state.mark_changed(PanelName.TRIALS)


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
        t = state.trials[trial] = TrialState(
            trial=trial, step=step, group=gi, index=g.trials.index(trial), task=task or g.task
        )
    return t


def group_started(state: RunState, e: GroupStarted) -> None:
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
    g.update, g.weights, g.dropped = None, [], None
    state.pipeline.group_started(e.ts, (e.step, e.group))
    summary = step_summary(state, e.step)
    if summary.started is None:  # a runner that sends no BatchStarted: the step starts with its first group
        summary.started = e.ts
    if retry:  # a retried group: its old trials, their rewards and counts are replaced
        for old in g.trials:
            if old not in e.trials:
                g.retired.add(old)
            _forget_trial(state, summary, old)
    g.trials = list(e.trials)
    state.ledger.observe(e)
    for i, name in enumerate(e.trials):
        t = state.trials.get(name)
        if t is None or t.step != e.step or t.group != e.group:
            t = TrialState(trial=name, step=e.step, group=e.group, index=i, task=e.task)
            state.trials[name] = t
        t.index = i
        t.phase_since = t.phase_since or e.ts
        state.changed_trials.add(name)
    state.mark_changed(PanelName.TRIALS, PanelName.CAPTURES)


def _forget_trial(state: RunState, summary: StepSummary, trial: str) -> None:
    old = state.trials.pop(trial, None)
    entry = summary.trial_rewards.pop(trial, None)
    summary.trial_data.pop(trial, None)
    if old is None or not old.done:
        return
    stats = state.task_stats.get(old.task)
    if stats is not None:
        stats.trials -= 1
        if entry is not None:
            stats.scored -= 1
            stats.reward_sum -= entry[1]
            stats.solved -= 1 if entry[1] >= 1.0 else 0


def group_ended(state: RunState, e: GroupEnded) -> None:
    g = _group(state, e.step, e.group)
    g.ended = e.ts
    g.rewards = list(e.rewards)
    g.ok = e.ok
    g.error = clip(e.error, 2000)
    if not e.ok:  # the runner cancelled the group's other trials
        cancel_unfinished(state, g.trials, e.ts)
    state.ledger.observe(e)
    rewards = [r if isinstance(r, (int, float)) and math.isfinite(r) else None for r in e.rewards]
    state.pipeline.group_ended(e.ts, (e.step, e.group), bool(e.ok), rewards)
    state.mark_changed(PanelName.TRIALS, PanelName.REWARDS, PanelName.LEDGER)


def trial_phase(state: RunState, e: TrialPhaseChanged) -> None:
    t = _trial(state, e.step, e.group, e.trial, e.task)
    if t is None:
        return
    _apply_phase(t, e)
    state.changed_trials.add(e.trial)
    state.mark_changed(PanelName.TRIALS)


def _apply_phase(t: TrialState, e: TrialPhaseChanged) -> None:
    if e.task:
        t.task = e.task
    if e.trial_dir:
        t.trial_dir = e.trial_dir
    t.phase = e.phase
    t.phase_since = e.ts
    if t.started is None and e.phase != Phase.QUEUED:
        t.started = e.ts
    if e.phase == Phase.DONE and t.ended is None:
        t.ended = e.ts


def _trial_data(e: TrialEnded) -> TrialData:
    """A scored trial's training cost (event fields are outside data: a number that is not a
    plain non-negative integer counts as nothing)."""

    def number(value: object) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

    reasons: dict[str, int] = {}
    if isinstance(e.new_datum, dict):
        for why, count in list(e.new_datum.items())[:16]:
            reasons[str(why)[:40]] = number(count)
    return TrialData(number(e.datums), number(e.trained_tokens), number(e.context_tokens), reasons)


def trial_ended(state: RunState, e: TrialEnded) -> None:
    t = _trial(state, e.step, e.group, e.trial)
    if t is None:
        return
    _apply_end(t, e)
    state.ledger.observe(e)
    stats = state.task_stats.get(t.task)
    if stats is None:
        stats = state.task_stats[t.task] = TaskStats(task=t.task)
    stats.trials += 1
    if e.scored and e.datums is not None:
        step_summary(state, e.step).trial_data[e.trial] = _trial_data(e)
        state.mark_changed(PanelName.CAPTURES)
    if e.scored and e.reward is not None and math.isfinite(e.reward):
        summary = step_summary(state, e.step)
        summary.trial_rewards[e.trial] = (t.task, float(e.reward))
        stats.scored += 1
        stats.reward_sum += e.reward
        if e.reward >= 1.0:
            stats.solved += 1
        rewards = [r for task, r in summary.trial_rewards.values() if task == t.task]
        stats.last_mean = sum(rewards) / len(rewards)
        stats.last_step = e.step
    state.changed_trials.add(e.trial)
    state.mark_changed(PanelName.TRIALS, PanelName.REWARDS)


def _apply_end(t: TrialState, e: TrialEnded) -> None:
    """What trial.ended says of the trial itself (training's and held-out trials alike)."""
    t.outcome = e.outcome
    # Cancelled by the user (cancel_trial): it ended with an outcome, and reads as cancelled.
    t.cancelled = e.outcome == TrialOutcome.CANCELLED
    t.scored = e.scored
    t.reward = e.reward
    t.turns = e.turns
    t.output_tokens = e.output_tokens
    t.trial_dir = e.trial_dir or t.trial_dir
    t.timings = dict(e.timings or {})
    t.weights = updates_of(e.weights) or t.weights
    t.exception_type = e.exception_type
    t.exception_message = clip(e.exception_message, 4000)
    t.phase = Phase.DONE
    t.ended = e.ts
    if t.started is None:
        t.started = e.ts - sum(v for v in t.timings.values() if isinstance(v, (int, float))) if t.timings else e.ts
    t.phase_since = t.phase_since or e.ts


def proxy_request(state: RunState, e: ProxyRequest) -> None:
    t = _trial(state, e.step, e.group, e.trial)
    if t is None:
        state.totals.add_request(e)
        return
    g = _group(state, e.step, e.group)
    for c in (g.counters, state.totals):
        c.add_request(e)
    _add_turn(t, e)
    state.changed_trials.add(e.trial)
    state.mark_changed(PanelName.CAPTURES, PanelName.TRIALS)


def _add_turn(t: TrialState, e: ProxyRequest) -> None:
    t.counters.add_request(e)
    t.transcript.append(
        Turn(
            index=t.counters.requests - 1,
            turn=e.turn,
            ts=e.ts,
            captured=e.captured,
            status=e.status,
            prompt_tokens=e.prompt_tokens,
            output_tokens=e.output_tokens,
            stop_reason=e.stop_reason,
            sample_ms=e.sample_ms,
            total_ms=e.total_ms,
            error=clip(e.error, 2000),
            weights=update_of(e.weights),
        )
    )


def capture_lost(state: RunState, e: CaptureLost) -> None:
    t = _trial(state, e.step, e.group, e.trial)
    if t is None:
        state.totals.lost += 1
        return
    g = _group(state, e.step, e.group)
    for c in (t.counters, g.counters, state.totals):
        c.lost += 1
    t.lost = clip(e.error, 1000)
    state.changed_trials.add(e.trial)
    state.mark_changed(PanelName.CAPTURES, PanelName.TRIALS)
    add_log(state, e.ts, LogLevel.ERROR, f"capture lost: trial {e.trial}: {e.error}")


# -- the held-out evaluation's trials ------------------------------------------------------------


def heldout_event(state: RunState, e: HeldOutEvent) -> None:
    """A held-out trial's event: folded into the evaluation's own groups and trials
    (``EvaluationState``), never into training's (rewards, per-task stats, step summaries,
    totals): held-out trials are scored, not trained on."""
    inner = e.unwrap()
    if inner is None:
        return
    inner = inert_event(inner, keep_raw=True)  # its paths and ids kept, as the reducer keeps them
    ev = state.heldout
    if ev is None or ev.after_updates != e.after_updates:  # its evaluation.started was not seen
        ev = state.heldout = EvaluationState(after_updates=e.after_updates, started=e.ts, trials=0)
    if isinstance(inner, GroupStarted):
        started = ev.groups[inner.group] = GroupState(
            step=inner.step, group=inner.group, task=inner.task, proxy_url=inner.proxy_url, started=inner.ts
        )
        started.trials = list(inner.trials)
        for i, name in enumerate(inner.trials):
            ev.trial_states[name] = TrialState(
                trial=name, step=inner.step, group=inner.group, index=i, task=inner.task, evaluation=True
            )
            ev.trial_states[name].phase_since = inner.ts
            state.changed_trials.add(name)
    elif isinstance(inner, GroupEnded):
        ended = ev.groups.get(inner.group)
        if ended is None:
            return
        ended.ended, ended.rewards, ended.ok = inner.ts, list(inner.rewards), inner.ok
        ended.error = clip(inner.error, 2000)
        if not inner.ok:
            _cancel_heldout(state, ev, ended.trials, inner.ts)
    elif isinstance(inner, (TrialPhaseChanged, TrialEnded, ProxyRequest, CaptureLost)):
        t = _heldout_trial(ev, inner.group, inner.trial, getattr(inner, "task", None))
        g = ev.groups.get(inner.group)
        if isinstance(inner, TrialPhaseChanged):
            _apply_phase(t, inner)
        elif isinstance(inner, TrialEnded):
            _apply_end(t, inner)
        elif isinstance(inner, ProxyRequest):
            _add_turn(t, inner)
            for c in (g.counters, ev.counters) if g is not None else (ev.counters,):
                c.add_request(inner)
        elif isinstance(inner, CaptureLost):
            t.lost = clip(inner.error, 1000)
            for c in (t.counters, g.counters, ev.counters) if g is not None else (t.counters, ev.counters):
                c.lost += 1
        state.changed_trials.add(inner.trial)
    state.mark_changed(PanelName.TRIALS, PanelName.CAPTURES)


def _heldout_trial(ev: EvaluationState, gi: int, trial: str, task: str | None) -> TrialState:
    """A held-out trial, created on first sight (a group.started lost to a damaged line)."""
    t = ev.trial_states.get(trial)
    if t is None:
        g = ev.groups.get(gi)
        if g is None:
            g = ev.groups[gi] = GroupState(step=ev.after_updates, group=gi, task=task or "?")
        if trial not in g.trials:
            g.trials.append(trial)
        t = ev.trial_states[trial] = TrialState(
            trial=trial,
            step=ev.after_updates,
            group=gi,
            index=g.trials.index(trial),
            task=task or g.task,
            evaluation=True,
        )
    return t


def cancel_heldout(state: RunState, ts: float) -> None:
    """The run ended (or started again) with the held-out evaluation unfinished: its trials'
    clocks stop, and it ends there without a reward (the grid shows it until the next batch)."""
    ev = state.heldout
    if ev is not None and ev.running:
        _cancel_heldout(state, ev, list(ev.trial_states), ts)
        ev.ended = ts


def _cancel_heldout(state: RunState, ev: EvaluationState, trials: Iterable[str], ts: float) -> None:
    for name in trials:
        t = ev.trial_states.get(name)
        if t is not None and not t.done and not t.cancelled:
            t.cancelled = True
            t.ended = ts
            state.changed_trials.add(name)


def add_log(state: RunState, ts: float, level: str, message: str) -> None:
    # A log line is text to show: a trial id or task name it names (kept raw in the state) is
    # made inert here, with the rest.
    state.logs.append((ts, str(level), inert_value(clip(message, 2000) or "")))
    state.mark_changed(PanelName.LOG)
