"""Run control: pause after the batch, resume, stop cleanly, abort, decisions on errors, and
cancelling one running trial (``cancel_trial``).

Two ways in, one state machine:
- in process, the console calls ``RunControl`` methods directly;
- from another process (``tbconsole attach``), ``ControlClient`` drops a command file into
  ``<log_path>/control/inbox/`` (written whole under a hidden temporary name, then renamed, so
  never read half-written) and the runner's ``ControlInbox`` picks it up within a fraction of a
  second.

The runner reports every state change as a ``ControlChanged`` event, so whoever sent the
command sees its effect in the event stream like everyone else.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tbconsole.common import atomic
from tbconsole.record.enums import ControlCommand, ControlState, Decision, DecisionBy, LogLevel, RunStatus
from tbconsole.record.events import ControlChanged, DecisionMade, Event, LogLine
from tbconsole.record.runfolder import RunFolder

COMMANDS = tuple(ControlCommand)
TASK_COMMANDS = (ControlCommand.DROP_TASK, ControlCommand.READMIT_TASK, ControlCommand.WEIGHT_TASK)
DECISIONS = tuple(Decision)
# Once a run has ended (finish), no command applies any more.
ENDED = (RunStatus.DONE, RunStatus.FAILED)


class ControlError(ValueError):
    """A command that does not apply (unknown, or not valid in the current state)."""


class RunControl:
    """The run's control state. All methods are called on the runner's event loop.

    States: running → pausing (finish this batch) → paused → running; stopping (finish and
    train this batch, checkpoint, exit 0); aborting (cancel trials now, keep what was
    captured); awaiting_decision (an error stopped the run until someone chooses); then, once
    the run has ended, done or failed (``finish``).
    """

    def __init__(self, publish: Callable[[Event], None]):
        self._publish = publish
        self.state: ControlState | RunStatus = ControlState.RUNNING
        self._resume = asyncio.Event()
        self._resume.set()
        self._decision: asyncio.Future[str] | None = None
        self._before_decision: ControlState | RunStatus = ControlState.RUNNING
        self.abort_requested = asyncio.Event()
        self.stop_requested = False
        self.stop_event = asyncio.Event()  # set with stop_requested: the off-policy driver waits on it
        self._running_trials: dict[str, Callable[[], None]] = {}  # trial id -> how to cancel it
        self._ended_trials: set[str] = set()
        # The difficulty ledger's task commands (drop_task, readmit_task, weight_task): the
        # runner's ``runner.admission.TaskAdmissions``; None where a run takes none.
        self.task_commands: Callable[[str, str], None] | None = None
        # The off-policy mode's max_steps_off_policy, lowered live (``runner.offpolicy``); None
        # where the run is not off-policy.
        self.off_policy_limit: Callable[[int], None] | None = None

    def _set(self, state: ControlState | RunStatus, reason: str | None = None) -> None:
        self.state = state
        self._publish(ControlChanged(state=state, reason=reason))

    # -- commands ------------------------------------------------------------------------

    def pause(self) -> None:
        if self.state != ControlState.RUNNING:
            raise ControlError(f"cannot pause while {self.state}")
        self._resume.clear()
        self._set(ControlState.PAUSING, "pause after the current batch")

    def resume(self) -> None:
        if self.state not in (ControlState.PAUSING, ControlState.PAUSED):
            raise ControlError(f"nothing to resume while {self.state}")
        self._resume.set()
        self._set(ControlState.RUNNING)

    def stop(self) -> None:
        if self.state in (ControlState.STOPPING, ControlState.ABORTING, *ENDED):
            raise ControlError(f"cannot stop while {self.state}")
        self.stop_requested = True
        self.stop_event.set()
        self._resume.set()  # a paused run must wake up to stop
        self._set(ControlState.STOPPING, "stop after the current batch is trained")

    def abort(self) -> None:
        if self.state in (ControlState.ABORTING, *ENDED):
            raise ControlError(f"cannot abort while {self.state}")
        self.abort_requested.set()
        self._resume.set()
        if self._decision is not None and not self._decision.done():
            self._decision.set_result(Decision.ABORT)
        self._set(ControlState.ABORTING, "abort requested")

    def decide(self, decision: str) -> None:
        if decision not in DECISIONS:
            raise ControlError(f"unknown decision {decision!r}; choose one of {', '.join(DECISIONS)}")
        if self._decision is None or self._decision.done():
            raise ControlError("no decision is pending")
        self._decision.set_result(decision)

    def cancel_trial(self, trial: str) -> None:
        """Cancel one running (or queued) trial: its sandbox is stopped and it ends as cancelled
        by the user, never scored; its group then raises like any infrastructure failure."""
        if self.state in (ControlState.ABORTING, *ENDED):
            raise ControlError(f"cannot cancel a trial while {self.state}")
        cancel = self._running_trials.get(trial)
        if cancel is None:
            if trial in self._ended_trials:
                raise ControlError(f"trial {trial} has already ended: nothing to cancel")
            raise ControlError(f"no trial {trial!r} is running")
        self._publish(LogLine(level=LogLevel.WARNING, message=f"trial {trial}: cancelling (requested)"))
        cancel()

    def change_task(self, command: str, argument: str) -> None:
        """A training task's place in the batches, from the next batch on (``drop_task TASK``,
        ``readmit_task TASK``, ``weight_task TASK=WEIGHT``); recorded as a task.admission event."""
        if self.state in (ControlState.ABORTING, ControlState.STOPPING, *ENDED):
            raise ControlError(f"no batch comes after this one while {self.state}")
        if self.task_commands is None:
            raise ControlError("this run takes no task changes")
        if not argument:
            raise ControlError(f"{command} needs a task name")
        self.task_commands(command, argument)

    def set_max_steps_off_policy(self, argument: str) -> None:
        """Lower the off-policy mode's max_steps_off_policy from the next update on (recorded as
        an off_policy.limit event)."""
        if self.state in (ControlState.ABORTING, *ENDED):
            raise ControlError(f"no update comes after this one while {self.state}")
        if self.off_policy_limit is None:
            raise ControlError("this run is not off-policy (config.async_config is unset)")
        try:
            limit = int(argument.strip())
        except ValueError:
            raise ControlError(f"set_max_steps_off_policy needs a whole number of updates, not {argument!r}") from None
        self.off_policy_limit(limit)

    def apply(self, command: str, argument: str | None = None) -> None:
        """Dispatch a command by name (the control inbox and the console's palette)."""
        if command not in COMMANDS:
            raise ControlError(f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
        if command == ControlCommand.DECIDE:
            self.decide(argument or "")
        elif command == ControlCommand.CANCEL_TRIAL:
            self.cancel_trial(argument or "")
        elif command in TASK_COMMANDS:
            self.change_task(command, argument or "")
        elif command == ControlCommand.SET_MAX_STEPS_OFF_POLICY:
            self.set_max_steps_off_policy(argument or "")
        else:
            getattr(self, command)()

    # -- what the runner tells it ----------------------------------------------------------

    @contextmanager
    def trial_running(self, trial: str, cancel: Callable[[], None]) -> Iterator[None]:
        """While the block runs, ``cancel_trial(trial)`` calls ``cancel`` (on the runner's loop)."""
        self._running_trials[trial] = cancel
        try:
            yield
        finally:
            self._running_trials.pop(trial, None)
            self._ended_trials.add(trial)

    # -- what the runner awaits ------------------------------------------------------------

    async def batch_boundary(self) -> bool:
        """Called before each batch starts. Waits while paused; False means: do not start it
        (stop or abort was requested)."""
        if self.state == ControlState.PAUSING:
            self._set(ControlState.PAUSED, "paused after the batch")
        await self._resume.wait()
        return not (self.stop_requested or self.abort_requested.is_set())

    async def ask(self, step: int | None, group: int | None, default: str, timeout: float | None) -> str:
        """Wait for a decision on a raised error. With no one to ask (timeout 0, headless),
        the default is taken at once. Groups that fail while a decision is pending (a gateway
        outage fails every group in flight) share that one decision."""
        loop = asyncio.get_running_loop()
        pending = self._decision
        decided_by = DecisionBy.CONSOLE
        if pending is None or pending.done():
            pending = self._decision = loop.create_future()
            awaiting = self.state == ControlState.AWAITING_DECISION
            self._before_decision = ControlState.RUNNING if awaiting else self.state
            if timeout == 0:
                pending.set_result(default)
                decided_by = DecisionBy.HEADLESS_DEFAULT
            else:
                self._set(
                    ControlState.AWAITING_DECISION,
                    f"an error needs a decision: {Decision.ABORT} or {Decision.RETRY_GROUP}",
                )
        try:
            decision = await asyncio.wait_for(asyncio.shield(pending), timeout)
        except TimeoutError:
            decision, decided_by = default, DecisionBy.TIMEOUT_DEFAULT
            if not pending.done():
                pending.set_result(default)
        if self._decision is pending:
            self._decision = None
        self._publish(DecisionMade(step=step, group=group, decision=decision, by=decided_by))
        if decision == Decision.RETRY_GROUP and self.state == ControlState.AWAITING_DECISION:
            self._set(self._before_decision)
        return decision

    def finish(self, state: RunStatus | str, reason: str | None = None) -> None:
        """The run has ended: ``state`` is done or failed."""
        self._set(RunStatus(state), reason)


class ControlClient:
    """Sends commands to a run from another process."""

    def __init__(self, log_path: Path):
        self.log_path = Path(log_path)
        self.inbox = RunFolder(log_path).control_inbox

    def available(self) -> bool:
        return self.inbox.is_dir()

    def send(self, command: str, argument: str | None = None) -> Path:
        if command not in COMMANDS:
            raise ControlError(f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
        if not self.available():
            raise ControlError(f"{self.log_path} has no control inbox (not a live run?)")
        # Names sort in sending order; the write's temporary name is hidden from the poller.
        path = self.inbox / f"{time.time_ns()}-{uuid.uuid4().hex[:8]}.json"
        return atomic.write_text(path, json.dumps({"command": command, "argument": argument}))


class ControlInbox:
    """The runner's side of the control channel: polls the inbox and applies commands."""

    def __init__(self, log_path: Path, control: RunControl, on_error: Callable[[str], None] | None = None):
        self.inbox = RunFolder(log_path).control_inbox
        self.inbox.mkdir(parents=True, exist_ok=True)
        self.control = control
        self.on_error = on_error

    def poll(self) -> int:
        """Apply pending commands in order; returns how many were read."""
        handled = 0
        # A name starting with '.' is a command still being written (atomic.temp_name).
        for path in sorted(p for p in self.inbox.glob("*.json") if not p.name.startswith(".")):
            try:
                body = json.loads(path.read_text())
                self.control.apply(str(body.get("command")), body.get("argument"))
            except (OSError, ValueError, ControlError) as exc:
                if self.on_error is not None:
                    self.on_error(f"control command {path.name} ignored: {exc}")
            finally:
                path.unlink(missing_ok=True)
                handled += 1
        return handled

    async def run(self, interval: float = 0.2) -> None:
        while True:
            self.poll()
            await asyncio.sleep(interval)
