"""Trial outcome policy: which Harbor results are scored and which stop the run.

The recipe's rule (seed "Limitations"): a completed trial, an agent timeout, a context-window
overflow and an output-token limit are scored with the verifier's reward. Any other Harbor
failure, a missing or non-finite reward, a capture loss or a sample without log-probs raises:
the group's other trials are cancelled and training stops. Infrastructure errors are never
scored as zero.

What counts as infrastructure here: a model call the gateway could not answer (the proxy's
sampler raised or timed out) makes the whole trial an infrastructure failure, whatever Harbor
reports after it: an agent timeout or error that follows a failed model call is not the
policy's doing. So does a trial of an agent that calls the proxy but made no successful model
call at all (the sandbox could not reach ``{proxy_url}``, or every request was refused), unless
its only call was refused for exceeding the context window (a scored outcome).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SUBMITTED = "Submitted"
TIME_LIMIT = "TimeLimitExceeded"
SEQUENCE_LIMIT = "SequenceLengthLimitExceeded"
OUTPUT_LIMIT = "OutputTokenLimitExceeded"
AGENT_ERROR = "AgentError"

TIME_LIMIT_ERRORS = {"AgentTimeoutError"}
SEQUENCE_LIMIT_ERRORS = {"ContextWindowExceededError", "ContextLengthExceededError", "MaxSeqLenExceededError"}
OUTPUT_LIMIT_ERRORS = {"OutputTokenExceededError", "OutputLengthExceededError"}

# Infrastructure failures the runner itself detects (exception types in events and the modal).
MODEL_CALL_FAILED = "ModelCallFailed"
NO_MODEL_CALL = "NoModelCall"
GATEWAY_DOWN = "GatewayUnavailable"


class TrialFailed(RuntimeError):
    """A trial that must not be scored. Carries what the console's error modal shows."""

    def __init__(self, trial: str, exception_type: str, message: str, trial_dir: str | None):
        super().__init__(f"trial {trial}: {exception_type}: {message}")
        self.trial = trial
        self.exception_type = exception_type
        self.message = message
        self.trial_dir = trial_dir


@dataclass(frozen=True)
class Outcome:
    status: str
    reward: float | None
    exception_type: str | None
    message: str | None

    @property
    def scored(self) -> bool:
        return self.status != AGENT_ERROR


def classify(
    exception_type: str | None,
    exception_message: str | None,
    rewards: dict[str, float] | None,
    reward_key: str,
    *,
    context_refused: bool = False,
    output_limited: bool = False,
) -> Outcome:
    """Map a Harbor trial result to an outcome. ``context_refused``: the proxy refused this
    trial's last request for exceeding its context window; ``output_limited``: the trial's last
    reply stopped at its token limit. Agents report both as an ordinary failure (Codex CLI fails
    its turn on a reply cut at max_output_tokens), so the proxy's word decides."""
    if exception_type is None:
        status = SUBMITTED
    elif exception_type in TIME_LIMIT_ERRORS:
        status = TIME_LIMIT
    elif exception_type in SEQUENCE_LIMIT_ERRORS or (context_refused and exception_type == "NonZeroAgentExitCodeError"):
        status = SEQUENCE_LIMIT
    elif exception_type in OUTPUT_LIMIT_ERRORS or (output_limited and exception_type == "NonZeroAgentExitCodeError"):
        status = OUTPUT_LIMIT
    else:
        return Outcome(AGENT_ERROR, None, exception_type, exception_message)
    reward = (rewards or {}).get(reward_key)
    if reward is None:
        keys = ", ".join(sorted(rewards)) if rewards else "none"
        return Outcome(AGENT_ERROR, None, "MissingReward",
                       f"the verifier gave no '{reward_key}' reward (keys: {keys}) after {status}")
    try:
        value = float(reward)
    except (TypeError, ValueError):
        return Outcome(AGENT_ERROR, None, "InvalidReward", f"reward {reward!r} is not a number")
    if not math.isfinite(value):
        return Outcome(AGENT_ERROR, None, "NonFiniteReward", f"reward is {value}")
    return Outcome(status, value, exception_type, exception_message)


def infrastructure_failure(stats, *, calls_model: bool) -> Outcome | None:
    """The infrastructure failure hidden behind a trial's result, from the proxy's counts for it
    (``TrialStats``), or None. ``calls_model``: the trial's agent is pointed at the proxy."""
    failed = getattr(stats, "sampler_failed", 0)
    if failed:
        last = getattr(stats, "last_sampler_error", None) or "no detail"
        return Outcome(AGENT_ERROR, None, MODEL_CALL_FAILED,
                       f"{failed} of {stats.requests} model call(s) failed at the gateway (last: {last}); "
                       "the agent's result after a failed call is not the policy's doing")
    if calls_model and stats.captured == 0 and not stats.context_refused:
        if stats.requests == 0:
            detail = ("no request reached the capture proxy: check that the sandbox can reach the "
                      "proxy URL (harbor.advertised_host, harbor.listen_host)")
        else:
            detail = (f"{stats.requests} request(s) reached the proxy and none was answered "
                      f"({stats.rejected} refused as invalid, {stats.failed} failed)")
        return Outcome(AGENT_ERROR, None, NO_MODEL_CALL, f"the agent made no successful model call: {detail}")
    return None
