"""Entry points into the console (the composition root: it wires the app, its sources and controls).

- ``tbconsole attach LOG_PATH``: ``add_attach_arguments(parser)`` / ``run_attach(args)``. A run
  that is still going is followed live (``attach_console``: tail of ``events.jsonl``; p/s/a/d go
  through the run's control inbox; ``q`` leaves and the run goes on; a runner that dies reads as
  dead); a finished one is replayed (``[ ]`` move by step). Either way the terminal gets a short
  summary when the console closes. Without a terminal (stdin or stdout not one: a script, a
  pipe, cron) it prints where the run stands as plain text instead and exits (``status_text``).
  A path that is no run (``runfolder.run_events``) is a usage error; a run folder whose runner
  holds it but has written no event yet is a run starting, followed like any other.
  ``--web`` serves the console to a browser instead
  (``tbconsole.entry.web``). Only Textual and tbconsole's light modules are imported on
  this path (no torch, harbor, tinker), so it starts fast and works under ``textual-serve`` (which
  starts one process per browser connection: the served command attaches, it never starts a run).
- ``run_console(bus, control, theme, work=...)``: `tbconsole train`/`demo` open the console over
  a live run in this process (see its docstring for the threading model).
- ``python -m tbconsole.entry.attach demo-events``: the console over a synthetic run (no runner).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tbconsole.common.atomic import write_text
from tbconsole.record.runfolder import NotARun, RunFolder, run_events

if TYPE_CHECKING:  # imported where used, for a quick start: only the types here
    from tbconsole.record.control import RunControl
    from tbconsole.record.events import EventBus
    from tbconsole.ui.app import ConsoleApp


def add_attach_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "log_path",
        type=Path,
        metavar="LOG_PATH",
        help="the run's log_path (the folder with events.jsonl), or an events.jsonl file",
    )
    parser.add_argument(
        "--theme",
        default=None,
        help="theme: dark, light, or NAME for your own NAME.toml in ~/.config/tbconsole/themes or $TBCONSOLE_THEMES",
    )
    parser.add_argument("--replay", action="store_true", help="replay even if the run is still going (no controls)")
    parser.add_argument(
        "--screenshot",
        type=Path,
        metavar="FILE.svg",
        default=None,
        help="write the console at the run's last event as an SVG and exit (no terminal needed)",
    )
    parser.add_argument(
        "--size", default="140x44", metavar="COLSxROWS", help="terminal size for --screenshot (default: %(default)s)"
    )
    parser.add_argument("--web", action="store_true", help="serve the console to a browser instead of this terminal")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="--web: the address to listen on (default: %(default)s; another address makes the console, "
        "with its controls, reachable from the network)",
    )
    parser.add_argument("--port", type=int, default=8765, help="--web: the port (default: %(default)s)")
    parser.set_defaults(handler=run_attach)


def run_attach(args: argparse.Namespace) -> int:
    from tbconsole.record.enums import RunnerState
    from tbconsole.record.lease import read_lease
    from tbconsole.ui.app import ConsoleApp
    from tbconsole.ui.data.source import run_has_ended

    log_path: Path = args.log_path
    try:
        events_file = run_events(log_path)
    except NotARun as exc:
        print(f"tbconsole attach: {exc}", file=sys.stderr)
        return 2
    run_dir = events_file.parent
    if args.screenshot is not None:
        if not events_file.is_file():
            print(f"tbconsole attach: {run_dir}: the run has written no events yet (it is starting)", file=sys.stderr)
            return 1
        return _screenshot(events_file, args.screenshot, args.theme, args.size)
    if args.web:
        return _serve(run_dir, args.theme, args.host, args.port)
    if not console_has_terminal():
        print("tbconsole attach: the console needs a terminal; where the run stands:", file=sys.stderr)
        return print_status(run_dir)
    # A run folder whose last event is run.ended but that a runner holds again is a resume starting.
    ended = run_has_ended(run_dir) and read_lease(run_dir).state is not RunnerState.LIVE
    if not (args.replay or ended or log_path.is_file()):
        return attach_console(run_dir, args.theme)
    app = ConsoleApp(replay_path=events_file, theme=args.theme, remember_theme=True)
    return _run_and_summarize(app, run_dir)


def console_has_terminal() -> bool:
    """Whether a full-screen console can run here: stdin and stdout are a terminal, or
    textual-serve runs this command for a browser (it sets TEXTUAL_DRIVER; its pipes are no
    terminal). Without one Textual would write its screens into a pipe and wait for keys that
    never come. `attach` and `compare` decide alike."""
    if "TEXTUAL_DRIVER" in os.environ:
        return True
    return _isatty(sys.stdin) and _isatty(sys.stdout)


def _isatty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (OSError, ValueError):  # closed
        return False


def status_text(log_path: Path, now: float | None = None) -> str:
    """Where the run in ``log_path`` stands, as plain text (its state from the snapshot and the
    events after it, read only): run, model, step and state; the mean reward of its newest steps;
    its active advisories; then the summary the console prints when it closes (with the command
    to re-attach or resume). Text from the run is inert (the reducer's state holds no control
    character; ``one_line`` keeps each item on its line)."""
    import time

    from tbconsole.common.formatting import format_value
    from tbconsole.common.inert import one_line
    from tbconsole.record.enums import RunnerState
    from tbconsole.record.lease import read_lease
    from tbconsole.state.snapshot import restore
    from tbconsole.ui.present.wording import exit_summary, progress_text, severity_rank, status_label

    restored = restore(log_path, write_after=None)
    restored.reader.close()
    state, runner = restored.state, read_lease(log_path)
    now = time.time() if now is None else now
    if state.run_id is None:
        head = ["no events yet (the run is starting)" if runner.state is RunnerState.LIVE else "no events"]
    else:
        head = [f"run {one_line(state.run_id, 80)}"]
        if state.model_name:
            head.append(one_line(state.model_name, 80))
        head.append(progress_text(state, now))
    head.append(status_label(state, runner))
    lines = [" · ".join(head)]
    trend = state.reward_trend()
    if trend:
        lines.append("mean reward by step: " + ", ".join(f"{step} {format_value(m)}" for step, m, _ in trend[-8:]))
    active = sorted(
        (a for a in state.advisories.values() if a.active), key=lambda a: (severity_rank(a.severity), -a.updated)
    )
    if active:
        lines.append(f"advisories ({len(active)} active):")
        lines += [f"  {one_line(a.severity, 12)} {one_line(a.rule, 40)}: {one_line(a.message, 200)}" for a in active]
    elif state.run_id is not None:
        lines.append("advisories: none active")
    lines.append(exit_summary(state, runner, log_path))
    return "\n".join(lines)


def print_status(log_path: Path) -> int:
    """``status_text`` on stdout (a reader that leaves early, `| head`, is no error)."""
    from tbconsole.runs.runlist import remember

    remember(log_path)  # for `tbconsole runs`
    try:
        print(status_text(log_path), flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def attach_console(log_path: Path, theme: str | None) -> int:
    """The console over the run in ``log_path``, which another process runs (or ran): it follows
    ``events.jsonl`` (waiting for it to appear while the run starts), sends p/s/a/d through the
    run's control inbox and watches the runner's lease. ``q`` leaves at once and the run goes on.
    When the console closes the terminal gets one short summary: where the run stands and the
    command to re-attach (or, once nobody runs it, to resume it). Returns the exit status."""
    return _run_and_summarize(attach_app(log_path, theme), Path(log_path))


def attach_app(log_path: Path, theme: str | None) -> ConsoleApp:
    """The attach-mode ``ConsoleApp`` over ``log_path`` (not yet running)."""
    from tbconsole.ui.app import ConsoleApp
    from tbconsole.ui.data.source import FileControls, LeaseWatch, TailSource

    return ConsoleApp(
        source=TailSource(log_path),
        controls=FileControls(log_path),
        lease=LeaseWatch(log_path),
        theme=theme,
        mode="attach",
        remember_theme=True,
    )


def closing_summary(app: ConsoleApp, log_path: Path) -> str:
    """The summary printed when ``app`` (attached, or a replay) has closed: the whole run's state
    (a replay's at its end, wherever it was moved to: kept, not read again) and a fresh read of
    its runner's lease."""
    from tbconsole.record.lease import read_lease
    from tbconsole.ui.present.wording import exit_summary

    state = app.replay.final_state() if app.replay is not None else app.state
    return exit_summary(state, read_lease(log_path), log_path)


def _run_and_summarize(app: ConsoleApp, log_path: Path) -> int:
    from tbconsole.runs.runlist import remember

    remember(log_path)  # for `tbconsole runs`
    if os.environ.get("TBCONSOLE_EXIT_AFTER_FIRST_FRAME"):  # the benchmark's first-frame probe
        app.on_first_frame = lambda: app.exit(0)
    app.run()
    with contextlib.suppress(OSError):  # the terminal may be gone (a closed SSH session)
        print(closing_summary(app, log_path))
    return app.return_code or 0


def _serve(log_path: Path, theme: str | None, host: str, port: int) -> int:
    from tbconsole.entry.web import serve

    if not _is_loopback(host):
        print(
            f"tbconsole attach: warning: serving on {host}:{port}: the console, with its controls "
            "(pause, stop, abort), is reachable from the network",
            file=sys.stderr,
        )
    return serve(log_path, theme, host, port)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _screenshot(events_file: Path, out: Path, theme: str | None, size: str) -> int:
    """Open the run as a replay does (at its end: its snapshot and the events after it),
    headless, then export the screen as it stands (SVG)."""
    from tbconsole.ui.app import ConsoleApp
    from tbconsole.ui.data.source import FileReplay

    try:
        cols, rows = (int(n) for n in size.lower().split("x"))
    except ValueError:
        print(f"tbconsole attach: --size {size!r}: expected COLSxROWS, e.g. 140x44", file=sys.stderr)
        return 2

    # A run still going is shot as it stands: the header says [live], not [replay].
    from tbconsole.record.enums import RunnerState
    from tbconsole.record.lease import read_lease
    from tbconsole.ui.data.source import run_has_ended

    run_dir = events_file.parent
    going = not run_has_ended(run_dir) or read_lease(run_dir).state is RunnerState.LIVE
    label = "live" if going else "replay"

    async def shoot() -> str:
        app = ConsoleApp(replay=FileReplay.open(events_file), theme=theme, label=label)
        async with app.run_test(size=(cols, rows)) as pilot:
            await pilot.pause(0.5)
            return app.export_screenshot(title=f"tbconsole · {events_file.parent.name}")

    write_text(out, asyncio.run(shoot()))
    print(f"wrote {out}")
    return 0


@dataclass
class ConsoleResult:
    """What ``run_console`` returns: the work's return value or error, and the app's exit code."""

    value: Any = None
    error: BaseException | None = None
    exit_code: int = 0


def run_console(
    bus: EventBus, control: RunControl, theme: str | None = None, *, work: Callable[[], Awaitable[Any]]
) -> ConsoleResult:
    """Open the console over a run in this process; returns when the console closes.

    The run is a worker in the app's loop: ``work``, a zero-argument async callable, is started
    with ``run_worker(..., exit_on_error=False)`` on the console's asyncio loop, so the run's
    ``RunControl`` lives on that loop too (create it inside ``work`` or before — its asyncio
    objects bind lazily) and the console calls its methods directly. CPU-heavy parts of the run
    must go to threads (``asyncio.to_thread``) or they freeze the UI. When the run ends with
    ``stopped``/``aborted`` the console closes by itself; after ``done``/``failed`` it stays
    open on the final state until ``q``. ``q`` while the run is going asks, then stops it
    cleanly and quits when it has stopped.

    Events reach the console through ``bus.subscribe`` (the subscriber only appends to a deque:
    publish never waits on the UI). Call this from the main thread; it runs the Textual app
    until it exits.
    """
    from tbconsole.ui.app import ConsoleApp
    from tbconsole.ui.data.source import BusSource, LocalControls

    app = ConsoleApp(
        source=BusSource(bus), controls=LocalControls(control), theme=theme, mode="live", work=work, remember_theme=True
    )
    app.run()
    return ConsoleResult(value=app.work_result, error=app.work_error, exit_code=app.return_code or 0)


# -- demo-events: the console over a synthetic run ------------------------------------------------


def _demo_events(args: argparse.Namespace) -> int:
    from tbconsole.record.events import EventBus
    from tbconsole.synthetic.run import synthetic_run
    from tbconsole.ui.app import ConsoleApp
    from tbconsole.ui.data.source import Replay

    if args.replay:
        events = list(synthetic_run(steps=args.steps, error_at=(1, 2), pause_after=0, seed=args.seed))
        app = ConsoleApp(replay=Replay(events), theme=args.theme, mode="replay")
        app.run()
        return 0

    from tbconsole.record.control import RunControl

    RunFolder(args.log_path).events.unlink(missing_ok=True)
    bus = EventBus(args.log_path)
    speed = args.speed

    async def work() -> str:
        from tbconsole.record.control import ControlInbox
        from tbconsole.synthetic.run import SyntheticCaptures, play

        inbox = asyncio.create_task(ControlInbox(args.log_path, control).run())  # for `attach` from elsewhere
        try:
            captures = SyntheticCaptures(args.log_path)  # transcripts read capture files, as in a real run
            events = list(
                synthetic_run(
                    steps=args.steps,
                    error_at=(1, 2),
                    seed=args.seed,
                    end=False,
                    log_path=str(args.log_path),
                    captures=captures,
                )
            )
            return await play(bus, control, events, speed=speed, captures=captures)
        finally:
            inbox.cancel()

    control = RunControl(bus.publish)
    result = run_console(bus, control, args.theme, work=work)
    bus.close()
    if result.error is not None:
        print(f"demo-events: {result.error!r}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tbconsole.entry.attach")
    sub = parser.add_subparsers(dest="command", required=True)
    attach = sub.add_parser("attach", help="follow or replay a run")
    add_attach_arguments(attach)
    demo = sub.add_parser("demo-events", help="the console over a synthetic run (no runner needed)")
    demo.add_argument("--steps", type=int, default=4)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--speed", type=float, default=4.0, help="synthetic seconds per real second")
    demo.add_argument("--theme", default=None)
    demo.add_argument("--replay", action="store_true", help="replay instead of playing live")
    demo.add_argument("--log-path", type=Path, default=Path("/tmp/tbconsole-demo-events"))
    demo.set_defaults(handler=_demo_events)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
