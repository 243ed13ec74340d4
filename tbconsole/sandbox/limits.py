"""Memory and CPU ceilings for a sandbox through cgroups (v2, or v1 where the host has that).

Each sandbox gets a child cgroup *under the runner's own cgroup*, so a sandbox can never escape
limits that already apply to the runner. Where the kernel or the container we run in does not
let us create cgroups, the limits are skipped and the caller gets a note saying so.

A cgroup's name says who owns it:
``tbconsole.<runner pid namespace>.<runner pid>.<runner start time>.<sandbox id>``. So cleanup
finds a dead runner's cgroups in any hierarchy and under any parent (the runner may have run in
another cgroup than the cleaner: a systemd scope, another job's cgroup), and never touches those
of a runner still alive. A runner in another pid namespace cannot be looked up: its cgroups, like
those named by older versions, are only removed once empty and old.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from tbconsole.common.cpushare import SANDBOX_SESSION_NICE, lower_cgroup_weight
from tbconsole.common.procgroup import kill_process
from tbconsole.sandbox.processes import start_time

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000
PREFIX = "tbconsole."
_NAME = re.compile(r"tbconsole\.(\d+)\.(\d+)\.(\d+)\.(.+)")
# Before owners were part of the name: tbconsole-<sandbox id>.
_LEGACY_NAME = re.compile(r"tbconsole-([A-Za-z0-9_.-]{1,60}-[0-9a-f]{8})")
# Owner unknown: removed once empty for this long (a live sandbox's cgroup always holds its
# namespace process, except in the instant between its creation and the holder joining it).
UNKNOWN_OWNER_GRACE_SEC = 60
REMOVE_TIMEOUT_SEC = 3.0


@dataclass
class CgroupLimits:
    paths: list[Path]

    def join_script(self) -> str:
        """Shell that moves the current shell ($$) into every cgroup of the sandbox."""
        return "".join(f"echo $$ > {shlex.quote(str(p / 'cgroup.procs'))} && " for p in self.paths)

    def remove(self, timeout: float = REMOVE_TIMEOUT_SEC) -> bool:
        """Kill whatever is still inside, then remove the cgroups (blocking: at most ~timeout).
        Returns whether they are all gone."""
        return all([_remove_tree(path, timeout) for path in self.paths])


def cgroup_name(sandbox_id: str) -> str:
    pid = os.getpid()
    return f"{PREFIX}{_pid_namespace()}.{pid}.{start_time(pid)}.{sandbox_id}"


def create(name: str, *, memory_mb: int | None, cpus: float | None) -> tuple[CgroupLimits | None, str | None]:
    """Make the cgroup(s) for sandbox ``name``. Returns (limits or None, note for the user or None)."""
    if not memory_mb and not cpus:
        return None, None
    made: list[Path] = []
    try:
        own = _own_cgroups()
        if (CGROUP_ROOT / "cgroup.controllers").exists():
            return _create_v2(cgroup_name(name), own.get("", "/"), memory_mb, cpus, made)
        return _create_v1(cgroup_name(name), own, memory_mb, cpus, made)
    except OSError as exc:
        CgroupLimits(made).remove()  # half made (one controller of two): leave nothing
        return None, f"memory/cpu limits not applied: cannot create a cgroup ({exc.strerror})"


def clean_stale() -> list[Path]:
    """Remove every sandbox cgroup whose runner is gone (crashed, killed, or exited after its
    own cleanup failed), in every hierarchy and under any parent, killing what is still inside.
    Blocking (a walk of every cgroup hierarchy). Returns the paths removed."""
    removed = []
    own_namespace = _pid_namespace()
    for mount in _cgroup_mounts():
        for dirpath, dirnames, _ in os.walk(mount):
            for dirname in list(dirnames):
                path = Path(dirpath, dirname)
                if match := _NAME.fullmatch(dirname):
                    dirnames.remove(dirname)  # nothing of ours below a sandbox's cgroup
                    namespace, pid, start, _ = match.groups()
                    if namespace == own_namespace:
                        if start_time(int(pid)) != start and _remove_tree(path, REMOVE_TIMEOUT_SEC):
                            removed.append(path)  # its runner is gone
                        continue
                elif not _LEGACY_NAME.fullmatch(dirname):
                    continue
                # Owner unknown: only an old, empty one (which rmdir itself ensures); no kill.
                if _old(path):
                    try:
                        path.rmdir()
                    except OSError:
                        continue
                    removed.append(path)
    return removed


def _old(path: Path) -> bool:
    try:
        return time.time() - path.stat().st_mtime > UNKNOWN_OWNER_GRACE_SEC
    except OSError:
        return False


def _cgroup_mounts() -> list[Path]:
    """Every mounted cgroup hierarchy (v2, and each v1 controller or named hierarchy)."""
    mounts: list[Path] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return mounts
    for line in lines:
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype in ("cgroup", "cgroup2"):
            mounts.append(Path(fields[4].replace("\\040", " ")))
    return mounts


def _remove_tree(path: Path, timeout: float) -> bool:
    """Kill the processes in path (and in cgroups nested in it), then rmdir them, deepest first.
    The kernel frees a cgroup a moment after its last task exits: retry until timeout."""
    deadline = time.monotonic() + timeout
    while True:
        busy = False
        for dirpath, _, _ in os.walk(path, topdown=False):
            _kill_inside(Path(dirpath))
            try:
                os.rmdir(dirpath)
            except FileNotFoundError:
                pass
            except OSError:
                busy = True
        if not busy:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def _kill_inside(path: Path) -> None:
    """Kill every process in the cgroup, wherever it is in the process tree: a cgroup holds what
    left the sandbox's process group and tree too (an exec's ``nsenter``, the namespace's
    processes), which neither a group kill nor a tree walk from one process finds."""
    try:  # v2 (Linux 5.14+): one write kills every process inside, forks included
        (path / "cgroup.kill").write_text("1")
        return
    except OSError:
        pass
    for pid in _procs(path):
        kill_process(pid)


def _procs(path: Path) -> list[int]:
    try:
        return [int(pid) for pid in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _pid_namespace() -> str:
    """This process's pid namespace: the pids in our names mean something only inside it."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def _own_cgroups() -> dict[str, str]:
    """controller (or '' for v2) -> this process's cgroup path."""
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _create_v2(name, own, memory_mb, cpus, made):
    path = CGROUP_ROOT / own.lstrip("/") / name
    path.mkdir()
    made.append(path)
    applied = []
    if memory_mb and (path / "memory.max").exists():
        (path / "memory.max").write_text(str(memory_mb * 1024 * 1024))
        applied.append("memory")
    if cpus and (path / "cpu.max").exists():
        (path / "cpu.max").write_text(f"{int(cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
        applied.append("cpu")
    lower_cgroup_weight(path, SANDBOX_SESSION_NICE)  # weighed as a cgroup, not by its session's nice
    return CgroupLimits([path]), _note(memory_mb, cpus, applied)


def _create_v1(name, own, memory_mb, cpus, made):
    applied = []
    wanted = [("memory", memory_mb), ("cpu", cpus)]
    for controller, value in wanted:
        base = CGROUP_ROOT / controller
        if not value or not base.is_dir() or controller not in own:
            continue
        path = base / own[controller].lstrip("/") / name
        path.mkdir()
        made.append(path)
        if controller == "memory":
            (path / "memory.limit_in_bytes").write_text(str(memory_mb * 1024 * 1024))
        else:
            (path / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(int(cpus * CPU_PERIOD_US)))
            lower_cgroup_weight(path, SANDBOX_SESSION_NICE)  # weighed as a cgroup, not by its session's nice
        applied.append(controller)
    return (CgroupLimits(list(made)) if made else None), _note(memory_mb, cpus, applied)


def _note(memory_mb, cpus, applied) -> str | None:
    missing = [n for n, v in (("memory", memory_mb), ("cpu", cpus)) if v and n not in applied]
    return f"{'/'.join(missing)} limit not applied: no such cgroup controller here" if missing else None
