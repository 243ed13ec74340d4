import contextlib
import gc
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tbconsole.common import offline
from tbconsole.record.events import read_events

from tests_support.paths import FIXTURES, TB2_SAMPLE
from tests_support.prereqs import IN_CI, missing
from tests_support.recorded import DEMO_RUN_EVAL_GROUP_SIZE, DEMO_RUN_STEPS

offline.apply_embedded_defaults()
# The processor's name that platform.platform() reports comes from `uname -p`, run once per
# interpreter and cached (the OpenAI SDK reads it for its headers): asked here, before any unit
# test, which may start no process.
platform.platform()


def sandbox_problem() -> str | None:
    from tbconsole.sandbox.namespace import SandboxUnavailable, preflight

    try:
        preflight()
    except SandboxUnavailable as exc:
        return str(exc)
    return None


SANDBOX_FIX = "Run the tests as root on Linux with user namespaces and overlayfs (see docs/sandbox.md)."


def pytest_collection_finish(session):
    # What the imports and the collection made lives for the whole session: out of the collector's
    # way, so that the collections during the tests, the ones pytest makes at its end and the one
    # at exit do not walk it again and again (seconds, with torch, harbor and litellm loaded).
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    unmarked = [i.nodeid for i in items if ("root" in i.keywords or "slow" in i.keywords) and "e2e" not in i.keywords]
    if unmarked:
        raise pytest.UsageError(f"marked root or slow but not e2e (a sandbox or a long run is end to end): {unmarked}")
    problem = sandbox_problem()
    if problem is None or IN_CI:  # in CI each root test fails in its setup instead (pytest_runtest_setup)
        return
    skip = pytest.mark.skip(reason=f"local sandbox unavailable here: {problem}")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    if item.get_closest_marker("e2e") is None:
        # The engine runs in-process: refused by name, before it is set up.
        engine = [name for name in ("engine", "service_client") if name in getattr(item, "fixturenames", ())]
        if engine:
            pytest.fail(f"{item.nodeid} uses the engine ({engine[0]}): {MARK_IT}", pytrace=False)
    if IN_CI and "root" in item.keywords:
        problem = sandbox_problem()
        if problem is not None:
            missing(f"local sandbox unavailable here: {problem}", SANDBOX_FIX)
    with _no_process_started(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _no_process_started(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    with _no_process_started(item):
        return (yield)


# -- unit tests start no process ------------------------------------------------------------------
# The suite splits by cost: unit tests (``-m "not e2e"``, ``make test-fast``) start no process, no
# engine, no sandbox, no demo recording and no console app (Textual's run_test, a snapshot);
# end-to-end tests carry the ``e2e`` marker. While a unit test is set up (its fixtures of every
# scope), runs and is torn down, whatever would start one of these raises, and the test fails even
# where the code under test caught that: a misfiled test shows at once instead of slowing the fast set.

MARK_IT = "mark it e2e (pytestmark = pytest.mark.e2e, or @pytest.mark.e2e on the test)"
STARTED = pytest.StashKey[list[str]]()


class NotAUnitTest(Exception):
    """A test not marked e2e started a process, the engine or the console app."""


def _process_starters() -> list[tuple[object, str]]:
    """What starts a process: subprocess (and asyncio's subprocesses, os.popen, which go through it),
    fork (multiprocessing, pty, os.spawn*), posix_spawn, os.system, and the fork_exec that
    multiprocessing's spawn calls directly."""
    import _posixsubprocess

    return [
        (subprocess.Popen, "_execute_child"),
        (os, "fork"),
        (os, "forkpty"),
        (os, "posix_spawn"),
        (os, "posix_spawnp"),
        (os, "system"),
        (_posixsubprocess, "fork_exec"),
    ]


def _caller() -> str:
    """Where the process was asked for: the innermost frame outside the standard library."""
    import sysconfig
    import traceback

    stdlib = sysconfig.get_paths()["stdlib"]
    for frame in reversed(traceback.extract_stack()[:-2]):
        if not frame.filename.startswith(stdlib):
            return f"{frame.filename}:{frame.lineno}"
    return "?"


@contextlib.contextmanager
def _no_process_started(item):
    """For a test not marked e2e: starting a process raises (and is noted in the item's stash). The
    engine and the console app too, where their modules are loaded (they run in-process)."""
    if item.get_closest_marker("e2e") is not None:
        yield
        return
    started = item.stash.setdefault(STARTED, [])

    def refuse(what: str):
        def starter(*args, **kwargs):
            what_where = f"{what} from {_caller()}"
            started.append(what_where)
            raise NotAUnitTest(f"a unit test started {what_where}: {MARK_IT}")

        return starter

    with pytest.MonkeyPatch.context() as patch:
        for owner, name in _process_starters():
            if hasattr(owner, name):
                patch.setattr(owner, name, refuse(f"a process ({getattr(owner, '__name__', owner)}.{name})"))
        server = sys.modules.get("tbconsole.engine.server")
        if server is not None:
            patch.setattr(server.Engine, "__init__", refuse("the engine"))
        textual_app = sys.modules.get("textual.app")
        if textual_app is not None:  # run_test for Pilot, run_async for run and the snapshots
            patch.setattr(textual_app.App, "run_test", refuse("the console app (App.run_test)"))
            patch.setattr(textual_app.App, "run_async", refuse("the console app (App.run_async)"))
        yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A phase of a unit test that started a process fails, though the code under test caught it."""
    report = yield
    started = item.stash.get(STARTED, [])
    if started and report.passed:
        report.outcome = "failed"
        report.longrepr = f"a unit test started {', '.join(dict.fromkeys(started))}: {MARK_IT}"
    started.clear()
    return report


@pytest.fixture(autouse=True)
def own_config_home(tmp_path_factory, monkeypatch):
    """The user's tbconsole settings (the theme kept between consoles) in a folder of the test's
    own: a test, and any console it starts, never reads or writes the real ~/.config/tbconsole."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))


@pytest.fixture
def finished_events():
    """The synthetic run of the fixtures (finished; one group's error decided), its events."""
    return list(read_events(FIXTURES / "finished" / "events.jsonl"))


@pytest.fixture
def awaiting_events():
    """The synthetic run of the fixtures stopped at its error, awaiting a decision."""
    return list(read_events(FIXTURES / "awaiting" / "events.jsonl"))


@pytest.fixture
def sandbox_root() -> Path:
    """A sandbox root of the test's own (not under /tmp, which a sandbox hides), checked empty
    at the end: every sandbox the test started must be gone."""
    import tempfile

    base = Path("/var/tmp/tbconsole-test-sandboxes")
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(dir=base))
    yield path
    assert not any(path.iterdir()), f"sandbox folders left behind: {list(path.iterdir())}"
    path.rmdir()


@pytest.fixture
def tb2_sample() -> Path:
    if not TB2_SAMPLE.is_dir():
        missing(
            f"no Terminal-Bench 2 sample at {TB2_SAMPLE}",
            "Put the project's shared/ folder (with tb2-sample/) beside the repository checkout, "
            "or name it: TBCONSOLE_SHARED=/path/to/shared.",
        )
    return TB2_SAMPLE


def pytest_terminal_summary(terminalreporter):
    """The slowest test files (setup, call and teardown summed): where the suite's time goes, so
    that a file growing past its share shows in every CI log."""
    per_file: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            duration = getattr(report, "duration", None)
            nodeid = getattr(report, "nodeid", "")
            if duration is not None and nodeid:
                file = nodeid.split("::")[0]
                per_file[file] = per_file.get(file, 0.0) + duration
    slowest = sorted(per_file.items(), key=lambda kv: -kv[1])[:15]
    if slowest:
        terminalreporter.write_sep("=", f"slowest files (of {len(per_file)}; {sum(per_file.values()):.0f} s in all)")
        for file, seconds in slowest:
            terminalreporter.write_line(f"{seconds:8.1f} s  {file}")


def pytest_sessionfinish(session, exitstatus):
    # SDK clients of engines that tests already stopped keep a heartbeat thread that would log
    # "connection error" warnings at interpreter exit, after the test summary.
    import logging

    logging.getLogger("tinker").setLevel(logging.CRITICAL)


# A runner's lease held by a process of its own: readers (console, attach, runs) see a live runner.
LEASE_HOLDER = """
import json, sys, time
from tbconsole.record.lease import Lease
with Lease(sys.argv[1], json.loads(sys.argv[2])):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def hold_lease():
    """``hold_lease(folder, command=[...]) -> Popen``: a process holding ``folder``'s runner lease
    (killed at teardown; SIGKILL it in a test to play a runner that dies)."""
    procs: list[subprocess.Popen] = []

    def start(folder, command=("tbconsole", "demo")) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-c", LEASE_HOLDER, str(folder), json.dumps(list(command))],
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


# -- a real demo run, recorded once per test session ----------------------------------------------

DEMO_RUN_TIMEOUT = 1200  # seconds the recording may take (a slow or busy machine takes several minutes)
_demo_recorded = False


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """The test that first asks for ``demo_run`` records it: its own timeout (pytest-timeout's
    marker, read after this) gets the recording's time on top."""
    marker = item.get_closest_marker("timeout")
    if not _demo_recorded and marker is not None and "demo_run" in getattr(item, "fixturenames", ()):
        own = marker.args[0] if marker.args else marker.kwargs.get("timeout")
        if own:
            item.add_marker(pytest.mark.timeout(own + DEMO_RUN_TIMEOUT), append=False)
    yield


@pytest.fixture
def demo_run(request) -> Path:
    """The run folder of the session's demo recording (``demo_recording``), for e2e tests only: a
    unit test that asks for it fails before anything is recorded."""
    if request.node.get_closest_marker("e2e") is None:
        pytest.fail(f"{request.node.nodeid} uses the demo recording (demo_run): {MARK_IT}", pytrace=False)
    return request.getfixturevalue("demo_recording")


@pytest.fixture(scope="session")
def demo_recording(tmp_path_factory) -> Path:
    """The run folder of a real, finished `tbconsole demo --headless --multi-turn` (DEMO_RUN_STEPS
    steps on the embedded default: real engine, Harbor trials in the local sandbox, mini-swe-agent
    through the capture proxy, each trial two model calls that train as one datum, PPO updates and
    a checkpoint after each; its held-out evaluations before the first update and after the last
    score each variant DEMO_RUN_EVAL_GROUP_SIZE times). Recorded once per test session and shared,
    by the learning test and every test that reads a real run: tests read it, never write to it.
    (The one-command demo's defaults have end-to-end tests of their own in tests/demo.) Tests that
    use it (through ``demo_run``) need the sandbox: mark them ``e2e`` and ``root``.

    ``TBCONSOLE_TEST_DEMO_RUN=<run folder>`` reuses a folder recorded earlier (for development;
    CI records its own, so a change to what a run writes is always what the tests see)."""
    from tbconsole.demo.recipe import MULTI_TURN_FLAG

    global _demo_recorded
    reuse = os.environ.get("TBCONSOLE_TEST_DEMO_RUN")
    if reuse:
        _demo_recorded = True
        return Path(reuse)
    problem = sandbox_problem()
    if problem is not None:
        missing(f"local sandbox unavailable here: {problem}", SANDBOX_FIX)
    log = tmp_path_factory.mktemp("demo-run") / "run"
    # W&B pass-through, offline: the run's metrics and advisories also go to a local W&B run (under
    # the run folder, as the cookbook's WandbLogger puts it); wandb's other folders stay beside it.
    wandb_home = log.parent / "wandb-home"
    wandb_env = {
        name: str(wandb_home / name) for name in ("WANDB_DIR", "WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR")
    }
    # The run's temporary files go to a folder of its own (TMPDIR), and /tmp is listed before and
    # after: what the run leaves in either is recorded for the test that says it leaves nothing.
    tmpdir = log.parent / "tmpdir"
    tmpdir.mkdir()
    tmp_before = tmp_entries()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tbconsole",
            "demo",
            "--headless",
            MULTI_TURN_FLAG,
            f"config.log_path={log}",
            f"config.max_steps={DEMO_RUN_STEPS}",
            f"config.eval_every={DEMO_RUN_STEPS}",
            "config.save_every=1",  # a checkpoint per update: the learning test reads the policy after each
            f"harbor.eval_group_size={DEMO_RUN_EVAL_GROUP_SIZE}",
            "config.wandb_project=tbconsole-test",
        ],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "WANDB_MODE": "offline",
            "WANDB_SILENT": "true",
            **wandb_env,
            "TMPDIR": str(tmpdir),
        },
        timeout=DEMO_RUN_TIMEOUT,
    )
    _demo_recorded = True
    DEMO_RUN_LEFT["TMPDIR"] = sorted(p.name for p in tmpdir.iterdir())
    DEMO_RUN_LEFT["/tmp"] = sorted(tmp_entries() - tmp_before)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return log


# What the demo recording left in its TMPDIR and in /tmp (filled in by ``demo_run`` when it records).
DEMO_RUN_LEFT: dict[str, list[str]] = {}
TMP = Path("/tmp")


def tmp_entries() -> set[str]:
    """The entries of /tmp, less pytest's own folders (``pytest-of-<user>``)."""
    return {name for name in os.listdir(TMP) if not name.startswith("pytest-of-")}


@pytest.fixture
def list_tmp():
    """``list_tmp() -> set[str]``: the entries of /tmp, less pytest's own folders."""
    return tmp_entries


@pytest.fixture
def demo_run_left(demo_run) -> dict[str, list[str]]:
    """What the demo recording left in its own TMPDIR and in /tmp: ``{"TMPDIR": [...], "/tmp": [...]}``
    (names). Only known when this session recorded it (not with ``TBCONSOLE_TEST_DEMO_RUN``)."""
    if not DEMO_RUN_LEFT:
        missing("the demo run was reused (TBCONSOLE_TEST_DEMO_RUN): what it left is unknown", "Unset it.")
    return DEMO_RUN_LEFT


@pytest.fixture
def tmpfs(tmp_path):
    """Mounts small tmpfs filesystems (``tmpfs("2m")``); unmounts them after the test. Skips
    where mounting is not allowed."""
    mounted = []

    def mount(size: str) -> Path:
        if os.geteuid() != 0:
            missing("mounting a tmpfs needs root", "Run the tests as root.")
        where = tmp_path / f"fs{len(mounted)}"
        where.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
        )
        if done.returncode != 0:
            missing(f"cannot mount a tmpfs: {done.stderr.strip()}", "Run the tests as root where mount is allowed.")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        if subprocess.run(["umount", str(where)]).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], check=True)  # never leave a mount behind
