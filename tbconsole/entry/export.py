"""`tbconsole export RUN_FOLDER`: a run's scored training trials as ShareGPT or ATIF records (one
JSON object a line, to stdout or written whole to ``--out``); ``--harbor-view TRIAL`` prints
the command that opens that trial's folder in Harbor's viewer instead."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tbconsole.entry.usage import UsageError


def register(sub) -> None:
    p = sub.add_parser(
        "export",
        help="export a run's scored trials (ShareGPT or ATIF), or print a trial's harbor view command",
        description="Write one record per scored trial of the run's trained steps (or of --step): trial, task, "
        "step, group, reward, its advantage (reproduced from its group's rewards as the cookbook computes it) "
        "and its conversation from the capture files. Held-out evaluation trials are left out. "
        "One JSON object a line, to stdout or --out.",
    )
    p.add_argument("run", type=Path, metavar="RUN_FOLDER", help="the run's folder (its config.log_path)")
    p.add_argument(
        "--step",
        type=int,
        nargs="+",
        action="extend",
        metavar="N",
        dest="steps",
        help="only these steps (default: every trained step)",
    )
    p.add_argument(
        "--format", choices=("sharegpt", "atif"), default="sharegpt", help="record format (default sharegpt)"
    )
    p.add_argument("--out", type=Path, metavar="FILE", help="write the records to FILE, whole (default: stdout)")
    p.add_argument("--tokens", action="store_true", help="add each sampled reply's token ids and log-probs")
    p.add_argument(
        "--harbor-view",
        metavar="TRIAL",
        help="print the command that opens TRIAL's Harbor trial folder in `harbor view`, and export nothing",
    )
    p.set_defaults(handler=run)


def _folder(path: Path):
    from tbconsole.record.runfolder import RunFolder

    folder = RunFolder(path)
    if not path.is_dir():
        raise UsageError(f"{path}: no such folder")
    if not folder.events.is_file():
        raise UsageError(f"{path}: not a run folder (no {folder.events.name})")
    return folder


def harbor_view_of(folder, trial: str) -> str:
    """The trial's `harbor view` command and where to look (training or held-out trials)."""
    from tbconsole.harbor.harborview import harbor_view
    from tbconsole.record.events import HeldOutEvent, TrialEnded, TrialPhaseChanged, read_events

    found, trial_dir = False, None
    for event in read_events(folder.events):
        inner = event.unwrap() if isinstance(event, HeldOutEvent) else event
        if isinstance(inner, TrialEnded | TrialPhaseChanged) and inner.trial == trial:
            found = True
            trial_dir = inner.trial_dir or trial_dir
    if not found:
        raise UsageError(f"{trial}: no such trial in {folder.root}")
    if trial_dir is None:
        raise UsageError(f"{trial}: Harbor made no trial folder for it")
    return harbor_view(trial_dir).describe()


def run(args) -> int:
    folder = _folder(args.run)
    if args.harbor_view is not None:
        print(harbor_view_of(folder, args.harbor_view))
        return 0
    from tbconsole.export.records import Export
    from tbconsole.export.selection import SelectionError

    try:
        export = Export(folder, args.steps, args.format, args.tokens)
    except SelectionError as exc:
        raise UsageError(str(exc)) from None
    if args.out is not None:
        from tbconsole.common import atomic

        atomic.write_bytes(args.out, b"".join(export.lines()))
    else:
        out = sys.stdout.buffer
        try:
            for line in export.lines():
                out.write(line)
            out.flush()
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            return 0
    written = len(export.trials) - len(export.skipped)
    steps = sorted({t.step for t in export.trials})
    where = f" to {args.out}" if args.out is not None else ""
    print(
        f"exported {written} trial{'s' if written != 1 else ''} of step{'s' if len(steps) != 1 else ''} "
        f"{', '.join(map(str, steps)) or '(none trained)'} ({args.format}){where}",
        file=sys.stderr,
    )
    for why in export.skipped:
        print(f"left out {why}", file=sys.stderr)
    return 1 if export.skipped else 0
