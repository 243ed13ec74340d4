"""Trial outcome policy: which Harbor results are scored and which stop the run.

The recipe's rule (seed "Limitations"): a completed trial, an agent timeout, a context-window
overflow and an output-token limit are scored with the verifier's reward. Any other Harbor
failure, a missing or non-finite reward, a capture loss or a sample without log-probs raises:
the group's other trials are cancelled and training stops. Infrastructure errors are never
scored as zero.
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
) -> Outcome:
    """Map a Harbor trial result to an outcome. ``context_refused``: the proxy refused this
    trial's last request for exceeding its context window (agents report that as an ordinary
    failure, so the proxy's word decides)."""
    if exception_type is None:
        status = SUBMITTED
    elif exception_type in TIME_LIMIT_ERRORS:
        status = TIME_LIMIT
    elif exception_type in SEQUENCE_LIMIT_ERRORS or (context_refused and exception_type == "NonZeroAgentExitCodeError"):
        status = SEQUENCE_LIMIT
    elif exception_type in OUTPUT_LIMIT_ERRORS:
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
