"""The run's vocabularies, defined once: trial phases, trial outcomes, the failures the runner
detects itself, control states, commands and decisions, how a run ended, the runner's lease and
the run's condition, log levels, the console's panels and the timeline's kinds of work. They are
``StrEnum``s, so events and files carry them as plain strings on the wire (old runs'
``events.jsonl`` read back unchanged) while code compares against names, never spellings.

The bottom layer: this module imports nothing from tbconsole."""

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


class FailureKind(StrEnum):
    """Failures the runner itself detects (``exception_type`` of ``trial.ended`` and
    ``error.raised``; Harbor's own exception names are an open set and stay plain strings)."""

    MODEL_CALL_FAILED = "ModelCallFailed"  # the gateway could not answer one of the trial's model calls
    NO_MODEL_CALL = "NoModelCall"  # an agent that calls the proxy made no successful model call
    GATEWAY_DOWN = "GatewayUnavailable"
    CAPTURE_LOST = "CaptureLost"
    MISSING_LOGPROBS = "MissingLogprobs"
    CANCELLED_BY_USER = TrialOutcome.CANCELLED.value  # the user cancelled the trial (cancel_trial)


class ControlState(StrEnum):
    """The run's control state (``control.changed``), plus WAITING: a console with no run yet."""

    RUNNING = "running"
    PAUSING = "pausing"
    PAUSED = "paused"
    STOPPING = "stopping"
    ABORTING = "aborting"
    AWAITING_DECISION = "awaiting_decision"
    WAITING = "waiting"


class ControlCommand(StrEnum):
    """What a console (or ``tbconsole attach``) may ask of a running run (``RunControl.apply``,
    the control inbox's command files)."""

    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"
    ABORT = "abort"
    DECIDE = "decide"  # argument: a Decision
    CANCEL_TRIAL = "cancel_trial"  # argument: the trial id
    # The difficulty ledger's actions, from the next batch on (argument: the task's name; for
    # weight_task "TASK=WEIGHT"). Recorded as task.admission events; a resumed run replays them.
    DROP_TASK = "drop_task"
    READMIT_TASK = "readmit_task"
    WEIGHT_TASK = "weight_task"
    # Off-policy mode only (config.async_config): the most updates a group's weights may lag the
    # update it trains in, lowered live (argument: an integer from 0 up to the configured value).
    # Recorded as an off_policy.limit event; it takes effect from the next update on.
    SET_MAX_STEPS_OFF_POLICY = "set_max_steps_off_policy"


class TrainingMode(StrEnum):
    """How sampling and training take turns (``run.started``'s ``training_mode``;
    ``docs/recipe.md``, *Overlapping sampling and training*)."""

    SYNC = "sync"  # the seed's: a batch samples, then trains; the next batch waits for it
    STREAM = "stream"  # config.stream_minibatch_config: on-policy, a batch trains as its groups return
    ASYNC = "async"  # config.async_config: sampling never waits; groups may be K updates old


class DropReason(StrEnum):
    """Why a group whose trials all ran was never trained (``group.dropped``): sandbox time paid
    for nothing, which the ledger counts as waste."""

    STALE = "stale"  # its weights lagged the update it would train in by more than max_steps_off_policy
    ABANDONED = "abandoned"  # the run stopped (or was killed) before an update took it
    UNFINISHED = "unfinished"  # the run ended before its group could fill a batch


class Decision(StrEnum):
    """What to do about an error that stopped the run (``decision.made``)."""

    ABORT = "abort"
    RETRY_GROUP = "retry_group"


class DecisionBy(StrEnum):
    """Who took a decision (``decision.made``'s ``by``)."""

    CONSOLE = "console"  # someone chose, in a console or with a command file
    HEADLESS_DEFAULT = "headless-default"  # no one to ask: the default, at once
    TIMEOUT_DEFAULT = "timeout-default"  # no one chose in time: the default


class AdmissionBy(StrEnum):
    """Who changed a task's place in the batches (``task.admission``'s ``by``)."""

    USER = "user"  # a console's action or a command file (drop_task, readmit_task, weight_task)
    POLICY = "policy"  # the ledger's skip policy (ledger.skip_after, ledger.skip_steps)


class GroupSignal(StrEnum):
    """What a trained group's rewards teach (the difficulty ledger): all solved and all failed
    are both constant, so the cookbook's advantages are all zero and the group trains nothing."""

    MIXED = "mixed"
    ALL_SOLVED = "all_solved"
    ALL_FAILED = "all_failed"
    CONSTANT = "constant"  # one reward for every trial, neither solved nor failed (partial credit)


class RunStatus(StrEnum):
    """How a run ended (``run.ended``)."""

    DONE = "done"
    STOPPED = "stopped"
    ABORTED = "aborted"
    FAILED = "failed"


class RunnerState(StrEnum):
    """What the runner's lease on its run folder says (``tbconsole.record.lease``)."""

    LIVE = "live"  # a runner holds the folder and beats
    DEAD = "dead"  # the runner died without ending the run (kill -9, power loss, OOM)
    ENDED = "ended"  # the runner ended the run and let go
    NONE = "none"  # no runner ever held this folder (an old run, or not a run folder)


class RunCondition(StrEnum):
    """A run's state in one word (``tbconsole.runs.runlist``). Ended runs read as their ``RunStatus``
    (done, stopped, …), a run whose runner died without ending it as ``RunnerState.DEAD``."""

    LIVE = "live"
    PAUSED = "paused"
    ENDED = "ended"  # the runner ended, but the events do not say how
    UNKNOWN = "unknown"  # no run.ended and no lease: an old run, going on or not


class LogLevel(StrEnum):
    """How much a log line or an advisory matters, least first: a ``log`` event's ``level`` and an
    ``advisory.raised``'s ``severity`` (an advisory is logged at its severity)."""

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


class PanelName(StrEnum):
    """The console's views that redraw when the run's state changes (``RunState.mark_changed``):
    the main screen's panels (their widget ids), the log, the decision modal and the advisories."""

    HEADER = "header"
    GATEWAY = "gateway"
    TRIALS = "trials"
    CAPTURES = "captures"
    REWARDS = "rewards"
    METRICS = "metrics"
    LOG = "log"
    DECISION = "decision"
    ADVISORIES = "advisories"
    LEDGER = "ledger"  # the difficulty ledger (its own screen)


class SpanKind(StrEnum):
    """What a bar on the timeline stands for (``tbconsole.state.timeline``)."""

    QUEUED = "queued"
    ENVIRONMENT = "environment"
    AGENT_SETUP = "agent_setup"
    AGENT = "agent"  # the agent's time outside model calls: its commands in the sandbox
    SAMPLING = "sampling"  # the sampler's part of a model call
    VERIFYING = "verifying"
    TRAINING = "training"
    CHECKPOINT = "checkpoint"
    EVALUATION = "evaluation"


class Share(StrEnum):
    """What the step's wall time went to (the timeline's summary line), one name per kind of work."""

    SAMPLING = "sampling"
    AGENT = "agent"  # the agents' own work between model calls (commands in the sandbox)
    SANDBOXES = "sandboxes"  # starting the environments and setting up the agents
    VERIFIER = "verifier"
    TRAINING = "training"
    EVALUATION = "evaluation"
    IDLE = "idle"  # nothing known ran (trials waiting for a slot, hand-overs)
