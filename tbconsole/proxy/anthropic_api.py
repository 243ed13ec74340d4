"""Anthropic Messages: request → ``ChatRequest``, ``ChatReply`` → message / SSE events.

Accepted and used: ``model``, ``system`` (string or text blocks), ``messages`` (user/assistant;
string content or blocks: ``text``, ``thinking``, ``tool_use``, ``tool_result``), ``tools``
(custom tools: ``name``/``description``/``input_schema``; server tools, which have a ``type``
other than ``custom``, are ignored), ``tool_choice`` (see below), ``max_tokens`` (optional here:
the proxy has a default), ``temperature``, ``top_p``, ``top_k``, ``stop_sequences``, ``stream``.
Accepted and ignored: ``metadata``, ``thinking``, ``service_tier``, ``container``,
``mcp_servers``, ``cache_control`` on blocks, ``redacted_thinking`` blocks, ``citations`` and any
unknown field. Images and documents are refused (400): the policy is text-only.

A user turn's ``tool_result`` blocks become the renderer's ``tool`` messages (in order), and its
remaining text a ``user`` message after them. A ``tool_result`` with ``is_error: true`` reaches
the model as its text prefixed with ``"Error: "`` (the renderers have no error flag of their own).
An assistant turn's ``thinking`` blocks become thinking parts and its ``tool_use`` blocks tool
calls.

``tool_choice``: ``{"type": "auto"}`` (the default; ``disable_parallel_tool_use`` is accepted and
ignored) offers the tools; ``{"type": "none"}`` renders without them (a call the model writes
anyway comes back as text); ``{"type": "any"}`` and ``{"type": "tool", "name": …}`` are refused
(400): the policy samples freely and cannot be made to call a tool.

A reply that stopped on one of the client's ``stop_sequences`` has ``stop_reason:
"stop_sequence"``, ``stop_sequence`` set to the matched string, and its text cut before it.
"""

from __future__ import annotations

import json
from typing import Any

from tinker_cookbook.renderers.base import Message, Renderer, TextPart, ThinkingPart

from tbconsole.proxy.chat import (
    ChatReply,
    ChatRequest,
    ConversionCache,
    expect_dict,
    expect_list,
    forced_tool_choice,
    json_bytes,
    make_tool_call,
    max_tokens_field,
    opt_bool,
    opt_str,
    stop_field,
    temperature_field,
    tool_spec,
    top_k_field,
    top_p_field,
    with_tools,
)
from tbconsole.proxy.errors import bad_request

IGNORED_BLOCKS = {"redacted_thinking", "server_tool_use", "web_search_tool_result", "container_upload"}
REFUSED_BLOCKS = {"image", "document", "search_result"}


def _block_text(block: dict, where: str) -> str:
    text = block.get("text")
    if not isinstance(text, str):
        raise bad_request(f"'{where}.text' must be a string", where)
    return text


def _tool_result_text(content: Any, where: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for j, block in enumerate(_blocks(content, where)):
        bwhere = f"{where}.content[{j}]"
        kind = block["type"]
        if kind == "text":
            texts.append(_block_text(block, bwhere))
        elif kind in REFUSED_BLOCKS:
            raise bad_request(f"'{bwhere}': {kind} content is not supported (text-only model)", bwhere)
        else:
            raise bad_request(f"'{bwhere}.type' {kind!r} is not allowed in a tool_result", bwhere)
    return "".join(texts)


def _blocks(content: Any, where: str) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks = expect_list(content, f"{where}.content")
    out = []
    for j, block in enumerate(blocks):
        block = expect_dict(block, f"{where}.content[{j}]")
        if not isinstance(block.get("type"), str):
            raise bad_request(f"'{where}.content[{j}].type' must be a string", where)
        out.append(block)
    return out


def _user_messages(content: Any, where: str) -> list[Message]:
    out: list[Message] = []
    texts: list[str] = []
    for j, block in enumerate(_blocks(content, where)):
        bwhere = f"{where}.content[{j}]"
        kind = block["type"]
        if kind == "text":
            texts.append(_block_text(block, bwhere))
        elif kind == "tool_result":
            tool_use_id = opt_str(block, "tool_use_id", f"{bwhere}.tool_use_id")
            text = _tool_result_text(block.get("content"), bwhere)
            is_error = block.get("is_error")
            if is_error is not None and not isinstance(is_error, bool):
                raise bad_request(f"'{bwhere}.is_error' must be a boolean", bwhere)
            if is_error:
                text = f"Error: {text}" if text else "Error"
            message = Message(role="tool", content=text)
            if tool_use_id is not None:
                message["tool_call_id"] = tool_use_id
            out.append(message)
        elif kind in REFUSED_BLOCKS:
            raise bad_request(f"'{bwhere}': {kind} content is not supported (text-only model)", bwhere)
        elif kind in IGNORED_BLOCKS:
            continue
        else:
            raise bad_request(f"'{bwhere}.type' {kind!r} is not allowed in a user message", bwhere)
    if texts or not out:
        out.append(Message(role="user", content="".join(texts) if len(texts) != 1 else texts[0]))
    return out


def _assistant_message(content: Any, where: str) -> Message:
    parts: list = []
    calls = []
    for j, block in enumerate(_blocks(content, where)):
        bwhere = f"{where}.content[{j}]"
        kind = block["type"]
        if kind == "text":
            parts.append(TextPart(type="text", text=_block_text(block, bwhere)))
        elif kind == "thinking":
            thinking = block.get("thinking")
            if not isinstance(thinking, str):
                raise bad_request(f"'{bwhere}.thinking' must be a string", bwhere)
            if thinking:
                parts.append(ThinkingPart(type="thinking", thinking=thinking))
        elif kind == "tool_use":
            tool_input = block.get("input", {})
            if not isinstance(tool_input, dict):
                raise bad_request(f"'{bwhere}.input' must be an object", bwhere)
            calls.append(make_tool_call(block.get("id"), block.get("name"), tool_input, bwhere))
        elif kind in IGNORED_BLOCKS:
            continue
        elif kind in REFUSED_BLOCKS:
            raise bad_request(f"'{bwhere}': {kind} content is not supported (text-only model)", bwhere)
        else:
            raise bad_request(f"'{bwhere}.type' {kind!r} is not allowed in an assistant message", bwhere)
    if any(p["type"] == "thinking" for p in parts):
        message = Message(role="assistant", content=parts)
    else:
        message = Message(role="assistant", content="".join(p["text"] for p in parts))
    if calls:
        message["tool_calls"] = calls
    return message


def _system(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    texts = []
    for j, block in enumerate(expect_list(value, "system")):
        block = expect_dict(block, f"system[{j}]")
        if block.get("type") != "text":
            raise bad_request(f"'system[{j}].type' must be 'text'", "system")
        texts.append(_block_text(block, f"system[{j}]"))
    return "\n\n".join(texts)


def _convert(raw: Any, i: int) -> list[Message]:
    where = f"messages[{i}]"
    raw = expect_dict(raw, where)
    role = raw.get("role")
    if role == "user":
        return _user_messages(raw.get("content"), where)
    if role == "assistant":
        return [_assistant_message(raw.get("content"), where)]
    if role == "system":
        # Not in Anthropic's published schema, but Claude Code sends its environment notes this
        # way under a model name it does not know; the renderer keeps it as a system turn in place.
        return [Message(role="system", content=_system(raw.get("content")) or "")]
    raise bad_request(f"'{where}.role' must be 'user', 'assistant' or 'system'", where)


def parse_messages(body: Any, renderer: Renderer, cache: ConversionCache | None = None, *,
                   count_only: bool = False) -> tuple[dict, list[Message]]:
    """``(body, messages)``; ``count_only`` (count_tokens): a forcing ``tool_choice`` is not
    refused, the tools are counted as offered."""
    body = expect_dict(body, "body")
    raw_messages = expect_list(body.get("messages"), "messages")
    if not raw_messages:
        raise bad_request("'messages' must not be empty", "messages")
    # The system prompt travels as a pseudo-message in front, so the cache covers it too.
    raws = [{"system": body.get("system")}] + raw_messages

    def convert(raw: Any, i: int) -> list[Message]:
        if i == 0:
            system = _system(raw["system"])
            return [] if system is None else [Message(role="system", content=system)]
        return _convert(raw, i - 1)

    if cache is None:
        messages = [m for i, raw in enumerate(raws) for m in convert(raw, i)]
    else:
        messages = cache.messages(raws, convert)
    tools = []
    raw_tools = body.get("tools")
    if raw_tools is not None:
        for j, tool in enumerate(expect_list(raw_tools, "tools")):
            tool = expect_dict(tool, f"tools[{j}]")
            if tool.get("type") not in (None, "custom"):
                continue  # a server tool (web search, bash_2025…): not callable through a template
            tools.append(tool_spec(tool.get("name"), tool.get("description"), tool.get("input_schema"), f"tools[{j}]"))
    if tool_choice(body.get("tool_choice"), counting=count_only) == "none":
        tools = []
    return body, with_tools(renderer, messages, tools, cache)


def tool_choice(value: Any, *, counting: bool = False) -> str:
    """``auto`` or ``none`` for an Anthropic ``tool_choice``; forcing a call is refused (counted
    as ``auto`` when ``counting``)."""
    if value is None:
        return "auto"
    kind = expect_dict(value, "tool_choice").get("type")
    if not isinstance(kind, str):
        raise bad_request("'tool_choice.type' must be a string", "tool_choice")
    if kind in ("auto", "none"):
        disable = value.get("disable_parallel_tool_use")
        if disable is not None and not isinstance(disable, bool):
            raise bad_request("'tool_choice.disable_parallel_tool_use' must be a boolean", "tool_choice")
        return kind
    if kind in ("any", "tool") and counting:
        return "auto"
    if kind == "any":
        raise forced_tool_choice("tool_choice", "{'type': 'any'}")
    if kind == "tool":
        raise forced_tool_choice("tool_choice", f"forcing the tool {str(value.get('name'))[:60]!r}")
    raise bad_request("'tool_choice.type' must be one of 'auto', 'any', 'tool' or 'none'", "tool_choice")


def parse_request(body: Any, renderer: Renderer, cache: ConversionCache | None = None) -> ChatRequest:
    body, messages = parse_messages(body, renderer, cache)
    return ChatRequest(
        api="anthropic",
        model=opt_str(body, "model") or "policy",
        messages=messages,
        max_tokens=max_tokens_field(body, "max_tokens"),
        temperature=temperature_field(body),
        top_p=top_p_field(body),
        top_k=top_k_field(body),
        stop=stop_field(body.get("stop_sequences"), "stop_sequences"),
        stream=opt_bool(body, "stream"),
        tool_choice=tool_choice(body.get("tool_choice")),
    )


# -- responses -----------------------------------------------------------------------------------

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
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


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
    return event("message_start", {"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": _usage(prompt_tokens, 0)}})


def stream_events(reply: ChatReply) -> list[bytes]:
    out = []
    for index, block in enumerate(_content(reply)):
        kind = block["type"]
        if kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]},
                      {"type": "signature_delta", "signature": ""}]
        elif kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": block["text"]}] if block["text"] else []
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"], ensure_ascii=False)}]
        out.append(event("content_block_start", {"type": "content_block_start", "index": index,
                                                 "content_block": start}))
        for delta in deltas:
            out.append(event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        out.append(event("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(event("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": _stop_reason(reply),
                                                 "stop_sequence": reply.stop_sequence},
                                       "usage": {"output_tokens": reply.output_tokens}}))
    out.append(event("message_stop", {"type": "message_stop"}))
    return out


def stream_error(body: dict[str, Any]) -> bytes:
    return event("error", body)


KEEPALIVE = event("ping", {"type": "ping"})


def models(model: str) -> dict[str, Any]:
    entry = {"type": "model", "id": model, "display_name": model, "created_at": "1970-01-01T00:00:00Z"}
    return {"data": [entry], "has_more": False, "first_id": model, "last_id": model}
