"""Memory and CPU ceilings for a sandbox through cgroups (v2, or v1 where the host has that).

Each sandbox gets a child cgroup *under the runner's own cgroup*, so a sandbox can never escape
limits that already apply to the runner. Where the kernel or the container we run in does not
let us create cgroups, the limits are skipped and the caller gets a note saying so.
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


@dataclass
class CgroupLimits:
    paths: list[Path]

    def join_script(self) -> str:
        """Shell that moves the current shell ($$) into every cgroup of the sandbox."""
        return "".join(f"echo $$ > {shlex.quote(str(p / 'cgroup.procs'))} && " for p in self.paths)

    def remove(self) -> None:
        for path in self.paths:
            for _ in range(50):  # the kernel frees a cgroup a moment after its last task exits
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _own_cgroups() -> dict[str, str]:
    """controller (or '' for v2) -> this process's cgroup path."""
    own: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def create(name: str, *, memory_mb: int | None, cpus: float | None) -> tuple[CgroupLimits | None, str | None]:
    """Make the cgroup(s) for a sandbox. Returns (limits or None, note for the user or None)."""
    if not memory_mb and not cpus:
        return None, None
    try:
        own = _own_cgroups()
        if (CGROUP_ROOT / "cgroup.controllers").exists():
            return _create_v2(name, own.get("", "/"), memory_mb, cpus)
        return _create_v1(name, own, memory_mb, cpus)
    except OSError as exc:
        return None, f"memory/cpu limits not applied: cannot create a cgroup ({exc.strerror})"


def discard(name: str) -> None:
    """Remove a dead sandbox's cgroups, if any (leftovers of a runner that crashed)."""
    try:
        own = _own_cgroups()
    except OSError:
        return
    candidates = [CGROUP_ROOT / own.get("", "/").lstrip("/") / f"tbconsole-{name}"]
    candidates += [CGROUP_ROOT / c / own[c].lstrip("/") / f"tbconsole-{name}"
                   for c in ("memory", "cpu") if c in own]
    CgroupLimits([p for p in candidates if p.is_dir()]).remove()


def _create_v2(name, own, memory_mb, cpus):
    path = CGROUP_ROOT / own.lstrip("/") / f"tbconsole-{name}"
    path.mkdir()
    applied = []
    if memory_mb and (path / "memory.max").exists():
        (path / "memory.max").write_text(str(memory_mb * 1024 * 1024))
        applied.append("memory")
    if cpus and (path / "cpu.max").exists():
        (path / "cpu.max").write_text(f"{int(cpus * CPU_PERIOD_US)} {CPU_PERIOD_US}")
        applied.append("cpu")
    return CgroupLimits([path]), _note(memory_mb, cpus, applied)


def _create_v1(name, own, memory_mb, cpus):
    paths, applied = [], []
    wanted = [("memory", memory_mb), ("cpu", cpus)]
    for controller, value in wanted:
        base = CGROUP_ROOT / controller
        if not value or not base.is_dir() or controller not in own:
            continue
        path = base / own[controller].lstrip("/") / f"tbconsole-{name}"
        path.mkdir()
        paths.append(path)
        if controller == "memory":
            (path / "memory.limit_in_bytes").write_text(str(memory_mb * 1024 * 1024))
        else:
            (path / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(int(cpus * CPU_PERIOD_US)))
        applied.append(controller)
    return (CgroupLimits(paths) if paths else None), _note(memory_mb, cpus, applied)


def _note(memory_mb, cpus, applied) -> str | None:
    missing = [n for n, v in (("memory", memory_mb), ("cpu", cpus)) if v and n not in applied]
    return f"{'/'.join(missing)} limit not applied: no such cgroup controller here" if missing else None
