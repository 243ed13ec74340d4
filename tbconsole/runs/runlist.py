"""Run folders on disk and what each says about its run, read cheaply (``tbconsole runs``).

A run folder is a folder holding ``events.jsonl``. Only its head (the first ``run.started``) and
its last ``TAIL_BYTES`` are read and folded with the console's reducer, so a run of gigabytes
lists as fast as a small one; the runner's lease says whether anyone is still running it.
``remember`` keeps the run folders the console was opened on, so ``runs`` finds them again.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tbconsole.common import atomic
from tbconsole.record.enums import ControlState, RunCondition, RunnerState
from tbconsole.record.events import Event, RunStarted, decode
from tbconsole.record.lease import LeaseView, read_lease
from tbconsole.record.runfolder import EVENTS_FILE
from tbconsole.state import RunState, reduce

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 256 * 1024
MAX_DEPTH = 3
RECENT_KEPT = 20
DEFAULT_ROOTS = (Path("runs"), Path("/tmp/harbor-tinker"))
REWARD_METRIC = "env/all/reward/total"


def run_condition(state: RunState, runner: LeaseView) -> str:
    """``live``/``paused`` while a runner holds the folder, else how the run ended, else
    ``dead``/``ended``/``unknown`` from the lease. A runner that took the folder after the last
    ``run.ended`` is a resume starting: live."""
    live = runner.state is RunnerState.LIVE
    if live and (not state.finished or (runner.started or 0.0) > (state.ended or 0.0)):
        return RunCondition.PAUSED if state.control == ControlState.PAUSED else RunCondition.LIVE
    if state.end_status is not None:
        return state.end_status
    if runner.state is RunnerState.DEAD:
        return RunnerState.DEAD
    return RunCondition.ENDED if runner.state is RunnerState.ENDED else RunCondition.UNKNOWN


def steps_trained(state: RunState) -> int:
    """Steps trained; the step in flight counts the steps before it when its metrics were not read."""
    return max(state.trained_steps, state.step or 0)


def last_reward(state: RunState) -> float | None:
    """The newest trained step's mean reward (its metric), else the newest step's trial rewards."""
    if REWARD_METRIC in state.metrics_latest:
        return state.metrics_latest[REWARD_METRIC]
    trend = state.reward_trend()
    return trend[-1][1] if trend else None


@dataclass(frozen=True)
class RunInfo:
    path: Path
    state: RunState  # folded from the head's run.started and the tail
    runner: LeaseView
    started: float | None  # the first run.started

    @property
    def condition(self) -> str:
        return run_condition(self.state, self.runner)


def read_run(folder: Path) -> RunInfo:
    """What ``folder``'s events.jsonl says, reading at most its head and tail."""
    path = Path(folder) / EVENTS_FILE
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size <= HEAD_BYTES + TAIL_BYTES:
            head, tail = _events(handle.read(), partial_first=False), []
        else:
            head = _events(handle.read(HEAD_BYTES), partial_first=False)
            handle.seek(size - TAIL_BYTES)
            tail = _events(handle.read(), partial_first=True)
    first_start = next((e for e in head if isinstance(e, RunStarted)), None)
    if tail:  # the run's settings come from the head, where it stands from the tail
        head = [first_start] if first_start is not None else []
    state = RunState()
    for event in [*head, *tail]:
        reduce(state, event)
    return RunInfo(Path(folder), state, read_lease(folder), first_start.ts if first_start else None)


def _events(data: bytes, partial_first: bool) -> list[Event]:
    """The decodable events of complete lines (a read cut lines at its ends). Not
    ``jsonl.whole_lines``: that reads forward from a line's start, while the tail here starts
    mid-line, at a fixed distance from the end, and its cut first line is dropped."""
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: empty, or a line cut short
    if partial_first and lines:
        lines.pop(0)
    events = (decode(raw.decode("utf-8", errors="replace")) for raw in lines if raw.strip())
    return [e for e in events if e is not None]


def find_runs(roots: Iterable[Path], depth: int = MAX_DEPTH) -> list[Path]:
    """Run folders at or under each root (up to ``depth`` levels down), once each. A run
    folder is not searched further: its held-out evaluation's folder is part of it."""
    found: dict[Path, None] = {}

    def walk(folder: Path, level: int) -> None:
        if (folder / EVENTS_FILE).is_file():
            found.setdefault(folder.resolve(), None)
            return
        if level >= depth:
            return
        with contextlib.suppress(OSError):
            for entry in sorted(os.scandir(folder), key=lambda e: e.name):
                if not entry.name.startswith(".") and entry.is_dir(follow_symlinks=False):
                    walk(Path(entry.path), level + 1)

    for root in roots:
        walk(Path(root), 0)
    return list(found)


def list_runs(roots: Iterable[Path], depth: int = MAX_DEPTH) -> list[RunInfo]:
    """Every readable run under ``roots``, the most recently active first."""
    runs = []
    for folder in find_runs(roots, depth):
        with contextlib.suppress(OSError):
            runs.append(read_run(folder))
    return sorted(runs, key=lambda r: r.state.last_ts or 0.0, reverse=True)


# -- the runs the console was opened on ------------------------------------------------------


def recent_file() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "tbconsole" / "recent.json"


def recent() -> list[Path]:
    try:
        paths = json.loads(recent_file().read_text())
    except (OSError, ValueError):
        return []
    return [Path(p) for p in paths if isinstance(p, str)] if isinstance(paths, list) else []


def remember(log_path: Path) -> None:
    """Put ``log_path`` first in the recent list (a cache: failing to write it is no error)."""
    path = Path(log_path).resolve()
    kept = [path, *(p for p in recent() if p != path)][:RECENT_KEPT]
    with contextlib.suppress(OSError):
        atomic.write_json(recent_file(), [str(p) for p in kept])


def default_roots() -> list[Path]:
    return [*DEFAULT_ROOTS, *recent()]
