"""The step timeline (tbconsole.state.timeline): spans from a step's events and the cookbook's timing
spans, the split of the wall time, and reading a run's folder one step at a time, incrementally.
The last test reads a real demo run's folder."""

import json

import pytest

from tbconsole.record.enums import Share, SpanKind
from tbconsole.record.events import (
    BatchStarted,
    CheckpointSaved,
    EvaluationEnded,
    EvaluationStarted,
    GroupEnded,
    GroupStarted,
    ProxyRequest,
    RunEnded,
    StepMetrics,
    TrialEnded,
    TrialPhaseChanged,
    read_events,
)
from tbconsole.record.runfolder import RunFolder
from tbconsole.state.timeline import StepCollector, StepReader

T0 = 1_767_225_600.0


def group(step, g, trials, ts, task="hello-file"):
    return GroupStarted(ts=ts, step=step, group=g, task=task, trials=trials, proxy_url="http://127.0.0.1:1")


def phase(step, g, trial, name, ts):
    return TrialPhaseChanged(ts=ts, step=step, group=g, trial=trial, phase=name, task="hello-file")


def call(step, g, trial, end, total_s, sample_s, turn=0):
    return ProxyRequest(
        ts=end,
        step=step,
        group=g,
        trial=trial,
        api="openai",
        stream=False,
        status=200,
        captured=True,
        turn=turn,
        sample_ms=sample_s * 1000,
        total_ms=total_s * 1000,
    )


def ended(step, g, trial, ts, reward=1.0, outcome="Submitted", scored=True):
    return TrialEnded(
        ts=ts,
        step=step,
        group=g,
        trial=trial,
        outcome=outcome,
        scored=scored,
        reward=reward,
        turns=1,
        output_tokens=10,
        trial_dir=None,
        timings={},
    )


def one_trial_step(step=0, t0=T0):
    """One trial: environment 0-10 s, agent setup 10-20, agent 20-60 (a call sampling 30-40),
    verifier 60-70; its group ends at 70, the metrics row comes at 100."""
    trial = f"hello-file.s{step}g0t0"
    return [
        BatchStarted(ts=t0, step=step, groups=[{"group": 0, "task": "hello-file", "trials": 1}]),
        group(step, 0, [trial], t0),
        phase(step, 0, trial, "queued", t0),
        phase(step, 0, trial, "environment", t0),
        phase(step, 0, trial, "agent_setup", t0 + 10),
        phase(step, 0, trial, "agent", t0 + 20),
        call(step, 0, trial, t0 + 40, total_s=11, sample_s=10),
        phase(step, 0, trial, "verifying", t0 + 60),
        ended(step, 0, trial, t0 + 70),
        GroupEnded(ts=t0 + 70, step=step, group=0, rewards=[1.0], ok=True),
        StepMetrics(ts=t0 + 100, step=step, metrics={"progress/batch": step}),
    ]


def collect(events, step=0):
    c = StepCollector(step)
    for e in events:
        c.add(e)
    return c


def test_phases_calls_and_training_from_events():
    tl = collect(one_trial_step()).timeline()
    assert tl is not None and tl.trained and not tl.open and not tl.from_spans
    (row,) = tl.trials
    assert row.label == "g0·t1" and row.outcome == "Submitted" and row.reward == 1.0
    assert [(s.kind, s.start - T0, s.end - T0) for s in row.spans] == [
        (SpanKind.ENVIRONMENT, 0, 10),
        (SpanKind.AGENT_SETUP, 10, 20),
        (SpanKind.AGENT, 20, 60),
        (SpanKind.VERIFYING, 60, 70),
    ]
    assert [(s.start - T0, s.end - T0) for s in row.calls] == [(30, 40)]
    (training,) = tl.training
    assert training.label == "training"
    assert [(s.start - T0, s.end - T0) for s in training.spans] == [(70, 100)]
    assert tl.start == T0 and tl.end == T0 + 100
    assert tl.shares[Share.SANDBOXES] == pytest.approx(20)
    assert tl.shares[Share.SAMPLING] == pytest.approx(10)
    assert tl.shares[Share.AGENT] == pytest.approx(30)
    assert tl.shares[Share.VERIFIER] == pytest.approx(10)
    assert tl.shares[Share.TRAINING] == pytest.approx(30)
    assert tl.summary() == "agent 30% · training 30% · sandboxes 20% · sampling 10% · verifier 10%"


def test_parallel_trials_split_each_moment():
    """Two trials sampling and one in its agent phase at once: 2/3 of that time is sampling."""
    trials = [f"t.s0g0t{k}" for k in range(3)]
    events = [group(0, 0, trials, T0)]
    for k, trial in enumerate(trials):
        events.append(phase(0, 0, trial, "agent", T0))
        if k < 2:
            events.append(call(0, 0, trial, T0 + 30, total_s=30, sample_s=30))
        events.append(ended(0, 0, trial, T0 + 30))
    tl = collect(events).timeline()
    assert tl.shares[Share.SAMPLING] == pytest.approx(20)
    assert tl.shares[Share.AGENT] == pytest.approx(10)
    assert sum(tl.shares.values()) == pytest.approx(tl.duration)


def test_live_step_is_open_until_now_and_idle_counts():
    events = one_trial_step()[:6]  # in the agent phase, nothing after it
    tl = collect(events).timeline(until=T0 + 45)
    assert tl.open and not tl.trained and tl.end == T0 + 45
    agent = tl.trials[0].spans[-1]
    assert agent.kind is SpanKind.AGENT and agent.open and agent.end == T0 + 45
    assert tl.training == []  # its group has not ended: no training yet
    # every group ended, no metrics row yet: training is open until now
    done = [e for e in one_trial_step() if not isinstance(e, StepMetrics)]
    tl = collect(done).timeline(until=T0 + 90)
    assert tl.training[0].spans[0].open and tl.training[0].spans[0].end == T0 + 90


def test_cancelled_trial_ends_with_its_group():
    trials = ["t.s0g0t0", "t.s0g0t1"]
    events = [
        group(0, 0, trials, T0),
        phase(0, 0, trials[0], "agent", T0),
        phase(0, 0, trials[1], "agent", T0),
        ended(0, 0, trials[0], T0 + 5, reward=None, outcome="AgentError", scored=False),
        GroupEnded(ts=T0 + 6, step=0, group=0, rewards=[None, None], ok=False, error="x"),
    ]
    tl = collect(events).timeline(until=T0 + 50)
    failed, cancelled = tl.trials
    assert failed.outcome == "AgentError" and not failed.cancelled
    assert cancelled.cancelled and cancelled.spans[-1].end == T0 + 6 and not cancelled.spans[-1].open


def write(path, events):
    with open(path, "a", encoding="utf-8") as f:
        for e in events:
            f.write(e.to_json() + "\n")


def spans_line(step, spans):
    return json.dumps({"step": step, "spans": spans}) + "\n"


def test_reader_follows_a_growing_file(tmp_path):
    folder = RunFolder(tmp_path)
    step0 = one_trial_step(0)
    write(folder.events, step0[:6])
    with open(folder.events, "a") as f:
        f.write(step0[6].to_json()[:40])  # a line being written: not read until it is whole
    reader = StepReader(folder.events, folder.timing_spans)
    assert reader.refresh() is False
    assert reader.steps == [0]
    reader.select(0)
    tl = reader.timeline(now=T0 + 45)
    assert tl.open and tl.trials[0].calls == []
    with open(folder.events, "a") as f:
        f.write(step0[6].to_json()[40:] + "\n")
    write(folder.events, step0[7:])
    write(folder.events, [CheckpointSaved(ts=T0 + 101, step=1, name="000001", state_path=None, sampler_path=None)])
    reader.refresh()
    tl = reader.timeline(now=T0 + 200)
    assert tl.trained and not tl.open and len(tl.trials[0].calls) == 1
    assert [r.label for r in tl.training] == ["training", "checkpoint"]  # saved after step 0: its own
    assert tl.end == T0 + 101


def test_reader_reads_in_slices_and_moves_between_steps(tmp_path):
    folder = RunFolder(tmp_path)
    write(folder.events, one_trial_step(0) + one_trial_step(1, T0 + 200) + one_trial_step(2, T0 + 400))
    reader = StepReader(folder.events)
    reads = 1
    while reader.refresh(limit=512):
        reads += 1
    assert reads > 3 and reader.steps == [0, 1, 2]
    for step in (2, 0, 1):
        reader.select(step)
        tl = reader.timeline()
        assert tl.step == step and tl.start == T0 + 200 * step and len(tl.trials) == 1
        assert tl.trials[0].trial == f"hello-file.s{step}g0t0"


def test_evaluations_and_run_end(tmp_path):
    """The evaluation before step 1 samples is step 1's; the one after the last step is shown with
    it; an aborted run's open spans end where it ended."""
    folder = RunFolder(tmp_path)
    write(
        folder.events,
        one_trial_step(0)
        + [
            EvaluationStarted(ts=T0 + 110, after_updates=1, tasks=2, trials=4),
            EvaluationEnded(ts=T0 + 150, after_updates=1, reward=0.5, trials=4, failed_tasks=0),
        ]
        + one_trial_step(1, T0 + 200)
        + [
            EvaluationStarted(ts=T0 + 310, after_updates=2, tasks=2, trials=4),
            EvaluationEnded(ts=T0 + 340, after_updates=2, reward=0.5, trials=4, failed_tasks=0),
        ],
    )
    reader = StepReader(folder.events)
    reader.refresh()
    reader.select(0)
    assert [r.label for r in reader.timeline().training] == ["training"]
    reader.select(1)
    tl = reader.timeline()
    evaluation = tl.training[0]
    assert evaluation.label == "evaluation"
    assert [(s.start - T0, s.end - T0) for s in evaluation.spans] == [(110, 150), (310, 340)]
    assert tl.start == T0 + 110 and tl.end == T0 + 340
    assert tl.shares[Share.EVALUATION] == pytest.approx(70)

    aborted = tmp_path / "aborted"
    aborted.mkdir()
    write(RunFolder(aborted).events, one_trial_step(0)[:6] + [RunEnded(ts=T0 + 30, status="aborted", step=0)])
    reader = StepReader(RunFolder(aborted).events)
    reader.refresh()
    reader.select(0)
    tl = reader.timeline(now=T0 + 999)
    assert tl.end == T0 + 30 and tl.trials[0].spans[-1].end == T0 + 30


def test_cookbook_spans_make_the_training_rows(tmp_path):
    """Spans relative to the step's first one, anchored so the last ends at the metrics row;
    the rollout's own spans stay out (the trial rows show them)."""
    folder = RunFolder(tmp_path)
    write(folder.events, one_trial_step(0))
    spans = [
        {"name": "sampling", "duration": 70, "wall_start": 0, "wall_end": 70},
        {"name": "env_step", "duration": 5, "wall_start": 20, "wall_end": 25},
        {"name": "assemble_training_data", "duration": 2, "wall_start": 70, "wall_end": 72},
        {"name": "train_step", "duration": 20, "wall_start": 72, "wall_end": 92},
        {"name": "train/fwd_bwd_substep_0_mb_0_consume", "duration": 15, "wall_start": 73, "wall_end": 88},
        {"name": "train/optim_substep_0_consume", "duration": 3, "wall_start": 88, "wall_end": 91},
        {"name": "save_checkpoint_and_get_sampling_client", "duration": 8, "wall_start": 92, "wall_end": 100},
        {"name": "save_checkpoint", "duration": 6, "wall_start": 93, "wall_end": 99},
    ]
    folder.timing_spans.write_text(spans_line(1, spans[:1]) + spans_line(0, spans))
    reader = StepReader(folder.events, folder.timing_spans)
    reader.refresh()
    reader.select(0)
    tl = reader.timeline()
    assert tl.from_spans
    rows = {r.label: [(s.start - T0, s.end - T0) for s in r.spans] for r in tl.training}
    assert list(rows) == [
        "assemble data",
        "forward-backward",
        "optim step",
        "train step",
        "checkpoint",
        "sampler refresh",
    ]
    assert rows["forward-backward"] == [(73, 88)] and rows["sampler refresh"] == [(92, 100)]
    assert rows["checkpoint"] == [(93, 99)]  # not the sampler refresh that holds it
    assert tl.shares[Share.TRAINING] == pytest.approx(30)  # the union of the training spans: 70-100


def test_bad_lines_are_skipped(tmp_path):
    folder = RunFolder(tmp_path)
    step = one_trial_step(0)
    write(folder.events, step[:3])
    with open(folder.events, "a") as f:
        f.write('{"v":1,"kind":"trial.phase","ts":1,"step":0,"group":0,"trial":"x", broken\n')
        f.write("not json at all\n")
    write(folder.events, step[3:])
    folder.timing_spans.write_text('{"step": 0, "spans": [{"name": 3}]\n{"step": 0, "spans": 7}\n')
    reader = StepReader(folder.events, folder.timing_spans)
    reader.refresh()
    reader.select(0)
    tl = reader.timeline()
    assert [r.trial for r in tl.trials] == ["hello-file.s0g0t0"] and not tl.from_spans


@pytest.mark.e2e
@pytest.mark.root
@pytest.mark.slow
def test_real_demo_run(demo_run):
    """A real run's folder: every trial of every step has a row that starts no earlier than the
    step, runs environment → agent → verifier in order, and holds its model calls; the shares add
    up to the step's wall time."""
    folder = RunFolder(demo_run)
    events = list(read_events(folder.events))
    trials = {(e.step, e.trial) for e in events if isinstance(e, TrialEnded)}
    calls = {}
    for e in events:
        if isinstance(e, ProxyRequest) and e.captured and e.sample_ms:
            calls[e.trial] = calls.get(e.trial, 0) + 1
    reader = StepReader(folder.events, folder.timing_spans)
    while reader.refresh():
        pass
    assert reader.steps == sorted({s for s, _ in trials})
    for step in reader.steps:
        reader.select(step)
        tl = reader.timeline()
        assert tl.trained and not tl.open
        assert {r.trial for r in tl.trials} == {t for s, t in trials if s == step}
        for row in tl.trials:
            kinds = [s.kind for s in row.spans]
            assert kinds.index(SpanKind.ENVIRONMENT) < kinds.index(SpanKind.AGENT) < kinds.index(SpanKind.VERIFYING)
            assert all(tl.start <= s.start <= s.end <= tl.end for s in row.spans)
            assert len(row.calls) == calls.get(row.trial, 0)
            agent = row.spans[kinds.index(SpanKind.AGENT)]
            assert all(agent.start - 1 <= c.start and c.end <= agent.end + 1 for c in row.calls)
        assert sum(tl.shares.values()) == pytest.approx(tl.duration)
        assert tl.shares[Share.SAMPLING] > 0 and tl.shares[Share.TRAINING] > 0
        assert tl.training and (tl.from_spans == folder.timing_spans.exists())
        assert "%" in tl.summary()
