"""Stale sandbox cgroups are found and removed wherever their runner made them; live ones stay.

Real cgroups: each runner is a child process moved into a cgroup of its own (as a runner started
from a systemd scope or another job's cgroup would be), never the cleaning test process's one.
"""

import json
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tbconsole.sandbox import limits
from tbconsole.sandbox.namespace import clean_leftovers

from tests_support.prereqs import CGROUP_FIX, missing
from tests_support.processes import pids_with

pytestmark = [pytest.mark.e2e, pytest.mark.root]

MARKER = "7451"
RUNNER = textwrap.dedent("""
    import asyncio, json, os, subprocess, sys
    from pathlib import Path
    from tbconsole.sandbox.namespace import NamespaceSandbox, SandboxSpec

    for parent in sys.argv[2:]:  # run from a cgroup of our own, as if from another scope
        Path(parent, "cgroup.procs").write_text(str(os.getpid()))

    async def main():
        box = NamespaceSandbox(SandboxSpec(name="cg", root=Path(sys.argv[1]), memory_mb=128, cpus=1))
        await box.start()
        paths = [str(p) for p in box._cgroup.paths] if box._cgroup else []
        # A process of the sandbox's cgroup outside its namespace, which outlives this runner.
        subprocess.Popen(["/bin/sh", "-c", box._cgroup.join_script() + " exec sleep {split_marker}"],
                         start_new_session=True)
        print(json.dumps({{"id": box.id, "cgroups": paths, "note": box.limits_note}}), flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the test kills us

    asyncio.run(main())
""").format(split_marker=f'{MARKER[:2]}""{MARKER[2:]}')  # only sleep's own argv holds MARKER


def _hierarchies() -> list[Path]:
    """Where limits.create makes a sandbox's cgroups on this host."""
    if (limits.CGROUP_ROOT / "cgroup.controllers").exists():
        return [limits.CGROUP_ROOT]
    return [limits.CGROUP_ROOT / c for c in ("memory", "cpu") if (limits.CGROUP_ROOT / c).is_dir()]


@pytest.fixture
def foreign_parents():
    """A fresh cgroup per hierarchy, elsewhere than this process's own."""
    made = []

    def make() -> list[Path]:
        paths = []
        for hierarchy in _hierarchies():
            path = hierarchy / f"tbctest-{uuid.uuid4().hex[:8]}"
            try:
                path.mkdir()
            except OSError as exc:
                missing(f"cannot create cgroups here: {exc.strerror}", CGROUP_FIX)
            made.append(path)
            paths.append(path)
        if not paths:
            missing("no cgroup hierarchy with memory or cpu here", CGROUP_FIX)
        return paths

    yield make
    for path in reversed(made):
        for _ in range(100):  # empty once the runner processes moved into it are reaped
            try:
                path.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.02)


def _start_runner(root: Path, parents: list[Path]) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(root), *map(str, parents)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"runner failed (exit {proc.wait()})"
    info = json.loads(line)
    if info["note"] or not info["cgroups"]:
        proc.kill()
        proc.wait()
        clean_leftovers(root)
        missing(f"limits not applied here: {info['note']}", CGROUP_FIX)
    return proc, info


def test_dead_runners_cgroups_are_removed_wherever_they_are_and_live_ones_stay(root, foreign_parents):
    dead_parents, live_parents = foreign_parents(), foreign_parents()
    dead, dead_info = _start_runner(root, dead_parents)
    live, live_info = _start_runner(root, live_parents)
    try:
        own = limits._own_cgroups()
        for path in map(Path, dead_info["cgroups"] + live_info["cgroups"]):
            assert path.is_dir()
            # Not under the cleaning process's cgroup: it must search, not guess.
            assert not any(
                str(path).startswith(str(limits.CGROUP_ROOT / c / own[c].lstrip("/")) + "/")
                for c in ("memory", "cpu", "")
                if own.get(c, "/") != "/"
            )
        # Each runner prints its cgroups as soon as it has started its cgroup's process: that
        # process is a shell until it execs sleep, so wait for both sleeps (a loaded machine
        # showed one) before the runner is killed.
        deadline = time.monotonic() + 30
        while len(pids_with(f"sleep {MARKER}")) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        dead.send_signal(signal.SIGKILL)
        dead.wait()
        # The runner is gone; a process it put in its sandbox's cgroup is still there.
        assert len(pids_with(f"sleep {MARKER}")) == 2
        assert all(Path(p).is_dir() for p in dead_info["cgroups"])

        assert clean_leftovers(root) == [dead_info["id"]]

        assert not any(Path(p).exists() for p in dead_info["cgroups"])
        assert all(Path(p).is_dir() for p in live_info["cgroups"])  # its runner lives
        assert all(limits._procs(Path(p)) for p in live_info["cgroups"])  # untouched inside
        assert len(pids_with(f"sleep {MARKER}")) == 1  # the dead one's stray was killed

        live.send_signal(signal.SIGKILL)
        live.wait()
        assert clean_leftovers(root) == [live_info["id"]]
        assert not any(Path(p).exists() for p in live_info["cgroups"])
        assert pids_with(f"sleep {MARKER}") == []
    finally:
        for proc in (dead, live):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        clean_leftovers(root)


def test_clean_stale_names(monkeypatch, foreign_parents):
    """Dead owner: removed, also below a parent whose name looks like ours. Owner unknown
    (another pid namespace, whose pids mean nothing here, or a name from before owners were in
    it): only once empty and old, and nothing inside is ever killed. Anything else: never."""
    parent = foreign_parents()[0]
    namespace = limits._pid_namespace()
    unit = parent / "tbconsole-train.service"  # e.g. a systemd unit: not a sandbox's cgroup
    stale = unit / f"tbconsole.{namespace}.4194304999.1.gone-01234567"  # no such pid can exist
    mine = parent / limits.cgroup_name("alive-01234567")
    foreign_empty = parent / "tbconsole.1.4194304999.1.far-01234567"
    foreign_busy = parent / "tbconsole.1.4194304999.1.farbusy-01234567"
    legacy_empty = parent / "tbconsole-old-89abcdef"
    legacy_busy = parent / "tbconsole-busy-89abcdef"
    made = [unit, stale, mine, foreign_empty, foreign_busy, legacy_empty, legacy_busy]
    for path in made:
        path.mkdir()
    holders = [
        subprocess.Popen(["/bin/sh", "-c", f"echo $$ > {busy}/cgroup.procs && exec sleep 1{MARKER}"])
        for busy in (foreign_busy, legacy_busy)
    ]
    try:
        for _ in range(100):
            if limits._procs(foreign_busy) and limits._procs(legacy_busy):
                break
            time.sleep(0.02)
        assert stale in limits.clean_stale()
        assert not stale.exists() and unit.is_dir() and mine.is_dir()
        assert foreign_empty.is_dir() and legacy_empty.is_dir()  # too recent: maybe just made
        monkeypatch.setattr(limits, "UNKNOWN_OWNER_GRACE_SEC", -1)
        limits.clean_stale()
        assert not foreign_empty.exists() and not legacy_empty.exists()
        assert foreign_busy.is_dir() and legacy_busy.is_dir() and mine.is_dir()
        assert all(holder.poll() is None for holder in holders)  # never killed
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
        for path in reversed(made):
            for _ in range(100):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
