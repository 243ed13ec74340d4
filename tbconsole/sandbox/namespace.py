"""A throw-away Linux sandbox: an overlay of the host root held open by one namespace process.

Why this shape: Harbor's agents expect a long-lived machine (a tmux server started by one
command must still be there for the next), and we have neither Docker nor a network. So each
sandbox is one *holder* process, PID 1 of fresh pid/mount/uts/ipc (and optionally net)
namespaces, chrooted into an overlayfs whose lower layer is the host root and whose upper layer
is a per-sandbox folder. Every command joins those namespaces with ``nsenter``.

Nothing leaks by construction:
- all mounts live only in the holder's private mount namespace, so they vanish with it;
- killing PID 1 of a pid namespace kills every process in it;
- the holder chain carries a parent-death signal, so if the runner dies (even SIGKILL) the
  namespace dies with it; the per-sandbox folder left behind is removed by the next start
  (``clean_leftovers``).

The parts: ``spec`` (spec, outcome, errors), ``holder`` (the namespaces' command lines and
shell), ``spawn`` (child processes on asyncio), ``processes`` (liveness, by /proc), ``ownership`` (owner
records and leftovers), ``transfer`` (tar in and out), ``limits`` (cgroups). This module knows
nothing about Harbor; ``tbconsole.sandbox.environment`` adapts it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import cast

from tbconsole.common.procgroup import descendants, kill_process
from tbconsole.sandbox import limits, transfer
from tbconsole.sandbox.holder import enter_argv, holder_argv, holder_env
from tbconsole.sandbox.ownership import clean_leftovers, write_owner
from tbconsole.sandbox.processes import process_alive
from tbconsole.sandbox.spawn import ExecProtocol, OutputSink, SpawnedChild, close_when_exited, kill_child, spawn
from tbconsole.sandbox.spec import (
    BASE_ENV,
    BASE_PATH,
    DEFAULT_ROOT,
    Bind,
    ExecOutcome,
    SandboxError,
    SandboxSpec,
    SandboxUnavailable,
)

__all__ = [
    "BASE_ENV",
    "BASE_PATH",
    "DEFAULT_ROOT",
    "Bind",
    "ExecOutcome",
    "NamespaceSandbox",
    "OutputSink",
    "SandboxError",
    "SandboxSpec",
    "SandboxUnavailable",
    "clean_leftovers",
    "preflight",
]

OUTPUT_GRACE_SEC = 0.5
# A SIGKILLed process is gone in milliseconds; one that is not after this (stuck in the kernel)
# is left to the kernel rather than blocking stop() forever.
KILL_WAIT_SEC = 5
REQUIRED_TOOLS = ("unshare", "nsenter", "setpriv", "chroot", "mount", "tar")


def preflight(root: Path = DEFAULT_ROOT) -> None:
    """Raise SandboxUnavailable with a remedy when this machine can't host sandboxes."""
    if sys.platform != "linux":
        raise SandboxUnavailable("The local sandbox needs Linux (namespaces and overlayfs).")
    if os.geteuid() != 0:
        raise SandboxUnavailable(
            "The local sandbox needs root (it mounts an overlay and creates namespaces). "
            "Run as root, or choose another Harbor environment (e.g. --env docker or e2b)."
        )
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        raise SandboxUnavailable(
            f"The local sandbox needs {', '.join(missing)} (util-linux, tar). "
            "Install them (Debian: apt-get install util-linux tar)."
        )
    if "overlay" not in Path("/proc/filesystems").read_text():
        raise SandboxUnavailable(
            "The kernel has no overlayfs. Load it (modprobe overlay) or use another Harbor environment."
        )
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SandboxUnavailable(
            f"Cannot create the sandbox folder {root}: {exc.strerror}. "
            "Set TBCONSOLE_SANDBOX_ROOT to a writable folder on a local disk."
        ) from None


class NamespaceSandbox:
    """One sandbox. ``start`` → many ``exec`` / transfers → ``stop`` (idempotent).

    ``stop`` may come at any time, from any task, even while ``start`` is still running, and
    any of them may be cancelled: whatever was made is taken down within bounded time.
    """

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        self.id = f"{_safe(spec.name)[:60]}-{uuid.uuid4().hex[:8]}"
        self.folder = spec.root / self.id
        self._holder: SpawnedChild | None = None
        self.init_pid: int | None = None
        self.limits_note: str | None = None
        self._cgroup: limits.CgroupLimits | None = None
        self._stop_requested = False
        self._teardown: asyncio.Future | None = None

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        if self._stop_requested:
            raise SandboxError(f"Sandbox {self.id} was stopped; make a new one.")
        preflight(self.spec.root)
        await asyncio.to_thread(clean_leftovers, self.spec.root)
        if self._stop_requested:
            raise SandboxError(f"Sandbox {self.id} was stopped while it started.")
        try:
            self.folder.mkdir(parents=True)
            write_owner(self.folder, self.spec.name, None)  # at once: a folder without one may be taken for a crash's
            merged, upper, work = (self.folder / n for n in ("merged", "upper", "work"))
            for path in (merged, upper, work):
                path.mkdir()
            await self._start_holder(merged, upper, work)
            if self._stop_requested:  # stop() ran meanwhile, maybe before the holder existed
                raise SandboxError(f"Sandbox {self.id} was stopped while it started.")
        except BaseException as exc:  # failed or cancelled half-way: take down what was made
            await asyncio.shield(self._take_down())
            if self._stop_requested and isinstance(exc, Exception):  # whatever broke, that's why
                raise SandboxError(f"Sandbox {self.id} was stopped while it started.") from exc
            raise

    async def _start_holder(self, merged: Path, upper: Path, work: Path) -> None:
        self._cgroup, self.limits_note = limits.create(self.id, memory_mb=self.spec.memory_mb, cpus=self.spec.cpus)
        loop = asyncio.get_running_loop()
        self._holder = transport, protocol = await spawn(
            loop,
            lambda: ExecProtocol(loop, None),
            self._in_cgroup(holder_argv(self.spec, merged, upper, work)),
            env=holder_env(self.folder),
            stdin=asyncio.subprocess.DEVNULL,
        )
        write_owner(self.folder, self.spec.name, transport.get_pid())
        await asyncio.wait([protocol.first_line], timeout=30)
        line = b"".join(protocol.out).split(b"\n", 1)[0]
        if line.strip() != b"ready":
            if protocol.exited.done():  # let the last of its stderr arrive
                await asyncio.wait([protocol.closed], timeout=1)
            err = b"".join(protocol.err)
            raise SandboxUnavailable(
                "The local sandbox could not be set up: "
                f"{err.decode(errors='replace').strip() or 'no answer from the holder'}. "
                "It needs root with overlayfs and mount namespaces (in a container: "
                "--privileged or CAP_SYS_ADMIN)."
            )
        self.init_pid = await self._find_init_pid(transport.get_pid(), protocol)

    async def stop(self) -> None:
        """Kill everything inside and remove the folder and cgroups; bounded in time. Calls
        made meanwhile (and a start failing meanwhile) share the work; a cancelled stop still
        finishes in the background."""
        self._stop_requested = True
        await asyncio.shield(self._take_down())

    def _take_down(self) -> asyncio.Future:
        # Each call takes down what exists *now*, after any teardown already running: a start
        # in progress may have made something since that one looked.
        previous = self._teardown

        async def take_down() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            await self._release()

        self._teardown = asyncio.ensure_future(take_down())
        return self._teardown

    async def _release(self) -> None:
        holder, self._holder = self._holder, None
        init_pid, self.init_pid = self.init_pid, None  # exec refuses from here on
        if holder is not None:
            transport, protocol = holder
            if init_pid is not None:
                # Killing the namespace's PID 1 kills everything inside; `unshare` (its parent)
                # then reaps it and exits, so no zombie is left for anyone else to collect.
                kill_process(init_pid)
                await asyncio.wait([protocol.exited], timeout=1)
            # Still starting (no PID 1 known yet), or it did not go: the whole holder chain.
            kill_child(transport.get_pid(), protocol.exited)
            await asyncio.wait([protocol.exited], timeout=KILL_WAIT_SEC)
            # Never transport.close() before the exit is known: asyncio would reap the process
            # itself (Popen.poll) behind its child watcher's back.
            close_when_exited(transport, protocol)
        cgroup, self._cgroup = self._cgroup, None
        if cgroup is not None:  # also kills what is still inside (e.g. an exec's nsenter)
            await asyncio.to_thread(cgroup.remove)
        # The upper layer may hold files the sandbox made read-only; rmtree copes as root.
        await asyncio.to_thread(shutil.rmtree, self.folder, True)

    @property
    def running(self) -> bool:
        return self.init_pid is not None and process_alive(self.init_pid)

    # -- commands ----------------------------------------------------------------------

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        user: str | int | None = None,
        timeout_sec: float | None = None,
        stdin: bytes | None = None,
        on_output: OutputSink | None = None,
    ) -> ExecOutcome:
        """Run ``bash -c command`` inside. On timeout the whole process tree is killed and
        TimeoutError is raised; cancellation kills it too."""
        if self.init_pid is None or not self.running:
            raise SandboxError(f"Sandbox {self.id} is not running (start it first, or it was stopped).")
        argv = enter_argv(self.init_pid, self.spec.isolate_network, cwd or self.spec.workdir, user)
        argv += ["/bin/bash", "-c", command]
        return await self._run(argv, {**BASE_ENV, **(env or {})}, timeout_sec, stdin, on_output)

    async def upload(self, source: Path, target: str) -> None:
        """Copy a host file or folder to ``target`` inside (folder: its contents)."""
        await transfer.upload(self._as_root, source, target)

    async def download(self, source: str, target: Path) -> None:
        """Copy ``source`` (file or folder) from inside to the host path ``target``."""
        await transfer.download(self._as_root, source, target)

    # -- internals ---------------------------------------------------------------------

    async def _as_root(self, script: str, stdin: bytes | None) -> ExecOutcome:
        return await self.exec(script, cwd="/", user="root", stdin=stdin)

    def _in_cgroup(self, argv: list[str]) -> list[str]:
        # Join the cgroup before exec so every descendant is accounted to the sandbox.
        if self._cgroup is None:
            return argv
        return ["/bin/sh", "-c", self._cgroup.join_script() + ' exec "$@"', "join", *argv]

    async def _run(
        self,
        argv: list[str],
        env: dict[str, str],
        timeout_sec: float | None,
        stdin: bytes | None,
        on_output: OutputSink | None,
    ) -> ExecOutcome:
        loop = asyncio.get_running_loop()
        transport, protocol = await spawn(
            loop,
            lambda: ExecProtocol(loop, on_output),
            self._in_cgroup(argv),
            env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        )
        pid = transport.get_pid()
        try:
            if stdin is not None:
                pipe = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
                pipe.write(stdin)
                pipe.write_eof()
            async with asyncio.timeout(timeout_sec):
                await asyncio.shield(protocol.exited)  # shielded: we still await it after a kill
            # A background job started by the command may hold its output open forever:
            # the command is over when its process exits, plus a moment for the last bytes.
            await asyncio.wait([protocol.closed], timeout=OUTPUT_GRACE_SEC)
            await protocol.flush()
        except TimeoutError:
            kill_child(pid, protocol.exited)
            await asyncio.wait([protocol.exited], timeout=KILL_WAIT_SEC)
            raise TimeoutError(f"Command timed out after {timeout_sec} seconds") from None
        except BaseException:
            kill_child(pid, protocol.exited)
            raise
        finally:
            close_when_exited(transport, protocol)
        return_code = transport.get_returncode()
        assert return_code is not None  # its exit is known: protocol.exited is done
        return ExecOutcome(b"".join(protocol.out), b"".join(protocol.err), return_code)

    async def _find_init_pid(self, holder_pid: int, protocol: ExecProtocol) -> int:
        for _ in range(100):
            if protocol.exited.done() or self._stop_requested:
                break
            children = descendants(holder_pid)
            if children:
                return children[0]
            await asyncio.sleep(0.01)
        raise SandboxError("The sandbox holder started but its namespace process was not found.")


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "sandbox"
