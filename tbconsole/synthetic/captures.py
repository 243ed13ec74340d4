"""Capture files for synthetic runs, in the proxy's line format (``tbconsole.record.capturefile``), so
that tests, fixtures and benchmarks read transcripts the way a real run's are read.

A synthetic run registers each captured turn's text here (``add``); the caller decides when the
lines reach the run folder: all at once (``write_all``, for a recorded run) or each just before
its ``proxy.request`` event is published (``write``, as the proxy writes before it reports).
Output token ids encode the reply with the model's tokenizer when one is found (so token views
and the logprob colouring show the reply), with deterministic log-probs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tbconsole.common.tokenizerfile import tokenizer_path
from tbconsole.record.capturefile import CAPTURE_VERSION
from tbconsole.record.events import ProxyRequest
from tbconsole.record.runfolder import RunFolder

_LOADED: dict[str, Any] = {}  # tokenizer file → tokenizer: loaded once per process


class Encoder:
    """Text → token ids: the model's tokenizer, or bytes when none is found."""

    def __init__(self, model_name: str | None = None):
        self._tok: Any = None
        path = tokenizer_path(model_name)
        if path is not None and path not in _LOADED:
            try:
                from tokenizers import Tokenizer

                _LOADED[path] = Tokenizer.from_file(path)
            except Exception:  # noqa: BLE001 - no tokenizer: bytes stand in
                _LOADED[path] = None
        self._tok = _LOADED.get(path) if path is not None else None

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        if self._tok is not None:
            return list(self._tok.encode(text, add_special_tokens=False).ids)
        return [256 + b for b in text.encode()]


def logprobs_for(n: int, seed: str) -> list[float]:
    """Mostly confident tokens, some hesitant, a few unlikely: what a sampled reply looks like."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        roll = rng.random()
        out.append(
            -rng.uniform(0.0, 0.05) if roll < 0.85 else -rng.uniform(0.1, 0.7) if roll < 0.97 else -rng.uniform(1, 4)
        )
    return out


def chat_text(messages: list[dict[str, Any]]) -> str:
    """The new messages as the chat template lays them out (for the prompt's tokens)."""
    return "".join(f"<|im_start|>{m['role']}\n{m.get('content', '')}<|im_end|>\n" for m in messages)


@dataclass
class _Turn:
    path: Path
    record: dict[str, Any]
    prompt_text: str
    reply_text: str | None


class SyntheticCaptures:
    """The capture lines of a synthetic run under ``log_path``, pending until written."""

    def __init__(self, log_path: str | Path, model_name: str | None = "Qwen/Qwen3-4B-Instruct-2507"):
        self.folder = RunFolder(log_path)
        self.encoder = Encoder(model_name)
        self.pending: dict[tuple[str, int], _Turn] = {}
        self.prompts: dict[str, tuple[list[int], list[int]]] = {}  # trial → its last prompt and reply

    def add(
        self,
        event: ProxyRequest,
        messages: list[dict[str, Any]] | None,
        reply: dict[str, Any] | None,
        *,
        max_tokens: int = 4096,
    ) -> None:
        """Register a captured turn's text (``messages``/``reply`` as in a capture line; None:
        a line without text, as runs wrote before text was recorded)."""
        if not event.captured or event.turn is None:
            return
        record: dict[str, Any] = {
            "v": CAPTURE_VERSION,
            "trial": event.trial,
            "turn": event.turn,
            "stop_reason": event.stop_reason,
            "api": event.api,
            "started_at": event.ts - (event.total_ms or 0) / 1000,
            "sample_ms": event.sample_ms,
            "max_tokens": max_tokens,
            "temperature": 1.0,
        }
        if messages is not None:
            record["messages"] = messages
        if reply is not None:
            record["reply"] = reply
        path = self.folder.capture_file(event.step, event.group, event.trial)
        reply_text = None if reply is None else reply_as_text(reply)
        self.pending[(event.trial, event.turn)] = _Turn(path, record, chat_text(messages or []), reply_text)

    def _line(self, turn: _Turn, fallback_tokens: int) -> bytes:
        record = turn.record
        trial = record["trial"]
        before, said = self.prompts.get(trial, ([], []))
        tail = said + (self.encoder.encode(turn.prompt_text) or [198] * 8)  # the last reply, then what is new
        if turn.reply_text is not None:
            output = self.encoder.encode(turn.reply_text + "<|im_end|>")
        else:
            output = self.encoder.encode("\n".join(["echo synthetic"] * max(1, fallback_tokens // 4)))
        record["prompt_len"] = len(before) + len(tail)
        record["prompt_shared"] = len(before)
        record["prompt_tail"] = tail
        record["output"] = output
        record["logprobs"] = logprobs_for(len(output), f"{trial}:{record['turn']}")
        self.prompts[trial] = (before + tail, output)
        return orjson.dumps(record) + b"\n"

    def _append(self, turn: _Turn, fallback_tokens: int) -> None:
        turn.path.parent.mkdir(parents=True, exist_ok=True)
        with open(turn.path, "ab") as handle:  # one write per line, as the proxy appends
            handle.write(self._line(turn, fallback_tokens))

    def write(self, event: ProxyRequest) -> bool:
        """Append the line of ``event``'s turn to its capture file (False: none registered)."""
        turn = self.pending.pop((event.trial, event.turn), None) if event.turn is not None else None
        if turn is None:
            return False
        self._append(turn, event.output_tokens)
        return True

    def write_all(self) -> None:
        """Every pending line, in the order the turns were registered."""
        for key in list(self.pending):
            self._append(self.pending.pop(key), 64)


def reply_as_text(reply: dict[str, Any]) -> str:
    """A reply as the model would have written it (reasoning, text, tool calls): its tokens."""
    parts = []
    if reply.get("reasoning"):
        parts.append(f"<think>\n{reply['reasoning']}\n</think>\n\n")
    parts.append(reply.get("text") or "")
    for call in reply.get("tool_calls") or []:
        parts.append(f'\n<tool_call>\n{{"name": "{call["name"]}", "arguments": {call["arguments"]}}}\n</tool_call>')
    return "".join(parts)
