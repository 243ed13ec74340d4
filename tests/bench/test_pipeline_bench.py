"""`tbconsole bench pipeline` in parts: the figures read from a run's events, the stream bound, the
trial durations and tasks it generates, and the simulation of the training modes. The bench's
real runs (four headless runs of minutes each) are not run here."""

import argparse
import math
import re

import pytest

from tbconsole.bench import pipeline
from tbconsole.bench.pipeline_model import Durations, Shape, group_trials, project, simulate, spread, trial_duration
from tbconsole.harbor.taskset import CONFIG_FILE
from tbconsole.record.events import (
    BatchEnded,
    GroupDropped,
    GroupStarted,
    GroupTrained,
    StepMetrics,
    TrainingStarted,
    TrialEnded,
    TrialPhaseChanged,
)


def _group(ts, step, task, n=2):
    trials = [f"{task}.s{step}g0t{k}" for k in range(n)]
    return GroupStarted(ts=ts, step=step, group=0, task=task, trials=trials, proxy_url="http://proxy")


def _phase(ts, trial, phase="environment"):
    return TrialPhaseChanged(ts=ts, step=0, group=0, trial=trial, phase=phase)


def _ended(ts, trial, total):
    return TrialEnded(
        ts=ts,
        step=0,
        group=0,
        trial=trial,
        outcome="Submitted",
        scored=True,
        reward=1.0,
        turns=1,
        output_tokens=8,
        trial_dir=None,
        timings={"total": total},
    )


def run_events():
    """Two updates of one group of two trials from t=100 to t=120, then a group still running
    when the run ended (dropped unfinished); the second update trained a group one update stale."""
    return [
        _group(100, 0, "a"),
        _phase(100, "a.s0g0t0", "queued"),
        _phase(100, "a.s0g0t0"),
        _phase(100, "a.s0g0t1"),
        _ended(104, "a.s0g0t0", 4),
        _ended(108, "a.s0g0t1", 8),
        TrainingStarted(ts=108, update=0),
        GroupTrained(ts=108.5, step=0, group=0, update=0, weights=[0]),
        _group(110, 1, "b"),
        _phase(110, "b.s1g0t0"),
        _phase(110, "b.s1g0t1"),
        BatchEnded(ts=110, step=0),
        StepMetrics(ts=110, step=0, metrics={pipeline.REWARD: 0.5}),
        _ended(112, "b.s1g0t0", 2),
        _ended(116, "b.s1g0t1", 6),
        TrainingStarted(ts=116, update=1),
        GroupTrained(ts=116.5, step=1, group=0, update=1, weights=[0]),
        _group(116, 2, "c"),
        _phase(116, "c.s2g0t0"),  # still running at the end: its slot is busy to the wall's end
        BatchEnded(ts=120, step=1),
        StepMetrics(ts=120, step=1, metrics={pipeline.REWARD: 0.0}),
        GroupDropped(ts=121, step=2, group=0, reason="unfinished", update=2, trials=2, sandbox_seconds=5.0, datums=2),
    ]


def test_figures_from_a_runs_events():
    f = pipeline.figures("async K=1", run_events(), slots=2)
    assert (f.updates, f.wall_s) == (2, 20)
    assert f.updates_per_hour == pytest.approx(360)
    assert f.trainer_idle == pytest.approx(1 - (2 + 4) / 20)
    # trial-seconds inside 100..120: 4 + 8 + 2 + 6 + 4 (c's first trial, running at the end) of 2 x 20
    assert f.sampler_idle == pytest.approx(1 - 24 / 40)
    assert f.staleness == [0, 1] and f.mean_staleness == 0.5
    assert (f.dropped_groups, f.dropped_datums, f.dropped_sandbox_s) == (1, 2, 5.0)
    assert f.drop_reasons == {"unfinished": 1}
    assert f.reward == pytest.approx(0.25)
    assert f.trained == {("a", 0), ("a", 1), ("b", 0), ("b", 1)}
    assert f.dropped == {("c", 0), ("c", 1)}
    assert f.steps_s == [10, 10] and f.training_s == [2, 4]


def test_same_trials_is_syncs_less_the_dropped():
    mode = pipeline.figures("async K=1", run_events(), slots=2)
    sync = pipeline.Figures("sync", 2, trained={(t, k) for t in "abc" for k in range(2)})
    assert pipeline.same_trials(mode, sync)
    sync.trained.add(("d", 0))  # sync trained a trial the mode neither trained nor dropped
    assert not pipeline.same_trials(mode, sync)


def test_a_run_without_an_update_has_no_rates():
    f = pipeline.figures("sync", [_group(100, 0, "a")], slots=2)
    assert f.updates == 0 and math.isnan(f.updates_per_hour) and math.isnan(f.trainer_idle)


def test_the_stream_bound_from_syncs_step():
    sync = pipeline.Figures("sync", 2, steps_s=[10.0, 10.0], training_s=[2.0, 4.0])
    with_m, all_hidden = pipeline.stream_bounds(sync, 2)
    assert all_hidden == pytest.approx(10 / 7)  # (S + T) / S, T = 3
    assert with_m == pytest.approx(10 / (7 + 1.5))  # (S + T) / (S + T/M)
    assert 1 < with_m < all_hidden


def test_trial_keys_and_durations():
    assert pipeline.trial_key("count-lines-003.s4g2t1") == ("count-lines-003", 1)
    assert pipeline.trial_key("count-lines-003.s4g2t0-r2") == ("count-lines-003", 0)
    assert pipeline.trial_key("not-a-trial") is None
    d = Durations(median_s=480, sigma=1.0, cap_s=5400)
    assert trial_duration(3, "t", 0, d) == trial_duration(3, "t", 0, d)
    assert trial_duration(3, "t", 0, d) != trial_duration(3, "t", 1, d)
    assert trial_duration(3, "t", 0, d, scale=0.5) == pytest.approx(trial_duration(3, "t", 0, d) / 2)
    many = [trial_duration(0, f"t{i}", 0, d) for i in range(2000)]
    assert max(many) == 5400  # the cap binds in the tail
    assert 380 < sorted(many)[1000] < 600  # about the median


def test_the_sandbox_script_compiles():
    compile(pipeline.sandbox_script(), "<pipeline agent>", "exec")


def test_tasks_and_durations_written(tmp_path):
    plan = pipeline.Plan(updates=2, groups=2, group_size=3, scale=0.01)
    table = pipeline.write_tasks(tmp_path, plan)
    assert len(table) == 4 and all(len(v) == 3 for v in table.values())
    for task, seconds in table.items():
        text = (tmp_path / task / CONFIG_FILE).read_text()
        timeout = float(re.search(r"\[agent\]\ntimeout_sec = ([0-9.]+)", text).group(1))
        assert timeout == pytest.approx(5400 * 0.01 + pipeline.SLACK_S, abs=0.1)
        assert seconds == [trial_duration(0, task, k, plan.durations, 0.01) for k in range(3)]


def test_mode_keys():
    plan = pipeline.Plan(groups=4, minibatches=2)
    keys = pipeline.run_keys(pipeline.Path("/r"), pipeline.Path("/t"), pipeline.Path("/j"), plan, "async1")
    assert "config.async_config.max_steps_off_policy=1" in keys
    assert "config.async_config.groups_per_batch=4" in keys
    stream = pipeline.run_keys(pipeline.Path("/r"), pipeline.Path("/t"), pipeline.Path("/j"), plan, "stream")
    assert "config.stream_minibatch_config.num_minibatches=2" in stream


def _args(**over):
    base = dict(
        updates=4, groups=4, group_size=2, parallel=4, scale=1 / 120, median=480.0, sigma=1.0, cap=5400.0,
        minibatches=2, seed=0,
    )  # fmt: skip
    return argparse.Namespace(**{**base, **over})


def test_bad_sizes_are_refused_with_a_message():
    assert pipeline.plan_from(_args()).slots == 8
    with pytest.raises(SystemExit, match="--groups"):
        pipeline.plan_from(_args(groups=0))
    with pytest.raises(SystemExit, match="multiple of --minibatches"):
        pipeline.plan_from(_args(groups=3))


# -- the simulation --------------------------------------------------------------------------------


def test_a_group_runs_its_trials_parallel_at_a_time():
    assert group_trials([3.0, 1.0, 2.0], 2) == [(0, 3), (0, 1), (1, 3)]


def test_sync_by_hand():
    shape = Shape(groups=2, group_size=2, parallel=1, train_s=5)
    groups = [[1.0, 2.0], [4.0, 1.0], [1.0, 1.0], [1.0, 1.0]]
    r = simulate("sync", groups, shape, updates=2)
    # update 0: groups take 3 and 5 s (one trial at a time), + 5 s training; update 1: 2 s + 5 s
    assert r.wall_s == 17 and r.updates == 2
    assert r.trainer_idle == pytest.approx(1 - 10 / 17)
    assert r.sampler_idle == pytest.approx(1 - 12 / (2 * 17))


def test_equal_trials_and_free_training_leave_nothing_to_hide():
    """Every trial the same and a free training step: no slot waits in either mode, so off-policy
    gains nothing."""
    shape = Shape(groups=4, group_size=8, parallel=4, train_s=0.0)
    results = project(Durations(median_s=600, sigma=0.0), shape, updates=50)
    sync = results[0]
    assert sync.sampler_idle == pytest.approx(0.0, abs=1e-9)
    for r in results[1:]:
        assert r.updates_per_hour == pytest.approx(sync.updates_per_hour)
        assert r.dropped == 0


def test_off_policy_outpaces_sync_on_heavy_tails():
    shape = Shape()
    sync, k1, k2 = project(Durations(median_s=480, sigma=1.2), shape, updates=200, seed=1)
    assert k1.updates_per_hour > sync.updates_per_hour
    assert k2.updates_per_hour > k1.updates_per_hour  # a looser limit drops fewer groups
    assert k2.sampler_idle < sync.sampler_idle
    assert max(k1.staleness) <= 1 and max(k2.staleness) <= 2 and set(sync.staleness) == {0}
    assert k1.dropped > k2.dropped


def test_the_simulation_refuses_too_few_groups():
    with pytest.raises(ValueError, match="need 8 groups"):
        simulate("sync", [[1.0]] * 7, Shape(groups=4, group_size=1), updates=2)
    with pytest.raises(ValueError, match="unknown mode"):
        simulate("stream", [[1.0]] * 8, Shape(groups=4, group_size=1), updates=2)


def test_the_model_on_the_benchs_own_trials():
    plan = pipeline.Plan(updates=2, groups=2, group_size=2, parallel=2)
    table = {"a": [1.0, 9.0], "b": [1.0, 1.0], "c": [1.0, 1.0], "d": [1.0, 1.0]}
    sync = pipeline.Figures("sync", plan.slots, training_s=[1.0, 1.0], order=["a", "b", "c", "d"])
    (line,) = pipeline.model_lines(sync, table, plan)
    # sync: 9 + 1, then 1 + 1 = 12 s. async K=1: b's worker runs c then d while a runs; b and c
    # train at 2..3, then d and a (one update behind: allowed) at 9..10: 10 s, 12 / 10 = 1.2x
    assert line.startswith("the model on these trials (training 1.0 s")
    assert "sync 2 updates 1.00x" in line and "async K=1 2 updates 1.20x" in line


def test_the_spread_of_short_draws_is_wider_than_the_long_runs():
    """A few updates are mostly start and end: their gains scatter around the long run's."""
    shape = Shape(groups=4, group_size=2, parallel=2, train_s=1.2)
    short = {s.k: s for s in spread(Durations(), shape, updates=4, scale=1 / 120, seeds=12)}
    long = {s.k: s for s in spread(Durations(), shape, updates=60, scale=1 / 120, seeds=12)}
    for k in (1, 2):
        assert list(short[k].ratios) == sorted(short[k].ratios) and len(short[k].ratios) == 12
        width = lambda s: s.ratios[-1] - s.ratios[0]  # noqa: E731
        assert width(short[k]) > 2 * width(long[k])
    # K=1 pays for the heavy tail in drops: a long run gains less than K=2 does.
    assert long[1].median < long[2].median
    assert 0 <= long[1].share_at_least(1.0) <= 1 and short[1].share_at_least(0.0) == 1.0


def test_the_verdict_reads_the_long_run_beside_the_draw():
    lines, long_run = pipeline.spread_lines(pipeline.Plan(), train_s=1.2)
    assert len(lines) == 2 and "of draws >= 1.8x" in lines[0] and "100 updates" in lines[1]
    assert f"median {long_run:.2f}x" in lines[1]
