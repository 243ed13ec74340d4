"""`tbconsole COMMAND …`: one subcommand per job, each in its own module of this package.

Heavy imports (torch, harbor) happen inside the subcommand that needs them, and only the command
being run gets its full argument list, so `--help` and light commands (`attach`) start fast.
"""

from __future__ import annotations

import sys

from tbconsole.entry import bench, compare, control, export, ledger, runs, tasks, train, trial, warmup
from tbconsole.entry.usage import USAGE_EXIT, Parser, UsageError

# Commands that parse their own KEY=VALUE arguments: they get the command line before argparse.
PASSTHROUGH = {"train": train.run_train, "demo": train.run_demo}


def _register_attach(sub, full: bool) -> None:
    p = sub.add_parser(
        "attach",
        help="open the console over another process's run (live or replay)",
        description="Open the console over a run's log_path: live (tailing events.jsonl, "
        "controls through the run's control inbox) or, when the run has ended, replay.",
    )
    if full:
        from tbconsole.entry.attach import add_attach_arguments  # light: no Textual import until it runs

        add_attach_arguments(p)


def _register_engine(sub, full: bool) -> None:
    p = sub.add_parser(
        "engine",
        help="serve the local Tinker-compatible engine (loopback by default)",
        description="Serve the local Tinker-compatible engine: the tinker SDK and the "
        "cookbook train and sample against it as against a gateway.",
    )
    if full:
        from tbconsole.engine import cli as engine_cli  # imports torch: only when asked for

        engine_cli.add_arguments(p)
        p.set_defaults(handler=engine_cli.run)


def build_parser(command: str | None = None) -> Parser:
    """The command line; ``command`` (the one being run) is the only one given its full options."""
    parser = Parser(prog="tbconsole", description="Training console for Terminal-Bench RL with Harbor and Tinker.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    trial.register(sub)
    tasks.register(sub)
    bench.register(sub, full=command == "bench")
    _register_engine(sub, full=command == "engine")
    _register_attach(sub, full=command == "attach")
    runs.register(sub)
    export.register(sub)
    compare.register(sub)
    ledger.register(sub)
    control.register(sub)
    warmup.register(sub, full=command == "warmup")
    train.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from tbconsole.runner.wandb_advisories import defer_wandb

    train.process_defaults()
    defer_wandb()  # whatever the command imports, wandb loads only if a W&B run is started
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in PASSTHROUGH:
        return PASSTHROUGH[argv[0]](argv[1:])
    parser = build_parser(argv[0] if argv else None)
    try:
        args = parser.parse_args(argv)
    except BrokenPipeError:
        return 0
    if not getattr(args, "handler", None):
        parser.print_help()
        return USAGE_EXIT
    try:
        return args.handler(args)
    except UsageError as exc:
        print(f"tbconsole {args.command}: {exc}", file=sys.stderr)
        return USAGE_EXIT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
