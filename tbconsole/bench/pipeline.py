"""`tbconsole bench pipeline`: how much of a run's wall do the trainer and the samplers wait, in
each training mode, when trial durations are heavy-tailed as Terminal-Bench 2's are?
(Over 400 lines: the runs, their waiting agent, the figures read back from their events and the
report are the one measurement, which ``tests/bench/test_pipeline_bench.py`` checks in parts.)

The same tasks and trials run once per mode, each a real headless run (``tbconsole demo
--headless``: the runner, the embedded engine with the demo's tiny model, the capture proxy,
Harbor trials in the local sandbox, the verifier, the cookbook's training step):

- sync: a batch samples, then trains;
- stream: ``config.stream_minibatch_config`` (M minibatches: training starts on the first while
  the batch still samples);
- async K=1 and K=2: ``config.async_config`` (off-policy: sampling never waits for training; a
  group more than K updates behind is dropped and its task queued again).

Tasks are the demo's one-command variants, generated into a temporary folder, scored by their
own verifier (the demo's policy was warmed up on mini-swe-agent's prompt, not this agent's one
call, so its reward here stays near 0: the column shows the reward path ran, not learning).
Each trial's agent (``WaitingAgent``) makes one model call through the capture proxy from inside
the sandbox, runs the command it gets back, then sleeps in the sandbox until the trial's
duration is up: trial time is spent waiting, as a real trial mostly waits on a remote sandbox and
model, not burning the 2 cores. Trial ``k`` of task ``t`` lasts ``trial_duration(seed, t, k)``
(``pipeline_model``: lognormal median 480 s, sigma 1.0, capped at 5400 s — the assumption fitted to
published TB2 means, see there) times ``--scale`` (default 1/120: the median trial 4 s, the cap 45
s), the same in every mode.

Figures per mode, from the run's ``events.jsonl``, over its wall: from the first
``group.started`` to the last ``batch.ended``:

- trained updates per hour: ``batch.ended`` events / wall;
- trainer idle share: the share of the wall with no update between its ``training.started`` and
  its ``batch.ended`` (in stream mode that span includes waiting for the later minibatches'
  groups, so its idle share is a floor);
- samplers' idle share: ``1 - trial-seconds / (slots x wall)``. ``slots = groups_per_batch x
  min(group_size, harbor.max_parallel_trials_per_group)``, the trials a run keeps in flight at
  most, in every mode (the async loop runs ``groups_per_batch`` workers of one group each). A
  trial occupies its slot from its first ``trial.phase`` past ``queued`` to its ``trial.ended``
  (or the wall's end when cancelled); dropped groups' trials count as busy (their cost shows as
  drops);
- staleness of trained groups (``group.trained``: update - weights[0]), mean and max;
- groups and datums dropped (``group.dropped``);
- reward per update: the mean over updates of ``env/all/reward/total`` (``step.metrics``);
- same trials: the (task, trial index) pairs an update trained, against sync's. Every mode draws
  the same ``updates x groups`` groups (the cookbook's loop draws no more batches than updates);
  the check is ``trained == sync's trained - dropped`` (a dropped group's task queued again and
  trained later counts as trained). The mean duration of the trials trained is shown beside it:
  an off-policy run drops the long trials first.

Stream's bound: a sync step is ``S + T`` (sampling, then training ``T``, from ``training.started``
to ``batch.ended``). Streaming M minibatches can overlap all but the last minibatch's training
with sampling, so its step is at least ``S + T/M``: gain <= (S + T) / (S + T/M); hiding all the
training, (S + T) / S, bounds any scheme that keeps the batch on-policy.

The model on these trials: ``pipeline_model.simulate`` on the same trials in sync's draw order
with sync's mean training step and no other cost (no start-up, model calls, verifier): the gain
the modes' scheduling alone allows at this size, beside the gain measured. A group dropped as
stale and run again runs the same trials, as long as before.

Projection: ``pipeline_model.simulate`` at the recipe's size (4 groups x 8 trials, 4 at a time
per group, the full-scale durations, a 90 s training step).

Spread: a few updates are mostly the pipeline's start and end, so one draw's gain says little
alone (at the default size K=1's ranges over about 1.3-3.4x from seed to seed). The model on 20
other seeds of the bench's size, and on a long run of it (100 updates), shows where the draw sits.

Target: async K=1 reaches >= 1.8x sync's trained updates per hour on this machine: PASS only
where both the measured draw and the long run's modelled median reach it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbconsole.bench.pipeline_model import (
    SOURCE,
    Durations,
    Shape,
    SimResult,
    project,
    simulate,
    spread,
    trial_duration,
)
from tbconsole.common.procgroup import kill_group
from tbconsole.record.events import (
    BatchEnded,
    Event,
    GroupDropped,
    GroupStarted,
    GroupTrained,
    StepMetrics,
    TrainingStarted,
    TrialEnded,
    TrialPhaseChanged,
    read_events,
)

TARGET = 1.8  # async K=1 over sync, trained updates per hour
LONG_RUN_UPDATES = 100  # a long run, for the model: start and end no longer count
DURATIONS_ENV = "PIPELINE_DURATIONS_FILE"  # the agent's table: {task: [seconds per trial index]}
REWARD = "env/all/reward/total"
_TRIAL = re.compile(r"^(?P<task>.+)\.s\d+g\d+t(?P<k>\d+)(?:-r\d+)?$")
SLACK_S = 120.0  # beyond the longest trial: the model call, the verifier


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--updates", type=int, default=4, help="trained updates per mode (default 4)")
    parser.add_argument("--groups", type=int, default=4, help="groups per update (default 4)")
    parser.add_argument("--group-size", type=int, default=2, help="trials per group (default 2)")
    parser.add_argument("--parallel", type=int, default=4, help="trials at a time per group (default 4)")
    parser.add_argument(
        "--scale", type=float, default=1 / 120, help="trial durations' scale (default 1/120: median 4 s)"
    )
    parser.add_argument("--median", type=float, default=480.0, help="full-scale median trial, s (default 480)")
    parser.add_argument("--sigma", type=float, default=1.0, help="lognormal sigma (default 1.0)")
    parser.add_argument("--cap", type=float, default=5400.0, help="full-scale cap: the agent timeout, s (default 5400)")
    parser.add_argument("--minibatches", type=int, default=2, help="stream mode's minibatches (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="durations' and tasks' seed (default 0)")
    parser.add_argument("--modes", default="sync,stream,async1,async2", help="modes to run (default all four)")
    parser.add_argument("--mode-timeout", type=float, default=900.0, help="seconds a mode may run (default 900)")
    parser.add_argument("--keep", type=Path, default=None, help="run in this folder and keep it (default: a temp one)")


# -- the waiting agent ---------------------------------------------------------------------------

# Runs in the sandbox: the one-call agent's call and command (soak.ONE_CALL), then a sleep until
# the trial's duration, counted from the script's start, is up.
WAIT_AFTER = """
import time as _time
_rest = float(os.environ["PIPELINE_SECONDS"]) - (_time.time() - _STARTED)
if _rest > 0:
    _time.sleep(_rest)
"""


def sandbox_script() -> str:
    from tbconsole.bench.soak import ONE_CALL

    return "import time as _t0; _STARTED = _t0.time()\n" + ONE_CALL + WAIT_AFTER


def trial_key(trial_name: str) -> tuple[str, int] | None:
    """(task, trial index) of a trial id (``<task>.s<step>g<group>t<k>[-r<N>]``)."""
    m = _TRIAL.match(trial_name)
    return (m.group("task"), int(m.group("k"))) if m else None


def _agent_class():
    from harbor.agents.base import BaseAgent

    class WaitingAgent(BaseAgent):
        """One model call through the capture proxy from inside the sandbox, its command, then a
        sleep in the sandbox until the trial's planned duration is up."""

        @staticmethod
        def name() -> str:
            return "tbconsole-pipeline-waiting"

        def version(self) -> str:
            return "1"

        async def setup(self, environment) -> None:
            return None

        async def run(self, instruction, environment, context) -> None:
            key = trial_key(Path(self.logs_dir).parent.name)
            table = json.loads(Path(self.extra_env[DURATIONS_ENV]).read_text())
            if key is None or key[0] not in table:
                raise RuntimeError(f"no planned duration for trial {Path(self.logs_dir).parent.name}")
            seconds = table[key[0]][key[1]]
            env = {**self.extra_env, "SOAK_INSTRUCTION": instruction, "PIPELINE_SECONDS": f"{seconds:.3f}"}
            command = f"{shlex.quote(sys.executable)} -S -c {shlex.quote(sandbox_script())}"
            await environment.exec(command, env=env, timeout_sec=int(seconds + SLACK_S))

    return WaitingAgent


def __getattr__(name: str) -> Any:
    # Harbor loads the agent by import path; the class is built on first use (Harbor's import
    # stays out of `tbconsole bench`'s start).
    if name == "WaitingAgent":
        return _agent_class()
    raise AttributeError(name)


# -- the tasks and the runs ----------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    updates: int = 4
    groups: int = 4
    group_size: int = 2
    parallel: int = 4
    scale: float = 1 / 120
    durations: Durations = Durations()
    minibatches: int = 2
    seed: int = 0

    @property
    def slots(self) -> int:
        return self.groups * min(self.group_size, self.parallel)


MODES = {
    "sync": ("sync", lambda p: []),
    "stream": (
        "stream M={m}",
        lambda p: [
            f"config.stream_minibatch_config.groups_per_batch={p.groups}",
            f"config.stream_minibatch_config.num_minibatches={p.minibatches}",
        ],
    ),
    "async1": ("async K=1", lambda p: _async_keys(p, 1)),
    "async2": ("async K=2", lambda p: _async_keys(p, 2)),
}


def _async_keys(plan: Plan, k: int) -> list[str]:
    return [f"config.async_config.max_steps_off_policy={k}", f"config.async_config.groups_per_batch={plan.groups}"]


def write_tasks(dest: Path, plan: Plan) -> dict[str, list[float]]:
    """The demo's one-command variants, one task per group of the run (``updates x groups``),
    their agent timeout above the longest trial; returns each task's trial durations (scaled)."""
    from tbconsole.demo import variants
    from tbconsole.demo.recipe import DEMO_FAMILIES
    from tbconsole.harbor.taskset import CONFIG_FILE

    n = plan.updates * plan.groups
    chosen = variants.sample_variants("train", n, plan.seed, DEMO_FAMILIES)
    if len(chosen) < n:
        raise SystemExit(f"--updates x --groups is {n}: the demo's families have {len(chosen)} training variants")
    timeout = plan.durations.cap_s * plan.scale + SLACK_S
    table = {}
    for variant in chosen:
        folder = variants.write_task(variant, dest)
        config = folder / CONFIG_FILE
        config.write_text(re.sub(r"(\[agent\]\ntimeout_sec = )[0-9.]+", rf"\g<1>{timeout:.1f}", config.read_text()))
        table[variant.name] = [
            trial_duration(plan.seed, variant.name, k, plan.durations, plan.scale) for k in range(plan.group_size)
        ]
    return table


def trial_config(durations_file: Path, plan: Plan, sandbox_root: Path | None = None, max_tokens: int = 64) -> dict:
    """The demo's trial.json, its agent the waiting agent."""
    from tbconsole.demo.recipe import demo_trial_config

    config = demo_trial_config(max_tokens)
    if sandbox_root is not None:
        config["environment"]["kwargs"]["root"] = str(sandbox_root)
    agent = config["agent"]
    config["agent"] = {
        "import_path": f"{__name__}:WaitingAgent",
        "override_timeout_sec": plan.durations.cap_s * plan.scale + SLACK_S,
        "env": {**agent["env"], "SOAK_MAX_TOKENS": str(max_tokens), DURATIONS_ENV: str(durations_file)},
    }
    return config


def run_keys(folder: Path, tasks: Path, trial: Path, plan: Plan, mode: str) -> list[str]:
    return [
        f"config.log_path={folder / mode}",
        f"config.max_steps={plan.updates}",
        f"config.dataset_builder.tasks_dir={tasks}",
        f"config.dataset_builder.groups_per_batch={plan.groups}",
        f"config.dataset_builder.group_size={plan.group_size}",
        "config.max_tokens=64",
        "config.eval_every=0",
        f"harbor.trial_config={trial}",
        f"harbor.max_parallel_trials_per_group={plan.parallel}",
        *MODES[mode][1](plan),
    ]


def run_mode(folder: Path, tasks: Path, trial: Path, plan: Plan, mode: str, timeout_s: float) -> tuple[int, Path]:
    """One headless run of ``mode``: (its exit status, its events.jsonl)."""
    keys = run_keys(folder, tasks, trial, plan, mode)
    with open(folder / f"{mode}-runner.out", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tbconsole", "demo", "--headless", *keys],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            proc.wait()
            code = 124
    return code, folder / mode / "events.jsonl"


# -- the figures -----------------------------------------------------------------------------------


@dataclass
class Figures:
    mode: str
    slots: int
    updates: int = 0
    wall_s: float = 0.0
    train_s: float = 0.0
    trial_s: float = 0.0
    staleness: list[int] = field(default_factory=list)
    dropped_groups: int = 0
    dropped_datums: int = 0
    dropped_sandbox_s: float = 0.0
    drop_reasons: dict[str, int] = field(default_factory=dict)
    rewards: list[float] = field(default_factory=list)  # per update
    trained: set[tuple[str, int]] = field(default_factory=set)  # (task, trial index)
    dropped: set[tuple[str, int]] = field(default_factory=set)  # and not trained later
    steps_s: list[float] = field(default_factory=list)  # update to update (the first from the first group)
    training_s: list[float] = field(default_factory=list)  # training.started to batch.ended, per update
    order: list[str] = field(default_factory=list)  # the groups' tasks in draw order (step, group)

    @property
    def updates_per_hour(self) -> float:
        return self.updates / self.wall_s * 3600 if self.wall_s > 0 else float("nan")

    @property
    def trainer_idle(self) -> float:
        return 1 - self.train_s / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def sampler_idle(self) -> float:
        return 1 - self.trial_s / (self.slots * self.wall_s) if self.wall_s > 0 else float("nan")

    @property
    def mean_staleness(self) -> float:
        return statistics.fmean(self.staleness) if self.staleness else float("nan")

    @property
    def reward(self) -> float:
        return statistics.fmean(self.rewards) if self.rewards else float("nan")


def _overlap(start: float, end: float, lo: float, hi: float) -> float:
    return max(0.0, min(end, hi) - max(start, lo))


def figures(mode: str, events: list[Event], slots: int) -> Figures:
    """A run's figures from its events (see the module's docstring for each definition)."""
    out = Figures(mode, slots)
    tasks: dict[tuple[int, int], tuple[str, int]] = {}  # (step, group) -> (task, trials)
    first_group = None
    ended: dict[int, float] = {}
    started: dict[int, float] = {}
    trial_start: dict[str, float] = {}
    trial_end: dict[str, float] = {}
    trained_groups: set[tuple[int, int]] = set()
    dropped_groups: set[tuple[int, int]] = set()
    for e in events:
        if isinstance(e, GroupStarted):
            first_group = e.ts if first_group is None else min(first_group, e.ts)
            tasks[(e.step, e.group)] = (e.task, len(e.trials))
        elif isinstance(e, BatchEnded):
            ended[e.step] = e.ts
        elif isinstance(e, TrainingStarted):
            started[e.update] = e.ts
        elif isinstance(e, TrialPhaseChanged) and e.phase != "queued":
            trial_start.setdefault(e.trial, e.ts)
        elif isinstance(e, TrialEnded):
            trial_end[e.trial] = e.ts
            trial_start.setdefault(e.trial, e.ts - float(e.timings.get("total", 0.0)))
        elif isinstance(e, GroupTrained):
            trained_groups.add((e.step, e.group))
            if e.weights:
                out.staleness.append(e.update - e.weights[0])
        elif isinstance(e, GroupDropped):
            dropped_groups.add((e.step, e.group))
            out.dropped_groups += 1
            out.dropped_datums += e.datums
            out.dropped_sandbox_s += e.sandbox_seconds
            out.drop_reasons[e.reason] = out.drop_reasons.get(e.reason, 0) + 1
        elif isinstance(e, StepMetrics) and REWARD in e.metrics:
            out.rewards.append(float(e.metrics[REWARD]))
    if first_group is None or not ended:
        return out
    lo, hi = first_group, max(ended.values())
    out.updates, out.wall_s = len(ended), hi - lo
    previous = lo
    for update in sorted(ended):
        out.steps_s.append(ended[update] - previous)
        previous = ended[update]
        if update in started:
            out.training_s.append(ended[update] - started[update])
            out.train_s += _overlap(started[update], ended[update], lo, hi)
    out.trial_s = sum(_overlap(s, trial_end.get(t, hi), lo, hi) for t, s in trial_start.items())

    def pairs(groups: set[tuple[int, int]]) -> set[tuple[str, int]]:
        return {(tasks[g][0], k) for g in groups if g in tasks for k in range(tasks[g][1])}

    out.order = [tasks[g][0] for g in sorted(tasks)]
    out.trained = pairs(trained_groups)
    out.dropped = pairs(dropped_groups - trained_groups)
    return out


def same_trials(mode: Figures, sync: Figures) -> bool:
    """The mode trained exactly sync's trials less the ones it dropped."""
    return mode.trained == sync.trained - mode.dropped


def stream_bounds(sync: Figures, minibatches: int) -> tuple[float, float]:
    """(the bound with M minibatches, the bound hiding all training) on stream's gain over sync,
    from sync's mean step ``S + T`` and mean training part ``T``."""
    if not sync.steps_s or not sync.training_s:
        return float("nan"), float("nan")
    step, train = statistics.fmean(sync.steps_s), statistics.fmean(sync.training_s)
    sampling = max(step - train, 1e-9)
    return step / (sampling + train / max(1, minibatches)), step / sampling


def mean_duration(pairs: set[tuple[str, int]], table: dict[str, list[float]]) -> float:
    values = [table[t][k] for t, k in pairs if t in table and k < len(table[t])]
    return statistics.fmean(values) if values else float("nan")


# -- the report ------------------------------------------------------------------------------------


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b and b == b and a == a else "n/a"


def report(results: list[Figures], table: dict[str, list[float]], plan: Plan) -> list[str]:
    sync = next((f for f in results if f.mode == "sync"), None)
    lines = [
        f"  {'mode':12}{'updates':>8}{'wall s':>8}{'upd/h':>8}{'vs sync':>9}{'trainer idle':>14}{'sampler idle':>14}"
        f"{'stale mean/max':>16}{'dropped grp/datums':>20}{'reward':>8}{'same trials':>13}{'trained mean s':>16}"
    ]
    for f in results:
        stale = f"{f.mean_staleness:.2f}/{max(f.staleness)}" if f.staleness else "-"
        same = "-" if sync is None or f is sync else ("yes" if same_trials(f, sync) else "NO")
        lines.append(
            f"  {f.mode:12}{f.updates:>8}{f.wall_s:>8.1f}{f.updates_per_hour:>8.0f}"
            f"{_ratio(f.updates_per_hour, sync.updates_per_hour) if sync else 'n/a':>9}"
            f"{f.trainer_idle:>13.0%} {f.sampler_idle:>13.0%} {stale:>15}"
            f"{f'{f.dropped_groups}/{f.dropped_datums}':>20}{f.reward:>8.2f}{same:>13}"
            f"{mean_duration(f.trained, table):>16.2f}"
        )
    if sync is not None:
        for f in results:
            if f is sync:
                continue
            missing = sync.trained - f.trained
            extra = f.trained - sync.trained
            lines.append(
                f"  {f.mode}: trained {len(f.trained)} trials, sync {len(sync.trained)}; sync's not trained: "
                f"{len(missing)} (dropped {len(missing & f.dropped)}), not sync's: {len(extra)}; "
                f"drops {f.drop_reasons or 'none'}, {f.dropped_sandbox_s:.0f} sandbox-s"
            )
    return lines


def projection_lines(results: list[SimResult], durations: Durations, shape: Shape) -> list[str]:
    sync = results[0]
    lines = [
        f"projection at the recipe's size ({shape.groups} groups x {shape.group_size} trials, {shape.parallel} at a "
        f"time per group, {durations.describe()}, a {shape.train_s:g} s training step; "
        f"simulated, {sync.updates} updates):",
        f"  {'mode':12}{'upd/h':>8}{'vs sync':>9}{'trainer idle':>14}{'sampler idle':>14}{'stale mean':>12}"
        f"{'dropped groups':>16}",
    ]
    for r in results:
        lines.append(
            f"  {r.mode:12}{r.updates_per_hour:>8.2f}{_ratio(r.updates_per_hour, sync.updates_per_hour):>9}"
            f"{r.trainer_idle:>13.0%} {r.sampler_idle:>13.0%} {r.mean_staleness:>11.2f}{r.dropped:>16}"
        )
    return lines


def model_lines(sync: Figures, table: dict[str, list[float]], plan: Plan) -> list[str]:
    """The simulation on this bench's own trials (sync's draw order) and sync's mean training
    step: what the modes would reach with no cost beyond trial time and training."""
    shape = Shape(plan.groups, plan.group_size, plan.parallel, statistics.fmean(sync.training_s))
    groups = [table[task] for task in sync.order]
    runs = [simulate("sync", groups, shape, plan.updates)] + [
        simulate("async", groups, shape, plan.updates, k) for k in (1, 2)
    ]
    base = runs[0].updates_per_hour
    return [
        f"the model on these trials (training {shape.train_s:.1f} s, no other cost): "
        + ", ".join(f"{r.mode} {r.updates} updates {_ratio(r.updates_per_hour, base)}" for r in runs)
    ]


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"machine: {platform.machine()}, {platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
        f"load average {load:.2f}, python {platform.python_version()}"
    )


def plan_from(args: argparse.Namespace) -> Plan:
    for name in ("updates", "groups", "group_size", "parallel", "minibatches"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1")
    if args.scale <= 0 or args.median <= 0 or args.sigma < 0 or args.cap <= 0:
        raise SystemExit("--scale, --median and --cap must be positive, --sigma 0 or more")
    if args.groups % args.minibatches:
        raise SystemExit(f"--groups ({args.groups}) must be a multiple of --minibatches ({args.minibatches})")
    return Plan(
        updates=args.updates,
        groups=args.groups,
        group_size=args.group_size,
        parallel=args.parallel,
        scale=args.scale,
        durations=Durations(args.median, args.sigma, args.cap),
        minibatches=args.minibatches,
        seed=args.seed,
    )


def run(args: argparse.Namespace) -> int:
    from tbconsole.sandbox.namespace import SandboxUnavailable, preflight

    plan = plan_from(args)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise SystemExit(f"--modes: unknown {', '.join(unknown) or '(none)'}; choose from {', '.join(MODES)}")
    try:
        preflight()
    except SandboxUnavailable as exc:
        print(f"the local sandbox is unavailable here: {exc} (the bench runs real trials: run it as root on Linux)")
        return 2
    print(machine())
    print(
        f"pipeline: {plan.updates} updates x {plan.groups} groups x {plan.group_size} trials "
        f"({plan.parallel} at a time per group, {plan.slots} slots) per mode, real headless runs"
    )
    print(
        f"trial durations: {plan.durations.describe()} ({SOURCE}), scaled x{plan.scale:.5g}: median "
        f"{plan.durations.median_s * plan.scale:.2f} s, cap {plan.durations.cap_s * plan.scale:.1f} s; seed {plan.seed}"
    )
    results: list[Figures] = []
    with tempfile.TemporaryDirectory(prefix="tbconsole-pipeline-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        table = write_tasks(folder / "tasks", plan)
        durations_file = folder / "durations.json"
        durations_file.write_text(json.dumps(table, indent=1))
        trial = folder / "trial.json"
        trial.write_text(json.dumps(trial_config(durations_file, plan), indent=2))
        every = [d for ds in table.values() for d in ds]
        print(
            f"  {len(table)} tasks, {len(every)} trials: median {statistics.median(every):.2f} s, "
            f"max {max(every):.2f} s, sum {sum(every):.0f} s",
            flush=True,
        )
        for mode in modes:
            name = MODES[mode][0].format(m=plan.minibatches)
            t0 = time.monotonic()
            code, events_path = run_mode(folder, folder / "tasks", trial, plan, mode, args.mode_timeout)
            events = list(read_events(events_path)) if events_path.exists() else []
            f = figures(name, events, plan.slots)
            results.append(f)
            print(
                f"  {name}: exit {code}, {f.updates} updates in {time.monotonic() - t0:.0f} s "
                f"(load {os.getloadavg()[0]:.2f})",
                flush=True,
            )
            if code != 0:
                print(f"  {name}: the run did not end well; its output: {folder / (mode + '-runner.out')}")
        print()
        print("\n".join(report(results, table, plan)))
    sync = next((f for f in results if f.mode == "sync"), None)
    if sync is not None and any(f.mode.startswith("stream") for f in results):
        stream = next(f for f in results if f.mode.startswith("stream"))
        bound_m, bound_all = stream_bounds(sync, plan.minibatches)
        step, train = statistics.fmean(sync.steps_s or [0.0]), statistics.fmean(sync.training_s or [0.0])
        print(
            f"stream's gain {_ratio(stream.updates_per_hour, sync.updates_per_hour)}; bound from sync's step "
            f"(S + T = {step:.1f} s, training T = {train:.1f} s): "
            f"(S+T)/(S+T/{plan.minibatches}) = {bound_m:.2f}x, all training hidden (S+T)/S = {bound_all:.2f}x"
        )
    if sync is not None and len(sync.order) >= plan.updates * plan.groups and sync.training_s:
        print("\n".join(model_lines(sync, table, plan)))
    shape = Shape(groups=4, group_size=8, parallel=4, train_s=90.0)
    print()
    print("\n".join(projection_lines(project(plan.durations, shape, seed=plan.seed), plan.durations, shape)))
    async1 = next((f for f in results if f.mode == "async K=1"), None)
    if sync is None or async1 is None or not sync.training_s:
        print("\ntarget: needs sync and async1 among --modes")
        return 0
    draws, long_run = spread_lines(plan, statistics.fmean(sync.training_s))
    print()
    print("\n".join(draws))
    gain = async1.updates_per_hour / sync.updates_per_hour if sync.updates_per_hour else float("nan")
    verdict = "PASS" if gain >= TARGET and long_run >= TARGET else "FAIL"
    print(
        f"\ntarget: async K=1 >= {TARGET}x sync's trained updates per hour on this machine: {gain:.2f}x measured, "
        f"{long_run:.2f}x in the long run of this size (modelled): {verdict}"
    )
    return 0 if verdict == "PASS" else 1


def spread_lines(plan: Plan, train_s: float) -> tuple[list[str], float]:
    """How much one measured draw tells: the model on other draws of the bench's own size, and
    on a long run of it (K=1's median gain returned). A few updates are mostly start and end."""
    shape = Shape(plan.groups, plan.group_size, plan.parallel, train_s)
    short = spread(plan.durations, shape, plan.updates, plan.scale)
    long = spread(plan.durations, shape, LONG_RUN_UPDATES, plan.scale)
    k1 = next(s for s in long if s.k == 1)
    return [
        f"one draw of {plan.updates} updates is one of many (the model, training {train_s:.1f} s, "
        f"{len(short[0].ratios)} other seeds): "
        + ", ".join(f"{s.describe()}, {s.share_at_least(TARGET):.0%} of draws >= {TARGET}x" for s in short),
        f"in the long run ({LONG_RUN_UPDATES} updates of this size, the same seeds): "
        + ", ".join(s.describe() for s in long),
    ], k1.median
