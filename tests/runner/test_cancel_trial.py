"""Cancelling one trial: the control command (validated), the runner's cancel path on real Harbor
trials in the local sandbox (a running trial and a queued one), and the whole flow on the
embedded default driven from the console: a trial hangs in its agent phase, the stalled-trial
advisory fires, x on it (from the advisories screen), confirm, the decision modal, Retry group
(a fresh -r1 attempt), the cancelled trials shown as cancelled in the grid."""

import asyncio
import contextlib
import json
import sys
import time

import pytest

from tbconsole.record.control import ControlClient, ControlError, ControlInbox, RunControl
from tbconsole.record.enums import FailureKind, TrialOutcome, TrialPhase
from tbconsole.record.events import LogLine, TrialEnded
from tbconsole.runner.outcomes import TrialFailed
from tbconsole.runner.rollout import run_group

from tests_support.processes import pids_with
from tests_support.trials import context, ended, group, make_task
from tests_support.waiting import wait_until_async

pytestmark = pytest.mark.e2e

HANG = "sleep 7471"  # the hanging task's command: a marker no other test's process carries


def hanging_task(root, name="hang"):
    """A task whose command never returns: its trials stay in the agent phase (the oracle runs
    solve.sh) until cancelled; its agent timeout is far away."""
    return make_task(root, name, solve=f"{HANG}\n", test="echo 1 > /logs/verifier/reward.txt\n", agent_timeout=3600)


# -- the command -----------------------------------------------------------------------------------


async def test_cancel_trial_is_validated_and_reaches_the_running_trial():
    seen: list = []
    control = RunControl(seen.append)
    cancelled: list[str] = []
    with pytest.raises(ControlError, match="no trial 'x.s0g0t0' is running"):
        control.apply("cancel_trial", "x.s0g0t0")
    with control.trial_running("x.s0g0t0", lambda: cancelled.append("x.s0g0t0")):
        control.apply("cancel_trial", "x.s0g0t0")
    assert cancelled == ["x.s0g0t0"]
    assert any(isinstance(e, LogLine) and "x.s0g0t0" in e.message for e in seen)
    with pytest.raises(ControlError, match="already ended"):
        control.cancel_trial("x.s0g0t0")
    assert cancelled == ["x.s0g0t0"], "a finished trial was cancelled again"


def test_cancel_trial_through_the_control_inbox(tmp_path):
    control = RunControl(lambda e: None)
    errors: list[str] = []
    inbox = ControlInbox(tmp_path, control, on_error=errors.append)
    cancelled: list[str] = []
    client = ControlClient(tmp_path)
    with control.trial_running("t.s0g0t1", lambda: cancelled.append("t.s0g0t1")):
        client.send("cancel_trial", "t.s0g0t1")
        client.send("cancel_trial", "t.s0g0t9")  # unknown: said, nothing happens
        assert inbox.poll() == 2
    assert cancelled == ["t.s0g0t1"]
    assert len(errors) == 1 and "no trial 't.s0g0t9' is running" in errors[0]


# -- the runner ------------------------------------------------------------------------------------


@pytest.mark.root
async def test_a_cancelled_trial_stops_its_sandbox_and_raises_its_group(tmp_path, sandbox_root):
    task = hanging_task(tmp_path)
    ctx, seen = context(tmp_path, sandbox_root)
    running = asyncio.create_task(run_group(ctx, group(task, size=2), sampling_client=None))

    def in_agent() -> list[str]:
        return [e.trial for e in seen if e.kind == "trial.phase" and e.phase == TrialPhase.AGENT]

    await wait_until_async(lambda: len(in_agent()) == 2 and len(pids_with(HANG)) >= 2, "both trials hang", 120)
    target = sorted(in_agent())[1]
    ctx.control.cancel_trial(target)
    with pytest.raises(TrialFailed) as failure:
        await asyncio.wait_for(running, 120)
    assert failure.value.trial == target and failure.value.exception_type == FailureKind.CANCELLED_BY_USER
    assert pids_with(HANG) == [], "a cancelled group left its command running"
    [end] = ended(seen)  # the sibling was cancelled with the group: no trial.ended of its own
    assert (end.trial, end.outcome, end.scored, end.reward) == (target, TrialOutcome.CANCELLED, False, None)
    assert [(e.ok, e.rewards) for e in seen if e.kind == "group.ended"] == [(False, [None, None])]
    with pytest.raises(ControlError, match="already ended"):
        ctx.control.cancel_trial(target)


@pytest.mark.root
async def test_a_queued_trial_is_cancelled_without_a_sandbox(tmp_path, sandbox_root):
    task = hanging_task(tmp_path)
    ctx, seen = context(tmp_path, sandbox_root)
    ctx.max_parallel_trials = 1  # t1 waits for t0's slot
    running = asyncio.create_task(run_group(ctx, group(task, size=2), sampling_client=None))
    await wait_until_async(lambda: len(pids_with(HANG)) == 1, "t0 hangs", 120)
    queued = next(e for e in seen if e.kind == "group.started").trials[1]
    ctx.control.cancel_trial(queued)
    with pytest.raises(TrialFailed) as failure:
        await asyncio.wait_for(running, 120)
    assert failure.value.trial == queued and failure.value.exception_type == FailureKind.CANCELLED_BY_USER
    assert [e.trial for e in ended(seen)] == [queued]
    assert not any(e.kind == "trial.phase" and e.trial == queued and e.phase != TrialPhase.QUEUED for e in seen)
    assert pids_with(HANG) == []


# -- from the console, on the embedded default --------------------------------------------------------


async def wait_for(pilot, predicate, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"still not true after {timeout:g} s: {what}")
        await pilot.pause(0.1)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_cancel_from_the_console_then_retry_group(tmp_path, sandbox_root, monkeypatch):
    from tbconsole.demo import recipe as demo
    from tbconsole.engine.registry import register_with_cookbook
    from tbconsole.record.events import EventBus, read_events
    from tbconsole.runner import train
    from tbconsole.runner.options import parse
    from tbconsole.ui.app import ConsoleApp
    from tbconsole.ui.data.source import BusSource, LocalControls
    from tbconsole.ui.screens.advisories import AdvisoriesScreen
    from tbconsole.ui.screens.confirm import ConfirmScreen
    from tbconsole.ui.screens.decision import DecisionScreen
    from tbconsole.ui.widgets.base import palette_of
    from tbconsole.ui.widgets.trialcells import cell_text

    register_with_cookbook()
    monkeypatch.setenv("TINKER_API_KEY", "tml-local")
    tasks = tmp_path / "tasks"
    hanging_task(tasks)  # group 0 (tasks go in name order)
    # group 1: its agent phases end in a second, the peers the stalled rule compares with
    make_task(tasks, "quick", solve="true\n", test="echo 1 > /logs/verifier/reward.txt\n")
    trial_json = tmp_path / "trial.json"
    trial_json.write_text(
        json.dumps(
            {
                "agent": {"name": "oracle"},
                "environment": {"import_path": "tbconsole.sandbox:LocalSandbox", "kwargs": {"root": str(sandbox_root)}},
            }
        )
    )
    log = tmp_path / "run"
    notified = tmp_path / "notified.jsonl"  # --notify: a real command appending its stdin here
    notify = f"{sys.executable} -c 'import sys; open(sys.argv[1], \"a\").write(sys.stdin.read())' {notified}"
    parsed = demo.materialize(
        parse(
            [
                f"config.log_path={log}",
                "config.max_steps=1",
                "config.dataset_builder.groups_per_batch=2",
                "config.dataset_builder.group_size=2",
                f"config.dataset_builder.tasks_dir={tasks}",
                f"harbor.trial_config={trial_json}",
                "config.max_tokens=64",
                "config.eval_every=0",
                "config.kl_penalty_coef=0",
                f"harbor.notify={notify}",
                "advise.stall_min_peers=2",
                "advise.stall_floor_s=4",
            ],
            demo.demo_defaults(),
        )
    )
    bus = EventBus(log)
    control = RunControl(bus.publish)

    async def work():
        async with demo.embedded_engine(parsed) as for_run:
            return await train.main(for_run, bus, control, decision_timeout=None)

    app = ConsoleApp(source=BusSource(bus), controls=LocalControls(control), mode="live", work=work)
    rang: list[float] = []
    app.bell = lambda: rang.append(time.time())  # observe the bell (a headless terminal has none)

    def trials(attempt: str = "") -> list:  # the hanging group's
        return sorted(
            (t for t in app.state.trials.values() if t.task == "hang" and (t.trial.endswith(attempt) or not attempt)),
            key=lambda t: t.index,
        )

    def stalled() -> dict:
        return {a.trial: a for a in app.state.advisories.values() if a.rule == "stalled" and a.cleared is None}

    def cell(trial: str) -> str:
        return cell_text(app.state.trials[trial], app.now(), 12, palette_of(app)).plain

    try:
        async with app.run_test(size=(140, 40)) as pilot:
            await wait_for(
                pilot,
                lambda: len(trials()) == 2 and all(t.phase == TrialPhase.AGENT for t in trials()),
                "both trials in their agent phase",
                300,
            )
            assert not rang
            sibling, target = (t.trial for t in trials())
            # Two quick agent phases done, then over max(4 s floor, 3 × their median): a stall each.
            await wait_for(pilot, lambda: set(stalled()) == {sibling, target}, "the stalled advisories", 120)
            advice = stalled()[target]
            assert "agent" in advice.message and advice.threshold.startswith("advise.stall_factor=3")
            grid = app.screen.grid
            await pilot.press("v")
            screen = app.screen
            assert isinstance(screen, AdvisoriesScreen)
            ids = [screen.options.get_option_at_index(i).id for i in range(screen.options.option_count)]
            shown = {o: a.key for o, a in screen._by_id.items()}
            screen.options.highlighted = next(i for i, o in enumerate(ids) if shown.get(o) == advice.key)
            await pilot.pause()
            await pilot.press("x")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen), "the decision modal", 120)
            await wait_for(pilot, lambda: not stalled(), "the stalled advisories cleared with their group", 30)
            assert app.screen.error.trial == target and app.screen.error.exception_type == FailureKind.CANCELLED_BY_USER
            assert rang, "the bell did not ring for the decision"
            assert pids_with(HANG) == [], "the cancelled group left its command running"
            # Both show as cancelled: the one cancelled by hand and the sibling its group took along.
            assert cell(target) == "cancel" and cell(sibling) == "cancel"
            # The grid lies under the advisories screen and is brought up to date when shown again.
            grid.show(app.state, app.now())
            row = grid.render_line(1).text  # the hanging group's line as the grid draws it
            assert row.count("cancel") == 2 and "agent" not in row, row
            ends = [
                e
                for e in read_events(log / "events.jsonl")
                if isinstance(e, TrialEnded) and e.trial.startswith("hang.")
            ]
            assert [(e.trial, e.outcome, e.scored, e.reward) for e in ends] == [
                (target, TrialOutcome.CANCELLED, False, None)
            ]

            await pilot.press("r")  # Retry group
            await wait_for(
                pilot,
                lambda: len(trials("-r1")) == 2 and all(t.phase == TrialPhase.AGENT for t in trials("-r1")),
                "the retried group's trials in their agent phase",
                240,
            )
            assert isinstance(app.screen, AdvisoriesScreen)  # back where the cancel started
            await pilot.press("escape")
            assert [t.trial for t in trials()] == [f"{sibling}-r1", f"{target}-r1"]
            assert app.screen.check_action("cancel_trial", ()) is True  # a live trial again: x works

            await pilot.press("a")  # done with it: abort the run (its trials are cancelled)
            await pilot.press("y")
            await wait_for(pilot, lambda: app.work_result is not None, "the run's end", 180)
    finally:
        with contextlib.suppress(ControlError):  # a test that failed midway: end the run
            control.abort()
        bus.close()
    assert app.work_result.status == "aborted"
    assert pids_with(HANG) == []
    events = list(read_events(log / "events.jsonl"))
    assert [e.decision for e in events if e.kind == "decision.made"] == ["retry_group"]
    assert not any(e.kind == "trial.ended" and e.scored and e.trial.startswith("hang.") for e in events)
    told = [json.loads(line) for line in notified.read_text().splitlines()]
    assert [(n["event"], n.get("trial"), n.get("status")) for n in told] == [
        ("decision_needed", target, None),
        ("run_ended", None, "aborted"),
    ]
    assert all(n["log_path"] == str(log) and n["run"] for n in told)
