"""The reducer over recorded event streams: what every panel shows is derived here."""

import dataclasses
import json
import tracemalloc

import pytest

from tbconsole.record.enums import TrialOutcome
from tbconsole.record.events import (
    BatchStarted,
    ControlChanged,
    DecisionMade,
    ErrorRaised,
    EvaluationEnded,
    EvaluationStarted,
    GatewayHealth,
    GroupEnded,
    GroupStarted,
    ProxyRequest,
    RunEnded,
    RunStarted,
    StepMetrics,
    TrialEnded,
    TrialPhaseChanged,
    decode,
    read_events,
)
from tbconsole.state import KEEP_STEPS, MAX_TEXT, RunState, reduce, reduce_all
from tbconsole.synthetic.run import T0, flood, synthetic_run
from tbconsole.ui.present.wording import progress_text, status_label

from tests_support.paths import FIXTURES
from tests_support.recorded import recorded_runs


@pytest.mark.parametrize("path", recorded_runs(), ids=lambda p: p.parent.name)
def test_every_recorded_run_reduces(path):
    events = list(read_events(path))
    assert events, path
    state = reduce_all(events)
    assert state.events == len(events)
    assert state.run_id and state.total_steps > 0
    assert state.step is not None
    # counters add up: totals ≥ the sum over the groups still in memory
    groups = list(state.groups.values())
    assert state.totals.requests >= sum(g.counters.requests for g in groups)
    assert state.totals.requests == state.totals.captured + state.totals.rejected
    # every trial in memory belongs to a group in memory
    for t in state.trials.values():
        assert t.trial in state.groups[(t.step, t.group)].trials


def test_finished_run(finished_events):
    state = reduce_all(finished_events)
    assert state.finished and state.status == "done" and status_label(state) == "done"
    assert progress_text(state, state.last_ts) == "step 2 · 3/3 trained"  # steps count from 0, as in the log
    assert state.completed_steps == 3 and state.last_completed == 2
    assert state.pending_decision is None
    assert state.eta(state.last_ts) is None  # finished: no ETA
    assert state.elapsed(state.last_ts + 1000) == pytest.approx(state.ended - state.started)
    # metrics with the cookbook's names, trend per step
    key, value, trend = state.metric(("optim/kl_sample_train_v1",))
    assert key == "optim/kl_sample_train_v1" and len(trend) == 3 and value == trend[-1]
    assert state.metric(("no/such",)) == (None, None, [])
    # reward trend: one (step, mean, std) per step
    trend = state.reward_trend()
    assert [s for s, _, _ in trend] == [0, 1, 2]
    step, rewards = state.histogram_rewards()
    assert step == 2 and len(rewards) == 16 and set(rewards) <= {0.0, 1.0}
    assert trend[-1][1] == pytest.approx(sum(rewards) / len(rewards))
    # per-task breakdown covers every task that ran
    assert {"hello-file", "recover-lost-commit"} <= set(state.task_stats)
    hello = state.task_stats["hello-file"]
    assert hello.mean == 1.0 and hello.solved == hello.scored
    # the capture lost in step 1 is counted; rejected requests too
    assert state.totals.lost == 1 and state.totals.rejected > 0
    assert any("checkpoint" in m for _, _, m in state.logs)


def test_all_same_reward_groups_are_flagged(finished_events):
    state = reduce_all(finished_events)
    flags = {(g.step, g.task): g.all_same(state.trials) for g in state.groups.values()}
    assert flags[(2, "hello-file")] is True  # always solved: trains nothing
    assert any(v is False for v in flags.values())
    # a group still running is never flagged
    state = RunState()
    for e in finished_events:
        reduce(state, e)
        if isinstance(e, TrialEnded) and e.step == 0 and e.group == 0:
            break
    assert not state.groups[(0, 0)].all_same(state.trials)


def test_pending_decision_and_control(awaiting_events):
    state = reduce_all(awaiting_events)
    assert state.control == "awaiting_decision" and status_label(state) == "awaiting decision"
    e = state.pending_decision
    assert isinstance(e, ErrorRaised) and e.decision_needed and e.exception_type == "CaptureLost"
    assert not state.finished
    reduce(state, DecisionMade(step=e.step, group=e.group, decision="retry_group", by="console"))
    assert state.pending_decision is None
    reduce(state, ControlChanged(state="running"))
    assert state.status == "running"


def test_retry_replaces_the_groups_trials(finished_events):
    """Step 1 group 2 failed, was retried: only the retry's trials count in the step's rewards."""
    state = RunState()
    for e in finished_events:
        reduce(state, e)
        if isinstance(e, BatchStarted) and e.step == 2:
            break
    group = state.groups[(1, 2)]
    assert group.ok is True and len(group.trials) == 4
    assert all(state.trials[t].done for t in group.trials)
    summary = state.steps[1]
    assert len(summary.rewards) == 16  # 4 groups × 4, the failed attempt's trials forgotten
    assert all(t in state.trials for t in summary.trial_rewards)


def test_trial_phases_elapsed_and_transcript(finished_events):
    state = RunState()
    seen_agent = None
    for e in finished_events:
        reduce(state, e)
        if isinstance(e, TrialPhaseChanged) and e.phase == "agent" and seen_agent is None:
            seen_agent = e
            break
    t = state.trials[seen_agent.trial]
    assert t.phase == "agent" and not t.done
    assert t.phase_elapsed(seen_agent.ts + 7) == pytest.approx(7)
    assert t.elapsed(seen_agent.ts + 7) > 7  # started at "environment"
    for e in finished_events[state.events :]:
        reduce(state, e)
        if isinstance(e, ProxyRequest) and e.trial == t.trial:
            break
    assert t.live_turns == 1 and len(t.transcript) == 1
    turn = t.transcript[0]
    assert turn.turn == (0 if turn.captured else None)  # the text is in the capture file, not the state


def test_eta_from_trained_steps():
    state = RunState()
    reduce(
        state,
        RunStarted(
            ts=0,
            run_id="r",
            log_path="/x",
            model_name="m",
            base_url=None,
            renderer_name=None,
            total_steps=10,
            groups_per_batch=1,
            group_size=2,
            tasks=["a"],
            config={},
        ),
    )
    assert state.eta(5) is None  # nothing trained yet
    reduce(state, BatchStarted(ts=0, step=0, groups=[{"group": 0, "task": "a", "trials": 2}]))
    reduce(state, StepMetrics(ts=100, step=0, metrics={"optim/lr": 1e-6}))
    reduce(state, BatchStarted(ts=100, step=1, groups=[{"group": 0, "task": "a", "trials": 2}]))
    # 9 steps left at 100 s each, 30 s into the current one
    assert state.eta(130) == pytest.approx(9 * 100 - 30)
    assert progress_text(state, 130) == "step 1 · 1/10 trained"


def test_gateway_health_history():
    state = RunState()
    for i in range(100):
        reduce(
            state,
            GatewayHealth(
                ts=i,
                base_url="http://g",
                ok=i != 50,
                latency_ms=None if i == 50 else 10.0 + i,
                error="refused" if i == 50 else None,
                sampler_path="tinker://s/1",
            ),
        )
    g = state.gateway
    assert g.ok and g.failures == 1 and g.probes == 100 and g.last_error == "refused" and g.last_error_ts == 50
    assert len(g.latencies) == 60 and g.latency_ms == 109.0 and g.sampler_path == "tinker://s/1"


def test_events_out_of_order_or_unknown_do_not_break():
    state = RunState()
    # a proxy request and a trial end for a group never announced (attach mid-run)
    reduce(
        state,
        ProxyRequest(
            ts=1,
            step=4,
            group=2,
            trial="t1",
            api="openai",
            stream=False,
            status=200,
            captured=True,
            turn=0,
            prompt_tokens=10,
            output_tokens=5,
        ),
    )
    reduce(
        state,
        TrialEnded(
            ts=2,
            step=4,
            group=2,
            trial="t1",
            outcome="Submitted",
            scored=True,
            reward=1.0,
            turns=1,
            output_tokens=5,
            trial_dir=None,
            timings={},
        ),
    )
    assert state.step == 4 and state.trials["t1"].reward == 1.0
    assert state.groups[(4, 2)].counters.captured == 1
    assert decode(json.dumps({"v": 9, "kind": "future.kind", "ts": 1})) is None
    assert decode('{"v":1,"kind":"run.ended","ts":1,"status":"do') is None


def test_long_text_is_clipped():
    state = RunState()
    reduce(
        state,
        ProxyRequest(
            ts=1,
            step=0,
            group=0,
            trial="t",
            api="openai",
            stream=False,
            status=400,
            captured=False,
            error="x" * (MAX_TEXT * 3),
        ),
    )
    turn = state.trials["t"].transcript[0]
    assert turn.error is not None and len(turn.error) < 2100  # the reducer keeps counts and short lines only


def test_memory_stays_flat_over_a_long_run():
    events = list(flood(60_000))
    state = RunState()
    for e in events[:20_000]:
        reduce(state, e)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for e in events[20_000:]:
        reduce(state, e)
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    steps_in_memory = {t.step for t in state.trials.values()}
    assert len(steps_in_memory) <= KEEP_STEPS
    assert grown < 5 << 20, grown  # per-trial detail is evicted; summaries are small


def test_a_failed_group_cancels_its_unfinished_trials(awaiting_events):
    """As the runner: the failing trial ends as AgentError, its siblings send nothing more and
    stop their clocks when the group ends unscored."""
    state = reduce_all(awaiting_events)
    group = state.groups[(1, 2)]
    assert group.ok is False
    trials = [state.trials[t] for t in group.trials]
    failed = [t for t in trials if t.done]
    assert [t.outcome for t in failed] == ["AgentError"] and failed[0].exception_type == "CaptureLost"
    cancelled = [t for t in trials if not t.done]
    assert cancelled and all(t.cancelled and t.ended == group.ended for t in cancelled)
    assert all(t.elapsed(group.ended + 1000) == t.elapsed(group.ended) for t in cancelled)
    assert not any(isinstance(e, TrialEnded) and e.outcome not in set(TrialOutcome) for e in awaiting_events)


def _started(ts, **fields):
    base = dict(
        run_id="r",
        log_path="/run",
        model_name="m",
        base_url=None,
        renderer_name=None,
        total_steps=4,
        groups_per_batch=1,
        group_size=2,
        tasks=["a"],
        config={},
    )
    return RunStarted(ts=ts, **{**base, **fields})


def _train_step(state, step, ts, reward):
    reduce(state, BatchStarted(ts=ts, step=step, groups=[{"group": 0, "task": "a", "trials": 1}]))
    reduce(
        state,
        TrialEnded(
            ts=ts + 5,
            step=step,
            group=0,
            trial=f"t{step}",
            outcome="Submitted",
            scored=True,
            reward=reward,
            turns=1,
            output_tokens=3,
            trial_dir=None,
            timings={},
        ),
    )
    reduce(state, StepMetrics(ts=ts + 9, step=step, metrics={"optim/entropy": 1.0 - step / 10}))


def test_a_resumed_run_keeps_its_trends():
    """A run resumed into the same folder starts again (a second run.started): the reward and
    metric trends, per-task stats and the trained-step count go on."""
    state = RunState()
    reduce(state, _started(0))
    _train_step(state, 0, 10, 0.0)
    _train_step(state, 1, 30, 1.0)
    reduce(state, BatchStarted(ts=50, step=2, groups=[{"group": 0, "task": "a", "trials": 1}]))
    reduce(state, TrialPhaseChanged(ts=51, step=2, group=0, trial="t2", phase="agent"))  # then the process died
    reduce(state, _started(100, run_id="r2", start_step=2))
    assert not state.batch_active and state.trials["t2"].cancelled
    assert [s for s, _, _ in state.reward_trend()] == [0, 1]
    assert len(state.metric(("optim/entropy",))[2]) == 2
    assert state.task_stats["a"].trials == 2 and state.trained_steps == 2
    _train_step(state, 2, 110, 1.0)
    assert [s for s, _, _ in state.reward_trend()] == [0, 1, 2]
    assert state.metric(("optim/entropy",))[2] == pytest.approx([1.0, 0.9, 0.8])
    assert progress_text(state, 120) == "step 2 · 3/4 trained"


def test_held_out_evaluation_is_its_own_phase():
    """evaluation.started/ended mark the held-out evaluation: while it runs the header names it
    instead of a step that has not started; its result is kept once it ends."""
    state = RunState()
    reduce(state, _started(0))
    reduce(state, EvaluationStarted(ts=1, after_updates=0, tasks=2, trials=8))
    assert state.heldout_running_since() == 1 and progress_text(state, 31) == "held-out evaluation 30s · 0/4 trained"
    reduce(state, EvaluationEnded(ts=40, after_updates=0, reward=0.25, trials=8, failed_tasks=0))
    assert state.heldout_running_since() is None and state.last_evaluation.reward == 0.25
    _train_step(state, 0, 40, 0.0)
    assert progress_text(state, 60) == "step 0 · 1/4 trained"
    for step in (1, 2, 3):
        _train_step(state, step, 40 + 20 * step, 1.0)
    reduce(state, EvaluationStarted(ts=109, after_updates=4, tasks=2, trials=8))
    assert state.heldout_running_since() == 109 and state.eta(120) is None  # the final weights
    assert progress_text(state, 120) == "held-out evaluation 11s · 4/4 trained"
    reduce(state, RunEnded(ts=131, status="done", step=4))  # a run that ends mid-evaluation ends it
    assert state.heldout_running_since() is None
    assert reduce_all([_started(0)]).heldout_running_since() is None  # no event, no phase


def test_synthetic_stream_is_deterministic_and_ordered():
    a = [e.to_json() for e in synthetic_run(seed=3)]
    b = [e.to_json() for e in synthetic_run(seed=3)]
    assert a == b
    events = list(synthetic_run(seed=3))
    assert events[0].ts == T0
    kinds = {type(e) for e in events}
    assert {RunStarted, GroupStarted, GroupEnded, TrialPhaseChanged, TrialEnded, ProxyRequest, StepMetrics} <= kinds
    # every line round-trips through the wire format
    for e in events[:50]:
        assert decode(e.to_json()) == dataclasses.replace(e)


def test_fixtures_are_current():
    """The recorded synthetic fixtures match the generator (regenerate with tests/ui/make_fixtures.py)."""
    from tbconsole.synthetic.run import write_jsonl  # noqa: F401 - documents where they come from

    recorded = (FIXTURES / "finished" / "events.jsonl").read_text().splitlines()
    assert recorded == [e.to_json() for e in synthetic_run(error_at=(1, 2), pause_after=0)]


def test_an_evaluation_only_row_updates_metrics_but_completes_no_step():
    """The runner scores the final weights after the last batch: that row reports on N updates
    but trains nothing, so it must not count as a finished step."""
    state = RunState()
    reduce(
        state,
        StepMetrics(step=0, metrics={"progress/batch": 0, "env/all/reward/total": 0.25, "eval/heldout/reward": 0.2}),
    )
    reduce(state, StepMetrics(step=1, metrics={"eval/heldout/reward": 0.9, "eval/heldout/trials": 8}))
    assert state.last_completed == 0 and state.completed_steps == 1
    assert 1 not in state.steps
    assert state.metric(("eval/heldout/reward",))[1:] == (0.9, [0.2, 0.9])
    assert StepMetrics(step=1, metrics={"eval/x": 1.0}).evaluation_only
    assert not StepMetrics(step=1, metrics={"eval/x": 1.0, "loss": 2.0}).evaluation_only
    assert not StepMetrics(step=1, metrics={}).evaluation_only


def test_a_steps_training_cost_comes_from_its_scored_trials_and_forgets_a_retried_attempt():
    """trial.ended's datum figures → the step's datums per trial and token amplification, shown on
    the captures panel's "trained" line; a retried group's earlier attempt no longer counts."""
    from tbconsole.record.events import GroupStarted
    from tbconsole.ui.widgets.base import Palette
    from tbconsole.ui.widgets.captures import trained_line

    palette = Palette(*(["#010101"] * 9))

    def ended(trial: str, datums: int, trained: int, context: int, why: dict) -> TrialEnded:
        return TrialEnded(
            ts=T0, step=0, group=0, trial=trial, outcome=TrialOutcome.SUBMITTED, scored=True, reward=1.0,
            turns=12, output_tokens=100, trial_dir=None, timings={}, datums=datums, trained_tokens=trained,
            context_tokens=context, new_datum=why,
        )  # fmt: skip

    state = RunState()
    reduce(state, GroupStarted(ts=T0, step=0, group=0, task="t", trials=["a", "b"], proxy_url=None))
    reduce(state, ended("a", 12, 39_000, 6_000, {"continuity_off": 11}))
    reduce(state, ended("b", 1, 5_999, 6_000, {}))
    summary = state.steps[0]
    assert summary.datums_per_trial == 6.5 and summary.amplification == pytest.approx(44_999 / 12_000)
    assert summary.new_datum_reasons() == {"continuity_off": 11}
    line = trained_line(state, palette)
    assert line is not None and line.plain == "trained s0  6.50 datum/trial  3.75× tokens"
    # The group is retried under new trial names: the first attempt's figures are forgotten.
    reduce(state, GroupStarted(ts=T0, step=0, group=0, task="t", trials=["a2", "b2"], proxy_url=None))
    assert summary.trial_data == {} and trained_line(state, palette) is None


def test_a_resumed_run_keeps_one_identity_and_one_clock():
    from tbconsole.record.events import RunStarted

    first = list(synthetic_run(steps=3, groups=1, group_size=2, seed=4, stop_after=1, hostile=False))
    full = list(synthetic_run(steps=3, groups=1, group_size=2, seed=4, hostile=False))
    gap = 3600.0  # an hour between the stop and the resume: not run time
    resumed = dataclasses.replace(full[0], run_id="second-id", start_step=2, ts=first[-1].ts + gap)
    rest = [
        dataclasses.replace(e, ts=e.ts + gap)
        for e in full
        if getattr(e, "step", None) == 2 and not isinstance(e, RunStarted)
    ]
    state = reduce_all([*first, resumed, *rest])
    first_span = first[-1].ts - first[0].ts
    second_span = state.ended - resumed.ts
    assert state.elapsed(state.ended + 100) == pytest.approx(first_span + second_span)
    assert state.first_run_id == first[0].run_id and state.run_id == "second-id" and state.starts == 2
    # A start that crashed (no run.ended) counts up to its last event.
    crashed = [e for e in first if not isinstance(e, RunEnded)]
    state = reduce_all([*crashed, resumed])
    assert state.elapsed(resumed.ts + 10) == pytest.approx(crashed[-1].ts - crashed[0].ts + 10)


def test_variants_roll_up_by_family_and_other_tasks_stay_their_own():
    from tbconsole.state import TaskStats, family_stats, task_family

    assert task_family("count-errors-003") == "count-errors" and task_family("fix-git") == "fix-git"
    stats = [
        TaskStats("count-errors-003", trials=8, scored=8, reward_sum=2.0, solved=2, last_mean=0.25, last_step=4),
        TaskStats("count-errors-007", trials=4, scored=4, reward_sum=4.0, solved=4, last_mean=1.0, last_step=4),
        TaskStats("count-errors-011", trials=4, scored=3, reward_sum=0.0, solved=0, last_mean=0.0, last_step=2),
        TaskStats("fix-git", trials=4, scored=4, reward_sum=1.0, solved=1, last_mean=0.25, last_step=3),
    ]
    rolled = {s.task: s for s in family_stats(stats)}
    family = rolled["count-errors"]
    assert (family.trials, family.scored, family.solved, family.mean) == (16, 15, 6, 6.0 / 15)
    assert family.last_step == 4 and family.last_mean == pytest.approx((0.25 + 1.0) / 2)  # only step 4's
    assert rolled["fix-git"] == stats[-1]
