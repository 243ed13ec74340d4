"""The layout of a run's folder (``config.log_path``): the one place that names its files.

The runner writes here, the proxy writes captures here, and the console (live, attach, replay)
reads the same paths through this module, so a rename can never leave a reader behind::

    <log_path>/
      events.jsonl                          every typed event, one JSON object per line
      runner.json, runner.lock              the runner's lease (tbconsole.record.lease): who runs the folder
      events.snapshot                       the console's state folded from events.jsonl's first N bytes
      logs.log                              the cookbook's log lines and tracebacks
      runner.log                            a detached runner's stdout and stderr (its progress log)
      timing_spans.jsonl                    the cookbook's per-step timing spans (the console's timeline)
      sizes.json                            what the run folder's finished steps take on disk (tbconsole.runs.diskspace)
      control/inbox/                        commands from attached consoles (pause, stop, …)
      capture/step_000003/group_001[-rN]/   one capture file per trial attempt: <trial>.jsonl
      trainer_logprobs/step_000003/group_001[-rN]/   the trainer's log-probs of its sampled tokens, per turn
      trials/step_000003/<trial>/           Harbor's trial folders (unless trial.json names one)
      heldout/                              the held-out evaluation's own run folder
      engine/                               the embedded engine's data (demo)

A folder is a run's when it holds events.jsonl or the runner's lease files: a run that is just
starting holds its lease before it writes its first event (``is_run_folder``, ``run_events``:
what every command that is given a run accepts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tbconsole.common.formatting import command_line

EVENTS_FILE = "events.jsonl"
LEASE_FILE = "runner.json"  # the runner's heartbeat and command (tbconsole.record.lease)
LOCK_FILE = "runner.lock"  # flock-ed by the runner for its whole life (tbconsole.record.lease)
RUN_MARKERS = (EVENTS_FILE, LEASE_FILE, LOCK_FILE)  # any one of them: a run folder
SNAPSHOT_FILE = "events.snapshot"  # tbconsole.state.snapshot: attach reads only the events after it
LOG_FILE = "logs.log"
RUNNER_LOG = "runner.log"
TIMING_SPANS = "timing_spans.jsonl"  # written by the cookbook's training loop
SIZES_FILE = "sizes.json"  # remembered by each measure of the folder's size
CONTROL_INBOX = Path("control") / "inbox"
CAPTURE_DIR = "capture"
TRAINER_LOGPROBS_DIR = "trainer_logprobs"
TRIALS_DIR = "trials"
HELDOUT_DIR = "heldout"
ENGINE_DIR = "engine"

# A retried attempt's trial ids and capture folder end in -r<N>; the first attempt has none.
_ATTEMPT = re.compile(r"-r(\d+)$")
_PLACE = re.compile(r"\.s(\d+)g(\d+)t\d+(?:-r\d+)?$")  # trial_id's shape, read back


def step_name(step: int) -> str:
    return f"step_{step:06d}"


def attempt_suffix(attempt: int) -> str:
    """``""`` for the first attempt, ``-r<N>`` for a retry: on trial ids and capture folders."""
    return f"-r{attempt}" if attempt else ""


def attempt_of(trial_id: str) -> int:
    """The attempt number a trial id carries (0 for the first attempt)."""
    m = _ATTEMPT.search(trial_id)
    return int(m.group(1)) if m else 0


def trial_id(task: str, step: int, group: int, k: int, attempt: int = 0) -> str:
    """``<task>.s<step>g<group>t<k>[-r<N>]``: unique per attempt within a run."""
    return f"{task}.s{step}g{group}t{k}{attempt_suffix(attempt)}"


def trial_place(trial_id: str) -> tuple[int, int] | None:
    """The (step, group) a trial id names; None for an id not of ``trial_id``'s shape."""
    m = _PLACE.search(trial_id)
    return (int(m.group(1)), int(m.group(2))) if m else None


class NotARun(ValueError):
    """A path given as a run that names none; the message says what to give instead."""


def is_run_folder(path: str | Path) -> bool:
    """Whether ``path`` is a run's folder: it holds events.jsonl, or the runner's lease (a run
    that is starting: its runner holds the folder before it writes the first event)."""
    folder = Path(path)
    return folder.is_dir() and any((folder / name).is_file() for name in RUN_MARKERS)


def run_events(path: str | Path) -> Path:
    """The events.jsonl that ``path`` names: a run folder's (which may not exist yet, while the
    run starts), or ``path`` itself when it is a file called events.jsonl. NotARun otherwise, with
    what to give instead (a file of a run folder: that folder)."""
    path = Path(path)
    if is_run_folder(path):
        return RunFolder(path).events
    if path.name == EVENTS_FILE and path.is_file():
        return path
    if not path.exists():
        raise NotARun(f"{path}: no such file or folder")
    what = f"{path} is not a run: give a run folder (the one holding {EVENTS_FILE})"
    if path.is_dir():
        raise NotARun(f"{what}; `{command_line('runs', path)}` lists the runs under it")
    if is_run_folder(path.parent):
        raise NotARun(f"{what}: its folder, {path.parent}")
    raise NotARun(f"{what}; `{command_line('runs')}` lists them")


@dataclass(frozen=True)
class RunFolder:
    """Paths inside one run's folder. Pure path arithmetic: nothing is created here."""

    root: Path

    def __init__(self, root: str | Path):
        object.__setattr__(self, "root", Path(root))

    @property
    def events(self) -> Path:
        return self.root / EVENTS_FILE

    @property
    def snapshot(self) -> Path:
        return self.root / SNAPSHOT_FILE

    @property
    def log_file(self) -> Path:
        return self.root / LOG_FILE

    @property
    def runner_log(self) -> Path:
        return self.root / RUNNER_LOG

    @property
    def timing_spans(self) -> Path:
        return self.root / TIMING_SPANS

    @property
    def sizes(self) -> Path:
        return self.root / SIZES_FILE

    @property
    def control_inbox(self) -> Path:
        return self.root / CONTROL_INBOX

    @property
    def heldout(self) -> RunFolder:
        return RunFolder(self.root / HELDOUT_DIR)

    @property
    def engine(self) -> Path:
        return self.root / ENGINE_DIR

    def capture_step(self, step: int) -> Path:
        return self.root / CAPTURE_DIR / step_name(step)

    def capture_group(self, step: int, group: int, attempt: int = 0) -> Path:
        return self.capture_step(step) / f"group_{group:03d}{attempt_suffix(attempt)}"

    def capture_file(self, step: int, group: int, trial: str) -> Path:
        """The capture file of one trial attempt (the attempt is read from the trial id)."""
        return self.capture_group(step, group, attempt_of(trial)) / f"{trial}.jsonl"

    def trainer_logprobs_file(self, step: int, group: int, trial: str) -> Path:
        """The trainer's per-token log-probs of one trial attempt's captured turns (written when
        its step trains), laid out like ``capture_file``."""
        return (
            self.root / TRAINER_LOGPROBS_DIR / step_name(step) / f"group_{group:03d}{attempt_suffix(attempt_of(trial))}"
        ) / f"{trial}.jsonl"

    def trials(self, step: int) -> Path:
        """Where Harbor's trial folders go when trial.json names no ``trials_dir``."""
        return self.root / TRIALS_DIR / step_name(step)
