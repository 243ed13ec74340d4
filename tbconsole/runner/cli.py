"""`tbconsole train KEY=VALUE…` (and `python -m tbconsole.train`): the recipe, with the
upstream command's arguments. Headless: a readable progress log; Ctrl-C once stops cleanly
after the current batch (checkpoint, exit 0), twice aborts."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from pathlib import Path

from tbconsole import offline

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


def run_train(argv: list[str], *, extra_defaults: dict | None = None, prog: str = "tbconsole train",
              materialize=None, prepare=None) -> int:
    """Parse, then run headless. ``materialize(parsed) -> parsed`` may fill in generated
    files before validation; ``prepare(parsed)`` (an async context manager) lets `demo` start
    the local engine around the run."""
    from tbconsole.runner import preflight

    offline.apply_safe_defaults()
    keys, flags, theme = split_flags(argv)
    if "--help" in flags or "-h" in argv:
        from tbconsole.runner.options import help_text

        print(USAGE.replace("tbconsole train", prog) + help_text(extra_defaults))
        return 0
    unknown = flags - {"--headless", "--help"}
    if unknown:
        print(f"{prog}: unknown flag {sorted(unknown)[0]} (flags: --headless, --theme=NAME, --help; "
              "options are KEY=VALUE)",
              file=sys.stderr)
        return 2
    # Before the heavy imports: a dead gateway or a missing key is reported in seconds.
    default_base_url = (extra_defaults or {}).get("config.base_url")
    try:
        preflight.check_api_key(preflight.last_value(keys, "config.base_url") or default_base_url)
    except preflight.PreflightError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    unreachable = preflight.fast_gateway_check(keys, default_base_url)
    if unreachable is not None:
        print(f"error: {unreachable}", file=sys.stderr)
        return 1

    from tbconsole.runner.options import OptionsError, parse

    from tbconsole.engine.registry import register_with_cookbook

    register_with_cookbook()  # local model names resolve like any other (tokenizer, renderer)
    try:
        parsed = parse(keys, extra_defaults)
        preflight.check_disk(Path(parsed.args.config.log_path))  # before the demo writes its files there
        if materialize is not None:
            parsed = materialize(parsed)
        _check_before_start(parsed)
    except (OptionsError, preflight.PreflightError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    # A log handler that cannot write (Harbor's per-trial log files on a full disk) must not print
    # a traceback per line: the bus reports the disk once and stops the run.
    logging.raiseExceptions = False
    if "--headless" in flags or not (sys.stdout.isatty() and sys.stdin.isatty()):
        return asyncio.run(_run(parsed, prepare))
    return _run_console(parsed, prepare, theme)


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


def open_run(log_path: Path):
    """The run's event bus and control. A disk that fills up mid-run (events.jsonl cannot be
    written) stops the run cleanly: one message (the bus's), then the usual end, whose last
    events fit in the bus's reserve."""
    from tbconsole.control import ControlError, RunControl
    from tbconsole.events import EventBus, LogLine

    control: RunControl | None = None

    def on_write_error(exc: OSError) -> None:
        if control is None:
            return
        try:
            control.stop()
        except ControlError:  # already stopping or ending
            return
        bus.publish(LogLine(level="error", message="stopping the run: its folder's disk is full "
                                                    "(the batch in flight is not trained)"))

    bus = EventBus(log_path, on_write_error=on_write_error)
    control = RunControl(bus.publish)
    return bus, control


def _run_console(parsed, prepare, theme: str | None) -> int:
    """The run as a worker in the console's own event loop; errors wait for a decision there."""
    from tbconsole.runner import train
    from tbconsole.ui.cli import run_console

    log_path = Path(parsed.args.config.log_path)
    bus, control = open_run(log_path)

    async def work():
        if prepare is None:
            return await train.main(parsed, bus, control, decision_timeout=None)
        async with prepare(parsed) as parsed_for_run:
            return await train.main(parsed_for_run, bus, control, decision_timeout=None)

    try:
        result = run_console(bus, control, log_path, theme, work=work)
    finally:
        bus.close()
    if result.error is not None:
        print(f"error: {result.error}", file=sys.stderr)
        return 1
    if result.value is not None:
        return result.value.exit_code
    return result.exit_code


async def _run(parsed, prepare) -> int:
    from tbconsole.runner import train
    from tbconsole.runner.health import GatewayUnreachable
    from tbconsole.runner.progress import ProgressLog

    bus, control = open_run(Path(parsed.args.config.log_path))
    bus.subscribe(ProgressLog())
    loop = asyncio.get_running_loop()
    interrupts = 0

    def on_interrupt() -> None:
        nonlocal interrupts
        interrupts += 1
        try:
            control.stop() if interrupts == 1 else control.abort()
        except Exception:
            control.abort()

    loop.add_signal_handler(signal.SIGINT, on_interrupt)
    try:
        if prepare is not None:
            async with prepare(parsed) as parsed_for_run:
                result = await train.main(parsed_for_run, bus, control)
        else:
            result = await train.main(parsed, bus, control)
        return result.exit_code
    except GatewayUnreachable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - one message here, the traceback in the run's log
        from tbconsole.runner.crashlog import log_traceback

        log_file = log_traceback(Path(parsed.args.config.log_path), exc)
        print(f"error: {type(exc).__name__}: {str(exc)[:500]} (traceback in {log_file})", file=sys.stderr)
        return 1
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        bus.close()


def run_demo(argv: list[str]) -> int:
    from tbconsole.runner import demo

    offline.apply_embedded_defaults()
    return run_train(argv, extra_defaults=demo.demo_defaults(), prog="tbconsole demo",
                     materialize=demo.materialize, prepare=demo.embedded_engine)
