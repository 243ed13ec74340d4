"""The reducer: ``reduce(state, event)`` folds one ``tbconsole.record.events`` event into a ``RunState``.

It returns the same object, updated in place: a flood of events must not copy the world each
time. Live, attach and replay all build their view with it. Run-level events are folded here;
batches, groups and trials in ``tbconsole.state.batches``. Which panels an event touched goes
to ``state.changed_panels`` (which trials to ``state.changed_trials``) so the UI redraws only
those, at its own pace.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from tbconsole.common.inert import inert_event
from tbconsole.record.enums import ControlState, DropReason, LogLevel, PanelName, RunStatus
from tbconsole.record.events import (
    AdvisoryCleared,
    AdvisoryRaised,
    BatchEnded,
    BatchStarted,
    CaptureLost,
    CheckpointSaved,
    ControlChanged,
    DecisionMade,
    ErrorRaised,
    EvaluationEnded,
    EvaluationStarted,
    Event,
    GatewayHealth,
    GroupDropped,
    GroupEnded,
    GroupStarted,
    GroupTrained,
    HeldOutEvent,
    LogLine,
    OffPolicyLimit,
    ProxyRequest,
    RunEnded,
    RunStarted,
    StepMetrics,
    TaskAdmission,
    TrainingStarted,
    TrialEnded,
    TrialPhaseChanged,
)
from tbconsole.state.batches import (
    add_log,
    batch_ended,
    batch_started,
    cancel_heldout,
    cancel_unfinished,
    capture_lost,
    clip,
    group_ended,
    group_started,
    group_trained_by,
    heldout_event,
    proxy_request,
    step_summary,
    trial_ended,
    trial_phase,
    update_ended,
    update_of,
    updates_of,
)
from tbconsole.state.model import PANELS, TREND_LEN, Advisory, EvaluationState, RunState
from tbconsole.state.pipeline import DroppedGroup


def reduce(state: RunState, event: Event) -> RunState:
    """Fold one event into the state (in place) and return it. The event's text is made inert
    first (``tbconsole.common.inert``), all but its paths and ids (``RAW`` fields: trial folders, the run
    folder, trial ids, task names), which the state keeps as the runner wrote them so that files
    are found and commands name the real task; views draw those through ``plain``."""
    event = inert_event(event, keep_raw=True)
    handler = _HANDLERS.get(type(event))
    state.events += 1
    if handler is not None:
        handler(state, event)  # before last_ts moves: a second start counts the first up to its last event
    if event.ts is not None and (state.last_ts is None or event.ts > state.last_ts):
        state.last_ts = event.ts
    state.mark_changed(PanelName.HEADER)
    return state


def reduce_all(events: Iterable[Event], state: RunState | None = None) -> RunState:
    state = state if state is not None else RunState()
    for event in events:
        reduce(state, event)
    return state


def _run_started(state: RunState, e: RunStarted) -> None:
    # A second start is the run resumed into the same folder: its trends, per-task stats and log
    # go on. Trials of the earlier start that never ended (a crash) are cancelled.
    cancel_unfinished(state, list(state.trials), e.ts)
    cancel_heldout(state, e.ts)
    until = None
    if state.started is not None:  # a resume: the earlier start ran until its end or its last event
        until = state.ended if state.ended is not None else state.last_ts
        state.earlier_starts_s += max(0.0, (until or state.started) - state.started)
    inner = e.config.get("config") if isinstance(e.config, dict) else None
    remove_constant = isinstance(inner, dict) and inner.get("remove_constant_reward_groups") is True
    limit = update_of(e.max_steps_off_policy)
    state.pipeline.start(e.ts, str(e.training_mode or ""), limit, remove_constant, until)
    state.starts += 1
    state.first_run_id = state.first_run_id or e.run_id
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
    if isinstance(e.task_families, dict):
        state.ledger.set_families({str(k): str(v) for k, v in e.task_families.items()})
    state.evaluation = None
    state.started = e.ts
    state.ended = None
    state.end_status = None
    state.end_message = None
    state.batch_active = False
    state.pending_decision = None
    if state.control in (ControlState.WAITING, RunStatus.DONE, RunStatus.FAILED):
        state.control = ControlState.RUNNING
    if state.gateway.base_url is None:
        state.gateway.base_url = e.base_url
    state.mark_changed(*PANELS)


def _task_admission(state: RunState, e: TaskAdmission) -> None:
    weight = e.weight if isinstance(e.weight, (int, float)) and e.weight >= 0 else 0.0
    state.ledger.admission(e.task, float(weight), e.step, e.by, e.reason, e.until)
    if weight == 0:
        what = f"dropped from step {e.step}" + (f" until step {e.until}" if e.until is not None else "")
    else:
        what = f"weight {weight:g} from step {e.step}"
    add_log(state, e.ts, LogLevel.INFO, f"task {e.task}: {what} ({e.by}{': ' + e.reason if e.reason else ''})")
    state.mark_changed(PanelName.LEDGER)


def _evaluation_started(state: RunState, e: EvaluationStarted) -> None:
    state.evaluation = state.heldout = EvaluationState(after_updates=e.after_updates, started=e.ts, trials=e.trials)
    state.mark_changed(PanelName.HEADER, PanelName.METRICS, PanelName.TRIALS)


def _evaluation_ended(state: RunState, e: EvaluationEnded) -> None:
    done = state.evaluation
    if done is None or done.after_updates != e.after_updates:  # its start was not seen: its trials may have been
        held = state.heldout
        done = held if held is not None and held.after_updates == e.after_updates and held.running else None
    done = done or EvaluationState(after_updates=e.after_updates, started=e.ts, trials=e.trials)
    done.ended, done.reward, done.scored, done.failed_tasks = e.ts, e.reward, e.trials, e.failed_tasks
    state.evaluation, state.last_evaluation, state.heldout = None, done, done
    state.mark_changed(PanelName.HEADER, PanelName.METRICS, PanelName.TRIALS)


def _run_ended(state: RunState, e: RunEnded) -> None:
    state.ended = e.ts
    state.end_status = e.status
    state.end_message = clip(e.message, 2000)
    state.batch_active = False
    state.pending_decision = None
    state.evaluation = None
    cancel_unfinished(state, list(state.trials), e.ts)
    cancel_heldout(state, e.ts)
    state.pipeline.end(e.ts)
    state.mark_changed(PanelName.HEADER, PanelName.DECISION, PanelName.TRIALS, PanelName.GATEWAY)
    add_log(
        state,
        e.ts,
        LogLevel.INFO if e.status in (RunStatus.DONE, RunStatus.STOPPED) else LogLevel.ERROR,
        f"run {e.status} at step {e.step}" + (f": {e.message}" if e.message else ""),
    )


def _control(state: RunState, e: ControlChanged) -> None:
    state.control = e.state
    if state.pending_decision is not None and e.state in (
        ControlState.ABORTING,
        ControlState.RUNNING,
        ControlState.STOPPING,
        RunStatus.DONE,
        RunStatus.FAILED,
    ):
        state.pending_decision = None
        state.mark_changed(PanelName.DECISION)
    state.mark_changed(PanelName.HEADER)
    add_log(state, e.ts, LogLevel.INFO, f"control: {e.state}" + (f" ({e.reason})" if e.reason else ""))


def _gateway(state: RunState, e: GatewayHealth) -> None:
    g = state.gateway
    g.base_url = e.base_url
    g.ok = e.ok
    g.latency_ms = e.latency_ms
    g.error = clip(e.error, 1000)
    g.checked = e.ts
    g.probes += 1
    g.starting = e.starting
    g.down_since = e.down_since
    g.outage_limit_s = e.outage_limit_s
    if e.sampler_path:
        g.sampler_path = e.sampler_path
    if not e.ok:
        g.failures += 1
        g.last_error = clip(e.error or "probe failed", 1000)
        g.last_error_ts = e.ts
    g.latencies.append(e.latency_ms if e.latency_ms is not None else 0.0)
    state.mark_changed(PanelName.GATEWAY)


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
        state.mark_changed(PanelName.METRICS, PanelName.HEADER)
        return
    summary = step_summary(state, e.step)
    summary.ended = e.ts
    update_ended(state, e.ts, e.step)
    if e.step == state.step:  # trained: a runner that sends no batch.ended has no other sign of it
        state.batch_active = False
    if state.last_completed is None or e.step > state.last_completed:
        state.last_completed = e.step
    state.completed_steps = len([s for s in state.steps.values() if s.ended is not None])
    state.mark_changed(PanelName.METRICS, PanelName.HEADER, PanelName.REWARDS)


def _off_policy_limit(state: RunState, e: OffPolicyLimit) -> None:
    limit, since = update_of(e.max_steps_off_policy), update_of(e.from_update)
    if limit is None or since is None:
        return
    by = clip(str(e.by), 40) or ""
    first = not state.pipeline.limits
    state.pipeline.set_limit(e.ts, limit, since, by)
    if not first or by != "config":
        add_log(state, e.ts, LogLevel.INFO, f"max_steps_off_policy {limit} from update {since} ({by})")
    state.mark_changed(PanelName.HEADER)


def _group_trained(state: RunState, e: GroupTrained) -> None:
    update = update_of(e.update)
    if update is None:
        return
    weights = updates_of(e.weights)
    state.pipeline.group_trained(e.ts, (e.step, e.group), update, weights)
    group_trained_by(state, (e.step, e.group), update, weights)


def _group_dropped(state: RunState, e: GroupDropped) -> None:
    g = state.groups.get((e.step, e.group))
    seconds = e.sandbox_seconds
    if not (isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and math.isfinite(seconds)):
        seconds = 0.0
    reason = clip(str(e.reason), 40) or "?"
    dropped = DroppedGroup(
        ts=e.ts,
        step=e.step,
        group=e.group,
        task=g.task if g is not None else state.ledger.task_of(e.step, e.group) or "?",
        reason=reason,
        weights=updates_of(e.weights),
        update=update_of(e.update) or 0,
        trials=update_of(e.trials) or 0,
        sandbox_seconds=max(0.0, float(seconds)),
        datums=update_of(e.datums) or 0,
    )
    state.pipeline.group_dropped(e.ts, dropped)
    state.ledger.observe(e)
    if g is not None:
        g.dropped, g.update = reason, None
        g.weights = dropped.weights or g.weights
        state.changed_trials.update(g.trials)
    state.mark_changed(PanelName.TRIALS, PanelName.LEDGER)
    add_log(
        state,
        e.ts,
        LogLevel.WARNING if reason == DropReason.STALE else LogLevel.INFO,
        f"group {e.group} of step {e.step} dropped ({reason}) at update {dropped.update}: "
        f"{dropped.sandbox_seconds:.0f} s of sandbox time not trained",
    )


def _training_started(state: RunState, e: TrainingStarted) -> None:
    update = update_of(e.update)
    if update is not None:
        state.pipeline.training_started(e.ts, update)
        state.mark_changed(PanelName.HEADER)


def _checkpoint(state: RunState, e: CheckpointSaved) -> None:
    state.checkpoints.append(e)
    del state.checkpoints[:-20]
    add_log(state, e.ts, LogLevel.INFO, f"checkpoint {e.name} saved at step {e.step}")


def _error(state: RunState, e: ErrorRaised) -> None:
    if e.decision_needed:
        state.pending_decision = e
        state.mark_changed(PanelName.DECISION)
    add_log(state, e.ts, LogLevel.ERROR, f"{e.exception_type}: {e.message}")


def _decision(state: RunState, e: DecisionMade) -> None:
    state.decisions.append(e)
    del state.decisions[:-50]
    state.pending_decision = None
    state.mark_changed(PanelName.DECISION, PanelName.HEADER)
    add_log(state, e.ts, LogLevel.INFO, f"decision: {e.decision} (by {e.by})")


def _log_line(state: RunState, e: LogLine) -> None:
    add_log(state, e.ts, e.level, e.message)


def _advisory_raised(state: RunState, e: AdvisoryRaised) -> None:
    # A raise under an active key replaces that advisory (new value, new message) but keeps when it
    # began; only a new one goes to the run's log: a rule re-raising every batch is not news.
    earlier = state.advisories.get(e.key)
    state.advisory_seq += 1
    advisory = Advisory(
        key=clip(e.key, 200) or "",
        rule=clip(e.rule, 200) or "",
        severity=e.severity,
        message=clip(e.message, 1000) or "",
        threshold=clip(e.threshold, 200) or "",
        value=e.value,
        step=e.step,
        group=e.group,
        trial=e.trial,
        metric=e.metric,
        raised=earlier.raised if earlier is not None else e.ts,
        updated=e.ts,
        raises=earlier.raises + 1 if earlier is not None else 1,
        seq=state.advisory_seq,
    )
    state.advisories[e.key] = advisory
    state.advisory_log.append(advisory)
    state.mark_changed(PanelName.ADVISORIES, PanelName.HEADER)
    if earlier is None:
        add_log(state, e.ts, e.severity, f"advisory: {advisory.message}")


def _advisory_cleared(state: RunState, e: AdvisoryCleared) -> None:
    earlier = state.advisories.pop(e.key, None)
    if earlier is None:  # a clear of nothing raised (or already cleared) has nothing to say
        return
    state.advisory_seq += 1
    cleared = dataclasses.replace(earlier, cleared=e.ts, cleared_by=clip(e.message, 1000) or "", seq=state.advisory_seq)
    state.advisory_log.append(cleared)
    state.mark_changed(PanelName.ADVISORIES, PanelName.HEADER)
    add_log(state, e.ts, LogLevel.INFO, f"advisory cleared: {earlier.message} ({cleared.cleared_by})")


_HANDLERS: dict[type[Event], Callable[[RunState, Any], None]] = {
    RunStarted: _run_started,
    RunEnded: _run_ended,
    EvaluationStarted: _evaluation_started,
    EvaluationEnded: _evaluation_ended,
    HeldOutEvent: heldout_event,
    ControlChanged: _control,
    GatewayHealth: _gateway,
    BatchStarted: batch_started,
    BatchEnded: batch_ended,
    GroupStarted: group_started,
    GroupEnded: group_ended,
    TrialPhaseChanged: trial_phase,
    TrialEnded: trial_ended,
    ProxyRequest: proxy_request,
    CaptureLost: capture_lost,
    StepMetrics: _step_metrics,
    CheckpointSaved: _checkpoint,
    ErrorRaised: _error,
    DecisionMade: _decision,
    LogLine: _log_line,
    AdvisoryRaised: _advisory_raised,
    AdvisoryCleared: _advisory_cleared,
    TaskAdmission: _task_admission,
    OffPolicyLimit: _off_policy_limit,
    GroupTrained: _group_trained,
    GroupDropped: _group_dropped,
    TrainingStarted: _training_started,
}
