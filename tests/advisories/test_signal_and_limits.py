"""no-signal and limits over the recorded demo run and constructed steps."""

from tbconsole.advisories import Thresholds, replay
from tbconsole.record import events as ev
from tbconsole.record.enums import LogLevel, TrialOutcome

from tests_support.advisories import cleared, raised


def test_the_recorded_run_warns_of_cut_replies_and_states_its_flat_groups(recorded):
    out = replay(recorded)
    assert {e.rule for e in raised(out) if e.severity != LogLevel.INFO} == {"limits"}
    signal = raised(out, "no-signal")
    assert [(e.step, e.severity) for e in signal] == [(0, "info"), (1, "info")]  # 2 steps: no trend yet
    assert "2 of 2 (100%) groups had no signal (2 all failed)" in signal[0].message
    assert signal[0].threshold == "advise.no_signal_p=0.01" and signal[0].value == 1.0
    limits = raised(out, "limits")
    assert {e.key for e in limits} == {"limits:cut-replies"}  # every trial ended Submitted
    assert "22 of 24 (92%) replies stopped at their max_tokens" in limits[0].message
    assert cleared(out) == []


def test_all_solved_is_success_not_a_warning(stream):
    stream.run_started()
    stream.group(0, 0, [1.0, 1.0, 1.0, 1.0])
    stream.group(0, 1, [1.0, 1.0, 1.0, 1.0])
    stream.step_end(0)
    (advice,) = raised(replay(stream.items), "no-signal")
    assert advice.severity == LogLevel.INFO
    assert "2 all solved" in advice.message and "success" in advice.message


def test_flat_groups_at_a_low_solve_rate_are_chance_info_with_how_likely(stream):
    """The issue's demo: 2 groups of 4 at solve rate ~0.25, a group or two all failed for 3 steps
    in a row, then it learns. P(all failed) = 0.75^4 ≈ 0.32 a group: info, never a warning."""
    stream.run_started()
    for step, (a, b) in enumerate([([0.0] * 4, [0.0, 1.0, 0.0, 1.0]), ([0.0] * 4, [1.0, 0.0, 0.0, 0.0])]):
        stream.group(step, 0, a)
        stream.group(step, 1, b)
        stream.step_end(step)
    stream.group(2, 0, [0.0] * 4)
    stream.group(2, 1, [0.0] * 4)
    stream.step_end(2)
    stream.group(3, 0, [0.0, 1.0, 1.0, 1.0])
    stream.group(3, 1, [1.0, 1.0, 0.0, 1.0])
    stream.step_end(3)
    out = replay(stream.items)
    signal = raised(out, "no-signal")
    assert [(e.step, e.severity) for e in signal] == [(0, "info"), (1, "info"), (2, "info")]
    # at least 1 of 2 groups all the same at p = 0.25: 1 - (1 - 0.75^4 - 0.25^4)^2 = 54%
    assert "1 of 2 (50%) groups had no signal (1 all failed) — 54% likely by chance at the solve rate 0.25" in (
        signal[0].message
    )
    (gone,) = cleared(out, "no-signal")
    assert gone.message == "step 3: every group had a signal"


def test_no_signal_in_every_group_for_the_window_is_an_error_a_step_with_signal_clears_it(stream):
    stream.run_started()
    for step in range(5):
        stream.group(step, 0, [0.0] * 4)
        stream.group(step, 1, [0.0] * 4)
        stream.step_end(step)
    stream.group(5, 0, [0.0, 1.0, 0.0, 0.0])
    stream.group(5, 1, [1.0, 0.0, 0.0, 1.0])
    stream.step_end(5)
    out = replay(stream.items)
    signal = raised(out, "no-signal")
    assert [(e.step, e.severity) for e in signal] == [(0, "info"), (1, "info"), (2, "info"), (3, "info"), (4, "error")]
    error = signal[-1]
    assert "no group of the last 5 steps had a signal (10 groups, 40 trials, none solved)" in error.message
    assert "(at one solved trial a group, p = 0.25: <0.1% likely)" in error.message  # nothing solved yet
    assert error.threshold == "advise.no_signal_p=0.01 over advise.no_signal_steps=5"
    (gone,) = cleared(out, "no-signal")
    assert gone.message == "step 5: every group had a signal"
    # with a 3-step window it is an error after 3 steps
    early = raised(replay(stream.items, Thresholds(no_signal_steps=3)), "no-signal")
    assert [e.step for e in early if e.severity == "error"] == [2]  # raised once while it holds


def test_groups_all_failed_while_the_rest_solve_much_is_a_warning(stream):
    """Clustered failures: half the groups all failed while the others solve most trials, which
    independent trials at the run's solve rate would give less than 1% of the time."""
    stream.run_started()
    for step in range(4):
        stream.group(step, 0, [0.0] * 4, attempt="")
        stream.group(step, 1, [1.0, 1.0, 1.0, 0.0])
        stream.event(ev.GroupStarted, step=step, group=2, task=f"other{step}", trials=[], proxy_url="p")
        stream.event(ev.GroupEnded, step=step, group=2, rewards=[0.0] * 4, ok=True)
        stream.event(ev.GroupStarted, step=step, group=3, task=f"easy{step}", trials=[], proxy_url="p")
        stream.event(ev.GroupEnded, step=step, group=3, rewards=[1.0, 1.0, 0.0, 1.0], ok=True)
        stream.step_end(step)
    warnings = [
        e for e in raised(replay(stream.items), "no-signal") if e.key == "no-signal" and e.severity == "warning"
    ]
    assert warnings and warnings[0].step == 2
    assert "over the last 3 steps 6 of 12 (50%) groups all failed while the run solves 38% of its trials" in (
        warnings[0].message
    )


def test_a_task_all_failed_again_and_again_is_flagged_while_the_run_solves_others(stream):
    stream.run_started()
    for step in range(3):
        stream.group(step, 0, [0.0] * 4)  # task0: never solved
        stream.group(step, 1, [1.0, 0.0, 1.0, 1.0])
        stream.step_end(step)
    stream.group(3, 0, [1.0, 0.0, 0.0, 0.0])
    stream.group(3, 1, [1.0, 0.0, 1.0, 1.0])
    stream.step_end(3)
    out = replay(stream.items)
    task = raised(out, "no-signal")
    flagged = [e for e in task if e.key == "no-signal:task0"]
    # 2 groups all failed at p = 0.375: 0.625^8 = 2.3%, chance; 3 groups: 0.625^12 = 0.4%, not
    assert [(e.step, e.severity) for e in flagged] == [(2, "warning")]
    assert "task0 all failed in its last 3 groups (12 trials) while the run solves 38% of its trials" in (
        flagged[0].message
    )
    assert [e.message for e in cleared(out, "no-signal:task0")] == ["step 3: task0 had a signal again"]


def test_a_failed_attempt_does_not_count_its_retry_does(stream):
    stream.run_started()
    stream.group(0, 0, [0.0, 0.0, 0.0, None], ok=False)  # infrastructure failure: not trained
    stream.group(0, 0, [0.0, 1.0, 1.0, 0.0], attempt="-r1")
    stream.group(0, 1, [0.0, 1.0, 0.0, 0.0])
    stream.step_end(0)
    assert raised(replay(stream.items), "no-signal") == []


def test_limit_rates_per_step_fire_and_clear(stream):
    stream.run_started()
    stream.group(0, 0, [0.0, 1.0, 0.0, 1.0], outcomes=[TrialOutcome.TIME_LIMIT] * 2 + [TrialOutcome.SUBMITTED] * 2)
    stream.group(0, 1, [1.0, 0.0, 0.0, 1.0], outcomes=[TrialOutcome.SEQUENCE_LIMIT] + [TrialOutcome.SUBMITTED] * 3)
    stream.step_end(0)
    stream.group(1, 0, [0.0, 1.0, 0.0, 1.0])
    stream.group(1, 1, [1.0, 0.0, 0.0, 1.0], outcomes=[TrialOutcome.SEQUENCE_LIMIT] * 2 + [TrialOutcome.SUBMITTED] * 2)
    stream.step_end(1)
    stream.group(2, 0, [0.0, 1.0, 0.0, 1.0])
    stream.group(2, 1, [1.0, 0.0, 0.0, 1.0], outcomes=[TrialOutcome.SEQUENCE_LIMIT] * 2 + [TrialOutcome.SUBMITTED] * 2)
    stream.step_end(2)
    out = replay(stream.items)
    by_key = {(e.key, e.step): e for e in raised(out, "limits")}
    # step 0: 2 of 8 timeouts (25%: at the threshold), 1 of 8 overflows (under it); steps 1 and 2:
    # 2 of 8 overflows, the second step in a row a warning
    assert set(by_key) == {
        ("limits:agent-timeout", 0),
        ("limits:context-overflow", 1),
        ("limits:context-overflow", 2),
    }
    once = by_key[("limits:agent-timeout", 0)]
    assert once.severity == "info" and once.message.endswith("one step; a warning if it persists")
    assert once.threshold == "advise.agent_timeout_rate=0.25 in advise.limit_steps=2 steps in a row"
    assert "2 of 8 (25%) trials hit their agent timeout" in once.message
    assert by_key[("limits:context-overflow", 1)].severity == "info"
    twice = by_key[("limits:context-overflow", 2)]
    assert twice.severity == "warning" and "(2 steps in a row)" in twice.message
    (gone,) = cleared(out, "limits:")
    assert gone.key == "limits:agent-timeout" and gone.message.startswith("step 1: 0 of 8 (0%)")


def test_a_limit_hit_in_one_step_between_clean_ones_never_warns(stream):
    """One update that garbles a step's replies (all cut at max_tokens), undone by the next: info."""
    stream.run_started()
    for step in range(6):
        stream.group(step, 0, [0.0, 1.0, 0.0, 1.0], stop_reason="length" if step in (2, 4) else "stop")
        stream.group(step, 1, [0.0, 1.0, 0.0, 1.0], stop_reason="length" if step in (2, 4) else "stop")
        stream.step_end(step)
    out = raised(replay(stream.items), "limits")
    assert [(e.step, e.severity) for e in out] == [(2, "info"), (4, "info")]
    assert raised(replay(stream.items, Thresholds(limit_steps=1)), "limits")[0].severity == "warning"


def test_cut_replies_use_their_own_threshold(stream):
    stream.run_started()
    stream.group(0, 0, [0.0, 1.0, 0.0, 1.0], stop_reason="length")
    stream.group(0, 1, [0.0, 1.0, 0.0, 1.0])
    stream.step_end(0)
    assert [e.key for e in raised(replay(stream.items), "limits")] == ["limits:cut-replies"]  # 50%
    assert raised(replay(stream.items, Thresholds(cut_reply_rate=0.6)), "limits") == []
