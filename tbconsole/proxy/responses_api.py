"""OpenAI Responses: ``ChatReply`` → response object / SSE events (requests: ``responses_input``).

The answer: ``output`` holds a ``reasoning`` item when the model reasoned (its text in both
``summary`` and ``content``: Codex sends back the summary only), a ``message`` item with one
``output_text`` part (present when there is text, or nothing else), and a ``function_call`` item
per call (``call_id`` ``call_…``). ``status`` is "completed", or "incomplete" with
``incomplete_details.reason = "max_output_tokens"`` on a length stop. ``usage`` counts the
rendered prompt and the sampled tokens (no cached or reasoning detail: 0).

Streaming: ``response.created`` and ``response.in_progress`` go out before sampling; then per
output item ``response.output_item.added``, its parts and deltas (``response.reasoning_summary_*``
and ``response.reasoning_text.*``; ``response.content_part.*`` and ``response.output_text.*``;
``response.function_call_arguments.*``), ``response.output_item.done``; finally
``response.completed`` (or ``response.incomplete``). Every event has ``event:`` and
``sequence_number`` (0, 1, 2…). An error once the stream is open (a sampler failure; a
context-window refusal, which a streaming request gets in the stream because that is where
Codex recognises it) is an ``error`` event followed by ``response.failed`` (its
``response.error.code``: ``context_length_exceeded``, ``server_error``…), never a second HTTP
response.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tbconsole.proxy.chat import ChatReply, ChatRequest, json_bytes, new_id
from tbconsole.proxy.errors import ProxyError


def _usage(reply: ChatReply) -> dict[str, Any]:
    return {
        "input_tokens": reply.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.prompt_tokens + reply.output_tokens,
    }


def _output(reply: ChatReply) -> list[dict[str, Any]]:
    status = "incomplete" if reply.finish == "length" else "completed"
    items: list[dict[str, Any]] = []
    if reply.thinking:
        items.append(
            {
                "id": new_id("rs_"),
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": reply.thinking}],
                "content": [{"type": "reasoning_text", "text": reply.thinking}],
                "encrypted_content": None,
                "status": status,
            }
        )
    if reply.text or not (reply.thinking or reply.tool_calls):
        items.append(
            {
                "id": new_id("msg_"),
                "type": "message",
                "role": "assistant",
                "status": status,
                "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}],
            }
        )
    for call in reply.tool_calls:
        items.append(
            {
                "id": new_id("fc_"),
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments,
                "status": "completed",
            }
        )
    return items


class Answer:
    """One response: its id and the request values it echoes; for a stream, the running
    ``sequence_number``."""

    def __init__(self, chat: ChatRequest, response_id: str, temperature: float):
        self.chat = chat
        self.id = response_id
        self.created_at = int(time.time())
        self.temperature = temperature
        self.seq = 0

    def base(self, status: str) -> dict[str, Any]:
        x = self.chat.extra
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": x["instructions"],
            "max_output_tokens": x["max_output_tokens"],
            "max_tool_calls": None,
            "model": self.chat.model,
            "output": [],
            "parallel_tool_calls": x["parallel_tool_calls"],
            "previous_response_id": None,
            "prompt_cache_key": x["prompt_cache_key"],
            "reasoning": x["reasoning"],
            "service_tier": "default",
            "store": x["store"],
            "temperature": self.temperature,
            "text": x["text"],
            "tool_choice": x["tool_choice"],
            "tools": x["tools"],
            "top_p": x["top_p"] if x["top_p"] is not None else 1.0,
            "truncation": x["truncation"],
            "usage": None,
            "user": x["user"],
            "metadata": x["metadata"],
        }

    def body(self, reply: ChatReply, output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        incomplete = reply.finish == "length"
        body = self.base("incomplete" if incomplete else "completed")
        body["output"] = _output(reply) if output is None else output
        body["usage"] = _usage(reply)
        if incomplete:
            body["incomplete_details"] = {"reason": "max_output_tokens"}
        else:
            body["completed_at"] = int(time.time())
        return body

    # -- streaming

    def event(self, kind: str, body: dict[str, Any]) -> bytes:
        data = {"type": kind, "sequence_number": self.seq, **body}
        self.seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + json_bytes(data) + b"\n\n"

    def stream_start(self, prompt_tokens: int) -> bytes:
        return self.event("response.created", {"response": self.base("in_progress")}) + self.event(
            "response.in_progress", {"response": self.base("in_progress")}
        )

    def stream_events(self, reply: ChatReply) -> list[bytes]:
        """The whole reply as the stream's events, in sequence: each output item added, its
        content streamed as one delta and done, the item done; then the response completed (or
        incomplete)."""
        output = _output(reply)
        out = []
        for index, item in enumerate(output):
            where = {"item_id": item["id"], "output_index": index}
            out.append(self.event("response.output_item.added", {"output_index": index, "item": _in_progress(item)}))
            if item["type"] == "reasoning":
                out += self._reasoning_events(item, where)
            elif item["type"] == "message":
                out += self._message_events(item, where)
            else:
                out += self._function_call_events(item, where)
            out.append(self.event("response.output_item.done", {"output_index": index, "item": item}))
        final = self.body(reply, output)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        out.append(self.event(kind, {"response": final}))
        return out

    def _reasoning_events(self, item: dict[str, Any], where: dict[str, Any]) -> list[bytes]:
        """A reasoning item's text, streamed both as its summary and as its content."""
        text = item["summary"][0]["text"]
        summary = {**where, "summary_index": 0}
        part = {"type": "summary_text", "text": text}
        out = [
            self.event("response.reasoning_summary_part.added", {**summary, "part": {**part, "text": ""}}),
            self.event("response.reasoning_summary_text.delta", {**summary, "delta": text}),
            self.event("response.reasoning_summary_text.done", {**summary, "text": text}),
            self.event("response.reasoning_summary_part.done", {**summary, "part": part}),
        ]
        content = {**where, "content_index": 0}
        part = {"type": "reasoning_text", "text": text}
        return out + [
            self.event("response.content_part.added", {**content, "part": {**part, "text": ""}}),
            self.event("response.reasoning_text.delta", {**content, "delta": text}),
            self.event("response.reasoning_text.done", {**content, "text": text}),
            self.event("response.content_part.done", {**content, "part": part}),
        ]

    def _message_events(self, item: dict[str, Any], where: dict[str, Any]) -> list[bytes]:
        """A message item's text part (no delta for an empty text)."""
        part = item["content"][0]
        content = {**where, "content_index": 0}
        out = [self.event("response.content_part.added", {**content, "part": {**part, "text": ""}})]
        if part["text"]:
            out.append(self.event("response.output_text.delta", {**content, "delta": part["text"], "logprobs": []}))
        out.append(self.event("response.output_text.done", {**content, "text": part["text"], "logprobs": []}))
        out.append(self.event("response.content_part.done", {**content, "part": part}))
        return out

    def _function_call_events(self, item: dict[str, Any], where: dict[str, Any]) -> list[bytes]:
        """A function call item's arguments (no delta for empty arguments)."""
        out = []
        if item["arguments"]:
            out.append(self.event("response.function_call_arguments.delta", {**where, "delta": item["arguments"]}))
        done = {**where, "name": item["name"], "arguments": item["arguments"]}
        out.append(self.event("response.function_call_arguments.done", done))
        return out

    def stream_error(self, error: ProxyError) -> bytes:
        """The end of a stream that failed: an ``error`` event, then ``response.failed``."""
        code = error_code(error)
        failed = self.base("failed")
        failed["error"] = {"code": code, "message": error.message}
        return self.event("error", {"code": code, "message": error.message, "param": _param(error)}) + self.event(
            "response.failed", {"response": failed}
        )


def _in_progress(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as the stream first adds it: in progress, its content still empty."""
    if item["type"] == "reasoning":
        return {**item, "summary": [], "content": [], "status": "in_progress"}
    if item["type"] == "message":
        return {**item, "content": [], "status": "in_progress"}
    return {**item, "arguments": "", "status": "in_progress"}


def error_code(error: ProxyError) -> str:
    return error.code or ("server_error" if error.status >= 500 else "invalid_request_error")


def _param(error: ProxyError) -> str | None:
    return "input" if error.param == "messages" else error.param


def error_body(error: ProxyError) -> dict[str, Any]:
    """A plain (non-stream) error in OpenAI's shape, naming Responses fields."""
    body = error.openai_body()
    body["error"]["param"] = _param(error)
    return body


def stream_error(error: ProxyError) -> bytes:
    """An ``error`` event for a stream whose ``Answer`` is unknown (the middleware's safety net)."""
    data = {
        "type": "error",
        "sequence_number": 0,
        "code": error_code(error),
        "message": error.message,
        "param": _param(error),
    }
    return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"


KEEPALIVE = b": keep-alive\n\n"
