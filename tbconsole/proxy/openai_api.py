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
from typing import Any

from tinker_cookbook.renderers.base import Message, Renderer, TextPart, ThinkingPart

from tbconsole.proxy.chat import (
    ChatReply,
    ChatRequest,
    ConversionCache,
    allowed_tools,
    expect_dict,
    expect_list,
    forced_tool_choice,
    json_bytes,
    make_tool_call,
    max_tokens_field,
    opt_bool,
    opt_int,
    opt_str,
    seed_field,
    stop_field,
    temperature_field,
    tool_choice_kind,
    tool_spec,
    top_p_field,
    with_tools,
)
from tbconsole.proxy.errors import bad_request

ROLES = {"system", "developer", "user", "assistant", "tool"}


def _text(content: Any, where: str, *, allow_none: bool = False) -> str:
    if content is None:
        if allow_none:
            return ""
        raise bad_request(f"'{where}.content' is required", where)
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_request(f"'{where}.content' must be a string or an array of content parts", where)
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict):
            raise bad_request(f"'{where}.content[{j}]' must be an object", where)
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text"):
            text = part.get("text")
            if not isinstance(text, str):
                raise bad_request(f"'{where}.content[{j}].text' must be a string", where)
            texts.append(text)
        elif kind == "refusal":
            refusal = part.get("refusal")
            if not isinstance(refusal, str):
                raise bad_request(f"'{where}.content[{j}].refusal' must be a string", where)
            texts.append(refusal)
        elif kind in ("image_url", "input_image", "input_audio", "file", "image"):
            raise bad_request(f"'{where}.content[{j}]': {kind} content is not supported (text-only model)", where)
        else:
            raise bad_request(f"'{where}.content[{j}].type' {kind!r} is not a known content part type", where)
    return "".join(texts)


def _message(raw: Any, i: int) -> Message:
    where = f"messages[{i}]"
    raw = expect_dict(raw, where)
    role = raw.get("role")
    if not isinstance(role, str) or role not in ROLES:
        if role == "function":
            raise bad_request(f"'{where}.role' 'function' is deprecated and not supported; use tools", where)
        raise bad_request(f"'{where}.role' must be one of {sorted(ROLES)}", where)
    if role in ("system", "developer"):
        return Message(role="system", content=_text(raw.get("content"), where))
    if role == "user":
        return Message(role="user", content=_text(raw.get("content"), where))
    if role == "tool":
        message = Message(role="tool", content=_text(raw.get("content"), where, allow_none=True))
        call_id = opt_str(raw, "tool_call_id", f"{where}.tool_call_id")
        if call_id is not None:
            message["tool_call_id"] = call_id
        name = raw.get("name")
        if isinstance(name, str):
            message["name"] = name
        return message
    # assistant
    text = _text(raw.get("content"), where, allow_none=True)
    reasoning = raw.get("reasoning_content")
    if reasoning is None:
        reasoning = raw.get("reasoning")
    if reasoning is not None and not isinstance(reasoning, str):
        raise bad_request(f"'{where}.reasoning_content' must be a string", where)
    if reasoning:
        parts: list = [ThinkingPart(type="thinking", thinking=reasoning)]
        if text:
            parts.append(TextPart(type="text", text=text))
        message = Message(role="assistant", content=parts)
    else:
        message = Message(role="assistant", content=text)
    calls = raw.get("tool_calls")
    if calls is not None:
        calls = expect_list(calls, f"{where}.tool_calls")
        parsed = []
        for j, call in enumerate(calls):
            cwhere = f"{where}.tool_calls[{j}]"
            call = expect_dict(call, cwhere)
            kind = call.get("type", "function")
            if kind != "function":
                raise bad_request(f"'{cwhere}.type' must be 'function'", cwhere)
            function = expect_dict(call.get("function"), f"{cwhere}.function")
            parsed.append(make_tool_call(call.get("id"), function.get("name"), function.get("arguments"), cwhere))
        if parsed:
            message["tool_calls"] = parsed
    return message


def parse_request(body: Any, renderer: Renderer, cache: ConversionCache | None = None) -> ChatRequest:
    body = expect_dict(body, "body")
    model = opt_str(body, "model") or "policy"
    raw_messages = expect_list(body.get("messages"), "messages")
    if not raw_messages:
        raise bad_request("'messages' must not be empty", "messages")
    n = opt_int(body, "n")
    if n is not None and n != 1:
        raise bad_request("'n' must be 1: the proxy samples one completion per call", "n")
    if cache is None:
        messages = [_message(raw, i) for i, raw in enumerate(raw_messages)]
    else:
        messages = cache.messages(raw_messages, lambda raw, i: [_message(raw, i)])
    tools = []
    raw_tools = body.get("tools")
    if raw_tools is not None:
        for j, tool in enumerate(expect_list(raw_tools, "tools")):
            tool = expect_dict(tool, f"tools[{j}]")
            if tool.get("type", "function") != "function":
                continue
            function = expect_dict(tool.get("function"), f"tools[{j}].function")
            tools.append(tool_spec(function.get("name"), function.get("description"), function.get("parameters"),
                                   f"tools[{j}].function"))
    choice, tools = tool_choice(body.get("tool_choice"), tools)
    stream_options = body.get("stream_options")
    include_usage = False
    if stream_options is not None:
        include_usage = opt_bool(expect_dict(stream_options, "stream_options"), "include_usage")
    return ChatRequest(
        api="openai",
        model=model,
        messages=with_tools(renderer, messages, tools, cache),
        max_tokens=max_tokens_field(body, "max_completion_tokens", "max_tokens"),
        temperature=temperature_field(body),
        top_p=top_p_field(body),
        seed=seed_field(body),
        stop=stop_field(body.get("stop"), "stop"),
        stream=opt_bool(body, "stream"),
        include_usage=include_usage,
        tool_choice=choice,
    )


def tool_choice(value: Any, tools: list) -> tuple[str, list]:
    """``(choice, tools to offer)`` for a Chat Completions ``tool_choice``."""
    kind = tool_choice_kind(value, tools)
    if isinstance(kind, tuple):
        return kind
    if kind == "allowed_tools":
        spec = expect_dict(value.get("allowed_tools"), "tool_choice.allowed_tools")
        mode = spec.get("mode")
        if mode == "required":
            raise forced_tool_choice("tool_choice", "'allowed_tools' with mode 'required'")
        if mode != "auto":
            raise bad_request("'tool_choice.allowed_tools.mode' must be 'auto' or 'required'", "tool_choice")
        names = []
        for j, tool in enumerate(expect_list(spec.get("tools"), "tool_choice.allowed_tools.tools")):
            tool = expect_dict(tool, f"tool_choice.allowed_tools.tools[{j}]")
            if tool.get("type", "function") == "function":
                names.append(expect_dict(tool.get("function"), f"tool_choice.allowed_tools.tools[{j}].function")
                             .get("name"))
        return "auto", allowed_tools(tools, names, "tool_choice")
    if kind in ("function", "custom"):
        named = value.get(kind)
        name = named.get("name") if isinstance(named, dict) else None
        raise forced_tool_choice("tool_choice", f"forcing the {kind} tool {str(name)[:60]!r}")
    raise bad_request("'tool_choice.type' must be 'function', 'custom' or 'allowed_tools'", "tool_choice")


# -- responses -----------------------------------------------------------------------------------

def _usage(reply: ChatReply) -> dict[str, int]:
    return {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.output_tokens,
            "total_tokens": reply.prompt_tokens + reply.output_tokens}


def _tool_calls(reply: ChatReply) -> list[dict[str, Any]]:
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls]


def response(reply: ChatReply, model: str, completion_id: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant",
                               "content": reply.text if (reply.text or not reply.tool_calls) else None}
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
    body = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
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
        body = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [], "usage": _usage(reply)}
        out.append(b"data: " + json.dumps(body).encode() + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out


def stream_error(body: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(body).encode() + b"\n\n"


KEEPALIVE = b": keep-alive\n\n"


def models(model: str) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "tbconsole"}]}
