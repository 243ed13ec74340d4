"""`tbconsole compare`: two recorded real demo runs with different settings (the one-command demo,
16 of its 20 steps, and the multi-turn demo, finished) compared. The comparison's trends, solve
rates and settings are checked against the recorded events read on their own; the command line's
usage errors exit 2; a run still being written is followed by reading what it gained."""

import gzip
import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

from tbconsole.entry import runs as runs_entry
from tbconsole.entry.main import main
from tbconsole.record.events import BatchStarted, EvaluationEnded, GroupStarted, StepMetrics, TrialEnded, read_events
from tbconsole.runs import compare
from tbconsole.runs.compare import MISSING, RunReading, build, config_diff, flatten, open_runs
from tbconsole.runs.runlist import list_runs
from tbconsole.state import task_family

from tests_support.paths import CORPUS

pytestmark = pytest.mark.timeout(60)

DEMO, MULTI_TURN = "healthy-demo-1", "healthy-multi-turn-1"


def write_run(folder: Path, name: str, lines: int | None = None) -> Path:
    """A run folder whose events.jsonl is a recorded run's events (the corpus' facts left out),
    its first ``lines`` only when given."""
    with gzip.open(CORPUS / f"{name}.jsonl.gz", "rt") as f:
        events = [line for line in f if "kind" in json.loads(line)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "events.jsonl").write_text("".join(events[:lines]))
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("compare")
    return [write_run(root / DEMO, DEMO), write_run(root / MULTI_TURN, MULTI_TURN)]


@pytest.fixture(scope="module")
def comparison(runs):
    readings = open_runs(runs)
    yield build(readings)
    for reading in readings:
        reading.close()


def test_the_settings_diff_holds_exactly_the_keys_that_differ(runs, comparison):
    assert [row.key for row in comparison.config] == [
        "config.base_url",
        "config.dataset_builder.tasks_dir",
        "config.kl_reference_config.base_model",
        "config.log_path",
        "config.model_name",
        "harbor.eval_tasks_dir",
        "harbor.trial_config",
    ]
    started = [next(json.loads(line) for line in open(r / "events.jsonl") if '"run.started"' in line) for r in runs]
    model = next(row for row in comparison.config if row.key == "config.model_name")
    assert model.values == tuple(s["config"]["config"]["model_name"] for s in started)
    assert model.values == ("tbconsole/qwen3-tiny-agent", "tbconsole/qwen3-tiny-agent-mt")
    # Everything else is alike: the learning rate, group size, the advisor's thresholds, ...
    same = flatten(started[0]["config"]).keys() - {row.key for row in comparison.config}
    assert {"config.learning_rate", "harbor.eval_group_size", "advise.kl_max"} <= same


def test_each_trend_is_the_runs_own_metrics_on_one_step_axis(runs, comparison):
    for i, run in enumerate(runs):
        events = list(read_events(run / "events.jsonl"))
        logged = [e for e in events if isinstance(e, StepMetrics)]
        for name, key in [("reward", compare.REWARD), ("kl", compare.KL), ("entropy", compare.ENTROPY)]:
            expected = [(e.step, e.metrics[key]) for e in logged if key in e.metrics]
            assert list(comparison.get(name).points[i]) == expected and expected
        evaluations = [(e.after_updates, e.reward) for e in events if isinstance(e, EvaluationEnded)]
        assert list(comparison.get("heldout").points[i]) == evaluations
        # No time/ metric in these recordings: each trained step's span, batch start to metrics.
        starts = {e.step: e.ts for e in events if isinstance(e, BatchStarted)}
        spans = [(e.step, e.ts - starts[e.step]) for e in logged if not e.evaluation_only]
        assert list(comparison.get("step_time").points[i]) == pytest.approx(spans)
    reward = comparison.get("reward")
    assert reward.steps == list(range(20))  # the union: the demo stopped after 16 of its 20 steps
    assert (reward.at(0, 15), reward.at(0, 16), reward.at(1, 19)) == (0.875, None, 0.75)
    assert comparison.get("heldout").points == (((0, 0.25),), ((0, 0.25), (20, 0.625)))


def test_solve_rates_per_family_side_by_side(runs, comparison):
    table = comparison.tasks
    assert table.by_family  # 014-count-lines-100 and its kind roll up into count-lines
    expected = []
    for run in runs:
        task, solved, scored = {}, defaultdict(int), defaultdict(int)
        for e in read_events(run / "events.jsonl"):
            if isinstance(e, GroupStarted):
                task[(e.step, e.group)] = task_family(e.task)
            elif isinstance(e, TrialEnded) and e.scored and e.reward is not None and math.isfinite(e.reward):
                scored[task[(e.step, e.group)]] += 1
                solved[task[(e.step, e.group)]] += e.reward >= 1
        expected.append({family: (solved[family], scored[family]) for family in scored})
    shown = {row.name: [(c.solved, c.scored) if c else None for c in row.cells] for row in table.rows}
    assert shown == {
        family: [e.get(family) for e in expected] for family in sorted(expected[0].keys() | expected[1].keys())
    }
    assert set(shown) == {"count-lines", "sort-unique", "pointer-count-lines", "pointer-sort-unique"}
    assert [(t.solved, t.scored) for t in table.totals] == [
        tuple(map(sum, zip(*e.values(), strict=True))) for e in expected
    ]


def test_runs_are_told_apart(runs, comparison):
    assert [r.label for r in comparison.runs] == [DEMO, MULTI_TURN]
    assert [(r.trained, r.total_steps, r.condition) for r in comparison.runs] == [(16, 20, "unknown"), (20, 20, "done")]
    assert not comparison.live
    assert compare.run_labels([Path("/a/x/run"), Path("/b/x/run")]) == ["a/x/run", "b/x/run"]


def test_flatten_and_diff_of_missing_and_nested_settings():
    a = {"lr": 1, "harbor": {"group": 4, "notify": None, "extra": {}}, "tags": [1, 2]}
    b = {"lr": 1.0, "harbor": {"group": 4}, "tags": [1, 2]}
    assert flatten(a) == {"lr": 1, "harbor.group": 4, "harbor.notify": None, "harbor.extra": {}, "tags": [1, 2]}
    diff = {row.key: row.values for row in config_diff([a, b])}
    assert diff == {"lr": (1, 1.0), "harbor.notify": (None, MISSING), "harbor.extra": ({}, MISSING)}
    assert config_diff([b, b]) == ()


def test_a_live_run_is_read_on_from_where_it_stopped(tmp_path, runs):
    full = (runs[1] / "events.jsonl").read_text().splitlines(keepends=True)
    growing = tmp_path / "growing"
    write_run(growing, MULTI_TURN, lines=len(full) // 2)
    reading = RunReading.open(growing)
    first = reading.read()
    half = build([reading, reading]).get("reward").points[0]
    with open(growing / "events.jsonl", "a") as f:
        f.writelines(full[len(full) // 2 :])
    assert reading.read() == len(full) - first  # only what the file gained
    reading.close()
    whole = RunReading.open(runs[1])
    whole.read()
    assert 0 < len(half) < 20
    assert build([reading, whole]).get("reward").points[0] == build([whole, whole]).get("reward").points[0]
    assert reading.heldout == whole.heldout == {0: 0.25, 20: 0.625}


def test_the_text_summary_for_scripts(runs, capsys):
    assert main(["compare", str(runs[0]), str(runs[1]), "--text"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "runs"
    assert any(line.split() == ["training", "reward", "(last)", "0.875", "@15", "0.75", "@19"] for line in lines)
    assert any(line.split() == ["count-lines", "40/64", "62%", "–"] for line in lines)
    assert "settings that differ (7)" in lines
    # stdout is no terminal here: the same table without --text
    assert main(["compare", str(runs[0]), str(runs[1])]) == 0
    assert capsys.readouterr().out == out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{a}"], "give 2 to 4 runs to compare (got 1)"),
        (["{a}", "{b}", "{a}/x", "{b}/y", "{a}/z"], "give 2 to 4 runs to compare (got 5)"),
        (["{a}", "{empty}"], "is not a run: give a run folder (the one holding events.jsonl)"),
        (["{a}", "{missing}"], "no such file or folder"),
        (["{a}", "{a}"], "a run is given twice"),
        (["{a}", "{a}/events.jsonl"], "a run is given twice"),
        (["{a}", "{b}", "--screenshot", "{empty}/x.svg", "--size", "big"], "--size 'big': expected COLSxROWS"),
    ],
)
def test_usage_errors_exit_2(runs, tmp_path, capsys, argv, message):
    (tmp_path / "empty").mkdir()
    places = {"a": runs[0], "b": runs[1], "empty": tmp_path / "empty", "missing": tmp_path / "missing"}
    assert main(["compare", *(arg.format(**places) for arg in argv)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tbconsole compare: ") and message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "answer, chosen",
    [("2", [1]), ("1 3", [0, 2]), ("3,1", [2, 0]), (" 1, 2 3 4 ", [0, 1, 2, 3]), ("1 1", None), ("0", None)],
)
def test_marking_runs_at_the_runs_prompt(answer, chosen):
    assert runs_entry.parse_choice(answer, 4) == chosen
    assert runs_entry.parse_choice("1 2 3 4 5", 5) is None  # at most four


def test_runs_prompt_compares_the_marked_runs(runs, tmp_path, monkeypatch, capsys):
    """`tbconsole runs` on a terminal: `2 1` at its prompt opens the comparison of those two runs, in that order."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    answers = iter(["7", "1 1", "2 1"])
    monkeypatch.setattr("builtins.input", lambda prompt: print(prompt) or next(answers))
    opened = []
    monkeypatch.setattr("tbconsole.entry.compare.compare_console", lambda paths, theme: opened.append(paths) or 0)
    assert main(["runs", str(runs[0].parent)]) == 0
    out = capsys.readouterr().out
    listed = [info.path for info in list_runs([runs[0].parent])]  # the table's order: latest event first
    assert [p.name for p in listed] == [DEMO, MULTI_TURN]
    assert opened == [[listed[1], listed[0]]]
    assert out.count("or compare 2-4 of them") == 3
    assert out.count("choose a number from 1 to 2, or 2 to 4 different ones to compare") == 2  # "7", "1 1"
