"""OpenAI Responses: request → ``ChatRequest``, ``ChatReply`` → response object / SSE events.

The API Codex CLI speaks (``POST {base_url}/responses``, base URL ``{proxy_url}/v1``). The proxy
is stateless: every request carries the whole conversation in ``input``, nothing is stored.

Accepted and used:

* ``instructions`` (a string) and ``input`` (a string, or a list of items): ``message`` items
  (also without ``type``) of roles system/developer (→ system), user and assistant, with string
  content or ``input_text``/``output_text``/``refusal`` parts; ``function_call`` items
  (``call_id``, ``name``, ``arguments``) and ``function_call_output`` items (``call_id``,
  ``output``: a string or text parts); ``reasoning`` items (their ``content`` reasoning text,
  else their ``summary`` texts, become the renderer's thinking). The instructions and the
  system/developer messages that open the input make one system prompt (joined by blank
  lines): the chat templates expect a single one, first. Consecutive assistant-side items
  (reasoning, one message, its function calls) make one assistant turn.
* ``tools``: function tools in the Responses API's flat shape (``{"type": "function", "name",
  "description", "parameters", "strict"}``). Every other tool type (``web_search``, which Codex
  always sends, ``file_search``, ``computer_use_preview``, ``custom``, ``mcp``, ``local_shell``…)
  is dropped, not refused: only OpenAI's servers run them, and a chat template cannot offer them.
* ``tool_choice``: "auto" (default); "none" renders without tools (a call the model writes anyway
  comes back as text); ``allowed_tools`` with mode "auto" offers the listed function tools.
  "required", a named function or custom tool, a hosted tool, or ``allowed_tools`` with mode
  "required" are refused (400): the policy samples freely and cannot be made to call a tool.
* ``max_output_tokens``, ``temperature``, ``top_p``, ``stream``.
* Echoed in the answer, otherwise without effect: ``metadata``, ``parallel_tool_calls`` (the
  policy may write several calls either way), ``store`` (true or false: nothing is stored),
  ``reasoning`` (the policy reasons as it does), ``text`` (format "text"; ``verbosity`` is
  ignored), ``truncation`` ("disabled" or "auto": the proxy never drops input, a conversation
  over the trial's window is refused as context_length_exceeded either way), ``user``,
  ``prompt_cache_key``, ``include`` (``reasoning.encrypted_content``: reasoning items carry
  ``encrypted_content: null``; their text travels in the clear).
* Ignored, like any unknown field: ``service_tier``, ``safety_identifier``,
  ``prompt_cache_retention``, ``stream_options``, ``top_logprobs``, ``max_tool_calls``.

Refused (400, OpenAI's error shape): ``previous_response_id`` and ``conversation`` (stateless:
send the whole conversation), ``item_reference`` items, ``background: true``, stored
``prompt`` templates, ``text.format`` other than "text" (no constrained decoding), images, files
and audio (the policy is text-only), and calls/outputs of non-function tools (``custom_tool_call``,
``local_shell_call``, ``computer_call``…: this proxy never offers those tools). Records of hosted
tools in the input (``web_search_call``, ``file_search_call``, ``mcp_call``…) are skipped.

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
    new_id,
    opt_bool,
    opt_str,
    temperature_field,
    tool_choice_kind,
    tool_spec,
    top_p_field,
    with_tools,
)
from tbconsole.proxy.errors import ProxyError, bad_request

ROLES = {"system", "developer", "user", "assistant"}
# Records of tools only OpenAI's servers run: nothing a chat template can show.
SKIPPED_ITEMS = {"web_search_call", "file_search_call", "image_generation_call", "code_interpreter_call",
                 "mcp_list_tools", "mcp_call", "mcp_approval_request", "mcp_approval_response",
                 "tool_search_call", "tool_search_output"}
# Calls of (and results for) tools this proxy never offers.
REFUSED_ITEMS = {"custom_tool_call", "custom_tool_call_output", "local_shell_call", "local_shell_call_output",
                 "computer_call", "computer_call_output", "shell_call", "shell_call_output", "apply_patch_call",
                 "apply_patch_call_output"}
MEDIA_PARTS = {"input_image", "input_file", "input_audio", "image_url", "image", "file"}
FORCED_TOOL_TYPES = {"function", "custom", "mcp", "file_search", "web_search", "web_search_preview",
                     "computer_use_preview", "computer", "image_generation", "code_interpreter", "local_shell",
                     "shell", "apply_patch"}
STATELESS = ("this proxy is stateless and stores no responses or conversations: send the whole conversation "
             "in 'input' (with 'store': false)")


# -- the request ---------------------------------------------------------------------------------

def _kind(item: Any) -> str | None:
    """An input item's type (``message`` for a typeless item with a role); ``None`` when the
    item is no object or its type no string (its conversion then says so)."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else None


def _parts_text(content: Any, where: str, allowed: tuple[str, ...]) -> str:
    """A message's (or a tool output's) text: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad_request(f"'{where}' must be a string or an array of content parts", where)
    texts = []
    for j, part in enumerate(content):
        pwhere = f"{where}[{j}]"
        if not isinstance(part, dict):
            raise bad_request(f"'{pwhere}' must be an object", pwhere)
        kind = part.get("type")
        if not isinstance(kind, str):
            raise bad_request(f"'{pwhere}.type' must be a string", pwhere)
        if kind in allowed and kind != "refusal":
            text = part.get("text")
            if not isinstance(text, str):
                raise bad_request(f"'{pwhere}.text' must be a string", pwhere)
            texts.append(text)
        elif kind == "refusal" and "refusal" in allowed:
            refusal = part.get("refusal")
            if not isinstance(refusal, str):
                raise bad_request(f"'{pwhere}.refusal' must be a string", pwhere)
            texts.append(refusal)
        elif kind in MEDIA_PARTS:
            raise bad_request(f"'{pwhere}': {kind} content is not supported (text-only model)", pwhere)
        else:
            raise bad_request(f"'{pwhere}.type' {kind!r} is not a known content part type here", pwhere)
    return "".join(texts)


def _message_text(item: dict, where: str) -> tuple[str, str]:
    role = item.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise bad_request(f"'{where}.role' must be one of {sorted(ROLES)}", where)
    if "content" not in item or item["content"] is None:
        raise bad_request(f"'{where}.content' is required", where)
    allowed = ("output_text", "input_text", "refusal") if role == "assistant" else ("input_text", "output_text")
    return role, _parts_text(item["content"], f"{where}.content", allowed)


def _reasoning_text(item: dict, where: str) -> str:
    content = item.get("content")
    if content is not None:
        texts = []
        for j, part in enumerate(expect_list(content, f"{where}.content")):
            part = expect_dict(part, f"{where}.content[{j}]")
            if part.get("type") not in ("reasoning_text", "text") or not isinstance(part.get("text"), str):
                raise bad_request(f"'{where}.content[{j}]' must be a reasoning_text part with a string 'text'", where)
            texts.append(part["text"])
        if texts:
            return "\n\n".join(texts)
    summary = item.get("summary")
    texts = []
    for j, part in enumerate(expect_list(summary if summary is not None else [], f"{where}.summary")):
        part = expect_dict(part, f"{where}.summary[{j}]")
        if part.get("type") != "summary_text" or not isinstance(part.get("text"), str):
            raise bad_request(f"'{where}.summary[{j}]' must be a summary_text part with a string 'text'", where)
        texts.append(part["text"])
    encrypted = item.get("encrypted_content")
    if encrypted is not None and not isinstance(encrypted, str):
        raise bad_request(f"'{where}.encrypted_content' must be a string", where)
    return "\n\n".join(texts)


def _units(body: dict) -> list[dict]:
    """The conversation in convertible units, each of which becomes zero or more messages:
    first the system prompt (instructions + the leading system/developer messages), then an
    assistant turn per run of assistant-side items, then every other item on its own."""
    raw_input = body.get("input")
    if raw_input is None:
        raise bad_request("'input' is required", "input")
    if isinstance(raw_input, str):
        items: list = [{"type": "message", "role": "user", "content": raw_input}]
    else:
        items = expect_list(raw_input, "input")
    if not items:
        raise bad_request("'input' must not be empty", "input")
    i = 0
    while i < len(items) and _kind(items[i]) == "message" and items[i].get("role") in ("system", "developer"):
        i += 1
    units: list[dict] = [{"system": body.get("instructions"), "items": items[:i]}]
    names: dict[str, str] = {}
    turn: dict | None = None  # the assistant turn being gathered
    for at in range(i, len(items)):
        item = items[at]
        kind = _kind(item)
        assistant = kind in ("reasoning", "function_call") or (kind == "message" and item.get("role") == "assistant")
        if assistant:
            output = kind != "reasoning"
            if turn is None or (turn["out"] and kind != "function_call"):
                turn = {"at": at, "turn": [], "out": False}
                units.append(turn)
            turn["turn"].append(item)
            turn["out"] = turn["out"] or output
            if kind == "function_call" and isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str):
                names[item["call_id"]] = item["name"]
            continue
        if kind in SKIPPED_ITEMS:
            continue
        turn = None
        unit = {"at": at, "item": item}
        if kind == "function_call_output":
            unit["name"] = names.get(item.get("call_id")) if isinstance(item.get("call_id"), str) else None
        units.append(unit)
    return units


def _system(unit: dict) -> list[Message]:
    instructions = unit["system"]
    if instructions is not None and not isinstance(instructions, str):
        raise bad_request("'instructions' must be a string", "instructions")
    texts = [instructions] if instructions else []
    for j, item in enumerate(unit["items"]):
        texts.append(_message_text(item, f"input[{j}]")[1])
    if instructions is None and not unit["items"]:
        return []
    return [Message(role="system", content="\n\n".join(t for t in texts if t))]


def _assistant(unit: dict) -> Message:
    thinking: list[str] = []
    text: list[str] = []
    calls = []
    for j, item in enumerate(unit["turn"]):
        where = f"input[{unit['at'] + j}]"
        kind = _kind(item)
        if kind == "reasoning":
            value = _reasoning_text(item, where)
            if value:
                thinking.append(value)
        elif kind == "message":
            text.append(_message_text(item, where)[1])
        else:  # function_call
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise bad_request(f"'{where}.call_id' must be a non-empty string", where)
            arguments = item.get("arguments")
            if not isinstance(arguments, str):
                raise bad_request(f"'{where}.arguments' must be a JSON string", where)
            calls.append(make_tool_call(call_id, item.get("name"), arguments, where))
    if thinking:
        parts: list = [ThinkingPart(type="thinking", thinking="\n\n".join(thinking))]
        if "".join(text):
            parts.append(TextPart(type="text", text="".join(text)))
        message = Message(role="assistant", content=parts)
    else:
        message = Message(role="assistant", content="".join(text))
    if calls:
        message["tool_calls"] = calls
    return message


def _item(unit: dict) -> list[Message]:
    item, where = unit["item"], f"input[{unit['at']}]"
    if not isinstance(item, dict):
        raise bad_request(f"'{where}' must be an object", where)
    kind = _kind(item)
    if kind is None:
        raise bad_request(f"'{where}.type' must be a string", where)
    if kind == "message":
        role, text = _message_text(item, where)
        return [Message(role="system" if role in ("system", "developer") else "user", content=text)]
    if kind == "function_call_output":
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise bad_request(f"'{where}.call_id' must be a non-empty string", where)
        output = item.get("output")
        if output is None:
            raise bad_request(f"'{where}.output' is required", where)
        message = Message(role="tool", content=_parts_text(output, f"{where}.output", ("input_text", "output_text")),
                          tool_call_id=call_id)
        if unit.get("name"):
            message["name"] = unit["name"]
        return [message]
    if kind == "item_reference":
        raise bad_request(f"'{where}': item references are not supported: {STATELESS}", where)
    if kind in REFUSED_ITEMS:
        raise bad_request(f"'{where}': {kind} items are not supported: this proxy offers function tools only", where)
    raise bad_request(f"'{where}.type' {kind[:60]!r} is not a known input item type", where)


def _convert(unit: dict, _index: int) -> list[Message]:
    if "system" in unit:
        return _system(unit)
    if "turn" in unit:
        return [_assistant(unit)]
    return _item(unit)


def _tools(body: dict) -> tuple[list, list[dict]]:
    """``(specs, echo)``: the function tools, as the renderer takes them and as the answer echoes them."""
    specs, echo = [], []
    raw_tools = body.get("tools")
    for j, tool in enumerate(expect_list(raw_tools, "tools") if raw_tools is not None else []):
        where = f"tools[{j}]"
        tool = expect_dict(tool, where)
        kind = tool.get("type")
        if not isinstance(kind, str):
            raise bad_request(f"'{where}.type' must be a string", where)
        if kind != "function":
            continue  # web_search, file_search, custom…: not callable through a chat template
        if "name" not in tool and isinstance(tool.get("function"), dict):
            raise bad_request(f"'{where}': Responses function tools are flat: "
                              "{'type': 'function', 'name', 'description', 'parameters'}", where)
        strict = tool.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise bad_request(f"'{where}.strict' must be a boolean", where)
        spec = tool_spec(tool.get("name"), tool.get("description"), tool.get("parameters"), where)
        specs.append(spec)
        echo.append({"type": "function", "name": spec["name"], "description": tool.get("description"),
                     "parameters": spec["parameters"], "strict": strict if strict is not None else True})
    return specs, echo


def tool_choice(value: Any, tools: list) -> tuple[str, list]:
    """``(choice, tools to offer)`` for a Responses ``tool_choice``."""
    kind = tool_choice_kind(value, tools)
    if isinstance(kind, tuple):
        return kind
    if kind == "allowed_tools":
        mode = value.get("mode")
        if mode == "required":
            raise forced_tool_choice("tool_choice", "'allowed_tools' with mode 'required'")
        if mode != "auto":
            raise bad_request("'tool_choice.mode' must be 'auto' or 'required'", "tool_choice")
        names = []
        for j, tool in enumerate(expect_list(value.get("tools"), "tool_choice.tools")):
            tool = expect_dict(tool, f"tool_choice.tools[{j}]")
            if tool.get("type") == "function":
                names.append(tool.get("name"))
        return "auto", allowed_tools(tools, names, "tool_choice")
    if kind in FORCED_TOOL_TYPES:
        name = value.get("name")
        what = f"forcing the {kind} tool {name[:60]!r}" if isinstance(name, str) else f"forcing the {kind} tool"
        raise forced_tool_choice("tool_choice", what)
    raise bad_request("'tool_choice.type' must be 'function', 'allowed_tools' or a hosted tool type", "tool_choice")


def _opt_dict(body: dict, key: str) -> dict | None:
    value = body.get(key)
    return None if value is None else expect_dict(value, key)


def _text_config(body: dict) -> dict:
    text = _opt_dict(body, "text") or {}
    fmt = text.get("format")
    if fmt is not None:
        kind = expect_dict(fmt, "text.format").get("type")
        if kind != "text":
            raise bad_request(f"'text.format' type {str(kind)[:40]!r} is not supported by this proxy: the policy "
                              "samples freely (no constrained decoding); send {'type': 'text'}", "text.format")
    verbosity = text.get("verbosity")
    if verbosity is not None and not isinstance(verbosity, str):
        raise bad_request("'text.verbosity' must be a string", "text.verbosity")
    out: dict[str, Any] = {"format": {"type": "text"}}
    if verbosity is not None:
        out["verbosity"] = verbosity
    return out


def parse_request(body: Any, renderer: Renderer, cache: ConversionCache | None = None) -> ChatRequest:
    body = expect_dict(body, "body")
    if body.get("previous_response_id") is not None:
        raise bad_request(f"'previous_response_id' is not supported: {STATELESS}", "previous_response_id")
    if body.get("conversation") is not None:
        raise bad_request(f"'conversation' is not supported: {STATELESS}", "conversation")
    if opt_bool(body, "background"):
        raise bad_request("'background' responses are not supported: this proxy answers in the request", "background")
    if body.get("prompt") is not None:
        raise bad_request("stored prompt templates ('prompt') are not supported: send 'instructions' and 'input'",
                          "prompt")
    model = opt_str(body, "model") or "policy"
    units = _units(body)
    if cache is None:
        messages = [m for i, unit in enumerate(units) for m in _convert(unit, i)]
    else:
        messages = cache.messages(units, _convert)
    specs, echo_tools = _tools(body)
    choice, offered = tool_choice(body.get("tool_choice"), specs)
    include = body.get("include")
    if include is not None and not (isinstance(include, list) and all(isinstance(x, str) for x in include)):
        raise bad_request("'include' must be an array of strings", "include")
    truncation = body.get("truncation")
    if truncation is not None and truncation not in ("auto", "disabled"):
        raise bad_request("'truncation' must be 'auto' or 'disabled'", "truncation")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise bad_request("'parallel_tool_calls' must be a boolean", "parallel_tool_calls")
    store = body.get("store")
    if store is not None and not isinstance(store, bool):
        raise bad_request("'store' must be a boolean", "store")
    max_tokens = max_tokens_field(body, "max_output_tokens")
    instructions = body.get("instructions")
    extra = {
        "instructions": instructions,
        "metadata": _opt_dict(body, "metadata") or {},
        "parallel_tool_calls": True if parallel is None else parallel,
        "tool_choice": body.get("tool_choice") if body.get("tool_choice") is not None else "auto",
        "tools": echo_tools,
        "top_p": top_p_field(body),
        "max_output_tokens": max_tokens,
        "store": True if store is None else store,
        "reasoning": _opt_dict(body, "reasoning") or {"effort": None, "summary": None},
        "text": _text_config(body),
        "truncation": truncation or "disabled",
        "user": opt_str(body, "user"),
        "prompt_cache_key": opt_str(body, "prompt_cache_key"),
    }
    return ChatRequest(
        api="responses",
        model=model,
        messages=with_tools(renderer, messages, offered, cache),
        max_tokens=max_tokens,
        temperature=temperature_field(body),
        top_p=extra["top_p"],
        stream=opt_bool(body, "stream"),
        tool_choice=choice,
        extra=extra,
    )


# -- the answer ----------------------------------------------------------------------------------

def _usage(reply: ChatReply) -> dict[str, Any]:
    return {"input_tokens": reply.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.prompt_tokens + reply.output_tokens}


def _output(reply: ChatReply) -> list[dict[str, Any]]:
    status = "incomplete" if reply.finish == "length" else "completed"
    items: list[dict[str, Any]] = []
    if reply.thinking:
        items.append({"id": new_id("rs_"), "type": "reasoning",
                      "summary": [{"type": "summary_text", "text": reply.thinking}],
                      "content": [{"type": "reasoning_text", "text": reply.thinking}],
                      "encrypted_content": None, "status": status})
    if reply.text or not (reply.thinking or reply.tool_calls):
        items.append({"id": new_id("msg_"), "type": "message", "role": "assistant", "status": status,
                      "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}]})
    for call in reply.tool_calls:
        items.append({"id": new_id("fc_"), "type": "function_call", "call_id": call.id, "name": call.name,
                      "arguments": call.arguments, "status": "completed"})
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
            "id": self.id, "object": "response", "created_at": self.created_at, "status": status,
            "background": False, "error": None, "incomplete_details": None, "instructions": x["instructions"],
            "max_output_tokens": x["max_output_tokens"], "max_tool_calls": None, "model": self.chat.model,
            "output": [], "parallel_tool_calls": x["parallel_tool_calls"], "previous_response_id": None,
            "prompt_cache_key": x["prompt_cache_key"], "reasoning": x["reasoning"], "service_tier": "default",
            "store": x["store"], "temperature": self.temperature, "text": x["text"],
            "tool_choice": x["tool_choice"], "tools": x["tools"],
            "top_p": x["top_p"] if x["top_p"] is not None else 1.0,
            "truncation": x["truncation"], "usage": None, "user": x["user"], "metadata": x["metadata"],
        }

    def response(self, reply: ChatReply, output: list[dict[str, Any]] | None = None) -> dict[str, Any]:
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

    def stream_start(self) -> bytes:
        return (self.event("response.created", {"response": self.base("in_progress")})
                + self.event("response.in_progress", {"response": self.base("in_progress")}))

    def stream_events(self, reply: ChatReply) -> list[bytes]:
        output = _output(reply)
        out = []
        for index, item in enumerate(output):
            where = {"item_id": item["id"], "output_index": index}
            kind = item["type"]
            if kind == "reasoning":
                added = {**item, "summary": [], "content": [], "status": "in_progress"}
            elif kind == "message":
                added = {**item, "content": [], "status": "in_progress"}
            else:
                added = {**item, "arguments": "", "status": "in_progress"}
            out.append(self.event("response.output_item.added", {"output_index": index, "item": added}))
            if kind == "reasoning":
                text = item["summary"][0]["text"]
                part = {"type": "summary_text", "text": text}
                out.append(self.event("response.reasoning_summary_part.added",
                                      {**where, "summary_index": 0, "part": {**part, "text": ""}}))
                out.append(self.event("response.reasoning_summary_text.delta", {**where, "summary_index": 0,
                                                                                 "delta": text}))
                out.append(self.event("response.reasoning_summary_text.done", {**where, "summary_index": 0,
                                                                                "text": text}))
                out.append(self.event("response.reasoning_summary_part.done", {**where, "summary_index": 0,
                                                                                "part": part}))
                part = {"type": "reasoning_text", "text": text}
                out.append(self.event("response.content_part.added", {**where, "content_index": 0,
                                                                       "part": {**part, "text": ""}}))
                out.append(self.event("response.reasoning_text.delta", {**where, "content_index": 0, "delta": text}))
                out.append(self.event("response.reasoning_text.done", {**where, "content_index": 0, "text": text}))
                out.append(self.event("response.content_part.done", {**where, "content_index": 0, "part": part}))
            elif kind == "message":
                part = item["content"][0]
                out.append(self.event("response.content_part.added", {**where, "content_index": 0,
                                                                       "part": {**part, "text": ""}}))
                if part["text"]:
                    out.append(self.event("response.output_text.delta", {**where, "content_index": 0,
                                                                          "delta": part["text"], "logprobs": []}))
                out.append(self.event("response.output_text.done", {**where, "content_index": 0,
                                                                     "text": part["text"], "logprobs": []}))
                out.append(self.event("response.content_part.done", {**where, "content_index": 0, "part": part}))
            else:
                if item["arguments"]:
                    out.append(self.event("response.function_call_arguments.delta",
                                          {**where, "delta": item["arguments"]}))
                out.append(self.event("response.function_call_arguments.done",
                                      {**where, "name": item["name"], "arguments": item["arguments"]}))
            out.append(self.event("response.output_item.done", {"output_index": index, "item": item}))
        final = self.response(reply, output)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        out.append(self.event(kind, {"response": final}))
        return out

    def stream_error(self, error: ProxyError) -> bytes:
        """The end of a stream that failed: an ``error`` event, then ``response.failed``."""
        code = error_code(error)
        failed = self.base("failed")
        failed["error"] = {"code": code, "message": error.message}
        return (self.event("error", {"code": code, "message": error.message, "param": _param(error)})
                + self.event("response.failed", {"response": failed}))


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
    data = {"type": "error", "sequence_number": 0, "code": error_code(error), "message": error.message,
            "param": _param(error)}
    return b"event: error\ndata: " + json.dumps(data).encode() + b"\n\n"


KEEPALIVE = b": keep-alive\n\n"
