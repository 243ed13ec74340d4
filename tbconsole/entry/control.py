"""`tbconsole control LOG_PATH COMMAND [ARGUMENT]`: one control command to a live run, from a shell or
a script (a headless run has no console): the same commands a console sends, dropped into the run's
control inbox; the run's events and log say when it applied them."""

from __future__ import annotations

from pathlib import Path

from tbconsole.entry.usage import UsageError
from tbconsole.record.enums import ControlCommand

# What each command's argument is, for the help and for the usage error of a missing one.
ARGUMENTS = {
    ControlCommand.DECIDE: ("abort|retry_group", "abort or retry_group"),
    ControlCommand.CANCEL_TRIAL: ("TRIAL", "a trial id"),
    ControlCommand.DROP_TASK: ("TASK", "a task's name"),
    ControlCommand.READMIT_TASK: ("TASK", "a task's name"),
    ControlCommand.WEIGHT_TASK: ("TASK=WEIGHT", "TASK=WEIGHT (0-10)"),
    ControlCommand.SET_MAX_STEPS_OFF_POLICY: ("N", "a whole number of updates, 0 up to the configured value"),
}


def register(sub) -> None:
    listing = ", ".join(f"{c} {ARGUMENTS[c][0]}" if c in ARGUMENTS else str(c) for c in ControlCommand)
    p = sub.add_parser(
        "control",
        help="send one control command to a live run (pause, stop, set_max_steps_off_policy N, …)",
        description=f"Send one control command to the live run at LOG_PATH, as a console would: {listing}.",
    )
    p.add_argument("log_path", type=Path, metavar="LOG_PATH", help="the run's folder (its config.log_path)")
    p.add_argument("control_command", choices=[str(c) for c in ControlCommand], metavar="COMMAND")
    p.add_argument("argument", nargs="?", metavar="ARGUMENT", help="what the command needs (see above)")
    p.set_defaults(handler=run)


def run(args) -> int:
    from tbconsole.record.control import ControlClient, ControlError
    from tbconsole.record.enums import RunnerState
    from tbconsole.record.lease import read_lease

    command = ControlCommand(args.control_command)
    if command in ARGUMENTS and not args.argument:
        raise UsageError(f"{command} needs {ARGUMENTS[command][1]}")
    if command not in ARGUMENTS and args.argument:
        raise UsageError(f"{command} takes no argument")
    lease = read_lease(args.log_path)
    if lease.state is not RunnerState.LIVE:
        raise UsageError(f"{args.log_path}: the run is not live ({lease.describe()}); a command needs its runner")
    try:
        ControlClient(args.log_path).send(command, args.argument)
    except ControlError as exc:
        raise UsageError(str(exc)) from None
    print(f"sent {command}{' ' + args.argument if args.argument else ''}: the run's log says when it applies")
    return 0
