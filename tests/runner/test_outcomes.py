"""The seed's outcome policy: scored vs raised, never an infrastructure error as zero."""

import math

import pytest

from tbconsole.proxy import TrialStats
from tbconsole.record.enums import FailureKind
from tbconsole.runner.outcomes import classify, infrastructure_failure


@pytest.mark.parametrize(
    "exception, status",
    [
        (None, "Submitted"),
        ("AgentTimeoutError", "TimeLimitExceeded"),
        ("ContextWindowExceededError", "SequenceLengthLimitExceeded"),
        ("OutputTokenExceededError", "OutputTokenLimitExceeded"),
    ],
)
def test_scored_outcomes_use_the_verifier_reward(exception, status):
    outcome = classify(exception, "msg", {"reward": 0.5, "other": 1.0}, "reward")
    assert outcome.status == status and outcome.scored and outcome.reward == 0.5


@pytest.mark.parametrize(
    "exception",
    [
        "EnvironmentStartTimeoutError",
        "NonZeroAgentExitCodeError",
        "VerifierTimeoutError",
        "RuntimeError",
        "CancelledError",
    ],
)
def test_other_failures_raise_even_with_a_reward(exception):
    outcome = classify(exception, "boom", {"reward": 0.0}, "reward")
    assert not outcome.scored and outcome.reward is None and outcome.exception_type == exception


@pytest.mark.parametrize(
    "rewards, kind",
    [
        (None, "MissingReward"),
        ({"score": 1.0}, "MissingReward"),
        ({"reward": math.nan}, "NonFiniteReward"),
        ({"reward": math.inf}, "NonFiniteReward"),
        ({"reward": "yes"}, "InvalidReward"),
    ],
)
def test_missing_or_bad_reward_raises(rewards, kind):
    outcome = classify(None, None, rewards, "reward")
    assert not outcome.scored and outcome.exception_type == kind


def test_reward_key_is_honoured():
    assert classify(None, None, {"score": 0.25}, "score").reward == 0.25


def test_context_refusal_reported_as_agent_exit_is_a_sequence_limit():
    outcome = classify("NonZeroAgentExitCodeError", "exit 1", {"reward": 0.0}, "reward", context_refused=True)
    assert outcome.status == "SequenceLengthLimitExceeded" and outcome.scored


def test_a_failed_model_call_makes_the_trial_an_infrastructure_failure():
    stats = TrialStats(requests=3, captured=2, sampler_failed=1, last_sampler_error="APIConnectionError: refused")
    outcome = infrastructure_failure(stats, calls_model=True)
    assert outcome is not None and not outcome.scored
    assert outcome.exception_type == FailureKind.MODEL_CALL_FAILED and "APIConnectionError" in outcome.message
    # Even for an agent the recipe does not point at the proxy: a failed call is never the policy's.
    assert infrastructure_failure(stats, calls_model=False).exception_type == FailureKind.MODEL_CALL_FAILED


def test_no_successful_model_call_is_an_infrastructure_failure_unless_the_window_refused_it():
    assert infrastructure_failure(TrialStats(), calls_model=True).exception_type == FailureKind.NO_MODEL_CALL
    refused = TrialStats(requests=2, rejected=2)
    assert "2 refused as invalid" in infrastructure_failure(refused, calls_model=True).message
    assert infrastructure_failure(TrialStats(), calls_model=False) is None  # e.g. the oracle agent
    overflow = TrialStats(requests=1, rejected=1, context_refused=1)
    assert infrastructure_failure(overflow, calls_model=True) is None  # scored as SequenceLengthLimitExceeded
    assert infrastructure_failure(TrialStats(requests=4, captured=4), calls_model=True) is None


def test_an_agent_that_gives_up_on_a_reply_cut_at_its_limit_is_an_output_limit():
    """Codex CLI fails its turn when a reply stops at max_output_tokens; Harbor reports a plain
    non-zero exit. The proxy saw the length stop, so it is the scored output-limit outcome."""
    outcome = classify("NonZeroAgentExitCodeError", "exit 1", {"reward": 0.0}, "reward", output_limited=True)
    assert outcome.status == "OutputTokenLimitExceeded" and outcome.scored and outcome.reward == 0.0
    assert not classify("NonZeroAgentExitCodeError", "exit 1", {"reward": 0.0}, "reward").scored
