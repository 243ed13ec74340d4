"""The runner's lease on its run folder: one runner per ``log_path``, and a dead runner looks dead.

A runner takes an exclusive ``flock`` on ``<log_path>/runner.lock`` for its whole life (the kernel
drops it when the process dies, however it dies) and rewrites ``<log_path>/runner.json`` every
``BEAT_SECONDS`` from a thread of its own, so a busy event loop never looks like a dead runner::

    {"pid": 4242, "host": "box", "started": 1767000000.0, "beat": 1767000042.0,
     "command": ["tbconsole", "demo", "config.max_steps=4"], "ended": null}

Readers (the console, ``attach``, ``runs``) ask :func:`read_lease`. On the runner's own host the
lock decides: taken means alive, free means gone, at once. From another host (a shared folder) the
lock cannot be seen, so a beat older than ``STALE_SECONDS`` means gone. A runner that ends writes
``ended`` before it lets go, so a clean end never reads as a crash.

The command is kept for the resume hint; values of secret-looking keys are redacted like events.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbconsole.common import atomic
from tbconsole.common.formatting import command_line, format_age
from tbconsole.record.enums import RunnerState
from tbconsole.record.events import redact
from tbconsole.record.runfolder import LEASE_FILE, LOCK_FILE

BEAT_SECONDS = 2.0
STALE_SECONDS = 8.0  # four missed beats: gone (readers on another host only)


class LeaseHeld(RuntimeError):
    """Another live runner holds this run folder."""

    def __init__(self, log_path: Path, holder: LeaseView):
        self.log_path = log_path
        self.holder = holder
        who = f"pid {holder.pid} on {holder.host}" if holder.pid else "another process"
        super().__init__(
            f"{log_path} is already being run by {who}; open its console with `{command_line('attach', log_path)}`, "
            "or choose another config.log_path"
        )


@dataclass(frozen=True)
class LeaseView:
    state: RunnerState
    pid: int | None = None
    host: str | None = None
    started: float | None = None
    beat: float | None = None  # the last heartbeat (unix seconds)
    ended: float | None = None
    command: tuple[str, ...] = ()

    def seen_ago(self, now: float | None = None) -> float | None:
        return None if self.beat is None else max(0.0, (time.time() if now is None else now) - self.beat)

    def describe(self, now: float | None = None) -> str:
        """One short line: ``runner live (pid 42)``, ``runner gone (pid 42, last seen 14s ago)``."""
        pid = f"pid {self.pid}" + ("" if self.host in (None, socket.gethostname()) else f" on {self.host}")
        ago = self.seen_ago(now)
        if self.state is RunnerState.LIVE:
            return f"runner live ({pid})"
        if self.state is RunnerState.DEAD:
            return f"runner gone ({pid}, last seen {format_age(ago)})" if ago is not None else f"runner gone ({pid})"
        if self.state is RunnerState.ENDED:
            return "runner ended"
        return "no runner"


def read_lease(log_path: str | Path, now: float | None = None) -> LeaseView:
    folder = Path(log_path)
    try:
        info: dict[str, Any] = json.loads((folder / LEASE_FILE).read_text())
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict):
        info = {}
    host = info.get("host") if isinstance(info.get("host"), str) else None
    beat = _float(info.get("beat"))
    fields: dict[str, Any] = dict(
        pid=_int(info.get("pid")),
        host=host,
        started=_float(info.get("started")),
        beat=beat,
        ended=_float(info.get("ended")),
        command=tuple(a for a in info.get("command") or () if isinstance(a, str)),
    )
    held = _lock_held(folder / LOCK_FILE) if host in (None, socket.gethostname()) else None
    if held is None:  # another host's runner (or no lock file): only its beat tells
        held = beat is not None and (time.time() if now is None else now) - beat < STALE_SECONDS
    if held:
        return LeaseView(RunnerState.LIVE, **fields)
    if fields["ended"] is not None:
        return LeaseView(RunnerState.ENDED, **fields)
    if not info:
        return LeaseView(RunnerState.NONE)
    return LeaseView(RunnerState.DEAD, **fields)


def _lock_held(path: Path) -> bool | None:
    """Whether some process holds the lock file (None: there is none to ask)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class Lease:
    """Held by the runner: ``with Lease(log_path, command):`` around the run. Raises LeaseHeld
    when another live runner has the folder."""

    def __init__(self, log_path: str | Path, command: list[str] | tuple[str, ...] = ()):
        self.folder = Path(log_path)
        self.command = [_redact_arg(str(a)) for a in command]
        self._fd: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started = time.time()

    def acquire(self) -> Lease:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        # A reader holds the lock shared for a moment while it looks: try a few times before saying no.
        for attempt in range(10):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == 9:
                    os.close(fd)
                    raise LeaseHeld(self.folder, read_lease(self.folder)) from None
                time.sleep(0.05)
        self._fd = fd
        self._write(ended=None)
        self._thread = threading.Thread(target=self._beat, name="tbconsole-lease", daemon=True)
        self._thread.start()
        return self

    def release(self) -> None:
        """Mark the run's runner as ended, then let go of the folder."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._fd is None:
            return
        with contextlib.suppress(OSError):  # a full disk must not turn a clean end into a crash
            self._write(ended=time.time())
        with contextlib.suppress(OSError):
            os.close(self._fd)  # closing drops the lock
        self._fd = None

    def __enter__(self) -> Lease:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _beat(self) -> None:
        while not self._stop.wait(BEAT_SECONDS):
            with contextlib.suppress(OSError):  # a full disk: readers see an old beat, the lock still tells
                self._write(ended=None)

    def _write(self, ended: float | None) -> None:
        atomic.write_json(
            self.folder / LEASE_FILE,
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": self.started,
                "beat": time.time(),
                "command": self.command,
                "ended": ended,
            },
        )


def _redact_arg(arg: str) -> str:
    """``KEY=VALUE`` with a secret-looking KEY (or a known key format anywhere) redacted."""
    key, sep, value = arg.partition("=")
    return f"{key}={redact({key: value})[key]}" if sep else str(redact(arg))


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _float(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
