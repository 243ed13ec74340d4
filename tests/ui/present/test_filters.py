"""The trials' filter (``/``): its words, and ``fail`` and ``error`` over every outcome."""

import pytest

from tbconsole.record.enums import TrialOutcome
from tbconsole.record.events import GroupEnded, GroupStarted, GroupTrained, TrialEnded
from tbconsole.state import RunState, reduce, reduce_all
from tbconsole.synthetic.run import synthetic_run
from tbconsole.ui.present.filters import trial_matches


def test_filter_words():
    state = reduce_all(synthetic_run(steps=1, groups=2, group_size=3, hostile=False))
    trials = list(state.trials.values())
    assert all(trial_matches(t, "") for t in trials)
    hello = [t for t in trials if trial_matches(t, "hello")]
    assert hello and all(t.task == "hello-file" for t in hello)
    assert all(t.reward == 1.0 for t in trials if trial_matches(t, "reward=1"))
    assert all(t.reward >= 1 for t in trials if trial_matches(t, "ok"))
    assert not any(trial_matches(t, "no-such-task") for t in trials)


@pytest.mark.parametrize("outcome", list(TrialOutcome))
def test_fail_filter_follows_every_outcome(outcome):
    """`/fail` matches every trial that did not submit: the limit outcomes (time, sequence, output
    tokens), errors and cancelled trials; `/error` only those nothing is trained on (unscored
    outcomes and cancelled trials)."""
    state = RunState()
    reduce(state, GroupStarted(step=0, group=0, task="a", trials=["t", "sibling"], proxy_url="http://p"))
    reduce(
        state,
        TrialEnded(
            step=0,
            group=0,
            trial="t",
            outcome=outcome,
            scored=outcome.scored,
            reward=0.0 if outcome.scored else None,
            turns=1,
            output_tokens=5,
            trial_dir=None,
            timings={},
            exception_type=None if outcome.scored else "ModelCallFailed",
        ),
    )
    assert trial_matches(state.trials["t"], "fail") is (outcome != TrialOutcome.SUBMITTED)
    assert trial_matches(state.trials["t"], "error") is (not outcome.scored)
    assert not trial_matches(state.trials["sibling"], "fail")  # still running
    assert not trial_matches(state.trials["sibling"], "error")
    if not outcome.scored:  # the runner cancels the rest of the group: no trial.ended for them
        reduce(state, GroupEnded(step=0, group=0, rewards=[None, None], ok=False, error="boom"))
        sibling = state.trials["sibling"]
        assert sibling.cancelled and not sibling.done
        assert trial_matches(sibling, "fail") and trial_matches(sibling, "error")
        assert trial_matches(sibling, "cancelled")
        # Only a trial cancelled by the user (x) reads as cancelled itself.
        assert trial_matches(state.trials["t"], "cancelled") is (outcome == TrialOutcome.CANCELLED)


def test_stale_and_fresh_follow_the_update_that_trained_each_group():
    """`/stale` finds the trials an off-policy update trained on older weights, `/stale=N` those
    exactly N updates old, `/fresh` the on-policy ones; a trial not yet trained is neither."""
    state = RunState()
    for group, task in enumerate(("a", "b", "c")):
        reduce(
            state, GroupStarted(step=0, group=group, task=task, trials=[f"{task}0", f"{task}1"], proxy_url="http://p")
        )
    reduce(state, GroupTrained(step=0, group=0, update=0, weights=[0]))
    reduce(state, GroupTrained(step=0, group=1, update=2, weights=[0, 1]))  # a trial ran across an update
    trials = state.trials

    def matching(query):
        return sorted(t for t in trials if trial_matches(trials[t], query))

    assert matching("fresh") == ["a0", "a1"]
    assert matching("stale") == matching("stale=2") == ["b0", "b1"]
    assert matching("stale=1") == matching("stale=x") == []
    assert matching("stale b1") == ["b1"]
    assert "c0" not in matching("fresh") + matching("stale")
