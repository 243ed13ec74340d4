"""`tbconsole train KEY=VALUE…` and `tbconsole demo [KEY=VALUE…]` (and `python -m tbconsole.train`):
the recipe, with the upstream command's arguments. Parsing and every check that can fail before
the run starts live here (a usage error exits 2 with nothing started); ``tbconsole.entry.run``
wires the run itself."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TextIO

from tbconsole import offline
from tbconsole.entry import run
from tbconsole.entry.usage import USAGE_EXIT

USAGE = """usage: tbconsole train KEY=VALUE ... [--headless] [--theme=NAME]

On a terminal the console opens over the run; --headless (or no terminal) prints a compact
progress log instead.

The Terminal-Bench 2 recipe: config.* is tinker_cookbook.rl.train.Config (native names and
defaults), config.dataset_builder.{tasks_dir, groups_per_batch=4, group_size=4, epochs=1},
harbor.{trial_config, reward_key=reward, listen_host=127.0.0.1, advertised_host=127.0.0.1,
max_parallel_trials_per_group=4}. Example:

  tbconsole train config.base_url=http://127.0.0.1:10613 config.model_name=Qwen/Qwen3.6-35B-A3B \\
      config.lora_rank=16 config.learning_rate=1e-6 config.max_tokens=8192 config.loss_fn=ppo \\
      config.log_path=/tmp/harbor-tinker config.dataset_builder.tasks_dir=$TB2_TASKS_DIR \\
      harbor.trial_config=trial.json

Rules: config.rollout_error_tolerance is set by the recipe (setting it is an error);
config.temperature must stay 1.0 (set the sampling temperature in trial.json);
config.max_tokens is the proxy's default for requests without one; config.renderer_name
defaults to the cookbook's recommendation for the model.

All options:
"""


def register(sub) -> None:
    """List `train` and `demo` in `tbconsole --help`. Both parse their own KEY=VALUE arguments:
    ``main`` hands them the rest of the command line before argparse sees it."""
    sub.add_parser(
        "train",
        add_help=False,
        help="run the recipe: same KEY=VALUE arguments as python -m tinker_agent.train",
        description="Run the Terminal-Bench 2 recipe (tbconsole train --help lists every option).",
    )
    sub.add_parser(
        "demo",
        add_help=False,
        help="the recipe on the embedded default: local engine, "
        "bundled tasks, local sandbox (accepts the same KEY=VALUE overrides)",
    )


def split_flags(argv: list[str]) -> tuple[list[str], set[str], str | None]:
    """KEY=VALUE arguments, flags, and the --theme value."""
    theme = None
    flags = set()
    for a in argv:
        if a.startswith("--theme="):
            theme = a.split("=", 1)[1]
        elif a.startswith("--"):
            flags.add(a)
    return [a for a in argv if not a.startswith("--")], flags, theme


def choose_console(
    prog: str, log_path: Path, *, headless: bool, stdin: TextIO, stdout: TextIO
) -> tuple[bool, str | None]:
    """Whether the run opens the console, and the one-line notice for a run that goes headless
    only because it has no terminal (`make demo | tee out.log`): without it the console would
    just never appear. An explicit --headless needs no notice."""
    if headless:
        return False, None
    if stdin.isatty() and stdout.isatty():
        return True, None
    stream = "stdout" if not stdout.isatty() else "stdin"
    return False, (
        f"{prog}: {stream} is not a terminal, so a progress log is printed instead of the console; "
        f"for the console run this in a terminal, or `tbconsole attach {log_path}` from one"
    )


def run_train(
    argv: list[str],
    *,
    extra_defaults: dict | None = None,
    prog: str = "tbconsole train",
    materialize=None,
    prepare=None,
) -> int:
    """Parse and check, then run in the console or headless. ``materialize(parsed) -> parsed``
    may fill in generated files before validation; ``prepare(parsed)`` (an async context
    manager) lets `demo` start the local engine around the run."""
    from tbconsole.runner import preflight

    offline.apply_safe_defaults()
    keys, flags, theme = split_flags(argv)
    if "--help" in flags or "-h" in argv:
        from tbconsole.runner.options import help_text

        print(USAGE.replace("tbconsole train", prog) + help_text(extra_defaults))
        return 0
    unknown = flags - {"--headless", "--help"}
    if unknown:
        print(
            f"{prog}: unknown flag {sorted(unknown)[0]} (flags: --headless, --theme=NAME, --help; "
            "options are KEY=VALUE)",
            file=sys.stderr,
        )
        return USAGE_EXIT
    # Before the heavy imports: a dead gateway or a missing key is reported in seconds.
    default_base_url = (extra_defaults or {}).get("config.base_url")
    try:
        preflight.check_api_key(preflight.last_value(keys, "config.base_url") or default_base_url)
    except preflight.PreflightError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return USAGE_EXIT
    unreachable = preflight.fast_gateway_check(keys, default_base_url)
    if unreachable is not None:
        print(f"error: {unreachable}", file=sys.stderr)
        return 1

    from tbconsole.engine.registry import register_with_cookbook
    from tbconsole.runner.options import OptionsError, parse

    register_with_cookbook()  # local model names resolve like any other (tokenizer, renderer)
    try:
        parsed = parse(keys, extra_defaults)
        preflight.check_disk(Path(parsed.args.config.log_path))  # before the demo writes its files there
        if materialize is not None:
            parsed = materialize(parsed)
        _check_before_start(parsed)
    except (OptionsError, preflight.PreflightError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return USAGE_EXIT
    # A log handler that cannot write (Harbor's per-trial log files on a full disk) must not print
    # a traceback per line: the bus reports the disk once and stops the run.
    logging.raiseExceptions = False
    console, notice = choose_console(
        prog, Path(parsed.args.config.log_path), headless="--headless" in flags, stdin=sys.stdin, stdout=sys.stdout
    )
    if console:
        return run.in_console(parsed, prepare, theme)
    if notice:
        print(notice, file=sys.stderr)
    return run.headless(parsed, prepare)


def _check_before_start(parsed) -> None:
    """Everything that can be known wrong before the run starts (OptionsError/PreflightError)."""
    from tbconsole.runner import preflight
    from tbconsole.runner.options import OptionsError
    from tbconsole.runner.trials import load_template
    from tbconsole.taskset import TaskSetError, discover
    from tbconsole.trial import TrialConfigError

    args = parsed.args
    try:
        template = load_template(Path(args.harbor.trial_config))
    except TrialConfigError as exc:
        raise OptionsError(str(exc)) from None
    try:
        task_dirs = args.config.dataset_builder.task_dirs()
    except TaskSetError as exc:
        raise OptionsError(f"config.dataset_builder.tasks_dir: {exc}") from None
    environment = template.raw.get("environment") or {}
    preflight.check_tasks(task_dirs, environment, "config.dataset_builder.tasks_dir")
    if args.harbor.eval_tasks_dir:
        try:
            eval_dirs = discover(Path(args.harbor.eval_tasks_dir).expanduser())
        except TaskSetError as exc:
            raise OptionsError(f"harbor.eval_tasks_dir: {exc}") from None
        preflight.check_tasks(eval_dirs, environment, "harbor.eval_tasks_dir")
    preflight.check_sandbox(environment)


def run_demo(argv: list[str]) -> int:
    from tbconsole.runner import demo

    offline.apply_embedded_defaults()
    return run_train(
        argv,
        extra_defaults=demo.demo_defaults(),
        prog="tbconsole demo",
        materialize=demo.materialize,
        prepare=demo.embedded_engine,
    )
