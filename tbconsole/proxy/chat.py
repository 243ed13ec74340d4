"""What the APIs translate to and from: a validated chat request in the cookbook's message
types, and the assistant reply parsed back from sampled tokens.

Validation helpers here raise ``ProxyError(400)`` with a message naming the field, so every
client mistake is a 4xx in the API's own shape, never a 500.

Rules shared by every API:

* ``tool_choice``: "auto" (the default) offers the declared tools; "none" renders the
  conversation *without* tool declarations (the model is not offered them) and returns any call
  the model writes anyway as text, one JSON object ``{"name", "arguments"}`` a line, so a client
  that ruled tools out never receives a call; forcing a call ("required", Anthropic's "any", a
  named tool) is refused with a 400 (``forced_tool_choice``): the policy samples freely and the
  proxy will not bend its tokens. OpenAI's ``allowed_tools`` with mode "auto" offers the listed
  subset of the tools.
* Client stop strings: a sample that stopped on one of them is answered with the text cut
  before the first occurrence of the matched string (as the APIs do; the captured tokens keep
  it), and ``ChatReply.stop_sequence`` names it (Anthropic's ``stop_reason: "stop_sequence"``).
"""

from __future__ import annotations

import json
import math
import secrets
from dataclasses import dataclass, field
from typing import Any

from tinker_cookbook.renderers.base import Message, Renderer, ToolCall, ToolSpec

try:
    import orjson
except ImportError:  # pragma: no cover
    orjson = None

from tbconsole.proxy.errors import ProxyError, bad_request

MAX_STOP_SEQUENCES = 16


@dataclass
class ChatRequest:
    """One model call, already in the renderer's terms."""

    api: str  # openai | anthropic | responses
    model: str
    messages: list[Message]
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False  # OpenAI stream_options.include_usage
    tool_choice: str = "auto"  # auto | none (forcing a call is refused while parsing)
    extra: dict[str, Any] = field(default_factory=dict)  # API-specific values the answer echoes


@dataclass
class ToolCallOut:
    id: str
    name: str
    arguments: str  # JSON text

    def input_object(self) -> dict[str, Any]:
        """Arguments as the JSON object Anthropic's ``tool_use.input`` must be."""
        try:
            value = json.loads(self.arguments) if self.arguments else {}
        except ValueError:
            return {"arguments": self.arguments}
        return value if isinstance(value, dict) else {"arguments": value}


@dataclass
class ChatReply:
    """The sampled turn, parsed by the renderer."""

    thinking: str
    text: str
    tool_calls: list[ToolCallOut]
    finish: str  # stop | length | tool_calls
    prompt_tokens: int
    output_tokens: int
    stop_sequence: str | None = None  # the client's stop string the sample stopped on


# -- validation helpers ------------------------------------------------------------------------

def expect_dict(value: Any, name: str) -> dict:
    if not isinstance(value, dict):
        raise bad_request(f"'{name}' must be an object", name)
    return value


def expect_list(value: Any, name: str) -> list:
    if not isinstance(value, list):
        raise bad_request(f"'{name}' must be an array", name)
    return value


def expect_str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise bad_request(f"'{name}' must be a string", name)
    return value


def opt_str(body: dict, key: str, name: str | None = None) -> str | None:
    value = body.get(key)
    return None if value is None else expect_str(value, name or key)


def opt_bool(body: dict, key: str) -> bool:
    value = body.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_request(f"'{key}' must be a boolean", key)
    return value


def opt_int(body: dict, key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer() and math.isfinite(value):
            return int(value)
        raise bad_request(f"'{key}' must be an integer", key)
    return value


def opt_number(body: dict, key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_request(f"'{key}' must be a number", key)
    value = float(value)
    if not math.isfinite(value):
        raise bad_request(f"'{key}' must be finite", key)
    return value


def max_tokens_field(body: dict, *keys: str) -> int | None:
    for key in keys:
        value = opt_int(body, key)
        if value is not None:
            if value <= 0:
                raise bad_request(f"'{key}' must be greater than 0", key)
            return value
    return None


def temperature_field(body: dict) -> float | None:
    value = opt_number(body, "temperature")
    if value is not None and not 0 <= value <= 2:
        raise bad_request("'temperature' must be between 0 and 2", "temperature")
    return value


def top_p_field(body: dict) -> float | None:
    value = opt_number(body, "top_p")
    if value is not None and not 0 < value <= 1:
        raise bad_request("'top_p' must be in (0, 1]", "top_p")
    return value


def top_k_field(body: dict) -> int | None:
    value = opt_int(body, "top_k")
    if value is None:
        return None
    if value < -1:
        raise bad_request("'top_k' must be -1, 0 or positive", "top_k")
    return -1 if value <= 0 else value


def seed_field(body: dict) -> int | None:
    value = opt_int(body, "seed")
    if value is not None and not -(2**63) <= value < 2**63:
        raise bad_request("'seed' is out of range", "seed")
    return value


def stop_field(value: Any, name: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise bad_request(f"'{name}' must be a string or an array of strings", name)
    if len(value) > MAX_STOP_SEQUENCES:
        raise bad_request(f"'{name}' may hold at most {MAX_STOP_SEQUENCES} sequences", name)
    if any(not v for v in value):
        raise bad_request(f"'{name}' sequences must not be empty", name)
    try:
        for v in value:
            v.encode("utf-8")
    except UnicodeEncodeError:
        raise bad_request(f"'{name}' sequences must be valid Unicode text", name) from None
    return list(dict.fromkeys(value))


def tool_spec(name: Any, description: Any, parameters: Any, where: str) -> ToolSpec:
    if not isinstance(name, str) or not name:
        raise bad_request(f"'{where}.name' must be a non-empty string", where)
    if description is not None and not isinstance(description, str):
        raise bad_request(f"'{where}.description' must be a string", where)
    if parameters is not None and not isinstance(parameters, dict):
        raise bad_request(f"'{where}' parameters must be an object", where)
    return ToolSpec(name=name, description=description or "",
                    parameters=parameters if parameters is not None else {"type": "object", "properties": {}})


def make_tool_call(call_id: Any, name: Any, arguments: Any, where: str) -> ToolCall:
    if call_id is not None and not isinstance(call_id, str):
        raise bad_request(f"'{where}.id' must be a string", where)
    if not isinstance(name, str) or not name:
        raise bad_request(f"'{where}' needs a function name", where)
    if arguments is None:
        arguments = "{}"
    elif isinstance(arguments, dict):
        arguments = json.dumps(arguments, ensure_ascii=False)
    elif not isinstance(arguments, str):
        raise bad_request(f"'{where}' arguments must be a JSON string", where)
    return ToolCall(id=call_id, function=ToolCall.FunctionBody(name=name, arguments=arguments))


def forced_tool_choice(param: str, what: str) -> ProxyError:
    """The refusal for a ``tool_choice`` that would force a call."""
    return bad_request(f"'{param}' {what} is not supported by this proxy: the policy samples freely, so it "
                       "cannot be made to call a tool; send 'auto' (or 'none' to offer no tools)", param)


def tool_choice_kind(value: Any, tools: list[ToolSpec]) -> tuple[str, list[ToolSpec]] | str:
    """What both OpenAI APIs share of ``tool_choice``: ``(choice, tools to offer)`` for "auto"
    and "none", a 400 for "required" (the policy samples freely) or a non-object, else the
    object's ``type`` for the caller's own shapes."""
    if value is None or value == "auto":
        return "auto", tools
    if value == "none":
        return "none", []
    if value == "required":
        raise forced_tool_choice("tool_choice", "'required'")
    if not isinstance(value, dict):
        raise bad_request("'tool_choice' must be 'auto', 'none', 'required' or an object", "tool_choice")
    kind = value.get("type")
    if not isinstance(kind, str):
        raise bad_request("'tool_choice.type' must be a string", "tool_choice")
    return kind


def allowed_tools(tools: list[ToolSpec], names: Any, param: str) -> list[ToolSpec]:
    """``tools`` restricted to ``names`` (a list of tool names, each declared)."""
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise bad_request(f"'{param}' must list the allowed tools by name", param)
    declared = {t["name"] for t in tools}
    unknown = [n for n in names if n not in declared]
    if unknown:
        raise bad_request(f"'{param}' names tools that are not declared: {unknown[:5]}", param)
    keep = set(names)
    return [t for t in tools if t["name"] in keep]


def json_bytes(value: Any) -> bytes:
    """JSON as UTF-8 text, for SSE events. A lone surrogate echoed from the request (valid in
    JSON, not encodable as UTF-8), e.g. in ``model``, is written as its ``\\u`` escape instead."""
    try:
        return json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value).encode()


def _fingerprint(raw: Any) -> bytes:
    """A raw JSON message as canonical-enough bytes: equal bytes, equal message."""
    if orjson is not None:
        try:
            return orjson.dumps(raw)
        except TypeError:  # a lone surrogate, an integer beyond 64 bits
            pass
    return json.dumps(raw, separators=(",", ":")).encode("utf-8", "surrogatepass")


class ConversionCache:
    """Per trial: the previous request's messages (as bytes) and what each converted to.

    An agent resends its whole history on every call; converting (and validating) only the
    messages that differ from last time's keeps the cost of a call independent of the history's
    length, and hands the renderer the very same message objects, which it recognises by
    identity. Messages are compared as serialized bytes, which the garbage collector does not
    track (keeping the raw dicts instead makes every request promote hundreds of containers into
    the oldest generation, and full collections in a process that imported torch take ~100 ms).
    A message equal to one that was valid before is valid now."""

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.converted: list[list[Message]] = []
        self.prefix_key: Any = None
        self.prefix: list[Message] = []

    def messages(self, raws: list[Any], convert) -> list[Message]:
        keys = [_fingerprint(raw) for raw in raws]
        old_keys, old_converted = self.keys, self.converted
        same = len(old_keys)
        if not (same <= len(keys) and keys[:same] == old_keys):  # the usual case, in one C compare
            same = 0
            limit = min(len(keys), len(old_keys))
            while same < limit and keys[same] == old_keys[same]:
                same += 1
        converted = old_converted[:same]
        for i in range(same, len(raws)):
            converted.append(convert(raws[i], i))
        self.keys, self.converted = keys, converted
        return [message for group in converted for message in group]


def with_tools(renderer: Renderer, messages: list[Message], tools: list[ToolSpec],
               cache: ConversionCache | None = None) -> list[Message]:
    """Put the tool declarations where the renderer wants them: its tool prefix, carrying the
    leading system prompt (if any) along."""
    if not tools:
        return messages
    system = ""
    rest = messages
    if messages and messages[0]["role"] == "system" and isinstance(messages[0]["content"], str):
        system = messages[0]["content"]
        rest = messages[1:]
    key = (system, tools)
    if cache is not None and cache.prefix_key == key:
        prefix = cache.prefix
    else:
        try:
            prefix = list(renderer.create_conversation_prefix_with_tools(tools, system))
        except NotImplementedError as exc:
            raise bad_request("this model's renderer does not support tools", "tools") from exc
        except Exception as exc:  # noqa: BLE001 - a schema the renderer's template cannot write
            raise bad_request(f"the tool declarations cannot be rendered: {type(exc).__name__}: {str(exc)[:200]}",
                              "tools") from None
        if cache is not None:
            cache.prefix_key, cache.prefix = key, prefix
    return prefix + list(rest)


# -- the reply ---------------------------------------------------------------------------------

def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def _end_token(renderer: Renderer) -> int | None:
    stops = renderer.get_stop_sequences()
    if stops and all(isinstance(s, int) for s in stops):
        return int(stops[0])
    return None


def parse_reply(renderer: Renderer, tokens: list[int], stop_reason: str, prompt_tokens: int,
                tool_id_prefix: str, *, stops: list[str] | tuple = (), tools_offered: bool = True) -> ChatReply:
    """Sampled tokens → reply, with the renderer's own parser.

    A turn that did not end on the renderer's end-of-message token (a length stop, or a
    request stop string) is parsed as if it had, so the client still gets thinking, text and any
    complete tool calls split out; ``finish`` says ``length`` for a length stop. ``stops``: the
    client's stop strings; a sample that stopped on one is cut before it (``stop_sequence``
    names it). ``tools_offered=False`` (``tool_choice`` "none"): calls come back as text. Raises
    whatever the renderer raises when the tokens cannot be parsed at all."""
    end = _end_token(renderer)
    parse_tokens = list(tokens)
    if end is not None and end not in parse_tokens:
        parse_tokens.append(end)
    message, _termination = renderer.parse_response(parse_tokens)
    thinking: list[str] = []
    text: list[str] = []
    content = message.get("content", "")
    if isinstance(content, str):
        text.append(content)
    else:
        for part in content:
            if part["type"] == "thinking":
                thinking.append(part["thinking"])
            elif part["type"] == "text":
                text.append(part["text"])
    for unparsed in message.get("unparsed_tool_calls", []) or []:
        # Shown to the agent as written: its own format error handling is the training signal.
        text.append(unparsed.raw_text)
    calls = [
        ToolCallOut(id=tc.id or new_id(tool_id_prefix), name=tc.function.name, arguments=tc.function.arguments)
        for tc in message.get("tool_calls", []) or []
    ]
    if calls and not tools_offered:
        # The model was not offered tools but wrote a call anyway: the client ruled calls out.
        written = "\n".join(json.dumps({"name": c.name, "arguments": c.arguments}, ensure_ascii=False)
                            for c in calls)
        text.append(("\n" if "".join(text).strip() else "") + written)
        calls = []
    reply_thinking, reply_text = "".join(thinking), "".join(text)
    matched = None
    if stops and stop_reason != "length" and (end is None or end not in tokens):
        matched = matched_stop(renderer.tokenizer.decode(list(tokens)), stops, _renderer_stop_strings(renderer))
        if matched is not None:
            if matched in reply_thinking and matched not in reply_text:
                reply_thinking = reply_thinking[: reply_thinking.index(matched)]
                reply_text, calls = "", []
            elif matched in reply_text:
                reply_text = reply_text[: reply_text.index(matched)]
    if stop_reason == "length":
        finish = "length"
    elif calls:
        finish = "tool_calls"
    else:
        finish = "stop"
    return ChatReply(thinking=reply_thinking, text=reply_text, tool_calls=calls, finish=finish,
                     prompt_tokens=prompt_tokens, output_tokens=len(tokens),
                     stop_sequence=matched if finish == "stop" else None)


def _renderer_stop_strings(renderer: Renderer) -> list[str]:
    out = []
    for stop in renderer.get_stop_sequences():
        if isinstance(stop, str):
            out.append(stop)
        else:
            try:
                out.append(renderer.tokenizer.decode([stop]))
            except Exception:  # noqa: BLE001 - a token the tokenizer cannot show: no string to match
                continue
    return [s for s in out if s]


def matched_stop(decoded: str, stops: list[str] | tuple, renderer_stops: list[str]) -> str | None:
    """Which of the client's ``stops`` ended ``decoded`` (the sampled text): the stop string whose
    first occurrence ends earliest (the sampler halts as soon as one appears), or ``None`` when
    that is one of the renderer's own (the model ended its turn) or nothing matches."""
    best: tuple[tuple[int, int], str] | None = None
    for stop in (*renderer_stops, *stops):
        at = decoded.find(stop)
        if at >= 0:
            key = (at + len(stop), at)
            if best is None or key < best[0]:
                best = (key, stop)
    if best is None or best[1] in renderer_stops:
        return None
    return best[1]
