"""`tbconsole trial TASK_DIR`: one Harbor trial, its outcome printed (smoke-test a task or an agent)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tbconsole.entry.usage import UsageError
from tbconsole.harbor.taskset import CONFIG_FILE


def register(sub) -> None:
    p = sub.add_parser(
        "trial",
        help="run one Harbor trial (default: local sandbox, oracle agent) and print the outcome",
        description="Run one Harbor trial of TASK_DIR and print outcome, reward, timings and "
        "the trial folder. Smoke-test a task or an agent before a training run.",
    )
    p.add_argument("task_dir", type=Path, metavar="TASK_DIR", help=f"a Harbor task folder (with {CONFIG_FILE})")
    p.add_argument("--agent", help="Harbor agent name (default: oracle, or the trial config's)")
    p.add_argument(
        "--trial-config", type=Path, metavar="trial.json", help="a Harbor TrialConfig without 'task' (as for training)"
    )
    p.add_argument(
        "--trials-dir",
        type=Path,
        default=None,
        help="where trial folders go (default: the trial config's, else ./trials)",
    )
    p.add_argument("--proxy-url", help="value for {proxy_url} in the trial config")
    p.add_argument(
        "--proxy-api-key",
        default=os.environ.get("TBCONSOLE_PROXY_API_KEY"),
        help="value for {proxy_api_key} (or set TBCONSOLE_PROXY_API_KEY)",
    )
    p.add_argument("--reward-key", default="reward", help="key of the verifier's rewards to report")
    p.set_defaults(handler=run)


def run(args) -> int:
    from tbconsole.common.formatting import format_clock
    from tbconsole.runner.single_trial import TrialConfigError, build_trial_config, load_trial_config, run_trial

    task_dir: Path = args.task_dir
    if not (task_dir / CONFIG_FILE).is_file():
        raise UsageError(f"{task_dir} is not a Harbor task folder (no {CONFIG_FILE} in it).")
    substitutions = {k: v for k, v in (("proxy_url", args.proxy_url), ("proxy_api_key", args.proxy_api_key)) if v}
    try:
        raw = load_trial_config(args.trial_config, substitutions) if args.trial_config else None
        config = build_trial_config(task_dir.resolve(), agent=args.agent, trial_config=raw, trials_dir=args.trials_dir)
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
    print(f"{format_clock()}  trial of {task_dir.name} with agent {agent}")

    async def on_phase(phase: str) -> None:
        print(f"{format_clock()}  {phase}", flush=True)

    try:
        summary = asyncio.run(run_trial(config, on_phase, args.reward_key))
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        # Raised before the trial starts (task or environment definition): a clear message.
        print(f"tbconsole trial: {exc}", file=sys.stderr)
        return 1
    print()
    print("\n".join(summary.lines()))
    return 0 if summary.ok else 1
