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


class NewDatum(StrEnum):
    """Why a captured turn's prompt does not continue an earlier turn's prompt + sampled tokens
    exactly, so that it starts a new training datum (capture lines' ``new_datum``;
    ``tbconsole.proxy.continuity``). A trial's first turn carries none."""

    CONTINUITY_OFF = "continuity_off"  # harbor.token_continuity=false: prompts are the renderer's own
    RENDERER = "renderer"  # the renderer renders whole conversations or stops on text: no splice
    HISTORY_REWRITTEN = "history_rewritten"  # no earlier request of the trial is a prefix of this one
    ECHO_CHANGED = "echo_changed"  # the agent sent back a reply other than the one sampled
    REPEATED = "repeated"  # the same conversation as an earlier request (a retry): a second sample
    CONTEXT_CHANGED = "context_changed"  # the renderer renders an earlier message differently now

    @property
    def describe(self) -> str:
        return _NEW_DATUM_TEXT[self]


_NEW_DATUM_TEXT = {
    NewDatum.CONTINUITY_OFF: "token continuity is off (harbor.token_continuity=false)",
    NewDatum.RENDERER: "the renderer cannot be spliced (it renders whole conversations or stops on text)",
    NewDatum.HISTORY_REWRITTEN: (
        "the agent rewrote its history (truncated, summarised or edited it, or left a reply out) "
        "or began another conversation"
    ),
    NewDatum.ECHO_CHANGED: "the agent sent back a different reply than the one sampled",
    NewDatum.REPEATED: "the agent sent the same conversation again (a retry)",
    NewDatum.CONTEXT_CHANGED: "the renderer renders an earlier message differently once the conversation grows",
}


class SnapshotProblem(StrEnum):
    """Why a reducer snapshot (``tbconsole.state.snapshot``) was not used: the run's events are
    then read from the start."""

    MISSING = "missing"  # no snapshot file, or no events file to tie it to
    DAMAGED = "damaged"  # its header cannot be read
    FORMAT = "format"  # written in another snapshot format
    CODE = "code"  # written by another version of the reducer or the model
    IDENTITY = "identity"  # the events file is another file (device and inode) than the one it covers
    OFFSET = "offset"  # it covers more bytes than the events file holds
    EVENTS = "events"  # the events file's bytes before its offset are not those it covered
    PAYLOAD = "payload"  # the state it holds is cut, altered or cannot be rebuilt
