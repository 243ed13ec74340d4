"""Anthropic Messages: ``ChatReply`` → message / SSE events (requests are read in ``anthropic_input``).

A reply that stopped on one of the client's ``stop_sequences`` has ``stop_reason:
"stop_sequence"``, ``stop_sequence`` set to the matched string, and its text cut before it.
Streams: ``message_start`` before sampling, then a ``content_block_*`` run per block,
``message_delta`` and ``message_stop``; ``ping`` events keep the connection alive meanwhile.
"""

from __future__ import annotations

import json
from typing import Any

from tbconsole.proxy.chat import ChatReply, ChatRequest, json_bytes
from tbconsole.proxy.errors import ProxyError

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _stop_reason(reply: ChatReply) -> str:
    return "stop_sequence" if reply.stop_sequence is not None else STOP_REASONS[reply.finish]


def _content(reply: ChatReply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.thinking:
        blocks.append({"type": "thinking", "thinking": reply.thinking, "signature": ""})
    if reply.text or not (reply.thinking or reply.tool_calls):
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input_object()})
    return blocks


def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def message(reply: ChatReply, model: str, message_id: str) -> dict[str, Any]:
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _content(reply),
        "stop_reason": _stop_reason(reply),
        "stop_sequence": reply.stop_sequence,
        "usage": _usage(reply.prompt_tokens, reply.output_tokens),
    }


def event(kind: str, body: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + json_bytes(body) + b"\n\n"


def stream_start(model: str, message_id: str, prompt_tokens: int) -> bytes:
    return event(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": _usage(prompt_tokens, 0),
            },
        },
    )


def stream_events(reply: ChatReply) -> list[bytes]:
    out = []
    for index, block in enumerate(_content(reply)):
        kind = block["type"]
        start: dict[str, Any]
        if kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": block["thinking"]},
                {"type": "signature_delta", "signature": ""},
            ]
        elif kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}] if block["text"] else []
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}]
        out.append(
            event("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
        )
        for delta in deltas:
            out.append(event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": reply.stop_sequence},
                "usage": {"output_tokens": reply.output_tokens},
            },
        )
    )
    out.append(event("message_stop", {"type": "message_stop"}))
    return out


def stream_error(error: ProxyError) -> bytes:
    """The ``error`` event that ends a stream."""
    return event("error", error.anthropic_body())


class Answer:
    """One message's answer: its id and the request values it echoes."""

    def __init__(self, chat: ChatRequest, message_id: str, temperature: float):
        self.chat = chat
        self.id = message_id

    def body(self, reply: ChatReply) -> dict[str, Any]:
        return message(reply, self.chat.model, self.id)

    def stream_start(self, prompt_tokens: int) -> bytes:
        return stream_start(self.chat.model, self.id, prompt_tokens)

    def stream_events(self, reply: ChatReply) -> list[bytes]:
        return stream_events(reply)

    def stream_error(self, error: ProxyError) -> bytes:
        return stream_error(error)


KEEPALIVE = event("ping", {"type": "ping"})


def models(model: str) -> dict[str, Any]:
    entry = {"type": "model", "id": model, "display_name": model, "created_at": "1970-01-01T00:00:00Z"}
    return {"data": [entry], "has_more": False, "first_id": model, "last_id": model}
