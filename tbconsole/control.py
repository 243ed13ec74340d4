"""Run control: pause after the batch, resume, stop cleanly, abort, and decisions on errors.

Two ways in, one state machine:
- in process, the console calls ``RunControl`` methods directly;
- from another process (``tbconsole attach``), ``ControlClient`` drops a command file into
  ``<log_path>/control/inbox/`` (written then renamed, so never read half-written) and the
  runner's ``ControlInbox`` picks it up within a fraction of a second.

The runner reports every state change as a ``ControlChanged`` event, so whoever sent the
command sees its effect in the event stream like everyone else.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from tbconsole.events import ControlChanged, DecisionMade, Event

COMMANDS = ("pause", "resume", "stop", "abort", "decide")
DECISIONS = ("abort", "retry_group")
INBOX = Path("control") / "inbox"


class ControlError(ValueError):
    """A command that does not apply (unknown, or not valid in the current state)."""


class RunControl:
    """The run's control state. All methods are called on the runner's event loop.

    States: running → pausing (finish this batch) → paused → running; stopping (finish and
    train this batch, checkpoint, exit 0); aborting (cancel trials now, keep what was
    captured); awaiting_decision (an error stopped the run until someone chooses).
    """

    def __init__(self, publish: Callable[[Event], None]):
        self._publish = publish
        self.state = "running"
        self._resume = asyncio.Event()
        self._resume.set()
        self._decision: asyncio.Future[str] | None = None
        self._before_decision = "running"
        self.abort_requested = asyncio.Event()
        self.stop_requested = False

    def _set(self, state: str, reason: str | None = None) -> None:
        self.state = state
        self._publish(ControlChanged(state=state, reason=reason))

    # -- commands ------------------------------------------------------------------------

    def pause(self) -> None:
        if self.state not in ("running",):
            raise ControlError(f"cannot pause while {self.state}")
        self._resume.clear()
        self._set("pausing", "pause after the current batch")

    def resume(self) -> None:
        if self.state not in ("pausing", "paused"):
            raise ControlError(f"nothing to resume while {self.state}")
        self._resume.set()
        self._set("running")

    def stop(self) -> None:
        if self.state in ("stopping", "aborting", "done", "failed"):
            raise ControlError(f"cannot stop while {self.state}")
        self.stop_requested = True
        self._resume.set()  # a paused run must wake up to stop
        self._set("stopping", "stop after the current batch is trained")

    def abort(self) -> None:
        if self.state in ("aborting", "done", "failed"):
            raise ControlError(f"cannot abort while {self.state}")
        self.abort_requested.set()
        self._resume.set()
        if self._decision is not None and not self._decision.done():
            self._decision.set_result("abort")
        self._set("aborting", "abort requested")

    def decide(self, decision: str) -> None:
        if decision not in DECISIONS:
            raise ControlError(f"unknown decision {decision!r}; choose one of {', '.join(DECISIONS)}")
        if self._decision is None or self._decision.done():
            raise ControlError("no decision is pending")
        self._decision.set_result(decision)

    def apply(self, command: str, argument: str | None = None) -> None:
        """Dispatch a command by name (the control inbox and the console's palette)."""
        if command not in COMMANDS:
            raise ControlError(f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
        if command == "decide":
            self.decide(argument or "")
        else:
            getattr(self, command)()

    # -- what the runner awaits ------------------------------------------------------------

    async def batch_boundary(self) -> bool:
        """Called before each batch starts. Waits while paused; False means: do not start it
        (stop or abort was requested)."""
        if self.state == "pausing":
            self._set("paused", "paused after the batch")
        await self._resume.wait()
        return not (self.stop_requested or self.abort_requested.is_set())

    async def ask(self, step: int | None, group: int | None, default: str, timeout: float | None) -> str:
        """Wait for a decision on a raised error. With no one to ask (timeout 0, headless),
        the default is taken at once. Groups that fail while a decision is pending (a gateway
        outage fails every group in flight) share that one decision."""
        loop = asyncio.get_running_loop()
        pending = self._decision
        decided_by = "console"
        if pending is None or pending.done():
            pending = self._decision = loop.create_future()
            self._before_decision = self.state if self.state != "awaiting_decision" else "running"
            if timeout == 0:
                pending.set_result(default)
                decided_by = "headless-default"
            else:
                self._set("awaiting_decision", "an error needs a decision: abort or retry_group")
        try:
            decision = await asyncio.wait_for(asyncio.shield(pending), timeout)
        except TimeoutError:
            decision, decided_by = default, "timeout-default"
            if not pending.done():
                pending.set_result(default)
        if self._decision is pending:
            self._decision = None
        self._publish(DecisionMade(step=step, group=group, decision=decision, by=decided_by))
        if decision == "retry_group" and self.state == "awaiting_decision":
            self._set(self._before_decision)
        return decision

    def finish(self, state: str, reason: str | None = None) -> None:
        self._set(state, reason)


class ControlClient:
    """Sends commands to a run from another process."""

    def __init__(self, log_path: Path):
        self.inbox = Path(log_path) / INBOX

    def available(self) -> bool:
        return self.inbox.is_dir()

    def send(self, command: str, argument: str | None = None) -> Path:
        if command not in COMMANDS:
            raise ControlError(f"unknown command {command!r}; one of {', '.join(COMMANDS)}")
        if not self.available():
            raise ControlError(f"{self.inbox.parent.parent} has no control inbox (not a live run?)")
        name = f"{time.time_ns()}-{uuid.uuid4().hex[:8]}"
        tmp = self.inbox / f".{name}.tmp"
        tmp.write_text(json.dumps({"command": command, "argument": argument}))
        final = self.inbox / f"{name}.json"
        os.replace(tmp, final)
        return final


class ControlInbox:
    """The runner's side of the control channel: polls the inbox and applies commands."""

    def __init__(self, log_path: Path, control: RunControl, on_error: Callable[[str], None] | None = None):
        self.inbox = Path(log_path) / INBOX
        self.inbox.mkdir(parents=True, exist_ok=True)
        self.control = control
        self.on_error = on_error

    def poll(self) -> int:
        """Apply pending commands in order; returns how many were read."""
        handled = 0
        for path in sorted(self.inbox.glob("*.json")):
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
