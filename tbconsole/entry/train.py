"""`tbconsole train KEY=VALUE…` and `tbconsole demo [KEY=VALUE…]` (and `python -m tbconsole.train`):
the recipe, with the upstream command's arguments. Parsing and every check that can fail before
the run starts, in the order a user sees them (a usage error exits 2 with nothing started or
written, a dead gateway exits 1; each refusal is one ``tbconsole <command>: <message>`` line on
stderr); ``tbconsole.entry.run`` wires the run itself."""

from __future__ import annotations

import logging
import math
import os
import shutil
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tbconsole.common import offline
from tbconsole.entry import run
from tbconsole.entry.usage import USAGE_EXIT

DETACHED_DECISION_TIMEOUT = 1800.0  # seconds an error waits in a detached runner for a console to decide

USAGE = """usage: tbconsole train KEY=VALUE ... [--headless | --detach] [--decision-timeout=SECONDS] [--notify=CMD]
       [--theme=NAME]

On a terminal the run starts in a process of its own and the console opens over it; quitting
the console (or closing the terminal) leaves the run going: `tbconsole attach LOG_PATH` opens
it again. --detach starts the run the same way without a console and prints its pid and how to
attach. --headless (or no terminal) runs it in this process with a compact progress log instead.
A run stops cleanly after its current batch on Ctrl-C or SIGTERM (or its console's stop), and
aborts on a second one.

--decision-timeout=SECONDS: how long an error that needs a decision (abort, or retry the group)
waits for one from a console before the default, abort, is taken (default: 1800 for a run in a
process of its own, 0 for --headless).

--notify=CMD (or --notify CMD; the same as harbor.notify=CMD): run CMD through the shell with a
short JSON object on stdin when the run needs a decision, ends (done, stopped, aborted, failed) or
raises an advisory of severity error; fields: event, run, log_path, step, message, ts. CMD is
killed after 10 s and never affects the run. Example:
  --notify='notify-send tbconsole "$(jq -r .message)"'

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


def process_defaults() -> None:
    """Settings every tbconsole process starts with: the offline defaults, and torch's compile
    cache out of /tmp (torch makes ``$TMPDIR/torchinductor_<user>`` whenever torch._dynamo is
    imported, e.g. by torch.optim, and never removes it; a user's own setting wins)."""
    offline.apply_safe_defaults()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", os.path.join(cache, "tbconsole", "torchinductor"))


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
        "bundled tasks, local sandbox (accepts the same KEY=VALUE overrides; --multi-turn: "
        "the two-command tasks and their warm-started policy)",
    )


@dataclass
class RunFlags:
    """The ``--`` flags of `train` and `demo` (everything else is KEY=VALUE)."""

    headless: bool = False
    detach: bool = False
    runner: bool = False  # the detached runner itself (internal, hidden from help)
    help: bool = False
    theme: str | None = None
    decision_timeout: float | None = None  # None: the default of where the run goes

    def for_runner(self) -> list[str]:
        """The flags a detached runner (and a resume of the run) keeps: those that change the run."""
        return [] if self.decision_timeout is None else [f"--decision-timeout={self.decision_timeout:g}"]


FLAGS_HELP = "--headless, --detach, --decision-timeout=SECONDS, --notify=CMD, --theme=NAME, --help"
NOTIFY_KEY = "harbor.notify"  # what --notify sets


def split_flags(argv: list[str]) -> tuple[list[str], RunFlags]:
    """KEY=VALUE arguments and the flags; a flag that is unknown or has a bad value: FlagError.
    ``--notify CMD`` becomes the key ``harbor.notify=CMD`` (a detached runner and a resume keep it)."""
    argv = _notify_as_key(argv)
    flags = RunFlags()
    for arg in argv:
        name, has_value, value = arg.partition("=")
        if arg in ("--help", "-h"):
            flags.help = True
        elif not arg.startswith("--"):
            continue
        elif arg == "--headless":
            flags.headless = True
        elif arg == "--detach":
            flags.detach = True
        elif arg == run.RUNNER_FLAG:
            flags.runner = True
        elif name == "--theme" and has_value:
            flags.theme = value
        elif name == "--decision-timeout":
            flags.decision_timeout = _seconds(value if has_value else "")
        else:
            raise FlagError(f"unknown flag {arg} (flags: {FLAGS_HELP}; options are KEY=VALUE)")
    if flags.headless and flags.detach:
        raise FlagError("--headless runs in this process, --detach in a process of its own: choose one")
    return [a for a in argv if not a.startswith("--")], flags


class FlagError(ValueError):
    """A bad ``--`` flag: message, exit 2."""


def _notify_as_key(argv: list[str]) -> list[str]:
    """``--notify=CMD`` and ``--notify CMD`` → ``harbor.notify=CMD``."""
    out: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--notify":
            command = next(args, None)
            if command is None or command.startswith("--"):
                raise FlagError("--notify takes a command: --notify='notify-send tbconsole \"$(jq -r .message)\"'")
            out.append(f"{NOTIFY_KEY}={command}")
        elif arg.startswith("--notify="):
            out.append(f"{NOTIFY_KEY}={arg.removeprefix('--notify=')}")
        else:
            out.append(arg)
    return out


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not (0 <= seconds < math.inf):
        raise FlagError(f"--decision-timeout takes a number of seconds, 0 or more (got {value!r})")
    return seconds


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
    from tbconsole.common.formatting import command_line

    stream = "stdout" if not stdout.isatty() else "stdin"
    return False, (
        f"{prog}: {stream} is not a terminal, so a progress log is printed instead of the console; "
        f"for the console run this in a terminal, or `{command_line('attach', log_path)}` from one"
    )


def refuse(prog: str, exc: BaseException | str, code: int = USAGE_EXIT) -> int:
    """A refusal of the command: ``<prog>: <message>`` on stderr, nothing started."""
    print(f"{prog}: {exc}", file=sys.stderr)
    return code


def run_train(
    argv: list[str],
    *,
    extra_defaults: dict | None = None,
    prog: str = "tbconsole train",
    command: str = "train",
    precheck=None,
    check=None,
    materialize=None,
    prepare=None,
    announce: str | None = None,
) -> int:
    """Check, then run: in a detached runner with the console attached (a terminal), in a
    detached runner alone (--detach), or in this process (--headless, no terminal, and the
    detached runner itself). ``command`` is the subcommand a detached runner is started with.

    The order a user sees: usage errors (exit 2) that need no heavy import, said at once (the
    keys, trial.json's file, the task folders, the sandbox, the disk; ``precheck(keys,
    defaults)``: the demo's own); the gateway (exit 1 when it does not answer); then the checks
    that need the cookbook or Harbor (values, renderer, trial.json's content; ``check(parsed)``:
    the demo's). Only then is anything written: ``materialize(parsed) -> parsed`` fills in the
    demo's generated files, ``prepare(parsed)`` (an async context manager) lets `demo` start the
    local engine around the run. ``announce``: a line said once the run starts."""
    from tbconsole.runner import preflight
    from tbconsole.runner.optionkeys import OptionsError
    from tbconsole.runner.wandb_advisories import defer_wandb

    process_defaults()
    try:
        keys, flags = split_flags(argv)
    except FlagError as exc:
        return refuse(prog, exc)
    if flags.runner:  # its own session: no terminal to lose, and nothing else may hang it up
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if flags.help:
        return _print_help(prog, extra_defaults)
    defaults = extra_defaults or {}
    try:
        preflight.check_command_line(keys, defaults, precheck)
        preflight.check_gateway(keys, defaults)
    except preflight.GatewayDown as exc:
        return refuse(prog, exc, 1)
    except (OptionsError, preflight.PreflightError) as exc:
        return refuse(prog, exc)

    defer_wandb()  # before the cookbook: wandb is imported only by a run that logs to W&B
    from tbconsole.engine.registry import register_with_cookbook

    register_with_cookbook()  # local model names resolve like any other (tokenizer, renderer)
    try:
        parsed = _parse_and_check(keys, extra_defaults, check)
    except (OptionsError, preflight.PreflightError) as exc:
        return refuse(prog, exc)
    if "config.log_path" not in parsed.explicit:  # the demo's generated one: the runner and a resume need it
        keys = [*keys, f"config.log_path={Path(parsed.args.config.log_path)}"]
    return _start(prog, command, keys, flags, parsed, materialize=materialize, prepare=prepare, announce=announce)


def _print_help(prog: str, extra_defaults: dict | None) -> int:
    """The usage text and every option with its default (the demo's where it has its own)."""
    from tbconsole.runner.options import help_text

    try:
        print(USAGE.replace("tbconsole train", prog) + help_text(extra_defaults), flush=True)
    except BrokenPipeError:  # `tbconsole train --help | head`: the rest goes nowhere, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _start(prog: str, command: str, keys: list[str], flags: RunFlags, parsed, *, materialize, prepare, announce) -> int:
    """Every check has passed: from here on the run folder is written. The run goes to a detached
    runner (with or without the console) or runs in this process."""
    from tbconsole.record.lease import Lease, LeaseHeld

    log_path = Path(parsed.args.config.log_path)
    console, notice = choose_console(
        prog, log_path, headless=flags.headless or flags.detach or flags.runner, stdin=sys.stdin, stdout=sys.stdout
    )
    elsewhere = console or flags.detach  # the runner is another process
    # The runner holds the folder from before its first write; a process that only starts one
    # just makes sure the folder is free before it writes there.
    lease = Lease(log_path, [*prog.split(), *keys, *flags.for_runner()])
    existed = log_path.exists()
    try:
        try:
            if elsewhere:
                _refuse_if_held(log_path)
            else:
                lease.acquire()
            if materialize is not None:
                parsed = materialize(parsed)
        except LeaseHeld as exc:
            return refuse(prog, exc)
        except OSError as exc:
            lease.release()
            if not existed:  # a refused start leaves no half-made folder behind
                shutil.rmtree(log_path, ignore_errors=True)
            return refuse(prog, f"cannot write the run folder {log_path}: {exc}", 1)
        if announce:
            print(announce, file=sys.stderr)
        if elsewhere:
            return run.detached(command, [*keys, *flags.for_runner()], log_path, console=console, theme=flags.theme)
        if notice:
            print(notice, file=sys.stderr)
        return _run_here(prog, flags, parsed, prepare)
    finally:
        lease.release()  # nothing to do when it was never taken


def _run_here(prog: str, flags: RunFlags, parsed, prepare) -> int:
    """The run in this process, which holds the folder's lease: --headless, no terminal, or the
    detached runner itself."""
    # A log handler that cannot write (Harbor's per-trial log files on a full disk) must not
    # print a traceback per line: the bus reports the disk once and stops the run.
    logging.raiseExceptions = False
    default_timeout = DETACHED_DECISION_TIMEOUT if flags.runner else 0
    decision_timeout = default_timeout if flags.decision_timeout is None else flags.decision_timeout
    code = run.headless(parsed, prepare, decision_timeout=decision_timeout, detached=flags.runner, prog=prog)
    if flags.runner:  # nobody waits for this process: its log says how it ended
        print(f"runner exit status {code}")
    return code


def _refuse_if_held(log_path: Path) -> None:
    from tbconsole.record.enums import RunnerState
    from tbconsole.record.lease import LeaseHeld, read_lease

    view = read_lease(log_path)
    if view.state is RunnerState.LIVE:
        raise LeaseHeld(log_path, view)


def _parse_and_check(keys: list[str], extra_defaults: dict | None, check):
    """The options parsed, and what needs the cookbook or Harbor to check (OptionsError)."""
    from tbconsole.runner.optionkeys import OptionsError
    from tbconsole.runner.options import parse, resolve_renderer_name
    from tbconsole.runner.preflight import GENERATED_PREFIX
    from tbconsole.runner.trials import TrialConfigError, load_template

    parsed = parse(keys, extra_defaults)
    resolve_renderer_name(parsed.args.config)
    trial_config = parsed.args.harbor.trial_config
    if not trial_config.startswith(GENERATED_PREFIX):  # the user's own, as Harbor will read it
        try:
            load_template(Path(trial_config))
        except TrialConfigError as exc:
            raise OptionsError(str(exc)) from None
    if check is not None:
        check(parsed)
    return parsed


def run_demo(argv: list[str]) -> int:
    """`tbconsole demo`: without config.log_path, a rerun goes on with the newest demo of its kind
    that ended before its last step (``demo.resumable_run``), else a new run folder."""
    from tbconsole.demo import recipe as demo
    from tbconsole.runner.preflight import last_value

    offline.apply_embedded_defaults()
    argv = demo.multi_turn_argv(argv)  # --multi-turn: the keys it stands for
    defaults = demo.demo_defaults()
    announce = None
    asks_help = any(a in ("--help", "-h") for a in argv)
    if last_value(argv, "config.log_path") is None and not asks_help:
        resumable = demo.resumable_run(demo.RUNS_DIR, demo.kind_of([a for a in argv if not a.startswith("--")]))
        if resumable is not None:
            announce = (
                f"tbconsole demo: resuming {resumable.path} at step {resumable.step}; "
                f"config.log_path={defaults['config.log_path']} for a new run"
            )
            defaults["config.log_path"] = str(resumable.path)
    return run_train(
        argv,
        extra_defaults=defaults,
        prog="tbconsole demo",
        command="demo",
        precheck=demo.precheck,
        check=demo.check,
        materialize=demo.materialize,
        prepare=demo.embedded_engine,
        announce=announce,
    )
