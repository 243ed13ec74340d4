"""The three APIs the proxy speaks, each described once as an ``Api``: how its requests are
read, and how its answers and errors are written. The pipeline and the HTTP side look an API up
in ``APIS`` by name instead of branching on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tinker_cookbook.renderers.base import Renderer

from tbconsole.proxy import anthropic_api, anthropic_input, openai_api, responses_api, responses_input
from tbconsole.proxy.chat import ChatReply, ChatRequest, ConversionCache
from tbconsole.proxy.errors import ProxyError


class Answer(Protocol):
    """One request's answer in its API's shape (for a stream, also its running state)."""

    def body(self, reply: ChatReply) -> dict[str, Any]: ...

    def stream_start(self, prompt_tokens: int) -> bytes: ...

    def stream_events(self, reply: ChatReply) -> list[bytes]: ...

    def stream_error(self, error: ProxyError) -> bytes: ...


@dataclass(frozen=True)
class Api:
    name: str
    id_prefix: str  # of an answer's id
    tool_id_prefix: str  # of a tool call's id, where the renderer gave none
    keepalive: bytes  # written to an open stream while the sampler works
    parse: Callable[[Any, Renderer, ConversionCache | None], ChatRequest]
    answer: Callable[[ChatRequest, str, float], Answer]  # (request, answer id, temperature)
    error_body: Callable[[ProxyError], dict[str, Any]]  # a plain (non-stream) error
    stream_error: Callable[[ProxyError], bytes]  # the end of a stream whose Answer is unknown
    # A context-window refusal of a streaming request goes into the stream (the Responses API:
    # Codex recognises it only there); the others refuse it before the stream, as a plain 400.
    context_refusal_in_stream: bool = False


APIS = {
    "openai": Api(
        "openai",
        "chatcmpl-",
        "call_",
        openai_api.KEEPALIVE,
        openai_api.parse_request,
        openai_api.Answer,
        ProxyError.openai_body,
        openai_api.stream_error,
    ),
    "anthropic": Api(
        "anthropic",
        "msg_",
        "toolu_",
        anthropic_api.KEEPALIVE,
        anthropic_input.parse_request,
        anthropic_api.Answer,
        ProxyError.anthropic_body,
        anthropic_api.stream_error,
    ),
    "responses": Api(
        "responses",
        "resp_",
        "call_",
        responses_api.KEEPALIVE,
        responses_input.parse_request,
        responses_api.Answer,
        responses_api.error_body,
        responses_api.stream_error,
        context_refusal_in_stream=True,
    ),
}
