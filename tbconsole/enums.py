"""The run's vocabularies, defined once: trial phases, trial outcomes, control states and how a
run ended. They are ``StrEnum``s, so events carry them as plain strings on the wire (old runs'
``events.jsonl`` read back unchanged) while code compares against names, never spellings."""

from __future__ import annotations

from enum import StrEnum


class TrialPhase(StrEnum):
    """Where a trial is, in order (``trial.phase`` events)."""

    QUEUED = "queued"
    ENVIRONMENT = "environment"
    AGENT_SETUP = "agent_setup"
    AGENT = "agent"
    VERIFYING = "verifying"
    DONE = "done"


class TrialOutcome(StrEnum):
    """How a trial ended (``trial.ended``). AGENT_ERROR and CANCELLED are not scored: an
    infrastructure failure, or a trial the user cancelled, is never a reward."""

    SUBMITTED = "Submitted"
    TIME_LIMIT = "TimeLimitExceeded"
    SEQUENCE_LIMIT = "SequenceLengthLimitExceeded"
    OUTPUT_LIMIT = "OutputTokenLimitExceeded"
    AGENT_ERROR = "AgentError"
    CANCELLED = "CancelledByUser"  # cancelled from a console (x): its group raises like any failure

    @property
    def scored(self) -> bool:
        return self not in (TrialOutcome.AGENT_ERROR, TrialOutcome.CANCELLED)


class ControlState(StrEnum):
    """The run's control state (``control.changed``), plus WAITING: a console with no run yet."""

    RUNNING = "running"
    PAUSING = "pausing"
    PAUSED = "paused"
    STOPPING = "stopping"
    ABORTING = "aborting"
    AWAITING_DECISION = "awaiting_decision"
    WAITING = "waiting"


class RunStatus(StrEnum):
    """How a run ended (``run.ended``)."""

    DONE = "done"
    STOPPED = "stopped"
    ABORTED = "aborted"
    FAILED = "failed"


class AdvisorySeverity(StrEnum):
    """How much an advisory matters (``advisory.raised``), least first."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
