"""The difficulty ledger (``tbconsole.state.ledger``) over recorded real demo runs (the advisory
corpus) and over hand-made event sequences for what a recording does not hold (a retried group,
a policy skip)."""

from tbconsole.record import events as ev
from tbconsole.record.enums import AdmissionBy, GroupSignal
from tbconsole.state import reduce_all
from tbconsole.state.ledger import family_by_name, signal_of

from tests_support.ledger import group_events, run_started
from tests_support.recorded import corpus_events


def test_a_recorded_run_ledger_adds_up_to_its_groups():
    events = corpus_events("healthy-demo-1")
    state = reduce_all(events)
    ended = {(e.step, e.group): e for e in events if isinstance(e, ev.GroupEnded)}
    started = {(e.step, e.group): e.task for e in events if isinstance(e, ev.GroupStarted)}
    ok = {key: e for key, e in ended.items() if e.ok}
    rows = state.ledger.rows(state.tasks)
    assert [r.name for r in rows[: len(state.tasks)]] == state.tasks
    assert sum(r.groups for r in rows) == len(ok)
    constant = [key for key, e in ok.items() if len(set(e.rewards)) == 1]
    assert sum(r.no_signal_groups for r in rows) == len(constant) > 0
    assert sum(r.solved for r in rows) == sum(sum(1 for x in e.rewards if x >= 1) for e in ok.values())
    # Sandbox time: every training trial's own total, no held-out trial among them.
    totals = [e.timings["total"] for e in events if isinstance(e, ev.TrialEnded)]
    assert abs(sum(r.sandbox_s for r in rows) - sum(totals)) < 1e-6
    wasted = sum(r.no_signal_s for r in rows)
    assert 0 < wasted < sum(r.sandbox_s for r in rows)
    for row in rows:
        if row.groups == 1:  # one group each in a short run: the streak is that group's kind
            [(key, task)] = [(k, t) for k, t in started.items() if t == row.name and k in ok]
            kind = signal_of(ok[key].rewards)
            assert (row.streak, row.streak_signal) == ((0, None) if kind == GroupSignal.MIXED else (1, kind))
    # The demo's variants roll up into their families by the default name rule.
    families = state.ledger.family_rows(state.tasks)
    assert {f.name for f in families} == {"count-lines", "sort-unique"}
    assert sum(f.tasks for f in families) == len(rows)
    assert sum(f.groups for f in families) == len(ok)
    figures = state.ledger.step_figures(0)
    step0 = [e for key, e in ok.items() if key[0] == 0]
    assert figures["ledger/no_signal_group_share"] == sum(len(set(e.rewards)) == 1 for e in step0) / len(step0)


def test_family_by_name():
    assert family_by_name("014-count-lines-100") == "count-lines"
    assert family_by_name("count-errors-003") == "count-errors"
    assert family_by_name("fix-git") == "fix-git"
    assert family_by_name("007") == "007"
    assert family_by_name("fix-git", r"[") == "fix-git"  # a broken rule leaves names alone


def test_streaks_retries_and_admissions():
    events = [
        run_started(["easy", "hard", "fix-git"], {"fix-git": "version-control"}),
        *group_events(0, 0, "easy", [1.0, 1.0]),
        *group_events(0, 1, "hard", [0.0, 1.0]),
        *group_events(1, 0, "easy", [1.0, 1.0]),
        *group_events(1, 1, "hard", [0.0, 0.0], ok=False, seconds=3.0),  # failed: time spent, not scored
        *group_events(1, 1, "hard", [0.0, 0.0]),  # its retry
        ev.TaskAdmission(task="easy", weight=0.0, step=2, by=AdmissionBy.POLICY, reason="solved 2 in a row", until=5),
        *group_events(2, 0, "hard", [0.0, 0.0]),
        *group_events(2, 1, "fix-git", [0.5, 0.5]),
    ]
    state = reduce_all(events)
    rows = {r.name: r for r in state.ledger.rows(state.tasks)}
    easy, hard, git = rows["easy"], rows["hard"], rows["fix-git"]
    assert (easy.streak, easy.streak_signal) == (2, GroupSignal.ALL_SOLVED)
    assert (hard.streak, hard.streak_signal) == (2, GroupSignal.ALL_FAILED)
    assert (git.streak, git.streak_signal) == (1, GroupSignal.CONSTANT)
    assert hard.groups == 3 and hard.scored == 6 and hard.solved == 1
    assert hard.sandbox_s == 2 * 10 + 2 * 3 + 2 * 10 + 2 * 10  # the failed attempt's time counts
    # The retried group taught nothing: its failed attempt's time is part of what it cost.
    assert hard.no_signal_s == 46 and hard.waste_share == 46 / 66
    assert easy.admission.weight == 0 and easy.admission.until == 5 and easy.admission.by == AdmissionBy.POLICY
    assert state.ledger.streak("hard", before=2) == (1, GroupSignal.ALL_FAILED)
    assert git.family == "version-control" and easy.family == "easy"
    assert state.ledger.step_figures(2)["ledger/tasks_out"] == 1
    assert any("easy: dropped from step 2 until step 5" in text for _ts, _level, text in state.logs)


def test_a_state_snapshot_keeps_the_ledger():
    from tbconsole.state.snapshot import decode as restore
    from tbconsole.state.snapshot import encode

    events = corpus_events("healthy-demo-1")
    state = reduce_all([*events, ev.TaskAdmission(task="000-count-lines-074", weight=0.0, step=9, by=AdmissionBy.USER)])
    again = restore(encode(state))
    assert again.ledger.rows(again.tasks) == state.ledger.rows(state.tasks)
    assert again.ledger.changes == state.ledger.changes
    assert again.ledger.streak(state.tasks[0]) == state.ledger.streak(state.tasks[0])
