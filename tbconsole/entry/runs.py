"""`tbconsole runs [DIR]`: the run folders under DIR (default: ./runs, /tmp/harbor-tinker and the
runs the console was opened on lately), one line each; on a terminal, then a choice: one number
attaches to that run, 2–4 numbers (``1 3``) compare those runs (``tbconsole compare``)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

from tbconsole.entry.usage import UsageError

COLUMNS = ("#", "run", "state", "trained", "reward", "size", "started", "last event")


def register(sub) -> None:
    p = sub.add_parser(
        "runs",
        help="list runs (folders with events.jsonl) and attach to one or compare several",
        description="List the run folders under DIR (up to 3 levels down): state (live, paused, done, "
        "stopped, aborted, failed, or dead: its runner died), steps trained, last reward, size on disk, "
        "when it started and when it last reported. On a terminal, then choose one to attach to, or mark "
        "2-4 (e.g. `1 3`) to compare them.",
    )
    p.add_argument(
        "dir",
        type=Path,
        nargs="?",
        metavar="DIR",
        help="where to look (default: ./runs, /tmp/harbor-tinker and the runs opened lately)",
    )
    p.add_argument("--theme", default=None, help="the console's theme when attaching (dark, light, or NAME)")
    p.set_defaults(handler=run)


def run(args) -> int:
    from tbconsole.runs.runlist import default_roots, list_runs

    if args.dir is not None and not args.dir.is_dir():
        raise UsageError(f"{args.dir}: no such folder")
    roots = [args.dir] if args.dir is not None else default_roots()
    runs = list_runs(roots)
    if not runs:
        where = args.dir if args.dir is not None else "./runs, /tmp/harbor-tinker or the runs opened lately"
        print(f"no runs (folders with events.jsonl) in {where}")
        return 0
    print(table(runs, time.time()))
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return 0
    chosen = _pick(len(runs))
    if not chosen:
        return 0
    if len(chosen) > 1:
        from tbconsole.entry.compare import compare_console

        return compare_console([runs[i].path for i in chosen], args.theme)
    from tbconsole.entry.attach import attach_console

    return attach_console(runs[chosen[0]].path, args.theme)


def table(runs, now: float) -> str:
    from tbconsole.common.formatting import format_age, format_bytes, format_timestamp, format_value
    from tbconsole.record.runfolder import RunFolder
    from tbconsole.runs.diskspace import run_size
    from tbconsole.runs.runlist import last_reward, steps_trained

    rows = [COLUMNS]
    for i, info in enumerate(runs, 1):
        state = info.state
        rows.append(
            (
                str(i),
                _shown_path(info.path),
                info.condition,
                f"{steps_trained(state)}/{state.total_steps or '?'}",
                format_value(last_reward(state)),
                # Walks only the newest steps' folders; the rest is remembered in the run folder.
                format_bytes(run_size(RunFolder(info.path), state.step or 0)),
                format_timestamp(info.started) if info.started else "–",
                format_age(now - state.last_ts) if state.last_ts else "–",
            )
        )
    widths = [max(len(row[c]) for row in rows) for c in range(len(COLUMNS))]
    right = {0, 3, 4, 5}  # numbers

    def line(row: tuple[str, ...]) -> str:
        cells = zip(row, widths, strict=True)
        return "  ".join(cell.rjust(w) if c in right else cell.ljust(w) for c, (cell, w) in enumerate(cells)).rstrip()

    return "\n".join(line(row) for row in rows)


def _shown_path(path: Path) -> str:
    """Relative to the current folder when inside it (what `tbconsole attach` takes from here),
    drawn inertly: a folder's name is anyone's text."""
    from tbconsole.common.inert import one_line

    try:
        return one_line(path.relative_to(Path.cwd().resolve()), limit=400)
    except ValueError:
        return one_line(path, limit=400)


PROMPT = "attach to [1-{n}], or compare 2-4 of them [e.g. 1 3], Enter to quit: "


def _pick(count: int) -> list[int]:
    """The chosen runs' indexes: one to attach to, 2-4 to compare; none on Enter, end of input
    or ctrl-c."""
    while True:
        try:
            answer = input(PROMPT.format(n=count)).strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return []
        if not answer:
            return []
        chosen = parse_choice(answer, count)
        if chosen is not None:
            return chosen
        print(f"choose a number from 1 to {count}, or 2 to 4 different ones to compare, or Enter to quit")


def parse_choice(answer: str, count: int) -> list[int] | None:
    """``3`` → [2]; ``1 3``, ``1,3`` → [0, 2]: the runs marked (indexes from 0), in the order
    given; None for anything else (a number out of range, one given twice, more than four)."""
    from tbconsole.runs.compare import MAX_RUNS

    words = [w for w in re.split(r"[\s,]+", answer) if w]
    if not words or not all(w.isdigit() and 1 <= int(w) <= count for w in words):
        return None
    chosen = [int(w) - 1 for w in words]
    if len(set(chosen)) < len(chosen) or len(chosen) > MAX_RUNS:
        return None
    return chosen
