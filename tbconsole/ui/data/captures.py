"""A run's capture files (the proxy's lines, one file per trial attempt: ``tbconsole.record.capturefile``),
read for the screens: the screens call these and never open a capture file themselves.

- where a trial's capture file is (``capture_path``, ``trial_capture_file``, ``locate`` for the
  token view, with the trainer's log-probs beside it);
- one trial's file followed as it grows (``CaptureFollower``), one group's (``GroupCaptures``);
- the trainer's per-token log-probs (``read_trainer_logprobs``); output tokens per turn
  (``read_capture_outputs``);
- the search across a run's transcripts (``search_run``), and the steps and trials the run folder
  keeps beyond the memory's (``captured_steps``, ``captured_refs``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tbconsole.common.jsonl import new_lines
from tbconsole.record.capturefile import CaptureRecord, CaptureTail, read_records
from tbconsole.record.runfolder import CAPTURE_DIR, RunFolder, trial_place
from tbconsole.state import RunState, TrialState
from tbconsole.ui.present.group_compare import Action, Decode, actions_of
from tbconsole.ui.present.transcript_search import (
    MATCH_LIMIT,
    SearchResult,
    TrialRef,
    compile_query,
    search_records,
)

# -- where a trial's captures are -------------------------------------------------------------


def capture_path(log_path: str | Path | None, step: int, group: int, trial: str) -> Path | None:
    """The capture file of ``trial`` (a retried attempt's id names its own ``-rN`` folder)."""
    if not log_path:
        return None
    return RunFolder(log_path).capture_file(step, group, trial)


@dataclass
class CaptureTurn:
    turn: int
    output: list[int]
    logprobs: list[float]
    stop_reason: str | None


def read_capture_outputs(path: Path | None) -> list[CaptureTurn]:
    """Output tokens and logprobs per captured turn. Damaged or cut-short lines are skipped:
    this is a viewer."""
    return [
        CaptureTurn(turn=r.turn, output=list(r.output), logprobs=list(r.logprobs), stop_reason=r.stop_reason)
        for r in read_records(path)
    ]


def trial_capture_file(trial: TrialState, folders: Sequence[str | Path | None]) -> Path | None:
    """``trial``'s capture file under the first of ``folders`` (run folders: the run's log_path,
    then the folder this console reads, for a run folder moved or copied) that has it, else where
    the first would put it. A held-out evaluation's captures are in its own run folder."""
    if trial.evaluation:
        folders = [str(RunFolder(folder).heldout.root) for folder in folders if folder]
    paths = [capture_path(folder, trial.step, trial.group, trial.trial) for folder in folders if folder]
    return next((p for p in paths if p is not None and p.exists()), paths[0] if paths else None)


@dataclass(frozen=True)
class TrialPlace:
    capture: Path | None  # the trial attempt's capture file
    trainer: Path | None  # the trainer's log-probs beside it (may not exist)
    evaluation: bool = False  # a held-out evaluation trial
    step: int | None = None
    group: int | None = None


def locate(state: RunState, trial: str) -> TrialPlace:
    """Where a trial's captures are: from its state, else from its id (a held-out trial)."""
    if not state.log_path:
        return TrialPlace(None, None)
    folder = RunFolder(state.log_path)
    t = state.trials.get(trial)
    if t is not None:
        step, group = t.step, t.group
    else:
        place = trial_place(trial)
        if place is None:
            return TrialPlace(None, None)
        step, group = place
        held = folder.heldout
        if not folder.capture_file(step, group, trial).exists() and held.capture_file(step, group, trial).exists():
            return TrialPlace(held.capture_file(step, group, trial), None, True, step, group)
    trainer = folder.trainer_logprobs_file(step, group, trial) if hasattr(folder, "trainer_logprobs_file") else None
    return TrialPlace(folder.capture_file(step, group, trial), trainer, False, step, group)


def read_trainer_logprobs(path: Path | None) -> dict[int, list[float]]:
    """Turn → the trainer's log-probs of its output tokens (a missing or damaged file: none)."""
    if path is None:
        return {}
    import orjson

    out: dict[int, list[float]] = {}
    try:
        lines, _ = new_lines(path, 0)  # whole lines: one still being written is read next time
    except OSError:
        return {}
    for line in lines:
        try:
            row = orjson.loads(line)  # strict: a line with NaN is skipped, as a damaged one
            out[int(row["turn"])] = [float(x) for x in row["logprobs"]]
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return out


# -- reading as the files grow ----------------------------------------------------------------


class CaptureFollower:
    """One trial's capture file, read as it grows (``CaptureTail``: each read returns the lines
    appended since the last). Where the file is may not be known yet: ``read_new(where)`` asks
    ``where`` again while the file does not exist, and follows the path it gives."""

    def __init__(self, path: Path | None = None):
        self._tail = CaptureTail(path)

    @property
    def path(self) -> Path | None:
        return self._tail.path

    @property
    def damaged(self) -> int:
        """Lines that could not be read (skipped)."""
        return self._tail.damaged

    def read_new(self, where: Callable[[], Path | None] | None = None) -> list[CaptureRecord]:
        path = self._tail.path
        if where is not None and (path is None or not path.exists()):
            found = where()
            if found != path:
                self._tail = CaptureTail(found)
        return self._tail.read_new()


class GroupCaptures:
    """One group's trials' actions, read incrementally from their capture files (a live group's
    files grow). ``decoder`` is asked for only when a line has no text (an older capture)."""

    def __init__(self, log_path: str | Path | None, step: int, group: int, trials: Iterable[str]):
        folder = RunFolder(log_path) if log_path else None
        self.tails = {t: CaptureTail(folder.capture_file(step, group, t) if folder else None) for t in trials}
        self.actions: dict[str, list[Action]] = {t: [] for t in self.tails}

    def read_new(self, decoder: Callable[[], Decode | None] = lambda: None) -> bool:
        """Read what was appended since the last call; True when anything was."""
        grew = False
        decode: Decode | None = None
        for trial, tail in self.tails.items():
            new = tail.read_new()
            if not new:
                continue
            if decode is None and any(r.reply is None for r in new):
                decode = decoder()
            self.actions[trial] = sorted([*self.actions[trial], *actions_of(new, decode)], key=lambda a: a.turn)
            grew = True
        return grew


# -- search ----------------------------------------------------------------------------------

_STEP_DIR = re.compile(r"step_(\d+)$")
_GROUP_DIR = re.compile(r"group_(\d+)(?:-r(\d+))?$")
_TRIAL_FILE = re.compile(r"^(?P<task>.+)\.s(?P<step>\d+)g(?P<group>\d+)t(?P<index>\d+)(?:-r\d+)?$")


def captured_steps(log_path: str | Path | None) -> list[int]:
    """The steps whose capture folders are in the run folder (the memory keeps the newest steps'
    trials only; the run folder keeps every step's captures): one listing of ``capture/``."""
    if not log_path:
        return []
    try:
        names = [entry.name for entry in os.scandir(RunFolder(log_path).root / CAPTURE_DIR) if entry.is_dir()]
    except OSError:
        return []
    return sorted(int(m.group(1)) for name in names if (m := _STEP_DIR.match(name)))


def captured_refs(log_path: str | Path | None, steps: Iterable[int]) -> list[TrialRef]:
    """The trials of ``steps`` as their capture files name them, for steps the state no longer
    holds: each group's newest attempt (as the state would have kept it), in step, group, position
    order. The step and group are the folders'; the position and task the id's, when it is of
    ``runfolder.trial_id``'s shape."""
    if not log_path:
        return []
    folder = RunFolder(log_path)
    refs: list[TrialRef] = []
    for step in sorted(set(steps)):
        try:
            groups = [entry.name for entry in os.scandir(folder.capture_step(step)) if entry.is_dir()]
        except OSError:
            continue
        newest: dict[int, int] = {}
        for name in groups:
            m = _GROUP_DIR.match(name)
            if m:
                group, attempt = int(m.group(1)), int(m.group(2) or 0)
                newest[group] = max(attempt, newest.get(group, attempt))
        for group, attempt in sorted(newest.items()):
            try:
                files = sorted(p.stem for p in folder.capture_group(step, group, attempt).glob("*.jsonl"))
            except OSError:
                continue
            for position, stem in enumerate(files):
                m = _TRIAL_FILE.match(stem)  # a runner's id names its task and place; others do not
                if m and (int(m["step"]), int(m["group"])) == (step, group):
                    refs.append(TrialRef(stem, step, group, int(m["index"]), m["task"]))
                else:
                    refs.append(TrialRef(stem, step, group, position, stem))
    return sorted(refs, key=lambda r: (r.step, r.group, r.index, r.trial))


def search_run(
    log_path: str | Path | None,
    refs: list[TrialRef],
    query: str,
    *,
    regex: bool = False,
    limit: int = MATCH_LIMIT,
    stop: Callable[[], bool] | None = None,
) -> SearchResult:
    """Search the capture files of ``refs`` under the run folder ``log_path``. ``stop()`` is asked
    before each file: a search that a newer one replaced stops reading (a day-long run keeps a
    gigabyte of captures, and the run shares the machine)."""
    result = SearchResult(query=query)
    pattern = compile_query(query, regex)
    if isinstance(pattern, str):
        result.error = pattern
        return result
    if not log_path:
        result.error = "the run's folder is not known (yet)"
        return result
    folder = RunFolder(log_path)
    for ref in refs:
        if stop is not None and stop():
            break
        result.trials += 1
        records = read_records(folder.capture_file(ref.step, ref.group, ref.trial))
        if not search_records(pattern, ref, records, result, limit):
            break
    return result
