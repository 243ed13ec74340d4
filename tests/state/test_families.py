"""One family rule for every view: a task's family is its task.toml's ``[metadata] category``
where it has one (TB2's categories; the demo's generated tasks carry their family's name), else
its name by ``ledger.family_pattern`` (``state.ledger.family_of``). The runner decides it once
(``task_families`` in run.started) and the ledger's families, the rewards panel, compare and
`tbconsole ledger --families` all read that; a run recorded without it falls back to the name."""

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from tbconsole.demo import recipe as demo
from tbconsole.demo import variants
from tbconsole.entry.main import main
from tbconsole.record import events as ev
from tbconsole.record.events import decode
from tbconsole.runner.admission import LedgerOptions, task_families
from tbconsole.runs.compare import task_table
from tbconsole.state import RunState, family_stats, reduce_all
from tbconsole.state.ledger import family_of

from tests_support.paths import CORPUS

PATTERN = LedgerOptions().family_pattern
# What the README names: the demo trains on count-lines and sort-unique, --multi-turn on the
# pointer-… families.
DEMO_FAMILIES = {"count-lines", "sort-unique"}
MULTI_TURN_FAMILIES = {"pointer-count-lines", "pointer-sort-unique"}


def recorded(name: str) -> list[ev.Event]:
    with gzip.open(CORPUS / f"{name}.jsonl.gz", "rt") as f:
        return [e for line in f if "fact" not in json.loads(line) and (e := decode(line)) is not None]


def materialized(events: list[ev.Event], dest: Path) -> list[Path]:
    """The recorded run's training tasks written again as the demo writes them (its folder names:
    the run's order, then the variant)."""
    [started] = [e for e in events if isinstance(e, ev.RunStarted)]
    return [
        variants.write_task(variants.parse_variant(name.split("-", 1)[1]), dest, folder=name) for name in started.tasks
    ]


def as_recorded_now(events: list[ev.Event], families: dict[str, str]) -> list[ev.Event]:
    """The same run as the runner records it now: its run.started carries the families."""
    return [dataclasses.replace(e, task_families=families) if isinstance(e, ev.RunStarted) else e for e in events]


def views(state: RunState) -> dict[str, set[str]]:
    """The families each view shows for a run."""
    ledger = {row.name for row in state.ledger.family_rows(state.tasks)}
    rewards = {s.task for s in family_stats(list(state.task_stats.values()), state.ledger.family)}
    table = task_table([state])
    return {
        "ledger": ledger,
        "rewards": rewards,
        "compare": {row.name for row in table.rows} if table.by_family else set(),
    }


@pytest.mark.parametrize(
    "name, expected", [("healthy-demo-1", DEMO_FAMILIES), ("healthy-multi-turn-1", MULTI_TURN_FAMILIES)]
)
def test_the_demos_tasks_give_the_families_the_readme_names_in_every_view(name, expected, tmp_path):
    events = recorded(name)
    dirs = materialized(events, tmp_path / "tasks")
    families = task_families(dirs, PATTERN)
    # The family is the task.toml's category (what `tbconsole tasks` shows), not a name rule.
    for task_dir in dirs:
        assert f'category = "{families[task_dir.name]}"' in (task_dir / "task.toml").read_text()
    assert set(families.values()) == expected
    now = reduce_all(as_recorded_now(events, families))
    assert views(now) == {"ledger": expected, "rewards": expected, "compare": expected}
    # A recording made before run.started carried the families reads the same, by the name rule.
    before = reduce_all(events)
    assert not before.ledger.families
    assert views(before) == views(now)


def test_the_ledger_command_lists_the_runs_families(tmp_path, capsys):
    events = recorded("healthy-demo-1")
    families = task_families(materialized(events, tmp_path / "tasks"), PATTERN)
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.jsonl").write_text("".join(e.to_json() + "\n" for e in as_recorded_now(events, families)))
    assert main(["ledger", str(run), "--families"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("2 families · ")
    assert {line.split()[0] for line in lines[2:]} == DEMO_FAMILIES


def test_a_tb2_task_keeps_its_category(tmp_path, tb2_sample):
    dirs = sorted(p for p in tb2_sample.iterdir() if (p / "task.toml").is_file())
    families = task_families(dirs, PATTERN)
    assert families["fix-git"] == "software-engineering"  # its task.toml's [metadata] category
    assert all(family != task for task, family in families.items())  # none falls back to its name
    # Every view groups the run's tasks by those categories.
    events: list[ev.Event] = [
        ev.RunStarted(
            run_id="tb2",
            log_path=str(tmp_path),
            model_name="m",
            base_url=None,
            renderer_name=None,
            total_steps=2,
            groups_per_batch=len(dirs),
            group_size=2,
            tasks=[d.name for d in dirs],
            config={},
            task_families=families,
        )
    ]
    for group, task_dir in enumerate(dirs):
        trials = [f"{task_dir.name}.s0g{group}t{k}" for k in range(2)]
        events.append(ev.GroupStarted(step=0, group=group, task=task_dir.name, trials=trials, proxy_url="http://x"))
        for k, trial in enumerate(trials):
            events.append(
                ev.TrialEnded(
                    step=0,
                    group=group,
                    trial=trial,
                    outcome="Submitted",
                    scored=True,
                    reward=float(k),
                    turns=1,
                    output_tokens=5,
                    trial_dir=None,
                    timings={"total": 10.0},
                )
            )
        events.append(ev.GroupEnded(step=0, group=group, rewards=[0.0, 1.0], ok=True))
    categories = set(families.values())
    assert views(reduce_all(events)) == {"ledger": categories, "rewards": categories, "compare": categories}


def test_the_one_rule():
    assert family_of("014-count-lines-100") == "count-lines"  # no category: the name rule
    assert family_of("014-count-lines-100", "count-lines") == "count-lines"
    assert family_of("fix-git", "software-engineering") == "software-engineering"
    assert family_of("fix-git", "") == "fix-git" and family_of("fix-git", 3) == "fix-git"  # not a category
    assert family_of("a-1", None, r"[") == "a-1"  # a broken name rule leaves names alone
    # Every family the demo generates is its own category.
    for family in variants.FAMILIES:
        assert f'category = "{family}"' in variants.TASK_TOML.format(
            name="n", description="d", family=family, split="train", min_commands=1
        )
    assert set(demo.GENERATED[demo.TRAIN_TASKS]) == DEMO_FAMILIES
    assert set(demo.GENERATED[demo.MULTI_TURN_TASKS]) == MULTI_TURN_FAMILIES
