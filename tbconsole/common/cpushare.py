"""How the run's processes share the CPU with the console.

Linux shares the CPU between sessions (autogroups) before processes: the console, the detached
runner and each sandbox command lead a session of their own, so eight busy agents and a training
engine would take nine shares to the console's one. A key press must not wait behind them, so
the background sessions run at a higher nice; when nothing interactive wants the CPU they get it
all the same.

Where a sandbox also has a cgroup of its own with the cpu controller (a task that sets ``cpus``;
with cgroup v2, any sandbox cgroup), the kernel weighs that cgroup and ignores the session's
nice: ``lower_cgroup_weight`` gives the cgroup the same lower weight.
"""

from __future__ import annotations

from pathlib import Path

SANDBOX_SESSION_NICE = 10  # each sandbox command's session: the agents and what they run
RUNNER_SESSION_NICE = 5  # the detached runner's session: proxy, trainer and the demo's engine


def lower_session_weight(pid: int, nice: int) -> None:
    """Run the session that ``pid`` leads, with all it starts, at ``nice`` (best effort: a
    kernel without autogroups, or a process already gone, keeps the default)."""
    try:
        Path(f"/proc/{pid}/autogroup").write_text(f"{nice}\n")
    except OSError:
        pass


def nice_weight(nice: int) -> int:
    """The scheduler's weight for a nice value (the kernel's table: 1024 at 0, 1.25× per step)."""
    return max(1, round(1024 / 1.25**nice))


def lower_cgroup_weight(path: Path, nice: int) -> None:
    """Give the cgroup at ``path`` the CPU weight of ``nice`` (v2 ``cpu.weight.nice``, or
    ``cpu.weight``; v1 ``cpu.shares``). Best effort: a cgroup without the cpu controller keeps
    what it has."""
    candidates = (
        ("cpu.weight.nice", str(nice)),
        ("cpu.weight", str(max(1, round(nice_weight(nice) * 100 / 1024)))),  # 100 is nice 0
        ("cpu.shares", str(nice_weight(nice))),
    )
    for name, value in candidates:
        try:
            (path / name).write_text(value)
            return
        except OSError:
            continue
