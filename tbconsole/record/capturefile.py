"""A capture file's lines as a viewer reads them: what each turn saw and said, as text, with its
tokens and log-probs, read incrementally while the proxy appends to it.

The proxy writes one line per sampled turn (``tbconsole.proxy.capture``; the layout is
``RunFolder.capture_file``). Besides the tokens the trainer needs, a line carries the turn's text:

- ``messages``: the request's messages that are new since the trial's previous captured turn
  (turn 0: all of them), each ``{"role", "content", "tool_calls"?, "name"?, "tool_call_id"?}``
  with ``content`` as plain text; the agent's own earlier replies, echoed back in the request,
  are left out (``echoed`` counts them). ``restarted: true`` when the request did not extend the
  previous one (the agent rewrote its history): ``messages`` is then the whole conversation.
- ``reply``: the sample parsed back, ``{"text", "reasoning", "tool_calls", "parse_error"?}``.

Lines written before the text was recorded have neither; readers then show tokens only.
A viewer never raises on a damaged line: it skips it and counts it (``CaptureTail.damaged``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tbconsole.common.jsonl import new_lines

CAPTURE_VERSION = 1
TEXT_LIMIT = 64 * 1024  # characters kept per message or reply field in a capture line


@dataclass(frozen=True)
class ToolCallText:
    name: str
    arguments: str  # JSON text, as the model wrote it


@dataclass(frozen=True)
class MessageText:
    role: str  # system | user | assistant | tool
    content: str
    tool_calls: tuple[ToolCallText, ...] = ()
    name: str | None = None  # the tool's name, for a tool result
    tool_call_id: str | None = None


@dataclass(frozen=True)
class ReplyText:
    text: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCallText, ...] = ()
    parse_error: str | None = None  # the renderer could not parse the sample: text is the raw decode


@dataclass(frozen=True)
class CaptureRecord:
    """One captured turn, as a viewer needs it (prompt tokens are left out: see
    ``tbconsole.proxy.capture.read_capture`` for the trainer's full reading)."""

    turn: int
    prompt_len: int
    output: tuple[int, ...]
    logprobs: tuple[float, ...]
    stop_reason: str | None = None
    api: str | None = None
    started_at: float | None = None  # unix seconds the request arrived
    sample_ms: float | None = None
    max_tokens: int | None = None
    messages: tuple[MessageText, ...] = ()
    echoed: int = 0
    restarted: bool = False
    reply: ReplyText | None = None  # None for lines written before text was recorded
    weights: int | None = None  # the update whose weights sampled it (None: not recorded)

    @property
    def has_text(self) -> bool:
        return self.reply is not None or bool(self.messages)


def clip(value: str, limit: int = TEXT_LIMIT) -> str:
    if len(value) <= limit:
        return value
    return value[:limit] + f"\n… [cut: {len(value) - limit} more characters]"


def _calls(raw: Any) -> tuple[ToolCallText, ...]:
    if not isinstance(raw, list):
        return ()
    return tuple(
        ToolCallText(name=str(c.get("name", "?")), arguments=str(c.get("arguments", "")))
        for c in raw
        if isinstance(c, dict)
    )


def _message(raw: Any) -> MessageText | None:
    if not isinstance(raw, dict):
        return None
    name, call_id = raw.get("name"), raw.get("tool_call_id")
    return MessageText(
        role=str(raw.get("role", "?")),
        content=str(raw.get("content") or ""),
        tool_calls=_calls(raw.get("tool_calls")),
        name=str(name) if name is not None else None,
        tool_call_id=str(call_id) if call_id is not None else None,
    )


def reply_text(raw: Any) -> ReplyText | None:
    """A capture line's ``reply`` field (as the proxy also keeps it: ``CaptureProxy.replies``) →
    ReplyText; None when there is none (a line written before text was recorded)."""
    if not isinstance(raw, dict):
        return None
    reasoning, error = raw.get("reasoning"), raw.get("parse_error")
    return ReplyText(
        text=str(raw.get("text") or ""),
        reasoning=str(reasoning) if reasoning else None,
        tool_calls=_calls(raw.get("tool_calls")),
        parse_error=str(error) if error else None,
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def decode_record(line: bytes | str) -> CaptureRecord:
    """One capture line → CaptureRecord; ValueError when it is not a capture line."""
    try:
        # Strict JSON, without ``jsonl.loads``'s fallback: the proxy writes these lines with
        # orjson, which writes no NaN or Infinity, so a line only the fallback takes is damaged.
        raw = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("turn"), int):
        raise ValueError("not a capture line")
    output, logprobs = raw.get("output") or [], raw.get("logprobs") or []
    if not isinstance(output, list) or not isinstance(logprobs, list):
        raise ValueError("output or logprobs is not a list")
    messages = raw.get("messages")
    max_tokens = raw.get("max_tokens")
    return CaptureRecord(
        turn=raw["turn"],
        prompt_len=int(raw.get("prompt_len") or 0),
        output=tuple(int(t) for t in output),
        logprobs=tuple(float(x) for x in logprobs),
        stop_reason=raw.get("stop_reason"),
        api=raw.get("api"),
        started_at=_number(raw.get("started_at")),
        sample_ms=_number(raw.get("sample_ms")),
        max_tokens=max_tokens if isinstance(max_tokens, int) else None,
        messages=tuple(m for m in map(_message, messages) if m is not None) if isinstance(messages, list) else (),
        echoed=int(raw.get("echoed") or 0),
        restarted=bool(raw.get("restarted")),
        reply=reply_text(raw.get("reply")),
        weights=weights if isinstance(weights := raw.get("weights"), int) and not isinstance(weights, bool) else None,
    )


@dataclass
class CaptureTail:
    """Reads a capture file as it grows: each ``read_new`` returns the whole lines appended since
    the last call (a line still being written waits for its end; ``jsonl.new_lines``). A missing
    file reads as empty until it appears; one replaced by a shorter file is read again from its
    start. Memory: only the bytes of one call's new lines."""

    path: Path | None
    offset: int = 0  # where the next read starts: the end of the last whole line read
    damaged: int = 0  # lines that could not be read (skipped)
    unreadable: bool = False  # the last read failed (the file is there but cannot be read)

    def read_new(self, max_bytes: int = 64 << 20) -> list[CaptureRecord]:
        if self.path is None:
            return []
        try:
            lines, self.offset = new_lines(self.path, self.offset, max_bytes)
        except OSError:
            self.unreadable = True
            return []
        self.unreadable = False
        out: list[CaptureRecord] = []
        for line in lines:
            if not line.strip():
                continue
            try:
                out.append(decode_record(line))
            except (ValueError, TypeError):
                self.damaged += 1
        return out


def read_records(path: Path | None) -> list[CaptureRecord]:
    """Every whole line of a capture file, for a one-off reading."""
    return CaptureTail(path).read_new()
