"""`tbconsole compare RUN_A RUN_B [RUN_C RUN_D]`: 2–4 runs side by side (``tbconsole.runs.compare``).

On a terminal, the compare screen (``tbconsole.ui.compare_app``): every run's training reward,
held-out reward, KL, entropy and step time on one step axis, solve rates per task or family, the
settings that differ; it reads on while any run is live. ``--web`` serves that screen to a
browser as ``attach --web`` serves the console (``tbconsole.entry.web``); ``--text``, or no
terminal (``attach.console_has_terminal``, as for attach), prints the same comparison as plain
columns for scripts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
from pathlib import Path

from tbconsole.entry.usage import UsageError


def register(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="compare 2-4 runs: trends on one step axis, solve rates, settings that differ",
        description="Compare 2 to 4 runs (their log_path folders, live or finished): training reward, "
        "held-out reward, KL, entropy and step time overlaid on one step axis, solve rates per task "
        "(or family of variants) side by side, and the settings that differ. Follows live runs.",
    )
    p.add_argument("runs", nargs="*", type=Path, metavar="RUN", help="a run's log_path (the folder with events.jsonl)")
    p.add_argument("--text", action="store_true", help="print a plain summary table (also when stdout is no terminal)")
    p.add_argument("--theme", default=None, help="theme: dark, light, or NAME (as for attach)")
    p.add_argument("--web", action="store_true", help="serve the comparison to a browser instead of this terminal")
    p.add_argument("--host", default="127.0.0.1", help="--web: the address to listen on (default: %(default)s)")
    p.add_argument("--port", type=int, default=8766, help="--web: the port (default: %(default)s)")
    p.add_argument(
        "--screenshot", type=Path, metavar="FILE.svg", default=None, help="write the comparison as an SVG and exit"
    )
    p.add_argument("--size", default="140x50", metavar="COLSxROWS", help="--screenshot: terminal size (%(default)s)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tbconsole.record.runfolder import NotARun, run_events
    from tbconsole.runs.compare import MAX_RUNS, MIN_RUNS

    paths: list[Path] = args.runs
    if not MIN_RUNS <= len(paths) <= MAX_RUNS:
        raise UsageError(f"give {MIN_RUNS} to {MAX_RUNS} runs to compare (got {len(paths)})")
    files = set()
    for path in paths:
        try:
            files.add(run_events(path).resolve())
        except NotARun as exc:
            raise UsageError(str(exc)) from None
    if len(files) < len(paths):
        raise UsageError("a run is given twice")
    if args.web:
        return _serve(paths, args.theme, args.host, args.port)
    if args.screenshot is not None:
        return _screenshot(paths, args.screenshot, args.theme, args.size)
    from tbconsole.entry.attach import console_has_terminal

    if args.text or not console_has_terminal():
        return print_summary(paths)
    return compare_console(paths, args.theme)


def print_summary(paths: list[Path]) -> int:
    from tbconsole.runs.compare import build, open_runs
    from tbconsole.ui.present.compare_view import summary_text

    readings = open_runs(paths)
    try:
        print(summary_text(build(readings)), flush=True)
    except BrokenPipeError:  # `| head`: the reader has all it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        for reading in readings:
            reading.close()
    return 0


def compare_console(paths: list[Path], theme: str | None) -> int:
    """The compare screen over ``paths`` in this terminal, until ``q``."""
    from tbconsole.runs.compare import RunReading
    from tbconsole.ui.compare_app import CompareApp

    app = CompareApp([RunReading.open(p) for p in paths], theme=theme)
    app.run()
    return app.return_code or 0


def _serve(paths: list[Path], theme: str | None, host: str, port: int) -> int:
    from tbconsole.entry.web import is_loopback, serve_command

    if not is_loopback(host):
        print(
            f"tbconsole compare: warning: serving on {host}:{port}: the runs' comparison (their settings "
            "and folders) is readable from the network",
            file=sys.stderr,
        )
    argv = [sys.executable, "-m", "tbconsole", "compare", *(str(p.absolute()) for p in paths)]
    if theme is not None:
        argv += ["--theme", theme]
    names = " · ".join(p.absolute().name for p in paths)
    what = ", ".join(str(p) for p in paths)
    return serve_command(shlex.join(argv), "compare", what, f"tbconsole compare · {names}", host, port)


def _screenshot(paths: list[Path], out: Path, theme: str | None, size: str) -> int:
    """The compare screen once every run is read, headless, exported as SVG."""
    from tbconsole.common.atomic import write_text
    from tbconsole.runs.compare import RunReading
    from tbconsole.ui.compare_app import CompareApp

    try:
        cols, rows = (int(n) for n in size.lower().split("x"))
    except ValueError:
        raise UsageError(f"--size {size!r}: expected COLSxROWS, e.g. 140x50") from None

    async def shoot() -> str:
        app = CompareApp([RunReading.open(p) for p in paths], theme=theme)
        async with app.run_test(size=(cols, rows)) as pilot:
            while app.reads == 0 and app.error is None:
                await pilot.pause(0.05)
            await pilot.pause(0.3)
            return app.export_screenshot(title="tbconsole compare")

    write_text(out, asyncio.run(shoot()))
    print(f"wrote {out}")
    return 0
