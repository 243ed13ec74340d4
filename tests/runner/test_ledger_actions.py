"""The difficulty ledger's actions: the schedule (``runner.schedule``), the task commands and the
skip policy (``runner.admission``), and a real run that drops a task, skips another by policy,
stops, and resumes onto the same batches.

The real run uses the soak bench's one-call agent (one model call through the capture proxy from
inside the local sandbox, so every trial has a turn to train on) and the local engine; its tasks'
verifiers decide the rewards: ``a-solved`` always 1, the others 0."""

import asyncio
import json
from pathlib import Path

import pytest

from tbconsole.record.control import ControlError, RunControl
from tbconsole.record.enums import AdmissionBy, ControlCommand
from tbconsole.record.events import BatchStarted, EventBus, GroupEnded, GroupStarted, TaskAdmission, read_events
from tbconsole.runner.admission import LedgerOptions, TaskAdmissions, task_families
from tbconsole.runner.schedule import Change, Schedule, round_robin

from tests_support.trials import make_task

pytestmark = pytest.mark.e2e

# -- the schedule ------------------------------------------------------------------------------


@pytest.mark.parametrize(("tasks", "per_batch", "epochs"), [(40, 8, 1), (89, 32, 3), (5, 8, 4), (7, 3, 2)])
def test_with_no_change_the_batches_are_the_recipes_round_robin(tasks, per_batch, epochs):
    schedule = Schedule(tasks, per_batch, tasks * epochs)
    batches = -(-tasks * epochs // per_batch)
    assert [schedule.batch(i) for i in range(batches)] == [
        list(round_robin(tasks, per_batch, tasks * epochs, i)) for i in range(batches)
    ]


def test_drops_weights_and_readmissions_from_their_batch_on():
    schedule = Schedule(5, 4, 100)
    schedule.add(Change(step=2, task=1, weight=0.0))
    schedule.add(Change(step=3, task=0, weight=2.0))
    schedule.add(Change(step=6, task=1, weight=1.0))
    batches = [schedule.batch(i) for i in range(12)]
    assert batches[:2] == [[0, 1, 2, 3], [4, 0, 1, 2]]  # before any change: the recipe's order
    assert all(1 not in batch for batch in batches[2:6]) and all(len(b) == 4 for b in batches)
    later = [task for batch in batches[6:] for task in batch]
    assert 1 in later  # back
    # Weight 2: task 0 gets twice the groups of a weight-1 task over the batches after it.
    counts = {k: later.count(k) for k in range(5)}
    assert counts[0] == 2 * counts[2] == 2 * counts[3], counts
    # The same changes give the same batches (a resumed run replays them).
    again = Schedule(5, 4, 100)
    for change in schedule.changes:
        again.add(change)
    assert [again.batch(i) for i in range(12)] == batches


def admissions(tasks, **options):
    published = []
    schedule = Schedule(len(tasks), 2, len(tasks) * 50)
    return TaskAdmissions(tasks, schedule, LedgerOptions(**options), published.append), published


def test_task_commands_say_what_is_wrong():
    adm, published = admissions(["a", "b"])
    for command, argument, message in [
        (ControlCommand.DROP_TASK, "held-out-1", "no training task named"),
        (ControlCommand.WEIGHT_TASK, "a", "TASK=WEIGHT"),
        (ControlCommand.WEIGHT_TASK, "a=lots", "not a number"),
        (ControlCommand.WEIGHT_TASK, "a=11", "between 0 and 10"),
        (ControlCommand.READMIT_TASK, "a", "is not dropped"),
    ]:
        with pytest.raises(ControlError, match=message):
            adm.request(command, argument)
    adm.request(ControlCommand.DROP_TASK, "a")
    with pytest.raises(ControlError, match="last one"):
        adm.request(ControlCommand.DROP_TASK, "b")
    assert [(e.task, e.weight, e.step, e.by) for e in published] == [("a", 0.0, 0, AdmissionBy.USER)]
    # Through the run control: a run without a ledger refuses, with the reason.
    control = RunControl(lambda _e: None)
    with pytest.raises(ControlError, match="takes no task changes"):
        control.apply(ControlCommand.DROP_TASK, "a")
    control.task_commands = adm.request
    control.apply(ControlCommand.READMIT_TASK, "a")
    assert published[-1].weight == 1.0


def _group(adm, step, group, task, rewards):
    adm.observe(GroupStarted(step=step, group=group, task=task, trials=["x", "y"], proxy_url="u"))
    adm.observe(GroupEnded(step=step, group=group, rewards=rewards, ok=True))


def test_the_policy_skips_a_streak_and_brings_it_back_for_one_recheck():
    adm, published = admissions(["a", "b"], skip_after=2, skip_steps=3, skip_failed=False)
    adm.open_batch(0)
    _group(adm, 0, 0, "a", [1.0, 1.0])
    _group(adm, 0, 1, "b", [0.0, 0.0])
    adm.open_batch(1)
    _group(adm, 1, 0, "a", [1.0, 1.0])
    _group(adm, 1, 1, "b", [0.0, 0.0])
    assert published == []  # one constant group each so far: not a streak of 2 yet
    adm.open_batch(2)
    [skip] = published
    assert (skip.task, skip.weight, skip.step, skip.until, skip.by) == ("a", 0.0, 2, 5, AdmissionBy.POLICY)
    assert "2 groups in a row all solved" in skip.reason  # b's failures do not count (skip_failed=False)
    for step in (3, 4):
        adm.open_batch(step)
        _group(adm, step, 0, "b", [0.0, 0.0])
    adm.open_batch(5)
    back = published[-1]
    assert (back.task, back.weight, back.step) == ("a", 1.0, 5)
    adm.open_batch(6)  # the re-check group has not run yet: the old streak is no news
    assert published[-1] is back
    _group(adm, 6, 0, "a", [1.0, 1.0])
    adm.open_batch(7)
    assert (published[-1].task, published[-1].weight, published[-1].step) == ("a", 0.0, 7)


def test_families_come_from_task_metadata_else_the_name_rule(tmp_path, tb2_sample):
    plain = make_task(tmp_path, "003-count-lines-017", solve="true\n", test="true\n")
    dirs = [p for p in sorted(tb2_sample.iterdir()) if (p / "task.toml").is_file()] + [plain]
    families = task_families(dirs, LedgerOptions().family_pattern)
    assert families["fix-git"] == "software-engineering"  # TB2's task.toml [metadata] category
    assert families["003-count-lines-017"] == "count-lines"


# -- a real run --------------------------------------------------------------------------------


def tasks(root: Path) -> Path:
    folder = root / "tasks"
    make_task(folder, "a-solved", solve="true\n", test="echo 1 > /logs/verifier/reward.txt\n")
    for name in ("b-failed", "c-failed", "d-failed"):
        make_task(folder, name, solve="true\n", test="echo 0 > /logs/verifier/reward.txt\n")
    return folder


def recipe_args(root: Path, sandbox_root: Path, base_url: str) -> list[str]:
    from tbconsole.bench.soak import trial_config

    trial = root / "trial.json"
    trial.write_text(json.dumps(trial_config(16, sandbox_root)))
    return [
        f"config.base_url={base_url}",
        "config.model_name=tbconsole/qwen3-tiny",
        "config.learning_rate=1e-4",
        "config.max_tokens=16",
        f"config.log_path={root / 'run'}",
        f"config.dataset_builder.tasks_dir={tasks(root)}",
        "config.dataset_builder.groups_per_batch=2",
        "config.dataset_builder.group_size=1",
        "config.dataset_builder.epochs=5",
        "config.max_steps=7",
        "config.save_every=1",
        f"harbor.trial_config={trial}",
        "ledger.skip_after=2",
        "ledger.skip_steps=2",
        "ledger.skip_failed=false",
    ]


async def test_a_run_drops_a_task_skips_a_streak_stops_and_resumes_on_the_same_batches(
    tmp_path, sandbox_root, monkeypatch
):
    from tbconsole.engine.embedded import EmbeddedEngine
    from tbconsole.engine.registry import register_with_cookbook
    from tbconsole.runner import train
    from tbconsole.runner.options import parse

    register_with_cookbook()
    run = tmp_path / "run"
    with EmbeddedEngine(data_dir=str(tmp_path / "engine"), model="tbconsole/qwen3-tiny") as engine:
        monkeypatch.setenv("TINKER_API_KEY", engine.api_key)
        args = recipe_args(tmp_path, sandbox_root, engine.base_url)

        bus = EventBus(run)
        control = RunControl(bus.publish)

        def act(event):  # as a console would: drop d while batch 1 runs, stop while batch 3 runs
            if isinstance(event, BatchStarted) and event.step == 1:
                control.apply(ControlCommand.DROP_TASK, "d-failed")
            if isinstance(event, BatchStarted) and event.step == 3:
                control.stop()

        bus.subscribe(act)
        first = await asyncio.wait_for(train.main(parse(args), bus, control), 300)
        bus.close()
        assert first.status == "stopped", first

        bus = EventBus(run)
        second = await asyncio.wait_for(train.main(parse(args), bus, RunControl(bus.publish)), 300)
        bus.close()
        assert second.status == "done", second

    events = list(read_events(run / "events.jsonl"))
    batches = {e.step: [g["task"] for g in e.groups] for e in events if isinstance(e, BatchStarted)}
    changes = [(e.task, e.weight, e.step, e.by, e.until) for e in events if isinstance(e, TaskAdmission)]
    assert changes == [
        ("d-failed", 0.0, 2, AdmissionBy.USER, None),  # asked for during batch 1: from batch 2
        ("a-solved", 0.0, 3, AdmissionBy.POLICY, 5),  # solved at 0 and 2: out for 2 batches
        ("a-solved", 1.0, 5, AdmissionBy.POLICY, None),  # back for a re-check (after the resume)
        ("a-solved", 0.0, 6, AdmissionBy.POLICY, 8),  # solved again: out again
    ], changes
    assert sorted(batches) == list(range(7))
    assert all("d-failed" not in batches[step] for step in range(2, 7))
    assert all("a-solved" not in batches[step] for step in (3, 4, 6))
    assert "a-solved" in batches[5]
    # The batches are the schedule's for the recorded changes, across the stop and the resume.
    names = ["a-solved", "b-failed", "c-failed", "d-failed"]
    schedule = Schedule(4, 2, 4 * 5)
    for task, weight, step, _by, _until in changes:
        schedule.add(Change(step=step, task=names.index(task), weight=weight))
    assert batches == {step: [names[k] for k in schedule.batch(step)] for step in range(7)}
    # Every batch kept its size: the dropped tasks' share went to the others.
    assert all(len(batches[step]) == 2 for step in range(7))
    # The trained groups ran the batch's tasks.
    trained = {(e.step, e.group): e.task for e in events if isinstance(e, GroupStarted)}
    assert all(trained[(step, g)] == task for step, tasks_ in batches.items() for g, task in enumerate(tasks_))
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    rows = {row["progress/batch"]: row for row in metrics if "progress/batch" in row}
    assert rows[0]["ledger/no_signal_group_share"] == 1.0  # every group: one reward for all its trials
    assert rows[4]["ledger/tasks_out"] == 2.0
