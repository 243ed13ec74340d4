"""Faults and races: cancels and stops landing at random points of start, exec and stop.

Every path must end within a bounded time and leave no folder, cgroup or process behind; exit
codes of concurrent commands must stay exact (no double reaping of child processes).
"""

import asyncio
import logging
import os
import random
import uuid
from pathlib import Path

import pytest

from tbconsole.sandbox.namespace import NamespaceSandbox, SandboxError, SandboxSpec

from tests_support.processes import pids_with

pytestmark = [pytest.mark.e2e, pytest.mark.root]

# CI's size; the full stress (50 iterations) with TBCONSOLE_STRESS_ITERATIONS=50.
ITERATIONS = int(os.environ.get("TBCONSOLE_STRESS_ITERATIONS", "20"))
SANDBOXES_PER_ITERATION = 3
ITERATION_BOUND_SEC = 20  # far above a healthy iteration (~0.2 s): reaching it means a hang
MARKER = "7450"  # in the commands' argv, to find their processes


class _AsyncioWarnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def asyncio_warnings():
    handler = _AsyncioWarnings()
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)
    yield handler.messages
    logger.removeHandler(handler)


def _cgroup_mounts() -> list[Path]:
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype = fields[fields.index("-") + 1]
        if fstype in ("cgroup", "cgroup2"):
            mounts.append(Path(fields[4]))
    return mounts


def cgroups_of(ids: set[str]) -> list[Path]:
    """Cgroup folders, in any hierarchy and under any parent, whose name holds one of ids."""
    found = []
    for mount in _cgroup_mounts():
        for dirpath, dirnames, _ in os.walk(mount):
            found += [Path(dirpath, d) for d in dirnames if any(i in d for i in ids)]
    return found


def processes_of(root: Path) -> list[int]:
    """Host pids that belong to sandboxes under root (by argv, or by the holder's environment,
    which every process of the holder chain inherits, the namespace's init included)."""
    found = set(pids_with(str(root))) | set(pids_with(f"sleep {MARKER}"))
    needle = str(root).encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if needle in (proc / "environ").read_bytes():
                    found.add(int(proc.name))
            except OSError:
                pass
    found.discard(os.getpid())
    return sorted(found)


async def _settle(task: asyncio.Task) -> str:
    try:
        await task
        return "ok"
    except asyncio.CancelledError:
        return "cancelled"
    except (SandboxError, TimeoutError, RuntimeError) as exc:
        return type(exc).__name__


class _Subject:
    """One sandbox under test, driven directly or through Harbor's environment interface
    (whose start also runs commands: the work folders and the task's setup.sh)."""

    def __init__(self, via: str, name: str, root: Path, memory_mb: int | None, tmp: Path):
        self.via = via
        if via == "namespace":
            self.box = NamespaceSandbox(SandboxSpec(name=name, root=root, memory_mb=memory_mb))
            return
        from harbor.models.task.config import EnvironmentConfig
        from harbor.models.trial.paths import TrialPaths

        from tbconsole.sandbox.environment import LocalSandbox

        env_dir = tmp / name / "environment"
        env_dir.mkdir(parents=True)
        (env_dir / "setup.sh").write_text("sleep 0.02; echo prepared > /app/state\n")
        paths = TrialPaths(tmp / name / "trial")
        paths.mkdir()
        self.env = LocalSandbox(
            environment_dir=env_dir,
            environment_name="stress",
            session_id=name,
            trial_paths=paths,
            task_env_config=EnvironmentConfig(memory_mb=memory_mb),
            root=str(root),
        )

    async def start(self):
        if self.via == "namespace":
            await self.box.start()
        else:
            await self.env.start(force_build=False)

    async def exec(self, command: str) -> int:
        if self.via == "namespace":
            return (await self.box.exec(command)).return_code
        return (await self.env.exec(command)).return_code

    async def stop(self):
        if self.via == "namespace":
            await self.box.stop()
        else:
            await self.env.stop(delete=True)
            await self.env.wait_stopped()


async def _scenario(box: _Subject, kind: str, rnd: random.Random) -> None:
    start = asyncio.ensure_future(box.start())
    if kind == "cancel_start":
        await asyncio.sleep(rnd.uniform(0, 0.06))
        start.cancel()
        await _settle(start)
    elif kind == "stop_during_start":
        await asyncio.sleep(rnd.uniform(0, 0.06))
        await box.stop()  # from another task than the one starting it
        await _settle(start)
    else:
        await start
        command = f"sleep {MARKER} & setsid sleep {MARKER} & sleep {MARKER}"
        running = asyncio.ensure_future(box.exec(command))
        await asyncio.sleep(rnd.uniform(0, 0.05))
        if kind == "cancel_exec":
            running.cancel()
            assert await _settle(running) == "cancelled"
        elif kind == "stop_during_exec":
            await box.stop()
            outcome = await _settle(running)  # the command ends with its sandbox, one way or another
            assert outcome in ("ok", "SandboxError"), outcome
        elif kind == "cancel_stop":
            stopping = asyncio.ensure_future(box.stop())
            await asyncio.sleep(rnd.uniform(0, 0.01))
            stopping.cancel()
            await _settle(stopping)
            await _settle(running)
    await box.stop()  # what every owner does at the end, whatever happened before


@pytest.mark.parametrize("via", ["namespace", "harbor"])
async def test_random_cancels_and_stops_leave_nothing(via, root, tmp_path, asyncio_warnings):
    rnd = random.Random(4242)
    kinds = ["cancel_start", "stop_during_start", "cancel_exec", "stop_during_exec", "cancel_stop"]
    token = uuid.uuid4().hex[:6]  # in every sandbox's name, so in its folder and cgroup names
    for iteration in range(ITERATIONS):
        boxes = [
            _Subject(via, f"st{token}-{iteration}-{i}", root, 256 if rnd.random() < 0.7 else None, tmp_path)
            for i in range(SANDBOXES_PER_ITERATION)
        ]
        chosen = [rnd.choice(kinds) for _ in boxes]
        tasks = [asyncio.ensure_future(_scenario(box, kind, rnd)) for box, kind in zip(boxes, chosen, strict=True)]
        done, pending = await asyncio.wait(tasks, timeout=ITERATION_BOUND_SEC)
        assert not pending, f"iteration {iteration}: {chosen} still running after {ITERATION_BOUND_SEC} s"
        for task in done:
            task.result()
        # Everything is gone as soon as the last stop() returned.
        assert not any(root.iterdir()), f"iteration {iteration} {chosen}: {list(root.iterdir())}"
        assert processes_of(root) == [], f"iteration {iteration} {chosen}"
        assert cgroups_of({token}) == [], f"iteration {iteration} {chosen}"
    assert not [m for m in asyncio_warnings if "already read" in m or "Unknown child" in m]


async def test_concurrent_exit_codes_stay_exact(root, asyncio_warnings):
    """Many commands at once with known exit codes, some with background children, some
    cancelled, while other sandboxes start and stop: each reported code is the command's own."""
    rnd = random.Random(7)
    boxes = [NamespaceSandbox(SandboxSpec(name=f"codes{i}", root=root)) for i in range(3)]
    await asyncio.gather(*(box.start() for box in boxes))

    async def churn():  # sandboxes starting and stopping alongside
        for i in range(15):
            box = NamespaceSandbox(SandboxSpec(name=f"churn{i}", root=root, memory_mb=128))
            await box.start()
            await box.exec("true")
            await box.stop()

    async def command(i: int):
        box = boxes[i % len(boxes)]
        code = rnd.choice([0, 1, 7, 42, 255])
        shape = rnd.choice(
            [
                "exit {c}",
                "sleep 5 & exit {c}",  # a child keeping the output open
                "(exit {c})",
                "sh -c 'exit {c}' & wait $!",
                "sleep 0.0{s}; exit {c}",
            ]
        )
        script = shape.format(c=code, s=rnd.randint(1, 9))
        cancel = rnd.random() < 0.5
        task = asyncio.ensure_future(box.exec(script))
        if cancel:
            await asyncio.sleep(rnd.uniform(0, 0.03))
            task.cancel()
        try:
            result = await task
        except asyncio.CancelledError:
            return None
        assert result.return_code == code, (script, result)
        return code

    try:
        results = await asyncio.wait_for(asyncio.gather(churn(), *(command(i) for i in range(600))), timeout=60)
    finally:
        await asyncio.gather(*(box.stop() for box in boxes))
    assert sum(r is not None for r in results[1:]) > 200  # many ran to the end
    assert not any(root.iterdir())
    assert not [m for m in asyncio_warnings if "already read" in m or "Unknown child" in m], asyncio_warnings
