"""OpenAI Chat Completions: request → ``ChatRequest``, ``ChatReply`` → response / SSE chunks.

Accepted and used: ``model``, ``messages`` (system, developer, user, assistant with
``tool_calls`` and ``reasoning_content``/``reasoning``, tool with ``tool_call_id``; string or
text-part content), ``tools`` (``type == "function"``; other tool types are ignored: they cannot be
called through a chat template), ``tool_choice`` (see below), ``max_tokens``/``max_completion_tokens``,
``temperature``, ``top_p``, ``seed``, ``stop`` (a reply that stopped on one is cut before it),
``n`` (must be 1), ``stream``, ``stream_options.include_usage``.
Accepted and ignored (harmless for a sampling proxy): ``user``, ``metadata``, ``store``,
``parallel_tool_calls``, ``response_format``, ``logprobs``, ``top_logprobs``,
``frequency_penalty``, ``presence_penalty``, ``logit_bias``, ``reasoning_effort``,
``service_level`` and any other unknown field. Images, audio and files are refused (400): the
policy is text-only.

``tool_choice``: "auto" (default) offers the tools; "none" renders without them (a call the model
writes anyway comes back as text); ``{"type": "allowed_tools", "allowed_tools": {"mode": "auto",
"tools": [...]}}`` offers the listed subset; "required", a named function or custom tool, and
``allowed_tools`` with mode "required" are refused (400): the policy samples freely and cannot be
made to call a tool.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

from pydantic import AfterValidator, ValidationInfo, field_validator, model_validator
from tinker_cookbook.renderers.base import Message, Renderer, TextPart, ThinkingPart, ToolCall, ToolSpec

from tbconsole.proxy.chat import ChatReply, ChatRequest, ConversionCache, convert_all, json_bytes, with_tools
from tbconsole.proxy.errors import ProxyError, bad_request
from tbconsole.proxy.tools import (
    Arguments,
    FunctionSpec,
    allowed_tools,
    forced_tool_choice,
    plain_tool_choice,
    tool_call,
)
from tbconsole.proxy.validation import (
    Flag,
    Int,
    MaxTokens,
    Name,
    NonEmptyList,
    Refusal,
    Seed,
    StopStrings,
    Temperature,
    Text,
    TopP,
    Typed,
    WireModel,
    invalid,
    literal,
    one_of,
    parse,
    string_or_array,
)

ROLES = ("system", "developer", "user", "assistant", "tool")
TEXT_PARTS = ("text", "input_text", "output_text")
MEDIA_PARTS = ("image_url", "input_image", "input_audio", "file", "image")


# -- the request -----------------------------------------------------------------------------------


def _not_function(value: Any) -> Any:
    if value == "function":
        raise invalid(" 'function' is deprecated and not supported; use tools")
    return value


class _Message(WireModel):
    role: Annotated[Any, AfterValidator(_not_function), one_of(*ROLES)]
    content: Annotated[Any, string_or_array("content parts")] = None  # null: only for assistant and tool turns
    tool_call_id: str | None = None
    name: Any = None  # a tool turn's function name, kept when it is a string
    reasoning_content: str | None = None
    reasoning: str | None = None  # another spelling of reasoning_content
    tool_calls: list[Any] | None = None

    @model_validator(mode="after")
    def _content_required(self) -> _Message:
        if self.content is None and self.role in ("system", "developer", "user"):
            raise invalid(" is required", at="content")
        return self


class _CallFunction(WireModel):
    name: Name
    arguments: Arguments = "{}"


class _Call(WireModel):
    id: str | None = None
    type: Annotated[Any, literal("function")] = "function"
    function: _CallFunction


class _StreamOptions(WireModel):
    include_usage: Flag = False


def _one(value: int | None) -> int | None:
    if value is not None and value != 1:
        raise invalid(" must be 1: the proxy samples one completion per call")
    return value


class _Body(WireModel):
    model: str | None = None
    messages: NonEmptyList
    n: Annotated[Int | None, AfterValidator(_one)] = None
    tools: list[Any] | None = None
    tool_choice: Any = None
    stream_options: _StreamOptions | None = None
    max_completion_tokens: MaxTokens = None
    max_tokens: MaxTokens = None
    temperature: Temperature = None
    top_p: TopP = None
    seed: Seed = None
    stop: StopStrings = []
    stream: Flag = False

    @field_validator("max_tokens", mode="wrap")
    @classmethod
    def _older_spelling(cls, value: Any, handler: Any, info: ValidationInfo) -> Any:
        """``max_tokens`` is read only without ``max_completion_tokens``, its newer spelling."""
        return None if info.data.get("max_completion_tokens") is not None else handler(value)


class _Tool(WireModel):
    type: Any = "function"
    function: Any = None


class _Choice(WireModel):
    type: str
    function: Any = None
    custom: Any = None


class _FunctionRef(WireModel):
    name: Any = None


class _AllowedTool(WireModel):
    type: Any = "function"
    function: _FunctionRef | None = None


class _AllowedTools(WireModel):
    mode: Annotated[Any, literal("auto", "required")]
    tools: list[_AllowedTool]


def _part_text(raw: Any, where: str, param: str) -> str:
    kind = parse(Typed, raw, where, param).type
    if kind in TEXT_PARTS:
        return parse(Text, raw, where, param).text
    if kind == "refusal":
        return parse(Refusal, raw, where, param).refusal
    if kind in MEDIA_PARTS:
        raise bad_request(f"'{where}': {kind} content is not supported (text-only model)", param)
    raise bad_request(f"'{where}.type' {kind!r} is not a known content part type", param)


def _text(content: str | list | None, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(_part_text(part, f"{where}.content[{j}]", where) for j, part in enumerate(content))


def _call(raw: Any, where: str) -> ToolCall:
    call = parse(_Call, raw, where)
    return tool_call(call.id, call.function.name, call.function.arguments)


def _message(raw: Any, i: int) -> Message:
    where = f"messages[{i}]"
    m = parse(_Message, raw, where)
    text = _text(m.content, where)
    if m.role in ("system", "developer"):
        return Message(role="system", content=text)
    if m.role == "user":
        return Message(role="user", content=text)
    if m.role == "tool":
        message = Message(role="tool", content=text)
        if m.tool_call_id is not None:
            message["tool_call_id"] = m.tool_call_id
        if isinstance(m.name, str):
            message["name"] = m.name
        return message
    reasoning = m.reasoning_content if m.reasoning_content is not None else m.reasoning
    if reasoning:
        parts: list = [ThinkingPart(type="thinking", thinking=reasoning)]
        if text:
            parts.append(TextPart(type="text", text=text))
        message = Message(role="assistant", content=parts)
    else:
        message = Message(role="assistant", content=text)
    calls = [_call(call, f"{where}.tool_calls[{j}]") for j, call in enumerate(m.tool_calls or [])]
    if calls:
        message["tool_calls"] = calls
    return message


def _tools(raws: list[Any]) -> list[ToolSpec]:
    specs = []
    for j, raw in enumerate(raws):
        tool = parse(_Tool, raw, f"tools[{j}]")
        if tool.type == "function":  # other types cannot be called through a chat template
            specs.append(parse(FunctionSpec, tool.function, f"tools[{j}].function").spec())
    return specs


def tool_choice(value: Any, tools: list[ToolSpec]) -> tuple[str, list[ToolSpec]]:
    """``(choice, tools to offer)`` for a Chat Completions ``tool_choice``."""
    plain = plain_tool_choice(value, tools)
    if plain is not None:
        return plain
    kind = parse(_Choice, value, "tool_choice").type
    if kind == "allowed_tools":
        spec = parse(_AllowedTools, value.get("allowed_tools"), "tool_choice.allowed_tools", "tool_choice")
        if spec.mode == "required":
            raise forced_tool_choice("'allowed_tools' with mode 'required'")
        names = [t.function.name if t.function is not None else None for t in spec.tools if t.type == "function"]
        return "auto", allowed_tools(tools, names)
    if kind in ("function", "custom"):
        named = value.get(kind)
        name = named.get("name") if isinstance(named, dict) else None
        raise forced_tool_choice(f"forcing the {kind} tool {str(name)[:60]!r}")
    raise bad_request("'tool_choice.type' must be 'function', 'custom' or 'allowed_tools'", "tool_choice")


def parse_request(body: Any, renderer: Renderer, cache: ConversionCache | None = None) -> ChatRequest:
    request = parse(_Body, body)
    messages = convert_all(request.messages, lambda raw, i: [_message(raw, i)], cache)
    choice, tools = tool_choice(request.tool_choice, _tools(request.tools or []))
    return ChatRequest(
        api="openai",
        model=request.model or "policy",
        messages=with_tools(renderer, messages, tools, cache),
        max_tokens=request.max_completion_tokens or request.max_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        stop=request.stop,
        stream=request.stream,
        include_usage=request.stream_options is not None and request.stream_options.include_usage,
        tool_choice=choice,
    )


# -- the answer ----------------------------------------------------------------------------------


def _usage(reply: ChatReply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.prompt_tokens + reply.output_tokens,
    }


def _tool_calls(reply: ChatReply) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in reply.tool_calls
    ]


def response(reply: ChatReply, model: str, completion_id: str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text if (reply.text or not reply.tool_calls) else None,
    }
    if reply.thinking:
        message["reasoning_content"] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = _tool_calls(reply)
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish, "logprobs": None}],
        "usage": _usage(reply),
        "system_fingerprint": None,
    }


def _chunk(completion_id: str, model: str, created: int, delta: dict, finish: str | None = None) -> bytes:
    body = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }
    return b"data: " + json_bytes(body) + b"\n\n"


def stream_events(reply: ChatReply, model: str, completion_id: str, include_usage: bool) -> list[bytes]:
    created = int(time.time())
    out = [_chunk(completion_id, model, created, {"role": "assistant", "content": ""})]
    if reply.thinking:
        out.append(_chunk(completion_id, model, created, {"reasoning_content": reply.thinking}))
    if reply.text:
        out.append(_chunk(completion_id, model, created, {"content": reply.text}))
    for i, call in enumerate(_tool_calls(reply)):
        out.append(_chunk(completion_id, model, created, {"tool_calls": [{"index": i, **call}]}))
    out.append(_chunk(completion_id, model, created, {}, reply.finish))
    if include_usage:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _usage(reply),
        }
        out.append(b"data: " + json.dumps(body).encode() + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out


def stream_error(error: ProxyError) -> bytes:
    """The error chunk that ends a stream (no ``[DONE]``: the SDKs raise on it)."""
    return b"data: " + json.dumps(error.openai_body()).encode() + b"\n\n"


class Answer:
    """One completion's answer: its id and the request values it echoes."""

    def __init__(self, chat: ChatRequest, completion_id: str, temperature: float):
        self.chat = chat
        self.id = completion_id

    def body(self, reply: ChatReply) -> dict[str, Any]:
        return response(reply, self.chat.model, self.id)

    def stream_start(self, prompt_tokens: int) -> bytes:
        return b""

    def stream_events(self, reply: ChatReply) -> list[bytes]:
        return stream_events(reply, self.chat.model, self.id, self.chat.include_usage)

    def stream_error(self, error: ProxyError) -> bytes:
        return stream_error(error)


KEEPALIVE = b": keep-alive\n\n"


def models(model: str) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "tbconsole"}]}
