"""A run wired up: its event bus and control, then the recipe in this process (a progress log;
the runner) or in a detached process of its own that a console attaches to.

The runner's signals: the first SIGINT or SIGTERM (or SIGHUP in the foreground: the terminal is
gone) stops the run cleanly after the current batch, the next one aborts it. A detached runner
(its own session, no terminal) ignores SIGHUP."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from tbconsole.common.cpushare import RUNNER_SESSION_NICE, lower_session_weight
from tbconsole.common.formatting import command_line
from tbconsole.record.enums import ControlState, LogLevel, RunStatus
from tbconsole.record.runfolder import RunFolder

if TYPE_CHECKING:
    from tbconsole.record.control import RunControl
    from tbconsole.record.events import Event

RUNNER_FLAG = "--detached-runner"  # internal: marks the process that `start_detached` starts
RUNNER_LOG_TAIL = 20  # lines of runner.log shown when a detached runner dies before it holds its folder


def open_run(log_path: Path):
    """The run's event bus and control. A disk that fills up mid-run (events.jsonl cannot be
    written) stops the run cleanly: one message (the bus's), then the usual end, whose last
    events fit in the bus's reserve."""
    from tbconsole.record.control import ControlError, RunControl
    from tbconsole.record.events import EventBus, LogLine

    control: RunControl | None = None

    def on_write_error(exc: OSError) -> None:
        if control is None:
            return
        try:
            control.stop()
        except ControlError:  # already stopping or ending
            return
        bus.publish(
            LogLine(
                level=LogLevel.ERROR,
                message="stopping the run: its folder's disk is full (the batch in flight is not trained)",
            )
        )

    bus = EventBus(log_path, on_write_error=on_write_error)
    control = RunControl(bus.publish)
    return bus, control


class SignalStop:
    """Turns signals into control commands: the first stops after the batch, the next aborts.
    A run waiting for a decision aborts at once (no batch can be trained without one). Records
    which signal stopped or aborted the run, for its end message."""

    def __init__(self, control: RunControl, publish: Callable[[Event], None]) -> None:
        self.control = control
        self.publish = publish
        self.causes: dict[RunStatus, str] = {}

    def cause(self, status: RunStatus) -> str | None:
        return self.causes.get(status)

    def __call__(self, signum: int) -> None:
        from tbconsole.record.control import ENDED
        from tbconsole.record.events import LogLine

        control = self.control
        if control.state in (ControlState.ABORTING, *ENDED):
            return
        name = signal.Signals(signum).name
        if self.causes or control.state in (ControlState.STOPPING, ControlState.AWAITING_DECISION):
            status, what, command = RunStatus.ABORTED, "aborting", control.abort
        else:
            status, what, command = RunStatus.STOPPED, "stopping after the current batch (again: abort)", control.stop
        self.causes[status] = f"on {name}"
        self.publish(LogLine(level=LogLevel.WARNING, message=f"{name}: {what}"))
        command()

    @contextmanager
    def installed(self, loop: asyncio.AbstractEventLoop, *, detached: bool) -> Iterator[SignalStop]:
        signums = [signal.SIGINT, signal.SIGTERM] + ([] if detached else [signal.SIGHUP])
        for signum in signums:
            loop.add_signal_handler(signum, self, signum)
        try:
            yield self
        finally:
            for signum in signums:
                loop.remove_signal_handler(signum)


def headless(
    parsed, prepare, *, decision_timeout: float | None = 0, detached: bool = False, prog: str = "tbconsole train"
) -> int:
    return asyncio.run(_headless(parsed, prepare, decision_timeout, detached, prog))


async def _headless(parsed, prepare, decision_timeout: float | None, detached: bool, prog: str) -> int:
    from tbconsole.runner import train
    from tbconsole.runner.health import GatewayUnreachable
    from tbconsole.runner.progress import ProgressLog
    from tbconsole.state.snapshot import SnapshotWriter

    log_path = Path(parsed.args.config.log_path)
    bus, control = open_run(log_path)
    bus.subscribe(ProgressLog())
    # A console attaching later reads the snapshot and only the events after it (a thread that
    # reads events.jsonl like any reader; its errors are logged, never the run's).
    snapshots = SnapshotWriter(log_path)
    snapshots.start()
    signals = SignalStop(control, bus.publish)
    try:
        with signals.installed(asyncio.get_running_loop(), detached=detached):
            if prepare is not None:
                async with prepare(parsed) as parsed_for_run:
                    result = await train.main(parsed_for_run, bus, control, decision_timeout, signals.cause)
            else:
                result = await train.main(parsed, bus, control, decision_timeout, signals.cause)
        return result.exit_code
    except GatewayUnreachable as exc:
        print(f"{prog}: {exc}", file=sys.stderr)  # a refusal, said as every other one of the command
        return 1
    except Exception as exc:  # noqa: BLE001 - one message here, the traceback in the run's log
        from tbconsole.runner.crashlog import log_traceback

        log_file = log_traceback(Path(parsed.args.config.log_path), exc)
        print(f"error: {type(exc).__name__}: {str(exc)[:500]} (traceback in {log_file})", file=sys.stderr)
        return 1
    finally:
        bus.close()
        snapshots.stop()  # after the last event: the final snapshot covers the whole run


def start_detached(command: str, args: list[str], folder: RunFolder) -> subprocess.Popen:
    """``tbconsole <command> ARGS`` as a detached runner: its own session (closing the terminal
    or the console leaves it running), no stdin, stdout and stderr appended to runner.log."""
    runner_log = folder.runner_log
    runner_log.parent.mkdir(parents=True, exist_ok=True)
    with open(runner_log, "ab") as out:
        runner = subprocess.Popen(
            [sys.executable, "-m", "tbconsole", command, *args, "--headless", RUNNER_FLAG],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            close_fds=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},  # runner.log follows the run line by line
        )
    lower_session_weight(runner.pid, RUNNER_SESSION_NICE)  # a console's key press comes first
    return runner


def wait_until_live(runner: subprocess.Popen, folder: RunFolder, log_offset: int, poll: float = 0.1) -> bool:
    """Wait until ``runner`` holds the run folder's lease. If it exits first, print what it wrote
    to runner.log (from ``log_offset``) and return False."""
    from tbconsole.record.enums import RunnerState
    from tbconsole.record.lease import read_lease

    while True:
        view = read_lease(folder.root)
        if view.state is RunnerState.LIVE and view.pid == runner.pid:
            return True
        if runner.poll() is not None:
            runner_log = folder.runner_log
            try:
                with open(runner_log, "rb") as f:
                    f.seek(log_offset)
                    tail = f.read().decode(errors="replace").splitlines()[-RUNNER_LOG_TAIL:]
            except OSError:
                tail = []
            print(
                "\n".join([*tail, f"error: the runner exited with status {runner.returncode} (its log: {runner_log})"]),
                file=sys.stderr,
            )
            return False
        time.sleep(poll)


def detached(command: str, args: list[str], log_path: Path, *, console: bool, theme: str | None) -> int:
    """Start the run's detached runner; then open the console attached to it, or (``console``
    False) say how to find it. Quitting the console leaves the run going."""
    folder = RunFolder(log_path)
    runner_log = folder.runner_log
    log_offset = runner_log.stat().st_size if runner_log.exists() else 0
    runner = start_detached(command, args, folder)
    try:
        if not wait_until_live(runner, folder, log_offset):
            return 1
    except KeyboardInterrupt:
        runner.send_signal(signal.SIGTERM)
        print(f"interrupted: the runner (pid {runner.pid}) was asked to stop; its log: {runner_log}", file=sys.stderr)
        return 130
    if not console:
        print(
            f"runner started (pid {runner.pid}); its log: {runner_log}; its console: {command_line('attach', log_path)}"
        )
        return 0
    from tbconsole.entry.attach import attach_console

    return attach_console(log_path, theme)
