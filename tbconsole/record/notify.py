"""Tell someone: a command of the user's (``--notify CMD`` or ``harbor.notify=CMD``) run through
the shell with a short JSON object on stdin when the run needs a decision, when it ends (done,
stopped, aborted, failed) and when an advisory of severity error is raised.

The JSON: ``event`` (decision_needed | run_ended | advisory), ``run`` (the run id), ``log_path``,
``step``, ``message`` (one line that says it all), ``ts``, and per event: ``status`` (run_ended);
``group``, ``trial``, ``exception_type`` (decision_needed); ``severity``, ``rule``, ``key``,
``group``, ``trial`` (advisory). Every value passes through ``events.redact``, and the command's
environment has no ``TINKER_API_KEY``: no secret of the run's reaches it.

The command never harms the run: ``Notifier`` is a bus subscriber that only queues (publishing
never waits on it); one thread runs the commands in order, each killed (with whatever it started)
after ``timeout_s``; the first failure (an exit status other than 0, a timeout, a command that
cannot start) is logged once through ``log``, later ones are only counted.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tbconsole.common.formatting import format_seconds
from tbconsole.common.procgroup import kill_group
from tbconsole.record.enums import LogLevel
from tbconsole.record.events import AdvisoryRaised, ErrorRaised, Event, RunEnded, RunStarted, redact

NOTIFY_TIMEOUT_S = 10.0
MESSAGE_LIMIT = 1000  # characters of the one-line message
QUEUE_LIMIT = 64  # notifications waiting for the command; more are dropped (and counted)
HIDDEN_ENV = ("TINKER_API_KEY",)  # the run's own credential: never handed to the command

DECISION_NEEDED = "decision_needed"
RUN_ENDED = "run_ended"
ADVISORY = "advisory"


def attention(event: Event) -> str | None:
    """The notification ``event`` calls for, or None: a decision someone must make, the run's
    end, an advisory of severity error."""
    if isinstance(event, ErrorRaised) and event.decision_needed:
        return DECISION_NEEDED
    if isinstance(event, RunEnded):
        return RUN_ENDED
    if isinstance(event, AdvisoryRaised) and event.severity == LogLevel.ERROR:
        return ADVISORY
    return None


def payload(event: Event, run: str | None, log_path: Path | str | None) -> dict[str, Any] | None:
    """The JSON object sent for ``event`` (None when it calls for none), secrets redacted."""
    kind = attention(event)
    if kind is None:
        return None
    body: dict[str, Any] = {"event": kind, "run": run, "log_path": str(log_path) if log_path else None}
    if isinstance(event, ErrorRaised):
        where = " ".join(
            f"{name} {value}" for name, value in (("step", event.step), ("group", event.group)) if value is not None
        )
        body |= {
            "step": event.step,
            "group": event.group,
            "trial": event.trial,
            "exception_type": event.exception_type,
            "message": f"{where or 'the run'} needs a decision (abort or retry the group): "
            f"{event.exception_type}: {event.message}",
        }
    elif isinstance(event, RunEnded):
        said = f": {event.message}" if event.message else ""
        body |= {
            "step": event.step,
            "status": event.status,
            "message": f"run {event.status} at step {event.step}{said}",
        }
    elif isinstance(event, AdvisoryRaised):
        body |= {
            "step": event.step,
            "group": event.group,
            "trial": event.trial,
            "severity": event.severity,
            "rule": event.rule,
            "key": event.key,
            "message": event.message,
        }
    body["message"] = " ".join(str(body.get("message") or "").split())[:MESSAGE_LIMIT]
    body["ts"] = event.ts
    return redact(body)


class Notifier:
    """A bus subscriber that runs ``command`` for every event that calls for a notification."""

    def __init__(
        self,
        command: str,
        log_path: Path | str,
        log: Callable[[str], None],
        timeout_s: float = NOTIFY_TIMEOUT_S,
    ):
        self.command = command
        self.log_path = log_path
        self.log = log
        self.timeout_s = timeout_s
        self.run: str | None = None
        self.sent = 0  # commands that exited 0
        self.failures = 0
        self.dropped = 0
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(QUEUE_LIMIT)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        """The subscriber: never blocks, never raises."""
        if isinstance(event, RunStarted):
            self.run = event.run_id
        body = payload(event, self.run, self.log_path)
        if body is None:
            return
        try:
            self._queue.put_nowait(body)
        except queue.Full:
            self.dropped += 1
            return
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="tbconsole-notify", daemon=True)
                self._thread.start()

    def close(self, timeout_s: float | None = None) -> None:
        """Let the notifications already queued go out, waiting at most ``timeout_s`` (default:
        one command's time limit and a second); then the thread ends."""
        with self._lock:
            thread = self._thread
        if thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=1)
        thread.join(self.timeout_s + 1 if timeout_s is None else timeout_s)

    def _work(self) -> None:
        while (body := self._queue.get()) is not None:
            problem = self._send(json.dumps(body) + "\n")
            if problem is None:
                self.sent += 1
                continue
            self.failures += 1
            if self.failures == 1:
                self.log(f"--notify command {problem} (later failures are not reported; the run is not affected)")

    def _send(self, data: str) -> str | None:
        """Run the command once with ``data`` on stdin; what went wrong, or None."""
        env = {k: v for k, v in os.environ.items() if k not in HIDDEN_ENV}
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                self.command,
                shell=True,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,  # its own process group: a timeout kills all it started
                text=True,
            )
        except OSError as exc:
            return f"could not start: {exc}"
        try:
            _, err = proc.communicate(data, timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=2)
            return f"was killed after {format_seconds(self.timeout_s)}"
        if proc.returncode != 0:
            tail = " ".join((err or "").split())[-200:]
            took = time.monotonic() - started
            return f"exited with status {proc.returncode} after {format_seconds(took)}" + (f": {tail}" if tail else "")
        return None
