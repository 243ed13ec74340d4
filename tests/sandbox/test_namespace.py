"""The namespace sandbox itself: exec semantics, transfers, isolation and cleanup."""

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tbconsole.sandbox import limits
from tbconsole.sandbox.namespace import (
    Bind,
    NamespaceSandbox,
    SandboxError,
    SandboxSpec,
    clean_leftovers,
)

from tests_support.paths import REPO
from tests_support.prereqs import CGROUP_FIX, missing
from tests_support.processes import pids_with

pytestmark = [pytest.mark.e2e, pytest.mark.root]


@pytest.fixture
async def sandbox(root):
    box = NamespaceSandbox(SandboxSpec(name="t", root=root))
    await box.start()
    yield box
    await box.stop()


async def test_cwd_env_and_exit_codes(sandbox):
    r = await sandbox.exec("pwd; echo $GREETING; echo err >&2; exit 3", env={"GREETING": "hi"})
    assert r.stdout == b"/app\nhi\n"
    assert r.stderr == b"err\n"
    assert r.return_code == 3
    r = await sandbox.exec("mkdir -p /srv/x && cd /srv/x && pwd")
    assert r.stdout == b"/srv/x\n"
    r = await sandbox.exec("pwd", cwd="/srv/x")
    assert r.stdout == b"/srv/x\n"
    r = await sandbox.exec("true", cwd="/does/not/exist")
    assert r.return_code != 0


async def test_base_environment_is_clean(sandbox):
    r = await sandbox.exec("echo $PATH; echo $HOME; ls -A /tmp | wc -l")
    path, home, tmp_entries = r.stdout.decode().split()
    assert path.startswith("/usr/local/sbin") and ".pyenv" not in path
    assert home == "/root"
    assert tmp_entries == "0"  # host /tmp is not visible


async def test_user_switch(sandbox):
    r = await sandbox.exec("id -u; id -g; echo $HOME", user="nobody")
    uid, gid, home = r.stdout.decode().split()
    assert uid == "65534" and gid == "65534" and home == "/nonexistent"
    r = await sandbox.exec("id -u", user=1234)
    assert r.stdout == b"1234\n"
    r = await sandbox.exec("useradd -m agent && id -un", user="root")
    assert r.return_code == 0
    r = await sandbox.exec("id -un; echo $HOME; touch ~/ok && ls ~", user="agent")
    assert r.stdout.decode().split() == ["agent", "/home/agent", "ok"]


async def test_large_output(sandbox):
    r = await sandbox.exec("head -c 10485760 /dev/zero | tr '\\0' x; echo tail >&2")
    assert len(r.stdout) == 10 * 1024 * 1024 and set(r.stdout) == {ord("x")}
    assert r.stderr == b"tail\n"


async def until_gone(marker: str) -> None:
    """Wait for the processes whose command line holds ``marker`` to be gone (a killed process
    lingers a moment as its parent reaps it)."""
    for _ in range(200):
        if not pids_with(marker):
            return
        await asyncio.sleep(0.05)
    assert pids_with(marker) == []


async def test_timeout_kills_the_whole_tree(sandbox):
    marker = "7431"
    with pytest.raises(TimeoutError):
        # A child in its own session escapes a process-group kill; it must die too.
        await sandbox.exec(f"setsid sleep {marker} & sleep {marker}", timeout_sec=1)
    await until_gone(f"sleep {marker}")
    # The sandbox is still usable afterwards.
    assert (await sandbox.exec("echo alive")).stdout == b"alive\n"


async def test_cancel_kills_the_command(sandbox):
    task = asyncio.create_task(sandbox.exec("sleep 7432"))
    for _ in range(600):  # until the command runs
        if pids_with("sleep 7432"):
            break
        await asyncio.sleep(0.05)
    assert pids_with("sleep 7432")
    task.cancel()
    try:
        result = await task
    except asyncio.CancelledError:
        result = "cancelled"
    assert result == "cancelled"
    await until_gone("sleep 7432")


async def test_background_job_holding_the_output_does_not_hang_exec(sandbox):
    r = await sandbox.exec("sleep 7436 & echo launched")  # returns while its job still holds stdout
    assert r.stdout == b"launched\n" and r.return_code == 0
    assert pids_with("sleep 7436")  # still running, as the command asked


async def test_workdir_starts_empty_even_if_the_host_has_one(root):
    host_dir = Path("/opt/tbconsole-workdir-test")
    host_dir.mkdir(exist_ok=True)
    (host_dir / "host-file").write_text("x")
    try:
        box = NamespaceSandbox(SandboxSpec(name="wd", root=root, workdir=str(host_dir)))
        await box.start()
        try:
            r = await box.exec("ls -A; pwd")
            assert r.stdout.decode() == f"{host_dir}\n"
        finally:
            await box.stop()
        assert (host_dir / "host-file").exists()
    finally:
        (host_dir / "host-file").unlink()
        host_dir.rmdir()


async def test_background_process_survives_between_execs(sandbox):
    r = await sandbox.exec("tmux new-session -d -s work 'sleep 7433' && echo started")
    assert r.stdout == b"started\n"
    r = await sandbox.exec("tmux has-session -t work && echo still-there")
    assert r.stdout == b"still-there\n"
    r = await sandbox.exec("nohup sh -c 'exit 0' >/dev/null 2>&1 & sleep 0.3; echo $!")
    finished = r.stdout.decode().strip()
    # Orphans are reaped by the sandbox's init: a finished job is really gone.
    r = await sandbox.exec(f"kill -0 {finished} 2>/dev/null && echo zombie || echo gone")
    assert r.stdout == b"gone\n"


async def test_host_paths_are_visible_read_only_even_under_hidden_tmp(root, tmp_path):
    shared = tmp_path / "venv-like"
    shared.mkdir()
    (shared / "tool").write_text("#!/bin/sh\necho from-host\n")
    (shared / "tool").chmod(0o755)
    box = NamespaceSandbox(SandboxSpec(name="binds", root=root, host_paths=(str(shared),)))
    await box.start()
    try:
        r = await box.exec(f"{shared}/tool; touch {shared}/x 2>/dev/null || echo read-only")
        assert r.stdout == b"from-host\nread-only\n"
        assert (await box.exec("ls -A /tmp | wc -l")).stdout.strip() != b"0"  # only the bind's parents
    finally:
        await box.stop()


async def test_binds_show_host_folders_writable_and_survive_the_workdir_reset(root, tmp_path):
    logs, workdir, inner = tmp_path / "logs", tmp_path / "work", tmp_path / "inner"
    for folder in (logs, workdir, inner):
        folder.mkdir()
    (workdir / "kept").write_text("host file\n")
    binds = (
        Bind(str(inner), "/logs/agent/inner"),  # inside the last one's target: bound after it
        Bind(str(workdir), "/app/sub", read_only=True),
        Bind(str(logs), "/logs/agent"),
    )
    box = NamespaceSandbox(SandboxSpec(name="rw-binds", root=root, workdir="/app", binds=binds))
    await box.start()
    try:
        r = await box.exec("echo live > /logs/agent/out.txt && cat /app/sub/kept && echo in > /logs/agent/inner/x")
        assert r.return_code == 0, r.stderr
        assert (logs / "out.txt").read_text() == "live\n"  # on the host before the sandbox ends
        assert (inner / "x").read_text() == "in\n"
        r = await box.exec("touch /app/sub/new 2>/dev/null || echo read-only")
        assert r.stdout == b"read-only\n"
    finally:
        await box.stop()
    # The sandbox is gone, the host folders and what was written into them stay.
    assert (workdir / "kept").read_text() == "host file\n" and (logs / "out.txt").exists()


async def test_writes_stay_inside(sandbox):
    marker = Path("/opt/tbconsole-sandbox-write-test")
    r = await sandbox.exec(f"echo inside > {marker} && cat {marker}")
    assert r.stdout == b"inside\n"
    assert not marker.exists()


async def test_upload_and_download(sandbox, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("alpha")
    (src / "sub" / "b.bin").write_bytes(bytes(range(256)) * 100)
    await sandbox.upload(src, "/data/in")
    r = await sandbox.exec("cat /data/in/a.txt; wc -c < /data/in/sub/b.bin")
    assert r.stdout == b"alpha25600\n"

    await sandbox.upload(src / "a.txt", "/data/renamed.txt")
    assert (await sandbox.exec("cat /data/renamed.txt")).stdout == b"alpha"

    await sandbox.exec("mkdir -p /out/d && echo one > /out/d/1 && echo two > /out/f")
    await sandbox.download("/out/d", tmp_path / "got")
    assert (tmp_path / "got" / "1").read_text() == "one\n"
    await sandbox.download("/out/f", tmp_path / "file" / "f2")
    assert (tmp_path / "file" / "f2").read_text() == "two\n"
    with pytest.raises(SandboxError):
        await sandbox.download("/no/such/file", tmp_path / "x")


async def test_stop_leaves_nothing(root):
    box = NamespaceSandbox(SandboxSpec(name="stop", root=root, memory_mb=256, cpus=1))
    await box.start()
    await box.exec("tmux new-session -d 'sleep 7434'; sleep 7434 >/dev/null 2>&1 &")
    init = box.init_pid
    assert pids_with("sleep 7434")
    await box.stop()
    await until_gone("sleep 7434")
    assert not Path(f"/proc/{init}").exists()
    assert not box.folder.exists()
    assert "overlay" not in Path("/proc/self/mountinfo").read_text()
    await box.stop()  # idempotent
    with pytest.raises(SandboxError):
        await box.exec("true")


async def test_memory_limit_applies(root):
    box = NamespaceSandbox(SandboxSpec(name="mem", root=root, memory_mb=64))
    await box.start()
    try:
        if box.limits_note:
            missing(f"memory limits not applied here: {box.limits_note}", CGROUP_FIX)
        # Touch 256 MB inside a 64 MB ceiling: the kernel's OOM killer ends it.
        r = await box.exec("python3 -c 'b = bytearray(256 * 1024 * 1024); print(len(b))'")
        assert r.return_code != 0
        r = await box.exec("python3 -c 'b = bytearray(16 * 1024 * 1024); print(len(b))'")
        assert r.return_code == 0
    finally:
        await box.stop()


async def test_no_network_isolates_loopback(root):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        probe = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('reached')\""
        open_box = NamespaceSandbox(SandboxSpec(name="net", root=root))
        await open_box.start()
        try:
            assert (await open_box.exec(probe)).stdout == b"reached\n"
        finally:
            await open_box.stop()
        closed_box = NamespaceSandbox(SandboxSpec(name="nonet", root=root, isolate_network=True))
        await closed_box.start()
        try:
            r = await closed_box.exec(probe)
            assert r.return_code != 0 and b"reached" not in r.stdout
            # Its own loopback works.
            r = await closed_box.exec(
                "python3 -c \"import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print('ok')\""
            )
            assert r.stdout == b"ok\n"
        finally:
            await closed_box.stop()
    finally:
        server.close()


def test_crashed_runner_leaves_nothing_running_and_next_start_cleans(root):
    # A runner that starts a sandbox with a background job, then dies by SIGKILL.
    script = textwrap.dedent(f"""
        import asyncio, os, signal
        from pathlib import Path
        from tbconsole.sandbox.namespace import NamespaceSandbox, SandboxSpec
        async def main():
            box = NamespaceSandbox(SandboxSpec(name="crash", root=Path({str(root)!r}), memory_mb=128))
            await box.start()
            await box.exec("sleep 7435 >/dev/null 2>&1 &")
            print(box.init_pid, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        asyncio.run(main())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    init_pid = int(proc.stdout.strip())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (Path(f"/proc/{init_pid}").exists() or pids_with("sleep 7435")):
        time.sleep(0.05)
    assert not Path(f"/proc/{init_pid}").exists(), "the namespace outlived its runner"
    assert pids_with("sleep 7435") == []
    leftovers = [p.name for p in root.iterdir()]
    assert len(leftovers) == 1  # the folder stays until someone cleans up
    assert clean_leftovers(root) == leftovers
    assert not any(root.iterdir())
    # Its cgroups too, wherever the runner made them.
    assert not [c for mount in limits._cgroup_mounts() for c in mount.rglob(f"*{leftovers[0]}")]


def test_clean_leftovers_keeps_live_sandboxes(root):
    async def scenario():
        box = NamespaceSandbox(SandboxSpec(name="live", root=root))
        await box.start()
        try:
            assert clean_leftovers(root) == []
            assert (await box.exec("echo ok")).stdout == b"ok\n"
        finally:
            await box.stop()

    asyncio.run(scenario())


def test_not_root_gets_a_clear_message(monkeypatch, capsys):
    from tbconsole.entry.main import main

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    task = REPO / "tbconsole" / "tasks" / "hello-file"
    assert main(["trial", str(task)]) == 1
    err = capsys.readouterr().err
    assert "needs root" in err and "another Harbor environment" in err
    assert "Traceback" not in err
