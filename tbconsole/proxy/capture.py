"""Durable capture of sampled turns: one JSON Lines file per trial, written as turns happen.

Layout: ``<capture_dir>/<trial_id>.jsonl``, one line per turn, in order. A line::

    {"v": 1, "trial": "...", "turn": 3, "prompt_len": 5120, "prompt_shared": 4800,
     "prompt_tail": [...], "output": [...], "logprobs": [...], "stop_reason": "stop",
     "api": "openai", "started_at": 1732900000.1, "sample_ms": 812.5, "max_tokens": 8192,
     "temperature": 0.8, "continues": 2, "messages": [...], "reply": {...}}

``continues``: the turn whose prompt + sampled tokens this prompt extends exactly (the cookbook
trains them as one datum); else ``new_datum``, why not (``enums.NewDatum``; ``proxy.continuity``).
A trial's first turn has neither.

``messages`` and ``reply`` are the turn's text, for viewers only: ``tbconsole.record.capturefile`` reads
them and documents their fields.

``prompt_shared`` is how many leading tokens this prompt shares with the previous turn's prompt,
``prompt_tail`` the rest (turn 0 shares nothing): an agent's prompts mostly repeat each other,
and writing each in full would make a trial's capture grow with the square of its length.

One attempt per file: the writer creates its file exclusively (``O_EXCL``) and refuses one that
already exists, so a capture file never holds two attempts' turns.

Durability: each line is built in memory and handed to the kernel in one ``write`` on an
``O_APPEND`` descriptor before the proxy parses the turn or answers the agent, so a killed or
crashed process loses at most the turn in flight. The file is ``fsync``'d when the trial's
writer closes (the proxy's ``stop()``), like events.jsonl; ``fsync=True`` also ``fsync``s every
turn before the agent is answered (survives a power loss too; costs ~0.2-0.5 ms per turn).
A killed process therefore leaves only whole lines; after a power loss at most the last line (a
turn no agent was ever answered for) can be cut short, and ``read_capture`` drops such a tail.
A damaged line anywhere else is an error, never silently skipped.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tbconsole.record.capturefile import CAPTURE_VERSION


@dataclass(frozen=True)
class CapturedTurn:
    """One sampled turn: what the policy saw and what it produced, with its log-probs."""

    turn: int  # 0-based, per trial
    prompt_tokens: list[int]
    output_tokens: list[int]
    logprobs: list[float]
    stop_reason: str  # stop | length
    api: str  # openai | anthropic | responses
    started_at: float  # unix seconds when the request arrived
    sample_ms: float
    max_tokens: int
    temperature: float
    # The turn's text for viewers (``tbconsole.record.capturefile``): new messages and the parsed reply.
    text: dict[str, Any] | None = None
    # Token continuity (``tbconsole.proxy.continuity``): the turn whose prompt + sampled tokens
    # this prompt extends exactly, else why it starts a new datum (a NewDatum value; None on turn 0).
    continues: int | None = None
    new_datum: str | None = None
    # The update whose weights sampled this turn (0: the initial weights); None where the sampler
    # does not say (a stand-in sampler).
    weights: int | None = None


class CaptureError(Exception):
    pass


def _shared_prefix(prev: list[int], prompt: list[int], known: int | None = None) -> int:
    """Length of the common prefix of two token lists. ``known``: a length already known to be
    shared (only extended here, not re-checked)."""
    n = min(len(prev), len(prompt))
    if known is not None:
        i = min(known, n)
    elif len(prev) <= len(prompt) and prompt[: len(prev)] == prev:
        return len(prev)
    else:
        i, step = 0, 4096  # compare in C, block by block, then token by token in the last block
        while i + step <= n and prompt[i : i + step] == prev[i : i + step]:
            i += step
    while i < n and prompt[i] == prev[i]:
        i += 1
    return i


class CaptureWriter:
    """Appends one trial's turns to its file. Not thread-safe: one turn at a time (the proxy
    serialises a trial's requests)."""

    def __init__(self, path: Path, trial: str, *, fsync: bool = False):
        self.path = Path(path)
        self.trial = trial
        self.fsync = fsync
        self._fd: int | None = None
        self._prev_prompt: list[int] = []

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:  # a new file, never an earlier attempt's: one attempt per capture file
                self._fd = os.open(
                    self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644
                )
            except FileExistsError:
                raise CaptureError(
                    f"{self.path} already exists (an earlier attempt's turns); "
                    "captures are never appended to another attempt's file"
                ) from None
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        return self._fd

    def write(self, turn: CapturedTurn, known_shared: int | None = None) -> int:
        """Hand one turn to the kernel in a single ``write`` (raises OSError/CaptureError when it
        cannot). Returns how many leading prompt tokens it shares with the previous turn's
        prompt; ``known_shared``: a count of leading tokens the caller knows are shared."""
        prompt = turn.prompt_tokens
        shared = _shared_prefix(self._prev_prompt, prompt, known_shared) if self._prev_prompt else 0
        if not math.isfinite(sum(turn.logprobs)):
            raise CaptureError(f"turn {turn.turn} has a non-finite log-prob")
        record: dict[str, Any] = {
            "v": CAPTURE_VERSION,
            "trial": self.trial,
            "turn": turn.turn,
            "prompt_len": len(prompt),
            "prompt_shared": shared,
            "prompt_tail": prompt[shared:],
            "output": turn.output_tokens,
            "logprobs": turn.logprobs,
            "stop_reason": turn.stop_reason,
            "api": turn.api,
            "started_at": turn.started_at,
            "sample_ms": round(turn.sample_ms, 3),
            "max_tokens": turn.max_tokens,
            "temperature": turn.temperature,
        }
        if turn.continues is not None:
            record["continues"] = turn.continues
        if turn.new_datum is not None:
            record["new_datum"] = str(turn.new_datum)
        if turn.weights is not None:
            record["weights"] = turn.weights
        line = orjson.dumps(record) + b"\n"
        if turn.text:  # the text is for viewers: text that cannot be written never costs the turn
            try:
                line = orjson.dumps({**record, **turn.text}) + b"\n"
            except TypeError:
                pass
        fd = self._open()
        view = memoryview(line)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        self._prev_prompt = prompt
        return shared

    def sync(self) -> None:
        """``fsync`` what was written (when this writer was made with ``fsync=True``)."""
        if self.fsync and self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        """``fsync`` and close (raises OSError when the data cannot be made durable)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def read_capture(path: Path) -> list[CapturedTurn]:
    """A trial's captured turns, in order. A cut-short last line is dropped; any other damage
    raises ``CaptureError``. Not through ``jsonl``'s readers, which take whole lines as a file
    grows: this reads a finished file once, for training, and a damaged line must stop it
    instead of being skipped."""
    turns: list[CapturedTurn] = []
    prev: list[int] = []
    with open(path, "rb") as handle:
        lines = handle.read().split(b"\n")
    last = len(lines) - 1
    for i, raw in enumerate(lines):
        if not raw:
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            if i == last:  # no newline after it: the write in flight when the machine stopped
                break
            raise CaptureError(f"{path}: line {i + 1} is damaged") from exc
        if record.get("v") != CAPTURE_VERSION:
            raise CaptureError(f"{path}: line {i + 1} has capture version {record.get('v')!r}")
        shared = record["prompt_shared"]
        if shared > len(prev):
            raise CaptureError(f"{path}: line {i + 1} shares {shared} tokens with a {len(prev)}-token prompt")
        prompt = prev[:shared] + record["prompt_tail"]
        if len(prompt) != record["prompt_len"]:
            raise CaptureError(f"{path}: line {i + 1} prompt length mismatch")
        turns.append(
            CapturedTurn(
                turn=record["turn"],
                prompt_tokens=prompt,
                output_tokens=record["output"],
                logprobs=record["logprobs"],
                stop_reason=record["stop_reason"],
                api=record["api"],
                started_at=record["started_at"],
                sample_ms=record["sample_ms"],
                max_tokens=record["max_tokens"],
                temperature=record["temperature"],
                continues=record.get("continues"),
                new_datum=record.get("new_datum"),
                weights=record.get("weights"),
            )
        )
        prev = prompt
    return turns
