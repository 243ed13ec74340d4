"""What the runner measures for the rules beside the event stream: facts are fed to the
``Advisor`` like events, but they are never published (the advisories they lead to are)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DiskSample:
    """Free space on the run folder's filesystem, measured at ``ts``."""

    ts: float
    free_bytes: int


@dataclass(frozen=True)
class RunFolderSize:
    """Bytes the run folder takes on disk at the end of step ``step`` (measured at ``ts``): the
    difference from one step's end to the next is what a step adds (captures, trial folders,
    events, checkpoints)."""

    ts: float
    step: int
    bytes: int


@dataclass(frozen=True)
class AgentTimeout:
    """The agent timeout Harbor resolved for a trial (task, trial.json, multipliers)."""

    trial: str
    seconds: float


@dataclass(frozen=True)
class CaptureFile:
    """What a scored trial's capture file holds on disk, read after the trial ended."""

    step: int
    group: int
    trial: str
    records: int  # captured turns
    with_logprobs: int  # turns with one log-prob per output token
    output_tokens: int
    damaged: int = 0  # lines that could not be read
    error: str | None = None  # the file could not be read at all


@dataclass(frozen=True)
class SdkRetry:
    """The Tinker SDK retried a request (it logs each retry)."""

    ts: float
    message: str
