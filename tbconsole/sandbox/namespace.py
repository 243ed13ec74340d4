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

This module knows nothing about Harbor; ``tbconsole.sandbox.environment`` adapts it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tbconsole.sandbox import limits

DEFAULT_ROOT = Path(os.environ.get("TBCONSOLE_SANDBOX_ROOT", "/var/tmp/tbconsole-sandboxes"))
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
BASE_ENV = {"PATH": BASE_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "xterm-256color"}
OUTPUT_GRACE_SEC = 0.5
# A SIGKILLed process is gone in milliseconds; one that is not after this (stuck in the kernel)
# is left to the kernel rather than blocking stop() forever.
KILL_WAIT_SEC = 5
# A folder with no owner.json yet is being created by another start (or its runner crashed
# in that instant): only remove it once it is this old.
OWNERLESS_GRACE_SEC = 60
REQUIRED_TOOLS = ("unshare", "nsenter", "setpriv", "chroot", "mount", "tar")

OutputSink = Callable[[str, str], Awaitable[None]]


class SandboxUnavailable(RuntimeError):
    """This machine cannot run the local sandbox; the message says what to do."""


class SandboxError(RuntimeError):
    """A sandbox operation failed (the sandbox itself may still be usable)."""


@dataclass
class ExecOutcome:
    stdout: bytes
    stderr: bytes
    return_code: int


@dataclass
class SandboxSpec:
    name: str
    workdir: str = "/app"
    isolate_network: bool = False
    memory_mb: int | None = None
    cpus: float | None = None
    root: Path = field(default_factory=lambda: DEFAULT_ROOT)
    # Host folders shown read-only at the same path inside, even where the sandbox hides the
    # host's view (/tmp, /var/tmp): e.g. the project's virtualenv, for agents run from it.
    host_paths: tuple[str, ...] = ()


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
            "The kernel has no overlayfs. Load it (modprobe overlay) or use another "
            "Harbor environment."
        )
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SandboxUnavailable(
            f"Cannot create the sandbox folder {root}: {exc.strerror}. "
            "Set TBCONSOLE_SANDBOX_ROOT to a writable folder on a local disk."
        ) from None


def _process_alive(pid: int, start_time: str | None = None) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # Field 22 (start time) guards against a recycled pid.
    return start_time is None or stat.rsplit(")", 1)[1].split()[19] == start_time


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def _descendants(pid: int) -> list[int]:
    """All live descendants of pid (children first discovered, deepest last)."""
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.append(child)
                    frontier.append(child)
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_tree(pid: int) -> None:
    """SIGKILL pid and everything below it, including children that left its process group."""
    for target in [pid, *_descendants(pid)]:
        _kill(target)


def _kill_child(pid: int, exited: asyncio.Future) -> None:
    """SIGKILL a child we spawned in a session of its own, with all it started. Its process
    group is killed in one go, so a fork in progress cannot slip through (a process-by-process
    kill misses a child forked meanwhile, e.g. the namespace's PID 1 while unshare starts);
    the tree walk gets those that left the group. Nothing once it is reaped: its pid may be
    someone else's by then."""
    if exited.done():
        return
    tree = [pid, *_descendants(pid)]  # before the kill: orphans are no longer found below pid
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for target in tree:
        _kill(target)


def clean_leftovers(root: Path = DEFAULT_ROOT) -> list[str]:
    """Remove sandboxes whose owning runner is gone (crashed or killed), and every cgroup of a
    sandbox whose runner is gone, wherever it is. Returns the names of the folders removed.
    Blocking (processes, files, cgroups): call it from a thread in async code."""
    removed: list[str] = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            owner = json.loads((folder / "owner.json").read_text())
        except (OSError, ValueError):
            owner = None
            try:
                if time.time() - folder.stat().st_mtime < OWNERLESS_GRACE_SEC:
                    continue  # being made right now
            except OSError:
                continue
        if owner and _process_alive(owner["runner_pid"], owner.get("runner_start")):
            continue
        if owner and owner.get("holder_pid") and _process_alive(
            owner["holder_pid"], owner.get("holder_start")
        ):
            kill_tree(owner["holder_pid"])
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    limits.clean_stale()
    return removed


# Runs as PID 1 of the new namespaces, before chroot. $1..: merged upper work workdir root.
_SETUP_SCRIPT = r"""
set -e
merged=$1 upper=$2 work=$3 workdir=$4 root=$5
mount -t overlay overlay -o "lowerdir=/,upperdir=$upper,workdir=$work" "$merged"
mount -t proc proc "$merged/proc"
mount --rbind /dev "$merged/dev"
mount -t tmpfs -o mode=1777 tmpfs "$merged/dev/shm"
mount --rbind /sys "$merged/sys"
mount -t tmpfs -o mode=1777 tmpfs "$merged/tmp"
# Hide every sandbox's state (this one's included) from the inside.
if [ -d "$merged$root" ]; then mount -t tmpfs -o mode=700 tmpfs "$merged$root"; fi
if [ -d "$merged/var/tmp" ]; then mount -t tmpfs -o mode=1777 tmpfs "$merged/var/tmp"; fi
shift 5
for p in "$@"; do
  mkdir -p "$merged$p" && mount --bind "$p" "$merged$p" && mount -o remount,bind,ro "$merged$p"
done
# The workdir starts empty even if the host has a folder of that name.
rm -rf "$merged$workdir"
mkdir -p "$merged$workdir" "$merged/logs"
ip link set lo up 2>/dev/null || true
exec setpriv --pdeathsig KILL chroot "$merged" /bin/bash -c "$INIT_SCRIPT"
"""

# PID 1 inside, already chrooted: say ready (commands joining earlier would get the host
# root), then stay alive and reap orphans — bash's SIGCHLD handling collects any child, so a
# finished background job does not linger as a zombie that `kill -0` still finds. Plain bash,
# so nothing depends on where the project (or its Python) lives.
_INIT_SCRIPT = "trap 'exit 0' TERM; echo ready; while :; do sleep 3600 & wait $!; done"


# Runs inside the sandbox as root for each exec: switch user if asked, then run the command.
_USER_PROLOGUE = r"""
cd -- "$1" || exit 1
u=$2; shift 2
case "$u" in ""|root|0) exec "$@";; esac
g=$(id -g -- "$u" 2>/dev/null) || g=$u
h=$(getent passwd "$u" | cut -d: -f6)
export HOME=${h:-/} USER=$u LOGNAME=$u
if getent passwd "$u" >/dev/null; then
  exec setpriv --reuid="$u" --regid="$g" --init-groups -- "$@"
fi
exec setpriv --reuid="$u" --regid="$g" --clear-groups -- "$@"
"""


class NamespaceSandbox:
    """One sandbox. ``start`` → many ``exec`` / transfers → ``stop`` (idempotent).

    ``stop`` may come at any time, from any task, even while ``start`` is still running, and
    any of them may be cancelled: whatever was made is taken down within bounded time.
    """

    def __init__(self, spec: SandboxSpec):
        self.spec = spec
        self.id = f"{_safe(spec.name)[:60]}-{uuid.uuid4().hex[:8]}"
        self.folder = spec.root / self.id
        self._holder: tuple[asyncio.SubprocessTransport, _ExecProtocol] | None = None
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
            self._write_owner()  # at once: a folder without one may be taken for a crash's
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
        self._cgroup, self.limits_note = limits.create(
            self.id, memory_mb=self.spec.memory_mb, cpus=self.spec.cpus
        )
        # --kill-child: the namespace's PID 1 dies with unshare at any time, also while it is
        # still setting up (before it execs into the init that carries its own death signal).
        unshare = ["unshare", "--fork", "--kill-child", "--pid", "--mount", "--uts", "--ipc",
                   "--propagation", "private"]
        if self.spec.isolate_network:
            unshare.append("--net")
        argv = [
            "setpriv", "--pdeathsig", "KILL", *unshare, "--", "/bin/sh", "-c", _SETUP_SCRIPT,
            "holder", str(merged), str(upper), str(work), self.spec.workdir,
            str(self.spec.root), *[str(Path(p).resolve()) for p in self.spec.host_paths],
        ]
        # TBCONSOLE_SANDBOX marks every process of the holder chain (the init included).
        env = {**BASE_ENV, "INIT_SCRIPT": _INIT_SCRIPT, "TBCONSOLE_SANDBOX": str(self.folder)}
        loop = asyncio.get_running_loop()
        self._holder = transport, protocol = await _spawn(
            loop, lambda: _ExecProtocol(loop, None), self._in_cgroup(argv), env=env,
            stdin=asyncio.subprocess.DEVNULL,
        )
        self._write_owner()
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
                _kill(init_pid)
                await asyncio.wait([protocol.exited], timeout=1)
            # Still starting (no PID 1 known yet), or it did not go: the whole holder chain.
            _kill_child(transport.get_pid(), protocol.exited)
            await asyncio.wait([protocol.exited], timeout=KILL_WAIT_SEC)
            # Never transport.close() before the exit is known: asyncio would reap the process
            # itself (Popen.poll) behind its child watcher's back.
            _close_when_exited(transport, protocol)
        cgroup, self._cgroup = self._cgroup, None
        if cgroup is not None:  # also kills what is still inside (e.g. an exec's nsenter)
            await asyncio.to_thread(cgroup.remove)
        # The upper layer may hold files the sandbox made read-only; rmtree copes as root.
        await asyncio.to_thread(shutil.rmtree, self.folder, True)

    @property
    def running(self) -> bool:
        return self.init_pid is not None and _process_alive(self.init_pid)

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
        argv = self._enter_argv(cwd or self.spec.workdir, user) + ["/bin/bash", "-c", command]
        return await self._run(argv, {**BASE_ENV, **(env or {})}, timeout_sec, stdin, on_output)

    async def upload(self, source: Path, target: str) -> None:
        """Copy a host file or folder to ``target`` inside (folder: its contents)."""
        source = Path(source)
        if source.is_dir():
            parent, names, dest = str(source), ["."], target
        else:
            parent, names, dest = str(source.parent), [source.name], str(Path(target).parent)
        packed = await _tar_create(parent, names)
        script = f"mkdir -p {shlex.quote(dest)} && tar -x -f - -C {shlex.quote(dest)} --no-same-owner"
        if not source.is_dir() and source.name != Path(target).name:
            tmp = f"{dest}/.tbc-upload-{uuid.uuid4().hex[:8]}"
            script = (f"mkdir -p {shlex.quote(tmp)} && tar -x -f - -C {shlex.quote(tmp)} "
                      f"--no-same-owner && mv -f {shlex.quote(tmp + '/' + source.name)} "
                      f"{shlex.quote(target)} && rmdir {shlex.quote(tmp)}")
        result = await self.exec(script, cwd="/", user="root", stdin=packed)
        if result.return_code != 0:
            raise SandboxError(f"Upload to {target} failed: {result.stderr.decode(errors='replace')}")

    async def download(self, source: str, target: Path) -> None:
        """Copy ``source`` (file or folder) from inside to the host path ``target``."""
        target = Path(target)
        check = await self.exec(f"test -d {shlex.quote(source)}", cwd="/", user="root")
        is_dir = check.return_code == 0
        if is_dir:
            script = f"tar -c -f - -C {shlex.quote(source)} ."
        else:
            parent, name = os.path.split(source.rstrip("/"))
            script = f"tar -c -f - -C {shlex.quote(parent or '/')} {shlex.quote(name)}"
        result = await self.exec(script, cwd="/", user="root")
        if result.return_code != 0:
            raise SandboxError(f"Download of {source} failed: {result.stderr.decode(errors='replace')}")
        await asyncio.to_thread(_tar_extract, result.stdout, target, is_dir)

    # -- internals ---------------------------------------------------------------------

    def _enter_argv(self, cwd: str, user: str | int | None) -> list[str]:
        if not self.running:
            raise SandboxError(f"Sandbox {self.id} is not running (start it first, or it was stopped).")
        argv = ["nsenter", "-t", str(self.init_pid), "-m", "-u", "-i", "-p"]
        if self.spec.isolate_network:
            argv.append("-n")
        # nsenter resolves --wd=DIR before entering the root, so cd happens in the prologue.
        argv += ["-r", "-w", "--", "/bin/sh", "-c", _USER_PROLOGUE, "prologue", cwd,
                 "" if user is None else str(user)]
        return argv

    def _in_cgroup(self, argv: list[str]) -> list[str]:
        # Join the cgroup before exec so every descendant is accounted to the sandbox.
        if self._cgroup is None:
            return argv
        return ["/bin/sh", "-c", self._cgroup.join_script() + ' exec "$@"', "join", *argv]

    async def _run(self, argv, env, timeout_sec, stdin, on_output) -> ExecOutcome:
        loop = asyncio.get_running_loop()
        transport, protocol = await _spawn(
            loop, lambda: _ExecProtocol(loop, on_output), self._in_cgroup(argv), env=env,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        )
        pid = transport.get_pid()
        try:
            if stdin is not None:
                pipe = transport.get_pipe_transport(0)
                pipe.write(stdin)
                pipe.write_eof()
            async with asyncio.timeout(timeout_sec):
                await asyncio.shield(protocol.exited)  # shielded: we still await it after a kill
            # A background job started by the command may hold its output open forever:
            # the command is over when its process exits, plus a moment for the last bytes.
            await asyncio.wait([protocol.closed], timeout=OUTPUT_GRACE_SEC)
            await protocol.flush()
        except TimeoutError:
            _kill_child(pid, protocol.exited)
            await asyncio.wait([protocol.exited], timeout=KILL_WAIT_SEC)
            raise TimeoutError(f"Command timed out after {timeout_sec} seconds") from None
        except BaseException:
            _kill_child(pid, protocol.exited)
            raise
        finally:
            _close_when_exited(transport, protocol)
        return ExecOutcome(b"".join(protocol.out), b"".join(protocol.err), transport.get_returncode())

    async def _find_init_pid(self, holder_pid: int, protocol: _ExecProtocol) -> int:
        for _ in range(100):
            if protocol.exited.done() or self._stop_requested:
                break
            children = _descendants(holder_pid)
            if children:
                return children[0]
            await asyncio.sleep(0.01)
        raise SandboxError("The sandbox holder started but its namespace process was not found.")

    def _write_owner(self) -> None:
        holder_pid = self._holder[0].get_pid() if self._holder else None
        owner = {
            "runner_pid": os.getpid(), "runner_start": _start_time(os.getpid()),
            "holder_pid": holder_pid,
            "holder_start": _start_time(holder_pid) if holder_pid else None,
            "name": self.spec.name,
        }
        tmp = self.folder / "owner.json.tmp"
        tmp.write_text(json.dumps(owner))
        tmp.replace(self.folder / "owner.json")


async def _spawn(loop, protocol_factory, argv, **kwargs):
    """loop.subprocess_exec in a session of its own, which a cancel cannot cut half-way.

    asyncio's own cleanup of a cancelled spawn SIGKILLs only the direct child, reaps it behind
    its child watcher's back (Popen.poll: "exit status already read" warnings) and then waits
    for its pipes to close, which a surviving grandchild (a namespace's PID 1) holds open
    forever: the cancelled task hangs. Here the spawn runs to its end (milliseconds), then the
    process and all it started are killed and collected by their normal path.
    """
    spawn = asyncio.ensure_future(loop.subprocess_exec(
        protocol_factory, *argv, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True, **kwargs,
    ))
    try:
        return await asyncio.shield(spawn)
    except asyncio.CancelledError:
        spawn.add_done_callback(_kill_spawned)
        raise


def _kill_spawned(spawn: asyncio.Future) -> None:
    if spawn.cancelled() or spawn.exception() is not None:
        return
    transport, protocol = spawn.result()
    _kill_child(transport.get_pid(), protocol.exited)
    _close_when_exited(transport, protocol)


def _close_when_exited(transport: asyncio.SubprocessTransport, protocol: _ExecProtocol) -> None:
    """Close a subprocess transport once its exit is known, not before: closing earlier makes
    asyncio reap the child itself (Popen.poll), and its child watcher then reports 255 with an
    "exit status already read" warning."""
    if protocol.exited.done():
        transport.close()
    else:
        protocol.exited.add_done_callback(lambda _: transport.close())


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "sandbox"


class _ExecProtocol(asyncio.SubprocessProtocol):
    """Collects output and signals exit separately from end-of-output: asyncio's
    Process.wait() waits for every pipe to close, which a background job can prevent."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sink: OutputSink | None):
        self.out: list[bytes] = []
        self.err: list[bytes] = []
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        # Done at the first end of line on stdout, or once the process or its pipes end.
        self.first_line: asyncio.Future[None] = loop.create_future()
        self._sink = sink
        self._forwarding: asyncio.Task | None = None
        self._pending: list[tuple[str, str]] = []
        self._loop = loop

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        (self.out if fd == 1 else self.err).append(data)
        if fd == 1 and b"\n" in data:
            _resolve(self.first_line)
        if self._sink is not None:
            self._pending.append((data.decode(errors="replace"), "stdout" if fd == 1 else "stderr"))
            if self._forwarding is None or self._forwarding.done():
                self._forwarding = self._loop.create_task(self._forward())

    async def _forward(self) -> None:
        # One task at a time, in arrival order: the sink sees chunks as they came.
        while self._pending:
            text, name = self._pending.pop(0)
            await self._sink(text, name)

    async def flush(self) -> None:
        if self._forwarding is not None:
            await self._forwarding

    def process_exited(self) -> None:
        _resolve(self.exited)
        _resolve(self.first_line)

    def connection_lost(self, exc) -> None:
        _resolve(self.closed)
        _resolve(self.first_line)


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


async def _tar_create(parent: str, names: list[str]) -> bytes:
    proc = await asyncio.create_subprocess_exec(
        "tar", "-c", "-f", "-", "-C", parent, *names,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    if proc.returncode != 0:
        raise SandboxError(f"Packing {parent} failed: {err.decode(errors='replace')}")
    return out


def _tar_extract(data: bytes, target: Path, is_dir: bool) -> None:
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        if is_dir:
            target.mkdir(parents=True, exist_ok=True)
            archive.extractall(target, filter=_host_filter)
            return
        member = next(m for m in archive.getmembers() if m.isfile() or m.issym())
        target.parent.mkdir(parents=True, exist_ok=True)
        extracted = archive.extractfile(member)
        if extracted is None:
            raise SandboxError(f"{member.name} is not a regular file")
        tmp = target.with_name(target.name + ".part")
        tmp.write_bytes(extracted.read())
        tmp.replace(target)


def _host_filter(member, dest):
    # Like tarfile's data filter, but skip device nodes/FIFOs an agent may have left.
    import tarfile

    if member.isdev():
        return None
    return tarfile.data_filter(member, dest)
