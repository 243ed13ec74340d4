"""Anthropic Messages requests → ``ChatRequest`` (the answer is ``anthropic_api``'s).

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
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, model_validator
from tinker_cookbook.renderers.base import Message, Renderer, TextPart, ThinkingPart, ToolSpec

from tbconsole.proxy.chat import ChatRequest, ConversionCache, convert_all, with_tools
from tbconsole.proxy.errors import ProxyError, bad_request
from tbconsole.proxy.tools import forced_tool_choice, tool_call, tool_spec
from tbconsole.proxy.validation import (
    Flag,
    MaxTokens,
    Name,
    NonEmptyList,
    Object,
    StopStrings,
    Temperature,
    Text,
    TopK,
    TopP,
    Typed,
    WireModel,
    invalid,
    literal,
    parse,
    string_or_array,
)

IGNORED_BLOCKS = {"redacted_thinking", "server_tool_use", "web_search_tool_result", "container_upload"}
REFUSED_BLOCKS = {"image", "document", "search_result"}
ROLES = ("user", "assistant", "system")


def _role(value: Any) -> str:
    if not isinstance(value, str) or value not in ROLES:
        raise invalid(" must be 'user', 'assistant' or 'system'")
    return value


Blocks = Annotated[Any, string_or_array("content blocks")]


class _Message(WireModel):
    role: Annotated[Any, AfterValidator(_role)]
    content: Blocks = None  # null: only for a system turn

    @model_validator(mode="after")
    def _content_required(self) -> _Message:
        if self.content is None and self.role != "system":
            raise invalid(" is required", at="content")
        return self


class _Thinking(WireModel):
    thinking: str


class _ToolUse(WireModel):
    id: str | None = None
    name: Name
    input: Object = {}


class _ToolResult(WireModel):
    tool_use_id: str | None = None
    content: Blocks = None
    is_error: bool | None = None


class _SystemBlock(WireModel):
    type: Annotated[Any, literal("text")]
    text: str


class _ToolKind(WireModel):
    type: Any = None  # none or "custom": a tool the model can call; anything else is a server tool


class _CustomTool(WireModel):
    name: Name
    description: str | None = None
    input_schema: Object | None = None


class _ToolChoice(WireModel):
    type: Annotated[Any, literal("auto", "any", "tool", "none")]
    disable_parallel_tool_use: bool | None = None  # accepted, without effect
    name: Any = None


class _CountBody(WireModel):
    """What ``count_tokens`` reads."""

    messages: NonEmptyList
    system: Annotated[Any, string_or_array("text blocks")] = None
    tools: list[Any] | None = None
    tool_choice: _ToolChoice | None = None


class _Body(_CountBody):
    model: str | None = None
    max_tokens: MaxTokens = None  # optional here: the proxy has a default
    temperature: Temperature = None
    top_p: TopP = None
    top_k: TopK = None
    stop_sequences: StopStrings = []
    stream: Flag = False


def _text_only(where: str, kind: str) -> ProxyError:
    return bad_request(f"'{where}': {kind} content is not supported (text-only model)", where)


def _blocks(content: list, where: str) -> list[tuple[str, str, Any]]:
    """``(path, type, block)`` for each block of a content array."""
    out = []
    for j, block in enumerate(content):
        bwhere = f"{where}.content[{j}]"
        out.append((bwhere, parse(Typed, block, bwhere).type, block))
    return out


def _tool_result_text(content: str | list | None, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    texts = []
    for bwhere, kind, block in _blocks(content, where):
        if kind == "text":
            texts.append(parse(Text, block, bwhere).text)
        elif kind in REFUSED_BLOCKS:
            raise _text_only(bwhere, kind)
        else:
            raise bad_request(f"'{bwhere}.type' {kind!r} is not allowed in a tool_result", bwhere)
    return "".join(texts)


def _tool_result(block: Any, where: str) -> Message:
    result = parse(_ToolResult, block, where)
    text = _tool_result_text(result.content, where)
    if result.is_error:  # the renderers have no error flag of their own
        text = f"Error: {text}" if text else "Error"
    message = Message(role="tool", content=text)
    if result.tool_use_id is not None:
        message["tool_call_id"] = result.tool_use_id
    return message


def _user_messages(content: str | list, where: str) -> list[Message]:
    if isinstance(content, str):
        return [Message(role="user", content=content)]
    out: list[Message] = []
    texts: list[str] = []
    for bwhere, kind, block in _blocks(content, where):
        if kind == "text":
            texts.append(parse(Text, block, bwhere).text)
        elif kind == "tool_result":
            out.append(_tool_result(block, bwhere))
        elif kind in REFUSED_BLOCKS:
            raise _text_only(bwhere, kind)
        elif kind not in IGNORED_BLOCKS:
            raise bad_request(f"'{bwhere}.type' {kind!r} is not allowed in a user message", bwhere)
    if texts or not out:
        out.append(Message(role="user", content="".join(texts) if len(texts) != 1 else texts[0]))
    return out


def _assistant_message(content: str | list, where: str) -> Message:
    if isinstance(content, str):
        return Message(role="assistant", content=content)
    parts: list = []
    calls = []
    for bwhere, kind, block in _blocks(content, where):
        if kind == "text":
            parts.append(TextPart(type="text", text=parse(Text, block, bwhere).text))
        elif kind == "thinking":
            thinking = parse(_Thinking, block, bwhere).thinking
            if thinking:
                parts.append(ThinkingPart(type="thinking", thinking=thinking))
        elif kind == "tool_use":
            use = parse(_ToolUse, block, bwhere)
            calls.append(tool_call(use.id, use.name, json.dumps(use.input, ensure_ascii=False)))
        elif kind in REFUSED_BLOCKS:
            raise _text_only(bwhere, kind)
        elif kind not in IGNORED_BLOCKS:
            raise bad_request(f"'{bwhere}.type' {kind!r} is not allowed in an assistant message", bwhere)
    if any(p["type"] == "thinking" for p in parts):
        message = Message(role="assistant", content=parts)
    else:
        message = Message(role="assistant", content="".join(p["text"] for p in parts))
    if calls:
        message["tool_calls"] = calls
    return message


def _system(value: str | list | None, where: str) -> str | None:
    """A system prompt: a string, or text blocks joined by blank lines."""
    if value is None or isinstance(value, str):
        return value
    return "\n\n".join(parse(_SystemBlock, block, f"{where}[{j}]", where).text for j, block in enumerate(value))


def _convert(raw: Any, i: int) -> list[Message]:
    where = f"messages[{i}]"
    message = parse(_Message, raw, where)
    if message.role == "user":
        return _user_messages(message.content, where)
    if message.role == "assistant":
        return [_assistant_message(message.content, where)]
    # Not in Anthropic's published schema, but Claude Code sends its environment notes this
    # way under a model name it does not know; the renderer keeps it as a system turn in place.
    return [Message(role="system", content=_system(message.content, f"{where}.content") or "")]


def _tools(raws: list[Any]) -> list[ToolSpec]:
    specs = []
    for j, raw in enumerate(raws):
        where = f"tools[{j}]"
        if parse(_ToolKind, raw, where).type not in (None, "custom"):
            continue  # a server tool (web search, bash_2025…): not callable through a template
        tool = parse(_CustomTool, raw, where)
        specs.append(tool_spec(tool.name, tool.description, tool.input_schema))
    return specs


def tool_choice(choice: _ToolChoice | None, *, counting: bool = False) -> str:
    """``auto`` or ``none`` for an Anthropic ``tool_choice``; forcing a call is refused (counted
    as ``auto`` when ``counting``)."""
    if choice is None:
        return "auto"
    if choice.type in ("auto", "none"):
        return choice.type
    if counting:
        return "auto"
    if choice.type == "any":
        raise forced_tool_choice("{'type': 'any'}")
    raise forced_tool_choice(f"forcing the tool {str(choice.name)[:60]!r}")


def _conversation(request: _CountBody, renderer: Renderer, cache: ConversionCache | None, choice: str) -> list[Message]:
    # The system prompt travels as a pseudo-message in front, so the cache covers it too.
    raws = [{"system": request.system}, *request.messages]

    def convert(raw: Any, i: int) -> list[Message]:
        if i == 0:
            system = _system(raw["system"], "system")
            return [] if system is None else [Message(role="system", content=system)]
        return _convert(raw, i - 1)

    messages = convert_all(raws, convert, cache)
    tools = _tools(request.tools or [])
    return with_tools(renderer, messages, tools if choice != "none" else [], cache)


def count_request(body: Any, renderer: Renderer) -> list[Message]:
    """A ``count_tokens`` body's conversation, with its tools as offered (a forcing
    ``tool_choice`` is not refused: nothing is sampled)."""
    request = parse(_CountBody, body)
    return _conversation(request, renderer, None, tool_choice(request.tool_choice, counting=True))


def parse_request(body: Any, renderer: Renderer, cache: ConversionCache | None = None) -> ChatRequest:
    request = parse(_Body, body)
    choice = tool_choice(request.tool_choice)
    return ChatRequest(
        api="anthropic",
        model=request.model or "policy",
        messages=_conversation(request, renderer, cache, choice),
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        top_k=request.top_k,
        stop=request.stop_sequences,
        stream=request.stream,
        tool_choice=choice,
    )
