"""The Responses API's ``input`` items → the renderer's messages (see ``responses_input``).

Consecutive assistant-side items (reasoning, one message, its function calls) make one assistant
turn, and the leading system/developer messages join the instructions in one system prompt:
``units`` groups the items that way, and ``convert`` turns one unit into messages (through the
trial's ``ConversionCache``, so only new units are validated and converted).
"""

from __future__ import annotations

from typing import Annotated, Any

from tinker_cookbook.renderers.base import Message, TextPart, ThinkingPart

from tbconsole.proxy.errors import bad_request
from tbconsole.proxy.tools import tool_call
from tbconsole.proxy.validation import (
    JsonText,
    Name,
    Present,
    Refusal,
    Text,
    Typed,
    WireModel,
    literal,
    one_of,
    parse,
    string_or_array,
)

ROLES = ("system", "developer", "user", "assistant")
# Records of tools only OpenAI's servers run: nothing a chat template can show.
SKIPPED_ITEMS = {
    "web_search_call",
    "file_search_call",
    "image_generation_call",
    "code_interpreter_call",
    "mcp_list_tools",
    "mcp_call",
    "mcp_approval_request",
    "mcp_approval_response",
    "tool_search_call",
    "tool_search_output",
}
# Calls of (and results for) tools this proxy never offers.
REFUSED_ITEMS = {
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "computer_call",
    "computer_call_output",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
}
MEDIA_PARTS = {"input_image", "input_file", "input_audio", "image_url", "image", "file"}
STATELESS = (
    "this proxy is stateless and stores no responses or conversations: send the whole conversation "
    "in 'input' (with 'store': false)"
)
Parts = Annotated[Any, Present, string_or_array("content parts")]


class _Message(WireModel):
    role: Annotated[Any, one_of(*ROLES)]
    content: Parts


class _ReasoningText(WireModel):
    type: Annotated[Any, literal("reasoning_text", "text")]
    text: str


class _SummaryText(WireModel):
    type: Annotated[Any, literal("summary_text")]
    text: str


class _Reasoning(WireModel):
    content: list[_ReasoningText] | None = None
    summary: list[_SummaryText] | None = None
    encrypted_content: str | None = None  # never set by this proxy; its text travels in the clear

    def text(self) -> str:
        """The reasoning text, else the summary's."""
        texts = [part.text for part in self.content or []] or [part.text for part in self.summary or []]
        return "\n\n".join(texts)


class _FunctionCall(WireModel):
    call_id: Name
    name: Name
    arguments: JsonText


class _FunctionCallOutput(WireModel):
    call_id: Name
    output: Parts


def _kind(item: Any) -> str | None:
    """An input item's type (``message`` for a typeless item with a role); ``None`` when the
    item is no object or its type no string."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"
    return kind if isinstance(kind, str) else None


def _parts_text(content: str | list, where: str, allowed: tuple[str, ...]) -> str:
    """A message's (or a tool output's) text: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(content):
        pwhere = f"{where}[{j}]"
        kind = parse(Typed, part, pwhere).type
        if kind in allowed and kind != "refusal":
            texts.append(parse(Text, part, pwhere).text)
        elif kind == "refusal" and "refusal" in allowed:
            texts.append(parse(Refusal, part, pwhere).refusal)
        elif kind in MEDIA_PARTS:
            raise bad_request(f"'{pwhere}': {kind} content is not supported (text-only model)", pwhere)
        else:
            raise bad_request(f"'{pwhere}.type' {kind!r} is not a known content part type here", pwhere)
    return "".join(texts)


def _message_text(item: Any, where: str) -> tuple[str, str]:
    message = parse(_Message, item, where)
    allowed = ("output_text", "input_text", "refusal") if message.role == "assistant" else ("input_text", "output_text")
    return message.role, _parts_text(message.content, f"{where}.content", allowed)


def units(items: list[Any], instructions: str | None) -> list[dict]:
    """The conversation in convertible units, each of which becomes zero or more messages:
    first the system prompt (instructions + the leading system/developer messages), then an
    assistant turn per run of assistant-side items, then every other item on its own."""
    i = 0
    while i < len(items) and _kind(items[i]) == "message" and items[i].get("role") in ("system", "developer"):
        i += 1
    units: list[dict] = [{"system": instructions, "items": items[:i]}]
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
            value = parse(_Reasoning, item, where).text()
            if value:
                thinking.append(value)
        elif kind == "message":
            text.append(_message_text(item, where)[1])
        else:
            call = parse(_FunctionCall, item, where)
            calls.append(tool_call(call.call_id, call.name, call.arguments))
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
    kind = _kind(item) or parse(Typed, item, where).type  # the parse says what is wrong with it
    if kind == "message":
        role, text = _message_text(item, where)
        return [Message(role="system" if role in ("system", "developer") else "user", content=text)]
    if kind == "function_call_output":
        result = parse(_FunctionCallOutput, item, where)
        message = Message(
            role="tool",
            content=_parts_text(result.output, f"{where}.output", ("input_text", "output_text")),
            tool_call_id=result.call_id,
        )
        if unit.get("name"):
            message["name"] = unit["name"]
        return [message]
    if kind == "item_reference":
        raise bad_request(f"'{where}': item references are not supported: {STATELESS}", where)
    if kind in REFUSED_ITEMS:
        raise bad_request(f"'{where}': {kind} items are not supported: this proxy offers function tools only", where)
    raise bad_request(f"'{where}.type' {kind[:60]!r} is not a known input item type", where)


def convert(unit: dict, _index: int) -> list[Message]:
    if "system" in unit:
        return _system(unit)
    if "turn" in unit:
        return [_assistant(unit)]
    return _item(unit)
