"""The off-policy mode (config.async_config, the cookbook's do_async_training) end to end, on the
Miles gateway's contract (an engine process with --contract miles-next: it serves only its latest
weights and refuses a sampler once newer weights are published; the run finds that out itself,
gateway.latest_weights_only left unset): the whole runner, the demo's policy and agent, real
Harbor trials in the local sandbox.

One run, in two processes' worth of lifetimes, meets what a day-long run meets: a pause and the
engine killed while the first groups run (the outage ridden out, nothing scored, nobody asked; the
groups in flight finish and train while the next batch waits at its gate), a trial cancelled by hand
and its group retried by decision, a clean stop with groups in flight (abandoned, with what they
cost), then the same command resumed to the end. Throughout: no infrastructure failure is scored,
no capture file holds two attempts, no group trains twice, each update trains once, and no turn
is sampled from weights the engine no longer serves (it would refuse the sample: the run would
need a decision, which no one gives but the retry's)."""

import asyncio
import json
import signal
from collections import Counter

import pytest

from tbconsole.proxy import read_capture
from tbconsole.record.capturefile import read_records
from tbconsole.record.enums import Decision, TrialPhase

from tests_support.engine import start_engine
from tests_support.runlog import run_events
from tests_support.waiting import wait_until_async
from tests_support.web import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.slow]

STEPS = 2
# The engine on the Miles gateway's contract, as the SDK installed here can use it.
MILES_NEXT = ("--contract", "miles-next")


async def test_an_off_policy_run_rides_out_the_gateway_retries_a_group_stops_with_groups_in_flight_and_resumes(
    tmp_path, monkeypatch
):
    from tbconsole.demo import recipe as demo
    from tbconsole.engine.registry import register_with_cookbook
    from tbconsole.record.control import ControlError, RunControl
    from tbconsole.record.events import EventBus
    from tbconsole.runner import train
    from tbconsole.runner.options import parse

    register_with_cookbook()
    port, data, log = free_port(), tmp_path / "engine", tmp_path / "run"
    monkeypatch.setenv("TINKER_API_KEY", "tml-local")
    argv = [
        f"config.base_url=http://127.0.0.1:{port}",
        f"config.log_path={log}",
        f"config.max_steps={STEPS}",
        "config.dataset_builder.groups_per_batch=2",
        "config.dataset_builder.group_size=2",
        "config.max_tokens=64",
        "config.eval_every=0",
        "config.kl_penalty_coef=0",
        "gateway.outage_limit=60",  # gateway.latest_weights_only left unset: the run finds it out
        "config.async_config.max_steps_off_policy=1",
        "config.async_config.groups_per_batch=2",
    ]
    engine = start_engine(port, data, *MILES_NEXT)
    try:
        # -- the first process's lifetime: outage, a retried group, a stop with groups in flight --
        bus = EventBus(log)
        control = RunControl(bus.publish)
        parsed = demo.materialize(parse(argv, demo.demo_defaults()))
        running = asyncio.create_task(train.main(parsed, bus, control, decision_timeout=None))

        def alive() -> bool:
            assert not running.done(), running.result()
            return True

        await wait_until_async(lambda: alive() and any(e.kind == "group.started" for e in run_events(log)),
                               "a group started", timeout=180)  # fmt: skip
        control.pause()  # the first batch's groups finish and train; the next batch's wait at its gate
        engine.send_signal(signal.SIGKILL)
        engine.wait()
        await wait_until_async(
            lambda: alive() and any(e.kind == "log" and "runs again once the gateway answers" in e.message
                                    for e in run_events(log)),
            "the outage noticed and ridden out", timeout=90,
        )  # fmt: skip
        assert [e for e in run_events(log) if e.kind == "trial.ended" and e.scored] == [], "scored on a dead engine"
        engine = await asyncio.to_thread(start_engine, port, data, *MILES_NEXT)
        await wait_until_async(
            lambda: alive() and control.state == "paused" and any(e.kind == "batch.ended" for e in run_events(log)),
            "paused, with the groups in flight at the pause trained", timeout=240,
        )  # fmt: skip
        paused = run_events(log)
        held_at = max(i for i, e in enumerate(paused) if e.kind == "control.changed" and e.state == "paused")
        assert not [e for e in paused[held_at:] if e.kind == "group.started"], "a group started while paused"
        assert {e.step for e in paused if e.kind == "group.started"} == {0}, "the next batch passed its gate"
        control.resume()

        # A trial of a group in flight, cancelled by hand: its group needs a decision; retry it.
        cancelled = None

        def cancel_one() -> bool:
            nonlocal cancelled
            ended = {e.trial for e in run_events(log) if e.kind == "trial.ended"}
            for e in reversed(run_events(log)):
                if e.kind == "trial.phase" and e.phase == TrialPhase.AGENT and e.trial not in ended:
                    try:
                        control.cancel_trial(e.trial)
                    except ControlError:  # it ended meanwhile: another
                        continue
                    cancelled = e.trial
                    return True
            return alive() and False

        await wait_until_async(cancel_one, "a running trial to cancel", timeout=120)
        await wait_until_async(lambda: alive() and control.state == "awaiting_decision", "the decision asked for")
        where = "." + cancelled.split(".")[1].split("t")[0] + "t"  # ".s{step}g{group}t"

        def attempts() -> int:
            return sum(1 for e in run_events(log) if e.kind == "group.started" and where in e.trials[0])

        before = attempts()
        control.decide(Decision.RETRY_GROUP)
        await wait_until_async(lambda: alive() and attempts() > before, "the retried group's fresh attempt", timeout=60)
        control.stop()
        stopped = await asyncio.wait_for(running, 240)
        bus.close()
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert left == [], f"the loop's tasks outlived the stopped run: {left}"
        first = run_events(log)
        assert stopped.status == "stopped", stopped
        updates_before = stopped.step
        abandoned = [e for e in first if e.kind == "group.dropped" and e.reason == "abandoned"]
        assert abandoned and all(e.sandbox_seconds > 0 for e in abandoned), "groups in flight at the stop"
        assert [e.decision for e in first if e.kind == "decision.made"] == [Decision.RETRY_GROUP]

        # -- the same command again: resumed from the stop's checkpoint, to the end ----------------
        bus = EventBus(log)
        control = RunControl(bus.publish)
        parsed = demo.materialize(parse(argv, demo.demo_defaults()))
        result = await asyncio.wait_for(train.main(parsed, bus, control, decision_timeout=None), 300)
        bus.close()
    finally:
        engine.kill()
        engine.wait()
    assert result.status == "done", result
    events = run_events(log)
    starts = [i for i, e in enumerate(events) if e.kind == "run.started"]
    assert len(starts) == 2 and events[starts[1]].start_step == updates_before > 0
    found = [e for e in events if e.kind == "log" and "serves only its latest weights" in e.message]
    assert len(found) == 2  # each start asked the gateway, unset as the option was

    # Nothing infrastructure-caused scored: the scored trials all submitted; the cancelled one not.
    ended = [e for e in events if e.kind == "trial.ended"]
    assert all(e.outcome == "Submitted" for e in ended if e.scored)
    assert [e.outcome for e in ended if e.trial == cancelled] == ["CancelledByUser"]

    # Each update trained once, each group at most once, none older than the limit allows; every
    # group abandoned at the stop trained after the resume.
    trained = [e for e in events if e.kind == "group.trained"]
    assert sorted(Counter(e.update for e in trained).items()) == [(u, 2) for u in range(STEPS)]
    assert max(Counter((e.step, e.group) for e in trained).values()) == 1, "a group trained twice"
    assert all(0 <= e.update - e.weights[0] <= 1 for e in trained)
    assert {(e.step, e.group) for e in abandoned} <= {(e.step, e.group) for e in trained}
    metrics = [json.loads(line) for line in (log / "metrics.jsonl").read_text().splitlines()]
    assert sorted(m["step"] for m in metrics if "env/all/reward/total" in m) == list(range(STEPS))

    # One attempt per capture file, and every captured turn names the weights that sampled it.
    files = list((log / "capture").rglob("*.jsonl"))
    assert files
    for path in files:
        turns = read_capture(path)
        assert [t.turn for t in turns] == list(range(len(turns))), f"{path.name} mixes attempts"
        assert all(t.weights is not None for t in turns)
        assert [r.weights for r in read_records(path)] == [t.weights for t in turns]  # as the console reads them
