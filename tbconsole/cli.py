"""`tbconsole` command line: one subcommand per job, each in its own module.

Heavy imports (torch, harbor) happen inside the subcommand that needs them, so `--help`
and light commands start fast.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from tbconsole import offline


class UsageError(Exception):
    """A mistake in how the command was called: message, exit 2, nothing started."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's default prints usage + exits 2; keep that, add a hint
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\nRun '{self.prog} --help' for the options.\n")


def _add_trial(sub) -> None:
    p = sub.add_parser(
        "trial",
        help="run one Harbor trial (default: local sandbox, oracle agent) and print the outcome",
        description="Run one Harbor trial of TASK_DIR and print outcome, reward, timings and "
        "the trial folder. Smoke-test a task or an agent before a training run.",
    )
    p.add_argument("task_dir", type=Path, metavar="TASK_DIR", help="a Harbor task folder (with task.toml)")
    p.add_argument("--agent", help="Harbor agent name (default: oracle, or the trial config's)")
    p.add_argument("--trial-config", type=Path, metavar="trial.json",
                   help="a Harbor TrialConfig without 'task' (as for training)")
    p.add_argument("--trials-dir", type=Path, default=None,
                   help="where trial folders go (default: the trial config's, else ./trials)")
    p.add_argument("--proxy-url", help="value for {proxy_url} in the trial config")
    p.add_argument("--proxy-api-key", default=os.environ.get("TBCONSOLE_PROXY_API_KEY"),
                   help="value for {proxy_api_key} (or set TBCONSOLE_PROXY_API_KEY)")
    p.add_argument("--reward-key", default="reward", help="key of the verifier's rewards to report")
    p.set_defaults(handler=_run_trial)


def _run_trial(args) -> int:
    from tbconsole.trial import TrialConfigError, build_trial_config, load_trial_config, now, run_trial

    task_dir: Path = args.task_dir
    if not (task_dir / "task.toml").is_file():
        raise UsageError(f"{task_dir} is not a Harbor task folder (no task.toml in it).")
    substitutions = {k: v for k, v in (("proxy_url", args.proxy_url),
                                        ("proxy_api_key", args.proxy_api_key)) if v}
    try:
        raw = load_trial_config(args.trial_config, substitutions) if args.trial_config else None
        config = build_trial_config(task_dir.resolve(), agent=args.agent, trial_config=raw,
                                    trials_dir=args.trials_dir)
    except TrialConfigError as exc:
        raise UsageError(str(exc)) from None
    if config.environment.import_path and config.environment.import_path.startswith("tbconsole.sandbox"):
        from tbconsole.sandbox.namespace import SandboxUnavailable, preflight

        try:
            preflight()
        except SandboxUnavailable as exc:
            print(f"tbconsole trial: {exc}", file=sys.stderr)
            return 1

    agent = config.agent.name or config.agent.import_path
    print(f"{now()}  trial of {task_dir.name} with agent {agent}")

    async def on_phase(phase: str) -> None:
        print(f"{now()}  {phase}", flush=True)

    try:
        summary = asyncio.run(run_trial(config, on_phase, args.reward_key))
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        # Raised before the trial starts (task or environment definition): a clear message.
        print(f"tbconsole trial: {exc}", file=sys.stderr)
        return 1
    print()
    print("\n".join(summary.lines()))
    return 0 if summary.ok else 1


def _add_tasks(sub) -> None:
    p = sub.add_parser(
        "tasks",
        help="list the tasks under a tasks dir (default: the bundled set)",
        description="List every task folder under TASKS_DIR (folders with a task.toml, sorted), "
        "read through Harbor's task model.",
    )
    p.add_argument("tasks_dir", type=Path, nargs="?", metavar="TASKS_DIR",
                   help="a folder of Harbor task folders (default: the bundled tasks)")
    p.set_defaults(handler=_run_tasks)


def _run_tasks(args) -> int:
    from tbconsole.taskset import BUNDLED_TASKS_DIR, TaskSetError, load_all

    tasks_dir = args.tasks_dir or BUNDLED_TASKS_DIR
    try:
        tasks = load_all(tasks_dir)
    except TaskSetError as exc:
        raise UsageError(str(exc)) from None
    width = max(len(t.path.name) for t in tasks)
    for t in tasks:
        print(f"{t.path.name:<{width}}  {t.difficulty or '-':<6}  {t.category or '-':<22}  {t.local_note}")
    print(f"{len(tasks)} tasks in {tasks_dir}")
    return 0


BENCHMARKS = {
    "sandbox": ("tbconsole.bench.sandbox", "local sandbox: start/stop and per-command cost vs a bare subprocess"),
    "console": ("tbconsole.ui.bench", "console: events/s ingested, UI lag, memory, attach's first frame"),
    "proxy": ("tbconsole.bench.proxy", "capture proxy: overhead per call vs a bare aiohttp handler; "
              "incremental vs full render"),
    "engine": ("tbconsole.bench.engine", "local engine: prefill, sampling (1 and 8 concurrent), train step, "
               "vs the bare model"),
}


def _add_bench(sub, full: bool = True) -> None:
    p = sub.add_parser("bench", help="run a benchmark (figures with a same-run baseline)",
                       description="Benchmarks. Each prints its figures beside a baseline measured "
                       "in the same run, with the ratio.")
    names = p.add_subparsers(dest="benchmark", metavar="NAME", parser_class=Parser, required=True)
    for name, (module, summary) in BENCHMARKS.items():
        bp = names.add_parser(name, help=summary, description=summary)
        bp.set_defaults(handler=_run_bench, bench_module=module)
        if full:
            import importlib

            importlib.import_module(module).add_arguments(bp)


def _run_bench(args) -> int:
    import importlib

    return importlib.import_module(args.bench_module).run(args)


def _add_attach(sub, full: bool = True) -> None:
    p = sub.add_parser("attach", help="open the console over another process's run (live or replay)",
                       description="Open the console over a run's log_path: live (tailing events.jsonl, "
                       "controls through the run's control inbox) or, when the run has ended, replay.")
    if full:
        from tbconsole.ui.cli import add_attach_arguments  # light: no Textual import until it runs

        add_attach_arguments(p)


def _add_engine(sub, full: bool = True) -> None:
    p = sub.add_parser("engine", help="serve the local Tinker-compatible engine (loopback by default)",
                       description="Serve the local Tinker-compatible engine: the tinker SDK and the "
                       "cookbook train and sample against it as against a gateway.")
    if full:
        from tbconsole.engine import cli as engine_cli  # imports torch: only when asked for

        engine_cli.add_arguments(p)
        p.set_defaults(handler=engine_cli.run)


def _add_warmup(sub, full: bool = True) -> None:
    p = sub.add_parser("warmup", help="make the demo's starting policy by supervised warm-up",
                       description="Supervised warm-up of the local model on demonstrations rendered in "
                       "the agent's own transcript format (see tbconsole/warmup.py), then an evaluation "
                       "on held-out task variants. Writes a PEFT adapter folder.")
    if full:
        from tbconsole.warmup import add_arguments, run

        add_arguments(p)
        p.set_defaults(handler=run)


def _add_train(sub) -> None:
    p = sub.add_parser("train", add_help=False,
                       help="run the recipe: same KEY=VALUE arguments as python -m tinker_agent.train",
                       description="Run the Terminal-Bench 2 recipe (tbconsole train --help lists every option).")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(handler=lambda args: _run_train(args.rest))


def _run_train(rest: list[str]) -> int:
    from tbconsole.runner.cli import run_train

    return run_train(rest)


def _run_demo(rest: list[str]) -> int:
    from tbconsole.runner.cli import run_demo

    return run_demo(rest)


def _add_demo(sub) -> None:
    # Listed for --help; `tbconsole demo …` is dispatched before argparse (KEY=VALUE arguments).
    sub.add_parser("demo", add_help=False, help="the recipe on the embedded default: local engine, "
                   "bundled tasks, local sandbox (accepts the same KEY=VALUE overrides)")


def build_parser(command: str | None = None) -> Parser:
    """The command line. Only the command being run gets its full argument list, so that
    `tbconsole attach` never imports torch for `engine`'s options."""
    parser = Parser(prog="tbconsole", description="Training console for Terminal-Bench RL with Harbor and Tinker.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    _add_trial(sub)
    _add_tasks(sub)
    _add_bench(sub, full=command == "bench")
    _add_engine(sub, full=command == "engine")
    _add_attach(sub, full=command == "attach")
    _add_warmup(sub, full=command == "warmup")
    _add_train(sub)
    _add_demo(sub)
    return parser


PASSTHROUGH = {"train": "_run_train", "demo": "_run_demo"}  # commands that parse their own KEY=VALUE arguments


def main(argv: list[str] | None = None) -> int:
    offline.apply_safe_defaults()
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in PASSTHROUGH:
        return globals()[PASSTHROUGH[argv[0]]](argv[1:])
    parser = build_parser(argv[0] if argv else None)
    try:
        args = parser.parse_args(argv)
    except BrokenPipeError:
        return 0
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return args.handler(args)
    except UsageError as exc:
        print(f"tbconsole {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
