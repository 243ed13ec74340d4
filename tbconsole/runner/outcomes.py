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

``judge`` is the one rule for a finished trial: training applies it with what the capture proxy
saw, ``tbconsole trial`` (no proxy) with Harbor's result alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tbconsole.record.enums import FailureKind, TrialOutcome

TIME_LIMIT_ERRORS = {"AgentTimeoutError"}
SEQUENCE_LIMIT_ERRORS = {"ContextWindowExceededError", "ContextLengthExceededError", "MaxSeqLenExceededError"}
OUTPUT_LIMIT_ERRORS = {"OutputTokenExceededError", "OutputLengthExceededError"}
AGENT_EXIT = "NonZeroAgentExitCodeError"  # how agents report a refusal or a cut reply they gave up on
# Failures the runner itself detects (exception types in events and the modal): enums.FailureKind.


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
    status: TrialOutcome
    reward: float | None
    exception_type: str | None
    message: str | None

    @property
    def scored(self) -> bool:
        return self.status.scored


def failure(exception_type: str, message: str | None) -> Outcome:
    """An outcome that is not scored."""
    return Outcome(TrialOutcome.AGENT_ERROR, None, exception_type, message)


def cancelled_by_user() -> Outcome:
    """A trial the user cancelled (``cancel_trial``): not scored, and its group raises."""
    return Outcome(
        TrialOutcome.CANCELLED,
        None,
        FailureKind.CANCELLED_BY_USER,
        "the trial was cancelled by request (its sandbox stopped); the group's other trials were "
        "cancelled too and nothing of the group is scored",
    )


@dataclass(frozen=True)
class Capture:
    """What the capture proxy saw of one trial."""

    stats: Any  # the proxy's TrialStats
    turns: list = field(default_factory=list)  # CapturedTurn, in order
    lost: str | None = None  # why a turn could not be captured (None: none was lost)
    calls_model: bool = True  # the trial's agent is pointed at the proxy


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
        status = TrialOutcome.SUBMITTED
    elif exception_type in TIME_LIMIT_ERRORS:
        status = TrialOutcome.TIME_LIMIT
    elif exception_type in SEQUENCE_LIMIT_ERRORS or (context_refused and exception_type == AGENT_EXIT):
        status = TrialOutcome.SEQUENCE_LIMIT
    elif exception_type in OUTPUT_LIMIT_ERRORS or (output_limited and exception_type == AGENT_EXIT):
        status = TrialOutcome.OUTPUT_LIMIT
    else:
        return failure(exception_type, exception_message)
    reward = (rewards or {}).get(reward_key)
    if reward is None:
        keys = ", ".join(sorted(rewards)) if rewards else "none"
        return failure("MissingReward", f"the verifier gave no '{reward_key}' reward (keys: {keys}) after {status}")
    try:
        value = float(reward)
    except (TypeError, ValueError):
        return failure("InvalidReward", f"reward {reward!r} is not a number")
    if not math.isfinite(value):
        return failure("NonFiniteReward", f"reward is {value}")
    return Outcome(status, value, exception_type, exception_message)


def judge(result: Any, reward_key: str, capture: Capture | None = None) -> Outcome:
    """The outcome of a finished Harbor trial (``TrialResult``): Harbor's exception and the
    verifier's reward, then, when the trial went through the capture proxy, what the proxy saw
    (a lost turn, a sample without log-probs, an infrastructure failure) overrides a score."""
    exc = result.exception_info
    rewards = result.verifier_result.rewards if result.verifier_result else None
    turns = capture.turns if capture is not None else []
    outcome = classify(
        exc.exception_type if exc else None,
        exc.exception_message if exc else None,
        rewards,
        reward_key,
        context_refused=bool(capture is not None and capture.stats.context_refused),
        output_limited=bool(turns) and turns[-1].stop_reason == "length",
    )
    if capture is None or not outcome.scored:
        return outcome
    if capture.lost is not None:
        return failure(FailureKind.CAPTURE_LOST, capture.lost or "a turn was not captured")
    if any(len(t.logprobs) != len(t.output_tokens) for t in turns):
        return failure(FailureKind.MISSING_LOGPROBS, "a sampled turn came without log-probs")
    # Infrastructure wins over whatever Harbor reports after it.
    return infrastructure_failure(capture.stats, calls_model=capture.calls_model) or outcome


def infrastructure_failure(stats: Any, *, calls_model: bool) -> Outcome | None:
    """The infrastructure failure hidden behind a trial's result, from the proxy's counts for it
    (``TrialStats``), or None. ``calls_model``: the trial's agent is pointed at the proxy."""
    failed = stats.sampler_failed
    if failed:
        last = stats.last_sampler_error or "no detail"
        return failure(
            FailureKind.MODEL_CALL_FAILED,
            f"{failed} of {stats.requests} model call(s) failed at the gateway (last: {last}); "
            "the agent's result after a failed call is not the policy's doing",
        )
    if calls_model and stats.captured == 0 and not stats.context_refused:
        if stats.requests == 0:
            detail = (
                "no request reached the capture proxy: check that the sandbox can reach the "
                "proxy URL (harbor.advertised_host, harbor.listen_host)"
            )
        else:
            detail = (
                f"{stats.requests} request(s) reached the proxy and none was answered "
                f"({stats.rejected} refused as invalid, {stats.failed} failed)"
            )
        return failure(FailureKind.NO_MODEL_CALL, f"the agent made no successful model call: {detail}")
    return None
