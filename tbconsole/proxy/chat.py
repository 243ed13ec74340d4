"""What the APIs translate to and from: a chat request in the cookbook's message types and the
reply parsed back from sampled tokens (``reply``), plus what every request converter shares:
``ConversionCache`` (convert only the messages that changed) and ``with_tools``.

Rules every API follows are in ``tools`` (``tool_choice``) and ``reply`` (client stop strings).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from tinker_cookbook.renderers.base import Message, Renderer, ToolSpec

from tbconsole.proxy.errors import bad_request


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


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def json_bytes(value: Any) -> bytes:
    """JSON as UTF-8 text, for SSE events. A lone surrogate echoed from the request (valid in
    JSON, not encodable as UTF-8), e.g. in ``model``, is written as its ``\\u`` escape instead."""
    try:
        return json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value).encode()


def _fingerprint(raw: Any) -> bytes:
    """A raw JSON message as canonical-enough bytes: equal bytes, equal message."""
    try:
        return orjson.dumps(raw)
    except TypeError:  # a lone surrogate, an integer beyond 64 bits
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

    def messages(self, raws: list[Any], convert: Callable[[Any, int], list[Message]]) -> list[Message]:
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


def convert_all(
    raws: list[Any], convert: Callable[[Any, int], list[Message]], cache: ConversionCache | None
) -> list[Message]:
    """Every raw message converted: through the trial's cache when there is one."""
    if cache is None:
        return [message for i, raw in enumerate(raws) for message in convert(raw, i)]
    return cache.messages(raws, convert)


def with_tools(
    renderer: Renderer, messages: list[Message], tools: list[ToolSpec], cache: ConversionCache | None = None
) -> list[Message]:
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
            raise bad_request(
                f"the tool declarations cannot be rendered: {type(exc).__name__}: {str(exc)[:200]}", "tools"
            ) from None
        if cache is not None:
            cache.prefix_key, cache.prefix = key, prefix
    return prefix + list(rest)
