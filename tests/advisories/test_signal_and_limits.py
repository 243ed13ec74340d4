"""no-signal and limits over the recorded demo run and constructed steps."""

from tbconsole.advisories import Thresholds, replay
from tbconsole.enums import AdvisorySeverity, TrialOutcome

from conftest import cleared, raised


def test_the_recorded_run_warns_of_all_failed_groups_and_cut_replies_and_nothing_else(recorded):
    out = replay(recorded)
    assert {e.rule for e in raised(out)} == {"no-signal", "limits"}
    signal = raised(out, "no-signal")
    assert [e.step for e in signal] == [0, 1]  # once per step: the condition holds in both
    assert all(e.severity == AdvisorySeverity.WARNING for e in signal)
    assert "2 of 2 (100%) groups had no signal (2 all failed)" in signal[0].message
    assert signal[0].threshold == "advise.no_signal_share=0.5" and signal[0].value == 1.0
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
    assert advice.severity == AdvisorySeverity.INFO
    assert "2 all solved" in advice.message and "success" in advice.message


def test_mixed_groups_and_a_minority_of_flat_ones_do_not_fire(stream):
    stream.run_started()
    stream.group(0, 0, [0.0, 1.0, 0.0, 1.0])
    stream.group(0, 1, [0.0, 0.0, 1.0, 0.0])
    stream.group(0, 2, [0.0, 0.0, 0.0, 0.0])  # 1 of 3 flat: under the 0.5 share
    stream.step_end(0)
    assert raised(replay(stream.items)) == []


def test_no_signal_for_steps_in_a_row_is_an_error_and_a_step_with_signal_clears_it(stream):
    stream.run_started()
    for step in range(3):
        stream.group(step, 0, [0.0] * 4)
        stream.group(step, 1, [0.0] * 4)
        stream.step_end(step)
    stream.group(3, 0, [0.0, 1.0, 0.0, 0.0])
    stream.group(3, 1, [1.0, 0.0, 0.0, 1.0])
    stream.step_end(3)
    out = replay(stream.items)
    signal = raised(out, "no-signal")
    assert [(e.step, e.severity) for e in signal] == [(0, "warning"), (1, "warning"), (2, "error")]
    assert "for 3 steps in a row" in signal[-1].message and "no_signal_steps=3" in signal[-1].threshold
    (gone,) = cleared(out, "no-signal")
    assert gone.message == "step 3: 0 of 2 (0%) groups without signal"


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
    out = replay(stream.items)
    by_key = {(e.key, e.step): e for e in raised(out, "limits")}
    # step 0: 2 of 8 timeouts (25%: at the threshold), 1 of 8 overflows (under it)
    assert set(by_key) == {("limits:agent-timeout", 0), ("limits:context-overflow", 1)}
    assert by_key[("limits:agent-timeout", 0)].threshold == "advise.agent_timeout_rate=0.25"
    assert "2 of 8 (25%) trials hit their agent timeout" in by_key[("limits:agent-timeout", 0)].message
    (gone,) = cleared(out, "limits:")
    assert gone.key == "limits:agent-timeout" and gone.message.startswith("step 1: 0 of 8 (0%)")


def test_cut_replies_use_their_own_threshold(stream):
    stream.run_started()
    stream.group(0, 0, [0.0, 1.0, 0.0, 1.0], stop_reason="length")
    stream.group(0, 1, [0.0, 1.0, 0.0, 1.0])
    stream.step_end(0)
    assert [e.key for e in raised(replay(stream.items), "limits")] == ["limits:cut-replies"]  # 50%
    assert raised(replay(stream.items, Thresholds(cut_reply_rate=0.6)), "limits") == []
