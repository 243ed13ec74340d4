"""`tbconsole bench soak`: does a run's cost grow with its step count? A real run is about 100
steps over a day; whatever it costs per step that it never gives back (memory, open files,
threads, event-loop time) is a bug that only shows late.
(Over 400 lines: the run, its one-call agent, the samplers and the judgement are the one
measurement, which the bench and ``tests/bench/test_soak.py`` share.)

A real headless run (``tbconsole demo --headless``: the runner, the embedded engine, the capture
proxy, Harbor trials in the local sandbox, the verifier and the cookbook's training step) with
the tiniest trials that still take every one of those paths: one group of two trials a step, each
trial an agent (``OneCallAgent``) that makes one model call through the proxy from inside the
sandbox and runs the command it gets back, then the task's tests score it. ``tbconsole attach``
follows the run on a pseudo-terminal, as a user's console would.

The runner's and the console's resident memory, open file descriptors and threads are read from
/proc every ``POLL_S`` over each step's rollout; a step's figure is their floor (``StepSample``).
At each ``batch.ended`` the runner's open files are checked against the per-step folders: a
descriptor into a finished step's captures, trial folders or trainer log-probs that is still open
at the next step's end was left open. The runner's event-loop lag is measured on its own loop:
the runner process is ``python -m tbconsole demo --headless …`` started through ``runner_main``,
which only adds a ticker task (every 100 ms: how late it woke) to the event loops the main thread
runs and writes each figure to a file. Per step: its p95.

The judgement compares medians of windows, never single samples: the steps around ``--early``
(default step 20, after warm-up: imports, the first checkpoint, caches filling) against the last
steps; a figure passes when the late median is within ``--bound`` % of the early one, or within
an absolute allowance (allocator noise for memory, a descriptor or thread that comes and goes,
load on a shared machine for the lag), whichever is larger.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import select
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbconsole.bench import attach_on_pty
from tbconsole.common.jsonl import loads, new_lines
from tbconsole.common.procgroup import kill_group
from tbconsole.common.stats import percentile
from tbconsole.record.runfolder import CAPTURE_DIR, TRAINER_LOGPROBS_DIR, TRIALS_DIR, RunFolder, step_name

LAG_ENV = "TBCONSOLE_SOAK_LAG_FILE"  # runner_main: where the loop-lag ticker writes
LAG_TICK_S = 0.1
ATTACH_SIZE = (120, 36)
# Where a finished step's files live: none of them may still be open in the runner.
STEP_FOLDERS = (CAPTURE_DIR, TRIALS_DIR, TRAINER_LOGPROBS_DIR)
BOUND_PCT = 10.0
# The absolute allowance per figure, beside the percentage: what noise alone moves it by.
ALLOWANCE = {
    "runner rss MB": 24.0,  # glibc arenas and torch's caching allocator breathe by tens of MB
    "console rss MB": 12.0,
    "runner fds": 4.0,  # an HTTP keep-alive connection or a sandbox pipe that comes and goes
    "console fds": 2.0,
    "runner threads": 2.0,  # executor threads the loop starts and retires on demand
    "console threads": 2.0,
    "runner loop lag p95 ms": 100.0,  # a shared, loaded machine delays any one tick
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, default=200, help="training steps (default 200)")
    parser.add_argument("--early", type=int, default=20, help="the step whose window is the baseline (default 20)")
    parser.add_argument("--window", type=int, default=10, help="steps per window (default 10)")
    parser.add_argument("--bound", type=float, default=BOUND_PCT, help="allowed growth in %% (default 10)")
    parser.add_argument("--no-console", action="store_true", help="no `tbconsole attach` beside the run")
    parser.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it (default: a temp one)")


# -- the runner process, with a loop-lag ticker -------------------------------------------------


def runner_main(argv: list[str]) -> None:
    """``python -m tbconsole ARGV`` with a ticker on the event loops the main thread runs (the
    run's own loop), writing ``<time> <lag ms>`` lines to $TBCONSOLE_SOAK_LAG_FILE."""
    import asyncio
    import runpy

    out = open(os.environ[LAG_ENV], "a", buffering=1)  # noqa: SIM115 - open for the process's life

    async def tick() -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # a loop made here but run by another thread (the SDK's): not the run's
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            await asyncio.sleep(LAG_TICK_S)
            out.write(f"{time.time():.3f} {(loop.time() - started - LAG_TICK_S) * 1000:.2f}\n")

    class Policy(asyncio.DefaultEventLoopPolicy):
        def new_event_loop(self) -> asyncio.AbstractEventLoop:
            loop = super().new_event_loop()
            if threading.current_thread() is threading.main_thread():
                loop.call_soon(lambda: loop.create_task(tick()))
            return loop

    asyncio.set_event_loop_policy(Policy())
    sys.argv = ["tbconsole", *argv]
    runpy.run_module("tbconsole", run_name="__main__", alter_sys=True)


# -- the tiniest trial: one model call from inside the sandbox ---------------------------------

# Runs in the sandbox with the venv's Python, no site (a fast start): one chat completion with a
# bash tool through the capture proxy, then the command it returns, if any.
ONE_CALL = r"""
import json, os, subprocess, sys, urllib.request
body = {
    "model": "policy",
    "max_tokens": int(os.environ["SOAK_MAX_TOKENS"]),
    "messages": [
        {"role": "system", "content": "You are a helpful assistant that can run bash commands."},
        {"role": "user", "content": os.environ["SOAK_INSTRUCTION"]},
    ],
    "tools": [{"type": "function", "function": {"name": "bash", "description": "Run a bash command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}],
}
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions", json.dumps(body).encode(),
    {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
)
with urllib.request.urlopen(request, timeout=120) as response:
    message = json.load(response)["choices"][0]["message"]
for call in message.get("tool_calls") or []:
    try:
        command = json.loads(call["function"]["arguments"]).get("command")
    except ValueError:
        continue
    if command:
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=30)
        sys.stdout.write(done.stdout[-2000:])
"""


def _agent_class():
    from harbor.agents.base import BaseAgent

    class OneCallAgent(BaseAgent):
        """One model call through the capture proxy from inside the sandbox, then its command."""

        @staticmethod
        def name() -> str:
            return "tbconsole-soak-one-call"

        def version(self) -> str:
            return "1"

        async def setup(self, environment) -> None:
            return None

        async def run(self, instruction, environment, context) -> None:
            env = {**self.extra_env, "SOAK_INSTRUCTION": instruction}
            command = f"{shlex.quote(sys.executable)} -S -c {shlex.quote(ONE_CALL)}"
            await environment.exec(command, env=env, timeout_sec=120)

    return OneCallAgent


def __getattr__(name: str) -> Any:
    # Harbor loads the agent by import path; building the class on first use keeps Harbor's
    # import out of `tbconsole bench`'s own start.
    if name == "OneCallAgent":
        return _agent_class()
    raise AttributeError(name)


def trial_config(max_tokens: int, sandbox_root: Path | None = None) -> dict:
    """The demo's trial.json (its sandbox, environment and proxy placeholders), its agent the
    one-call agent; ``sandbox_root``: where the sandboxes go (default: the sandbox's own)."""
    from tbconsole.demo.recipe import demo_trial_config

    config = demo_trial_config(max_tokens)
    if sandbox_root is not None:
        config["environment"]["kwargs"]["root"] = str(sandbox_root)
    agent = config["agent"]
    config["agent"] = {
        "import_path": f"{__name__}:OneCallAgent",
        "env": {**agent["env"], "SOAK_MAX_TOKENS": str(max_tokens)},
    }
    return config


def run_args(log_path: Path, steps: int, max_tokens: int = 64, sandbox_root: Path | None = None) -> list[str]:
    """The demo's keys for the soak: one group of two trials a step, the demo's checkpoints every
    10 steps (a real run's), no held-out evaluation (trials of another shape every 20 steps)."""
    trial = log_path.parent / f"{log_path.name}-trial.json"
    trial.write_text(json.dumps(trial_config(max_tokens, sandbox_root), indent=2))
    return [
        f"config.log_path={log_path}",
        f"config.max_steps={steps}",
        "config.dataset_builder.groups_per_batch=1",
        "config.dataset_builder.group_size=2",
        f"config.max_tokens={max_tokens}",
        "config.eval_every=0",
        f"harbor.trial_config={trial}",
    ]


# -- /proc ---------------------------------------------------------------------------------------


@dataclass
class Proc:
    rss_mb: float
    fds: int
    threads: int
    links: dict[str, str]  # descriptor -> where it points


def read_proc(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/status") as handle:
            status = dict(line.split(":", 1) for line in handle if ":" in line)
        links = {}
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):  # closed between the listing and the read
                links[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
    except (OSError, ValueError):
        return None
    return Proc(int(status["VmRSS"].split()[0]) / 1024, len(links), int(status["Threads"]), links)


# -- the console on a pseudo-terminal -----------------------------------------------------------


class Console:
    """`tbconsole attach LOG_PATH` on a pseudo-terminal; what it draws is read and dropped (a
    terminal that never reads would stall it)."""

    def __init__(self, log_path: Path) -> None:
        cols, rows = ATTACH_SIZE
        self.master, self.proc = attach_on_pty(log_path, cols, rows)
        self.drawn = 0
        self._done = threading.Event()
        self._reader = threading.Thread(target=self._drain, name="soak-console-drain", daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        while not self._done.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.drawn += len(os.read(self.master, 1 << 20))
                except OSError:  # the console has exited
                    return

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self.master, b"q")
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            kill_group(self.proc.pid)  # the console leads its own session: it and anything it started
            self.proc.wait()
        self._done.set()
        self._reader.join(5)
        os.close(self.master)


# -- the run -------------------------------------------------------------------------------------


@dataclass
class StepSample:
    """One step's figures. Memory, descriptors and threads are the step's floor: the least of the
    reads every ``POLL_S`` from its batch.started to its batch.ended (its rollout: the trials
    through proxy, engine and sandbox; the training that follows is in the next step's floor if
    it keeps anything). A leak raises the floor, while what a step takes and gives back (a trial's
    sockets, a sampler's buffers) comes and goes between reads; one read at a fixed event is at the
    mercy of where the step happens to be."""

    step: int
    ended: float = 0.0  # batch.ended's time
    runner: dict[str, float] = field(default_factory=dict)  # rss MB, fds, threads -> floor
    console: dict[str, float] = field(default_factory=dict)
    reads: int = 0
    # At batch.ended: runner descriptors into finished steps' folders (fd -> path), and those of
    # them that were already open at the previous step's batch.ended (left open: a leak).
    step_files: dict[str, str] = field(default_factory=dict)
    left_open: dict[str, str] = field(default_factory=dict)

    def take(self, who: dict[str, float], proc: Proc) -> None:
        for name, value in (("rss MB", proc.rss_mb), ("fds", proc.fds), ("threads", proc.threads)):
            who[name] = min(who.get(name, value), value)


POLL_S = 0.25


@dataclass
class Soak:
    steps: int
    started: float = 0.0
    ended: float = 0.0
    batch_started: dict[int, float] = field(default_factory=dict)
    samples: dict[int, StepSample] = field(default_factory=dict)
    lag_ms: dict[int, float] = field(default_factory=dict)  # step -> p95 of its ticks
    status: str | None = None  # run.ended's
    message: str | None = None
    runner_exit: int | None = None
    console_exit: int | None = None
    console_bytes: int = 0

    @property
    def steps_per_minute(self) -> float:
        ended = sorted(s.ended for s in self.samples.values() if s.ended)
        if len(ended) < 2:
            return float("nan")
        return (len(ended) - 1) / ((ended[-1] - ended[0]) / 60)


def _finished_step_files(links: dict[str, str], root: Path, step: int) -> dict[str, str]:
    """Descriptors into the per-step folders of steps that are over: captures and trial folders
    of ``step`` and before (its trials have all ended), trainer log-probs before it (``step``'s
    are written by its training, which follows batch.ended)."""
    prefixes = [
        str(root / folder / step_name(s)) + "/" for folder in (CAPTURE_DIR, TRIALS_DIR) for s in range(step + 1)
    ]
    prefixes += [str(root / TRAINER_LOGPROBS_DIR / step_name(s)) + "/" for s in range(step)]
    return {fd: link for fd, link in links.items() if link.startswith(tuple(prefixes))}


class _Events:
    """New lines of events.jsonl as they are appended (a line is read only once it is whole)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def new(self) -> list[dict]:
        lines, self.offset = new_lines(self.path, self.offset)
        # A damaged line raises (ValueError): the soak's runner writes whole lines only.
        return [loads(line) for line in lines if line.strip()]


def soak(
    log_path: Path,
    steps: int,
    *,
    console: bool = True,
    timeout_s: float = 6 * 3600,
    sandbox_root: Path | None = None,
    extra_env: dict[str, str] | None = None,
    progress: Callable[[StepSample], None] | None = None,
) -> Soak:
    """Run the soak into ``log_path`` (a fresh folder) and sample it at every batch.ended.

    Long because it is one polling loop whose state (the step being sampled, the attached console,
    the previous step's open files) every branch of it reads and writes."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    lag_file = log_path.parent / f"{log_path.name}-loop-lag.txt"
    lag_file.write_text("")
    env = {**os.environ, **(extra_env or {}), LAG_ENV: str(lag_file), "PYTHONUNBUFFERED": "1"}
    code = f"import sys; from {__name__} import runner_main; runner_main(sys.argv[1:])"
    out = open(log_path.parent / f"{log_path.name}-runner.out", "wb")  # noqa: SIM115 - closed below
    result = Soak(steps=steps, started=time.time())
    runner = subprocess.Popen(
        [sys.executable, "-c", code, "demo", "--headless", *run_args(log_path, steps, sandbox_root=sandbox_root)],
        stdout=out,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    events = _Events(RunFolder(log_path).events)
    attached: Console | None = None
    current: StepSample | None = None
    before: dict[str, str] = {}  # the previous batch.ended's step files
    try:
        deadline = time.monotonic() + timeout_s
        while result.status is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the soak run did not end within {timeout_s:.0f} s")
            exited = runner.poll() is not None
            for event in events.new():
                kind = event.get("kind")
                if kind == "batch.started":
                    result.batch_started[event["step"]] = event["ts"]
                    current = result.samples.setdefault(event["step"], StepSample(event["step"]))
                    if attached is None and console:
                        attached = Console(log_path)
                elif kind == "batch.ended" and current is not None and current.step == event["step"]:
                    current.ended = event["ts"]
                    proc = read_proc(runner.pid)
                    if proc is not None:
                        current.step_files = _finished_step_files(proc.links, log_path, current.step)
                        # A walk of the folder (the runner measures its size at each step's end)
                        # holds a directory open for a moment; a leak is still open a step later.
                        current.left_open = {fd: p for fd, p in current.step_files.items() if before.get(fd) == p}
                        before = current.step_files
                    if progress is not None:
                        progress(current)
                    current = None  # its training and the run's end are not read
                elif kind == "run.ended":
                    result.status, result.message = event["status"], event.get("message")
            if exited:
                break  # its last events were read above
            if current is not None:
                proc = read_proc(runner.pid)
                if proc is not None:
                    current.take(current.runner, proc)
                    current.reads += 1
                if attached is not None and (proc := read_proc(attached.proc.pid)) is not None:
                    current.take(current.console, proc)
            time.sleep(POLL_S)  # the pace of the reads, not a wait for anything
        result.runner_exit = runner.wait(300)
    finally:
        if runner.poll() is None:
            kill_group(runner.pid)
            runner.wait()
        out.close()
        if attached is not None:
            result.console_bytes = attached.drawn
            attached.close()
            result.console_exit = attached.proc.returncode
    result.ended = time.time()
    result.lag_ms = _lag_per_step(lag_file, result.batch_started, result.ended)
    return result


def _lag_per_step(lag_file: Path, starts: dict[int, float], end: float) -> dict[int, float]:
    """Each step's p95 of the ticker's lags, from its batch.started to the next one."""
    ticks = []
    for line in lag_file.read_text().splitlines():
        with contextlib.suppress(ValueError):
            ts, lag = line.split()
            ticks.append((float(ts), float(lag)))
    ordered = sorted(starts.items())
    out = {}
    for i, (step, begin) in enumerate(ordered):
        until = ordered[i + 1][1] if i + 1 < len(ordered) else end
        lags = [lag for ts, lag in ticks if begin <= ts < until]
        if lags:
            out[step] = percentile(lags, 95, "floor")
    return out


# -- the judgement ---------------------------------------------------------------------------------


@dataclass
class Figure:
    name: str
    early: float  # median of the window around the early step
    late: float  # median of the last window
    bound: float  # the most `late` may be
    at_early: float  # the single sample at the early step (shown, not judged)
    at_end: float

    @property
    def growth_pct(self) -> float:
        return (self.late - self.early) / self.early * 100 if self.early else float("nan")

    @property
    def ok(self) -> bool:
        return self.late <= self.bound


def series(result: Soak) -> dict[str, dict[int, float]]:
    out: dict[str, dict[int, float]] = {name: {} for name in ALLOWANCE}
    for step, sample in result.samples.items():
        if not sample.ended:
            continue  # a step the run did not finish
        for who, figures in (("runner", sample.runner), ("console", sample.console)):
            for name, value in figures.items():
                out[f"{who} {name}"][step] = value
    out["runner loop lag p95 ms"] = {s: v for s, v in result.lag_ms.items() if s in out["runner rss MB"]}
    return {name: values for name, values in out.items() if values}


def judge(
    result: Soak, early: int, window: int, bound_pct: float = BOUND_PCT, allowance: dict[str, float] | None = None
) -> list[Figure]:
    """Each figure's early window (``window`` steps centred on ``early``) against the last;
    ``allowance`` overrides ``ALLOWANCE``'s absolute allowances."""
    allowed = {**ALLOWANCE, **(allowance or {})}
    figures = []
    for name, values in series(result).items():
        steps = sorted(values)
        early_steps = [s for s in steps if early - window // 2 <= s < early - window // 2 + window]
        late_steps = steps[-window:]
        if not early_steps or not late_steps or late_steps[0] <= early_steps[-1]:
            raise ValueError(f"{name}: too few steps for an early window at {early} and a last one of {window}")
        e = statistics.median(values[s] for s in early_steps)
        late = statistics.median(values[s] for s in late_steps)
        at_early = values[min(steps, key=lambda s: abs(s - early))]
        figures.append(
            Figure(name, e, late, max(e * (1 + bound_pct / 100), e + allowed[name]), at_early, values[steps[-1]])
        )
    return figures


def open_step_files(result: Soak) -> list[tuple[int, str]]:
    """Finished steps' files the runner left open: (step, path)."""
    return [(s.step, link) for s in result.samples.values() for link in s.left_open.values()]


def report(result: Soak, figures: list[Figure], early: int, window: int, bound_pct: float) -> str:
    lines = [
        f"{sum(1 for s in result.samples.values() if s.ended)} steps in {(result.ended - result.started) / 60:.1f} min "
        f"({result.steps_per_minute:.1f} steps/min between the first and the last batch.ended); "
        f"run {result.status}, runner exit {result.runner_exit}, console exit {result.console_exit}",
        f"windows: steps {early - window // 2}..{early - window // 2 + window - 1} vs the last {window}; medians "
        f"of per-step floors (lag: per-step p95); bound: +{bound_pct:g}% or the allowance, whichever is larger",
        f"  {'figure':24}{'at step ' + str(early):>12}{'at end':>10}{'early med':>11}{'late med':>10}"
        f"{'growth':>9}{'bound':>10}  verdict",
    ]
    for f in figures:
        lines.append(
            f"  {f.name:24}{f.at_early:12.1f}{f.at_end:10.1f}{f.early:11.1f}{f.late:10.1f}"
            f"{f.growth_pct:8.1f}%{f.bound:10.1f}  {'pass' if f.ok else 'FAIL'}"
        )
    leaked = open_step_files(result)
    passing = sum(len(s.step_files) - len(s.left_open) for s in result.samples.values())
    lines.append(
        f"  finished steps' files the runner left open (still open a step later): {len(leaked)}"
        + (f" — e.g. step {leaked[0][0]}: {leaked[0][1]}" if leaked else "  pass")
        + f"  (open for a moment at a batch.ended, e.g. the folder-size walk: {passing})"
    )
    durations = {
        step: s.ended - result.batch_started[step]
        for step, s in result.samples.items()
        if s.ended and step in result.batch_started
    }
    if durations:
        steps = sorted(durations)
        first = [durations[s] for s in steps if early - window // 2 <= s < early - window // 2 + window]
        last = [durations[s] for s in steps[-window:]]
        if first and last:
            lines.append(
                f"  step duration (rollout, batch.started to batch.ended; not judged, it moves with load): "
                f"{statistics.median(first):.2f} s early, {statistics.median(last):.2f} s late"
            )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from tbconsole.sandbox.namespace import SandboxUnavailable, preflight

    try:
        preflight()
    except SandboxUnavailable as exc:
        print(f"the local sandbox is unavailable here: {exc} (the soak runs real trials: run it as root on Linux)")
        return 2
    if args.steps < args.early + args.window // 2 + args.window:
        raise SystemExit("--steps must leave a last window after the early one")
    load = os.getloadavg()[0]
    print(
        f"machine: {platform.machine()}, {platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
        f"load average {load:.2f}, python {platform.python_version()}"
    )
    print(f"soak: {args.steps} steps of `tbconsole demo --headless`, 1 group x 2 one-call trials a step", flush=True)

    def progress(sample: StepSample) -> None:
        if sample.step % 10 == 0:
            figures = [("runner", sample.runner), ("console", sample.console)]
            print(
                f"  step {sample.step:4d} floors: "
                + "; ".join(
                    f"{who} {f['rss MB']:.0f} MB, {f['fds']:.0f} fds, {f['threads']:.0f} threads"
                    for who, f in figures
                    if f
                ),
                flush=True,
            )

    with tempfile.TemporaryDirectory(prefix="tbconsole-soak-") as tmp:
        folder = args.keep or Path(tmp)
        result = soak(folder / "run", args.steps, console=not args.no_console, progress=progress)
        if result.status != "done":
            print(f"the run did not finish: {result.status}: {result.message} (its output: {folder}/run-runner.out)")
            return 1
        figures = judge(result, args.early, args.window, args.bound)
        print(report(result, figures, args.early, args.window, args.bound))
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    ok = all(f.ok for f in figures) and not open_step_files(result)
    return 0 if ok else 1
