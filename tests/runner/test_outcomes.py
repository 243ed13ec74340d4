"""The seed's outcome policy: scored vs raised, never an infrastructure error as zero."""

import math

import pytest

from tbconsole.runner.outcomes import classify


@pytest.mark.parametrize("exception, status", [
    (None, "Submitted"),
    ("AgentTimeoutError", "TimeLimitExceeded"),
    ("ContextWindowExceededError", "SequenceLengthLimitExceeded"),
    ("OutputTokenExceededError", "OutputTokenLimitExceeded"),
])
def test_scored_outcomes_use_the_verifier_reward(exception, status):
    outcome = classify(exception, "msg", {"reward": 0.5, "other": 1.0}, "reward")
    assert outcome.status == status and outcome.scored and outcome.reward == 0.5


@pytest.mark.parametrize("exception", ["EnvironmentStartTimeoutError", "NonZeroAgentExitCodeError",
                                       "VerifierTimeoutError", "RuntimeError", "CancelledError"])
def test_other_failures_raise_even_with_a_reward(exception):
    outcome = classify(exception, "boom", {"reward": 0.0}, "reward")
    assert not outcome.scored and outcome.reward is None and outcome.exception_type == exception


@pytest.mark.parametrize("rewards, kind", [(None, "MissingReward"), ({"score": 1.0}, "MissingReward"),
                                           ({"reward": math.nan}, "NonFiniteReward"),
                                           ({"reward": math.inf}, "NonFiniteReward"),
                                           ({"reward": "yes"}, "InvalidReward")])
def test_missing_or_bad_reward_raises(rewards, kind):
    outcome = classify(None, None, rewards, "reward")
    assert not outcome.scored and outcome.exception_type == kind


def test_reward_key_is_honoured():
    assert classify(None, None, {"score": 0.25}, "score").reward == 0.25


def test_context_refusal_reported_as_agent_exit_is_a_sequence_limit():
    outcome = classify("NonZeroAgentExitCodeError", "exit 1", {"reward": 0.0}, "reward", context_refused=True)
    assert outcome.status == "SequenceLengthLimitExceeded" and outcome.scored
