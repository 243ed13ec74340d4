"""Shared helpers for the proxy tests: replies, a proxy harness, and a proxy on its own thread
(for synchronous clients such as litellm and for hypothesis tests)."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinker_cookbook.renderers.base import Message, ToolCall

from tbconsole.proxy import CaptureProxy
from tbconsole.proxy.scripted import ScriptedSampler
from tbconsole.record.events import Event

BASH_TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}
BASH_SPEC = {"name": "bash", "description": "Execute a bash command", "parameters": BASH_TOOL["function"]["parameters"]}
ANTHROPIC_BASH = {
    "name": "bash",
    "description": "Execute a bash command",
    "input_schema": BASH_TOOL["function"]["parameters"],
}


def text_reply(text: str, thinking: str | None = None) -> Message:
    if thinking:
        return Message(
            role="assistant", content=[{"type": "thinking", "thinking": thinking}, {"type": "text", "text": text}]
        )
    return Message(role="assistant", content=text)


def tool_reply(command: str, thinking: str | None = None, text: str = "", name: str = "bash") -> Message:
    message = text_reply(text, thinking)
    arguments = json.dumps({"command": command})
    message["tool_calls"] = [ToolCall(function=ToolCall.FunctionBody(name=name, arguments=arguments))]
    return message


@dataclass
class Harness:
    proxy: CaptureProxy
    sampler: ScriptedSampler
    events: list[Event] = field(default_factory=list)

    def kinds(self, kind: str) -> list[Event]:
        return [e for e in self.events if e.kind == kind]


def make_harness(renderer, capture_dir: Path, sampler: ScriptedSampler | None = None, **kwargs: Any) -> Harness:
    sampler = sampler or ScriptedSampler(renderer, default=text_reply("ok"))
    events: list[Event] = []
    proxy = CaptureProxy(
        renderer=renderer,
        sampler=sampler,
        default_max_tokens=kwargs.pop("default_max_tokens", 512),
        capture_dir=capture_dir,
        publish=events.append,
        **kwargs,
    )
    return Harness(proxy, sampler, events)


class ThreadedProxy:
    """A proxy served from its own event loop on a background thread."""

    def __init__(self, harness: Harness):
        self.harness = harness
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def call(self, fn, *args, **kwargs):
        async def run():
            return fn(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def __enter__(self) -> ThreadedProxy:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.harness.proxy.start(), self.loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.harness.proxy.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def stopped_on_string(renderer, text: str):
    """A sample that stopped on a stop string: ``text``'s reply tokens without the end-of-message
    token (the sampler halts as soon as the string appears, keeping the tokens that hold it)."""
    from tbconsole.proxy.scripted import Scripted, reply_tokens

    tokens = reply_tokens(renderer, text_reply(text))
    end = renderer.get_stop_sequences()[0]
    return Scripted(tokens=tokens[: tokens.index(end)], stop_reason="stop")


def json_slots(value, out=None):
    """Every (container, key) place in a JSON value, depth first: where a fuzzer puts a bad value."""
    out = [] if out is None else out
    if isinstance(value, dict):
        for key, item in value.items():
            out.append((value, key))
            json_slots(item, out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.append((value, i))
            json_slots(item, out)
    return out


def message_pieces(renderer, messages: list[Message]) -> tuple[list[int], list[list[int]], list[int]]:
    """A conversation as the renderer's own ``build_generation_prompt`` lays it out, message by
    message (the oracle for token continuity: no incremental renderer involved): bos tokens, each
    message's tokens, the generation suffix."""
    from tinker_cookbook.renderers.base import RenderContext

    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    turn_start = renderer._last_assistant_turn_start_index(messages)
    pieces = []
    for idx, message in enumerate(messages):
        ctx = RenderContext(
            idx=idx,
            is_last=idx == len(messages) - 1,
            prev_message=messages[idx - 1] if idx else None,
            next_message=messages[idx + 1] if idx + 1 < len(messages) else None,
            last_user_index=last_user,
            in_last_assistant_turn=idx >= turn_start,
        )
        out = renderer.render_message(message, ctx)
        tokens = list(out.header.tokens) if out.header is not None else []
        for chunk in out.output:
            tokens += list(chunk.tokens)
        pieces.append(tokens)
    suffix_ctx = RenderContext(
        idx=len(messages),
        is_last=True,
        prev_message=messages[-1] if messages else None,
        last_user_index=last_user,
        in_last_assistant_turn=True,
    )
    return list(renderer._bos_tokens), pieces, list(renderer._get_generation_suffix("assistant", suffix_ctx))


def spliced_reference(
    renderer, messages: list[Message], sampled: dict[int, list[int]], kept: dict[int, list[int]] | None = None
) -> list[int]:
    """What token continuity must send for ``messages``: the renderer's prompt with each echoed
    reply (message index → the tokens sampled for it) replaced by the generation suffix its turn
    was prompted with, the sampled tokens and the end-of-turn tokens of the reply's history form
    that the sample did not produce; ``kept``: other replies' tokens as an earlier prompt held them."""
    bos, pieces, suffix = message_pieces(renderer, messages)
    stops = set(renderer.get_stop_sequences())
    out = list(bos)
    for idx, piece in enumerate(pieces):
        if kept and idx in kept:
            out += kept[idx]
            continue
        if idx not in sampled:
            out += piece
            continue
        output = sampled[idx]
        ends = max(i for i, t in enumerate(piece) if t in stops)
        tail = piece[ends + 1 :] if output and output[-1] in stops else piece[ends:]
        out += message_pieces(renderer, messages[:idx])[2] + output + tail
    return out + suffix


# SDK clients the proxy tests open on a harness's credentials; tests/proxy/conftest.py closes them
# after each test (an unclosed client's connection pool outlives its event loop).
_OPEN_CLIENTS: list = []


def openai_client(cred):
    """An ``openai.AsyncOpenAI`` on the proxy's OpenAI URL, without the SDK's own retries."""
    import openai

    api = openai.AsyncOpenAI(base_url=cred.openai_base_url, api_key=cred.api_key, max_retries=0)
    _OPEN_CLIENTS.append(api)
    return api


def anthropic_client(cred):
    """An ``anthropic.AsyncAnthropic`` on the proxy's Anthropic URL, without the SDK's own retries."""
    import anthropic

    api = anthropic.AsyncAnthropic(base_url=cred.anthropic_base_url, api_key=cred.api_key, max_retries=0)
    _OPEN_CLIENTS.append(api)
    return api


async def close_clients() -> None:
    while _OPEN_CLIENTS:
        await _OPEN_CLIENTS.pop().close()
