"""The soak at a small size (`tbconsole bench soak` runs it at 200 steps): a real headless run
(runner, embedded engine, capture proxy, local sandbox, verifier, training) with one-call trials
and `tbconsole attach` beside it. Neither process's memory, open descriptors or threads, nor the
runner's event-loop lag, may grow from the early window to the last; no finished step's file may
be open in the runner at any batch.ended.

At this size the windows are short and the run is young, so the test catches only gross growth:
a leak of a descriptor, a thread or a few MB per step. The allowances are absolute, beside the
10%: the lag's is wide, because on a shared machine any other job moves a step's p95 by hundreds
of ms; it still fails a loop that grows by a second."""

import pytest

from tbconsole.bench import soak

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.slow]

STEPS = 20
EARLY = 12  # its window: steps 10..13, after the engine's caches filled (8 snapshots, 4 merged weights)
WINDOW = 4  # the last window: steps 16..19
TEST_ALLOWANCE = {"runner loop lag p95 ms": 1000.0}


@pytest.mark.timeout(900)
def test_a_run_costs_no_more_per_step_late_than_early(tmp_path, sandbox_root):
    result = soak.soak(tmp_path / "run", STEPS, sandbox_root=sandbox_root, timeout_s=840)
    assert result.status == "done", (result.status, result.message, (tmp_path / "run-runner.out").read_text()[-3000:])
    assert result.runner_exit == 0 and result.console_exit == 0
    assert sorted(result.samples) == list(range(STEPS)) and all(s.ended for s in result.samples.values())
    assert all(s.console for s in result.samples.values()), "the console was not running at every step"
    assert result.console_bytes > 0, "the console drew nothing"

    figures = soak.judge(result, EARLY, WINDOW, allowance=TEST_ALLOWANCE)
    table = soak.report(result, figures, EARLY, WINDOW, soak.BOUND_PCT)
    print(table)
    assert {f.name for f in figures} == set(soak.ALLOWANCE), table
    assert [f.name for f in figures if not f.ok] == [], table
    assert soak.open_step_files(result) == [], table
