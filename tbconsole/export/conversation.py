"""A trial's conversation from its capture file: the messages its agent sent and the replies the
policy sampled, in order, each reply with its turn's sampled token ids and log-probs.

A capture line holds the request's messages that are new since the trial's previous turn (the
agent's echo of its own earlier replies left out: the reply as sampled stands in for it) and the
reply as the renderer parsed it (``tbconsole.record.capturefile``). So a linear agent's conversation is
each line's messages, then its reply. A request that did not extend the previous one
(``restarted``: the agent rewrote its history, or made a side request) carries its whole
conversation: its messages up to its last assistant message are history carried again and are
marked ``copied``; every sampled reply still appears once. Lines written before text was recorded
hold tokens only: their new prompt tokens and their reply are decoded with the run's tokenizer
and marked ``decoded`` (the prompt's part as one user message, chat-template markup included).
Texts longer than the capture's limit (64k characters a field) are as cut there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from tbconsole.record.capturefile import CaptureRecord, MessageText, ToolCallText, decode_record

Decode = Callable[[list[int]], str]


class CaptureDamaged(Exception):
    """A capture file with a damaged line (other than a last line cut short by a crash)."""


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant | tool (as the agent sent it)
    content: str
    reasoning: str | None = None
    tool_calls: tuple[ToolCallText, ...] = ()
    name: str | None = None  # a tool result's tool
    tool_call_id: str | None = None
    copied: bool = False  # history that a restarted request carried again
    decoded: bool = False  # decoded from tokens: the line has no text
    parse_error: str | None = None  # the renderer could not parse the reply: content is its raw decode
    sampled: CaptureRecord | None = None  # a reply the policy sampled: its turn, tokens and log-probs

    @property
    def turn(self) -> int | None:
        return self.sampled.turn if self.sampled is not None else None


def _from_text(m: MessageText, copied: bool = False) -> Message:
    return Message(
        role=m.role,
        content=m.content,
        tool_calls=m.tool_calls,
        name=m.name,
        tool_call_id=m.tool_call_id,
        copied=copied,
    )


def _request(record: CaptureRecord) -> list[Message]:
    messages = record.messages
    if not record.restarted:
        return [_from_text(m) for m in messages]
    last_reply = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    return [_from_text(m, copied=i <= last_reply) for i, m in enumerate(messages)]


def _reply(record: CaptureRecord, decode: Decode) -> Message:
    reply = record.reply
    if reply is None:
        return Message(role="assistant", content=decode(list(record.output)), decoded=True, sampled=record)
    return Message(
        role="assistant",
        content=reply.text,
        reasoning=reply.reasoning,
        tool_calls=reply.tool_calls,
        parse_error=reply.parse_error,
        sampled=record,
    )


def _lines(path: Path) -> list[tuple[CaptureRecord, bytes]]:
    """Each line's record and its bytes. A last line without its newline (the write in flight
    when the machine stopped) is dropped, as training's reader drops it; any other damage raises."""
    chunks = path.read_bytes().split(b"\n")
    out = []
    for i, raw in enumerate(chunks):
        if not raw.strip():
            continue
        try:
            out.append((decode_record(raw), raw))
        except (ValueError, TypeError):
            if i == len(chunks) - 1:
                break
            raise CaptureDamaged(f"{path}: line {i + 1} is damaged") from None
    return out


class _Prompts:
    """Each line's full prompt, rebuilt as training's reader does (the previous prompt's first
    ``prompt_shared`` tokens, then ``prompt_tail``): what a token-only line added is decoded."""

    def __init__(self, path: Path):
        self.path = path
        self.prompt: list[int] = []
        self.output: list[int] = []

    def advance(self, raw: bytes, record: CaptureRecord) -> list[int]:
        """The tokens this line's prompt adds to the previous prompt and its reply (all of them
        when it does not carry on from there)."""
        line = orjson.loads(raw)
        shared, tail = line.get("prompt_shared"), line.get("prompt_tail")
        if not isinstance(shared, int) or not isinstance(tail, list) or shared > len(self.prompt):
            raise CaptureDamaged(f"{self.path}: turn {record.turn}'s prompt tokens do not fit the previous turn's")
        prompt = self.prompt[:shared] + [int(t) for t in tail]
        carried = self.prompt + self.output
        new = prompt[len(carried) :] if self.prompt and prompt[: len(carried)] == carried else prompt
        self.prompt, self.output = prompt, list(record.output)
        return new


def read_conversation(path: Path, decode: Decode) -> list[Message]:
    """The conversation of one capture file. Raises CaptureDamaged for a damaged file and OSError
    for one that cannot be read; a missing file is an empty conversation (a trial that made no
    captured model call). ``decode`` is called only for lines without text."""
    if not path.exists():
        return []
    prompts = _Prompts(path)
    out: list[Message] = []
    for record, raw in _lines(path):
        new = prompts.advance(raw, record)
        if record.has_text:
            out += _request(record)
        elif new:
            out.append(Message(role="user", content=decode(new), decoded=True))
        out.append(_reply(record, decode))
    return out
