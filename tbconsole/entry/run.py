"""A run wired up: its event bus and control, then the recipe in the console (Textual's loop)
or headless (a progress log, Ctrl-C once stops cleanly after the current batch, twice aborts)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path


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
        bus.publish(
            LogLine(
                level="error",
                message="stopping the run: its folder's disk is full (the batch in flight is not trained)",
            )
        )

    bus = EventBus(log_path, on_write_error=on_write_error)
    control = RunControl(bus.publish)
    return bus, control


def in_console(parsed, prepare, theme: str | None) -> int:
    """The run as a worker in the console's own event loop; errors wait for a decision there."""
    from tbconsole.runner import train
    from tbconsole.ui.cli import run_console

    bus, control = open_run(Path(parsed.args.config.log_path))

    async def work():
        if prepare is None:
            return await train.main(parsed, bus, control, decision_timeout=None)
        async with prepare(parsed) as parsed_for_run:
            return await train.main(parsed_for_run, bus, control, decision_timeout=None)

    try:
        result = run_console(bus, control, theme, work=work)
    finally:
        bus.close()
    if result.error is not None:
        print(f"error: {result.error}", file=sys.stderr)
        return 1
    if result.value is not None:
        return result.value.exit_code
    return result.exit_code


def headless(parsed, prepare) -> int:
    return asyncio.run(_headless(parsed, prepare))


async def _headless(parsed, prepare) -> int:
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
