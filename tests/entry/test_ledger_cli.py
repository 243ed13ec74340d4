"""`tbconsole ledger`: the ledger of a recorded real demo run as text, and its actions sent to a
live run's control inbox (a process holding the run's lease stands for its runner)."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tbconsole.record.control import ControlInbox, RunControl
from tbconsole.record.events import GroupEnded, GroupStarted, RunStarted, TrialEnded, decode
from tbconsole.record.runfolder import RunFolder

from tests_support.paths import CORPUS

pytestmark = pytest.mark.e2e


def recorded_run(tmp_path: Path, name: str = "healthy-multi-turn-1") -> Path:
    run = tmp_path / "run"
    run.mkdir()
    with gzip.open(CORPUS / f"{name}.jsonl.gz", "rt") as f, open(run / "events.jsonl", "w") as out:
        for line in f:
            if "fact" not in json.loads(line):
                out.write(line)
    return run


def ledger(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tbconsole", "ledger", *map(str, args)], capture_output=True, text=True
    )


def test_the_text_ledger_puts_the_most_wasted_sandbox_time_first(tmp_path):
    run = recorded_run(tmp_path)
    done = ledger(run)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("40 tasks · sandbox ") and "trained nothing" in lines[0]
    # Independently of the ledger: each task's sandbox time in groups whose rewards were all one.
    events = [decode(line) for line in (run / "events.jsonl").read_text().splitlines()]
    task_of = {(e.step, e.group): e.task for e in events if isinstance(e, GroupStarted)}
    seconds: dict[tuple[int, int], float] = {}
    for e in events:
        if isinstance(e, TrialEnded):
            seconds[(e.step, e.group)] = seconds.get((e.step, e.group), 0.0) + e.timings["total"]
    wasted: dict[str, float] = {}
    for e in events:
        if isinstance(e, GroupEnded) and e.ok and len(set(e.rewards)) == 1:
            task = task_of[(e.step, e.group)]
            wasted[task] = wasted.get(task, 0.0) + seconds[(e.step, e.group)]
    assert lines[2].split()[0] == max(wasted, key=wasted.get)
    families = ledger(run, "--families", "--sort", "name")
    assert [line.split()[0] for line in families.stdout.splitlines()[2:]] == [
        "pointer-count-lines",
        "pointer-sort-unique",
    ]


def test_actions_go_to_a_live_run_and_mistakes_exit_2(tmp_path, hold_lease):
    run = recorded_run(tmp_path)
    events = [decode(line) for line in (run / "events.jsonl").read_text().splitlines()]
    task = next(e for e in events if isinstance(e, RunStarted)).tasks[3]
    refused = ledger(run, "--drop", task)
    assert refused.returncode == 2 and "not live" in refused.stderr
    RunFolder(run).control_inbox.mkdir(parents=True, exist_ok=True)
    hold_lease(run)
    for args, message in [
        (("--drop", "held-out-task"), "not one of the run's training tasks"),
        (("--weight", f"{task}=eleven"), "not a number"),
        (("--weight", f"{task}=11"), "between 0 and 10"),
        (("--weight", "11"), "TASK=W"),
    ]:
        done = ledger(run, *args)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
    assert ledger(run, "--drop", task).returncode == 0
    assert ledger(run, "--weight", f"{task}=2").returncode == 0
    # The runner's side reads them in order, as it would apply them.
    got = []
    control = RunControl(lambda _e: None)
    control.task_commands = lambda command, argument: got.append((command, argument))
    ControlInbox(run, control).poll()
    assert got == [("drop_task", task), ("weight_task", f"{task}=2")]
    missing = ledger(tmp_path / "nowhere")
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr
