"""Token continuity: a trial's next prompt holds the tokens the policy sampled, so that its turns
train as one datum.

Why: the cookbook merges a trial's turns into one training datum only when each prompt extends
the previous prompt + sampled tokens exactly (``trajectory_to_data``); otherwise every turn is a
datum of its own carrying its whole prompt again, and the trained tokens grow with the square of
the turns (a 200-turn trial trains ~100× its final context). Rendering each request from the
agent's messages breaks the extension twice over: the renderer's history form of a reply is not
what was sampled (Qwen3.x drops earlier thinking; the generation suffix opens a thinking block
that the history form lacks), and the agent echoes its reply in its own form (reasoning dropped,
tool-call JSON re-serialised, whitespace trimmed).

With continuity on (``harbor.token_continuity``, the default), the prompt of a request that
continues an earlier request of the trial — the same messages, then the reply the proxy sampled
for it (echoed in any form), then new messages — is, exactly:

    the renderer's own prompt for the conversation (``build_generation_prompt``), with each
    echoed reply's tokens replaced by the tokens of the turn that sampled it: that turn's
    generation suffix (e.g. ``<|im_start|>assistant\\n<think>\\n``), the sampled tokens, and the
    end-of-turn tokens the renderer writes after a reply that the sample stopped before
    (``<|im_end|>`` after a length or stop-string stop, then the renderer's ``\\n``).

So the policy sees its own earlier tokens, thinking included: the semantics of the cookbook's
``*_preserve_thinking`` renderers, for any renderer, and whatever the agent does to its echo.
An assistant message the proxy did not sample (history the agent wrote itself) keeps the tokens
it had in the first prompt that held it. Every other token is the renderer's. The prompt then
extends the earlier prompt + sampled tokens (checked, token by token), and the cookbook merges
the turns.

A request that does not continue an earlier one is rendered by the renderer alone and starts a
new datum; ``NewDatum`` says why (the agent rewrote its history, changed its echo, repeated a
request…), and the capture line records it. The last few conversations of a trial are
remembered (``HEADS``), so an agent's side requests (Claude Code's title and summary calls) do
not break its main conversation's chain. With continuity off, prompts are the renderer's own,
unchanged; a turn then still continues an earlier one when the renderer's form happens to extend.

``peek`` is ``splice`` that changes nothing of the trial (Anthropic's ``count_tokens``): every
token count the proxy gives is that of the prompt a request samples, or would sample, from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tinker_cookbook.renderers.base import Message

from tbconsole.proxy.chat import ChatReply
from tbconsole.proxy.render import IncrementalRenderer
from tbconsole.record.enums import NewDatum

HEADS = 4  # conversations remembered per trial: the main one and a few side requests


@dataclass
class _Head:
    """The end of one conversation of a trial: its last captured request and what was sampled."""

    messages: list[Message]
    prompt: list[int]  # the prompt sampled from (spliced)
    suffix: tuple[int, ...]  # its generation suffix: the opening of the sampled reply
    echoes: dict[int, tuple[int, ...]]  # message index → the tokens kept for that reply (sampled, or as first shown)
    turn: int  # the captured turn
    output: tuple[int, ...]
    stopped: bool  # the sample ended on one of the renderer's end-of-message tokens
    reply: ChatReply


@dataclass
class Splice:
    """One request's prompt and where it came from; ``commit`` it once its turn is captured."""

    prompt: list[int]
    continues: int | None = None  # the turn whose prompt + sampled tokens this prompt extends
    new_datum: NewDatum | None = None  # why it continues none (None on a trial's first turn)
    echoes: dict[int, tuple[int, ...]] = field(default_factory=dict)
    suffix: tuple[int, ...] = ()
    replaces: _Head | None = None  # the conversation this request carries on
    shared: int | None = None  # leading tokens known to equal the previous captured prompt's


class Continuity:
    """Per trial: the prompt of each request (``splice``) and what was sampled (``commit``).
    Not thread-safe: one request of a trial at a time (``Trial.lock``)."""

    def __init__(self, renderer: IncrementalRenderer, *, enabled: bool):
        self.renderer = renderer
        stops = renderer.renderer.get_stop_sequences()
        self._stops = frozenset(int(s) for s in stops) if stops and all(isinstance(s, int) for s in stops) else None
        self.enabled = enabled
        self.usable = enabled and renderer.incremental and self._stops is not None
        self._heads: list[_Head] = []  # most recent last
        self._last: tuple[int, list[int], tuple[int, ...]] | None = None  # (turn, prompt, output) captured last

    def splice(self, messages: list[Message]) -> Splice:
        """The prompt for ``messages`` (renders them: call on the render thread). The trial's
        renderer keeps this render for the next; nothing else changes until ``commit``."""
        rendered = self.renderer.render(messages)
        return self._splice(messages, rendered, self.renderer.message_offsets)

    def peek(self, messages: list[Message]) -> Splice:
        """``splice(messages)``'s prompt, changing nothing of the trial: not its renderer's kept
        renders, not its conversations (Anthropic's ``count_tokens``: the length of the prompt
        a ``create`` of the same body would sample from now)."""
        return self._splice(messages, *self.renderer.peek(messages))

    def _splice(self, messages: list[Message], rendered: list[int], offsets: list[int] | None) -> Splice:
        """The prompt for ``messages`` from their render and its per-message offsets. Reads the
        trial's conversations, never changes them."""
        if not self.usable:
            return self._unspliced(rendered)
        assert offsets is not None  # usable: the renderer renders per message
        suffix = tuple(rendered[offsets[-1] :])
        head, why = self._match(messages)
        if head is None:
            return Splice(rendered, new_datum=why, echoes=_frozen(messages, rendered, offsets, {}), suffix=suffix)
        if why is NewDatum.REPEATED:  # the same conversation: the same prompt as its turn had
            return Splice(
                list(head.prompt), new_datum=why, echoes=head.echoes, suffix=head.suffix, replaces=head, shared=None
            )
        echo_at = len(head.messages)
        echoes = dict(head.echoes)
        echoes[echo_at] = (
            head.suffix + head.output + self._end_of_turn(rendered[offsets[echo_at] : offsets[echo_at + 1]], head)
        )
        prompt = _with_echoes(rendered, offsets, echoes)
        echoes = _frozen(messages, rendered, offsets, echoes)
        base = len(head.prompt)
        if prompt[: base + len(head.output)] == head.prompt + list(head.output):
            continues, new = head.turn, None
        else:  # an earlier message's tokens changed with the conversation around it
            continues, new = None, NewDatum.CONTEXT_CHANGED
        shared = base if continues is not None and self._last is not None and self._last[0] == head.turn else None
        return Splice(prompt, continues, new, echoes, suffix, head, shared)

    def commit(
        self, splice: Splice, messages: list[Message], turn: int, output: list[int], reply: ChatReply | None
    ) -> None:
        """``turn`` was captured: its conversation is now the one to continue."""
        out = tuple(output)
        self._last = (turn, splice.prompt, out)
        if not self.usable or reply is None:
            # A sample the renderer could not parse was answered with an error, so there is no
            # reply to echo: the agent's retry carries on the conversation as it was.
            return
        if splice.replaces is not None and splice.replaces in self._heads:
            self._heads.remove(splice.replaces)
        stopped = bool(out) and out[-1] in (self._stops or ())
        self._heads.append(
            _Head(list(messages), splice.prompt, splice.suffix, splice.echoes, turn, out, stopped, reply)
        )
        del self._heads[:-HEADS]

    # -- matching ----------------------------------------------------------------------------------

    def _match(self, messages: list[Message]) -> tuple[_Head | None, NewDatum | None]:
        """The conversation ``messages`` carries on, or why there is none."""
        if not self._heads:
            return None, (NewDatum.HISTORY_REWRITTEN if self._last is not None else None)
        why = NewDatum.HISTORY_REWRITTEN
        for head in reversed(self._heads):
            n = len(head.messages)
            if len(messages) < n or not _same_prefix(messages, head.messages, n):
                continue
            if len(messages) == n:
                return head, NewDatum.REPEATED
            echo = messages[n]
            if echo["role"] != "assistant":
                # The agent left the reply out (mini-swe-agent does, for a reply with no tool
                # call: it sends its format-error message instead): a history it rewrote.
                continue
            if not same_reply(echo, head.reply):
                why = NewDatum.ECHO_CHANGED
                continue
            return head, None
        return None, why

    def _end_of_turn(self, history_form: list[int], head: _Head) -> tuple[int, ...]:
        """What the renderer writes after a reply's content, that the sample did not: the tokens
        after the last end-of-message token of the reply's history form (``\\n`` for Qwen), with
        that token itself first when the sample stopped before it (a length or stop-string stop)."""
        stops = self._stops or frozenset()
        at = max((i for i, t in enumerate(history_form) if t in stops), default=None)
        if at is None:
            return ()
        return tuple(history_form[at + 1 :]) if head.stopped else tuple(history_form[at:])

    def _unspliced(self, rendered: list[int]) -> Splice:
        """The renderer's own prompt; whether it happens to extend the previous captured turn."""
        last = self._last
        if last is None:
            return Splice(rendered)
        turn, prompt, output = last
        if rendered[: len(prompt) + len(output)] == prompt + list(output):
            return Splice(rendered, continues=turn, shared=len(prompt))
        why = NewDatum.CONTINUITY_OFF if not self.enabled else NewDatum.RENDERER
        return Splice(rendered, new_datum=why)


def _same_prefix(messages: list[Message], prefix: list[Message], n: int) -> bool:
    for a, b in zip(messages[:n], prefix, strict=True):
        if a is not b and a != b:
            return False
    return True


def _frozen(
    messages: list[Message], rendered: list[int], offsets: list[int], echoes: dict[int, tuple[int, ...]]
) -> dict[int, tuple[int, ...]]:
    """``echoes``, plus every other assistant message's tokens as this prompt holds them: once in
    a prompt, a reply's tokens stay as they were. (Renderers change an earlier reply's history
    form as the conversation grows — Qwen3.x keeps the empty thinking block only in the last
    assistant turn — so a reply the proxy did not sample, after a rewritten history, would
    otherwise break the next prompt's extension too.)"""
    out = dict(echoes)
    for index, message in enumerate(messages):
        if message["role"] == "assistant" and index not in out:
            out[index] = tuple(rendered[offsets[index] : offsets[index + 1]])
    return out


def _with_echoes(rendered: list[int], offsets: list[int], echoes: dict[int, tuple[int, ...]]) -> list[int]:
    """``rendered`` with each echoed message's tokens replaced by its spliced tokens."""
    out: list[int] = []
    pos = 0
    for index in sorted(echoes):
        if index + 1 >= len(offsets):
            break
        out += rendered[pos : offsets[index]]
        out += echoes[index]
        pos = offsets[index + 1]
    out += rendered[pos:]
    return out


# -- is this echo the reply that was sampled? --------------------------------------------------------


def same_reply(echo: Message, reply: ChatReply) -> bool:
    """Whether the agent's echo says what the proxy answered: the same tool calls (names, and
    arguments as JSON values) and the same text up to whitespace. Reasoning is not compared:
    agents drop it, summarise it or send it back, and it is the sampled tokens that are kept."""
    calls = echo.get("tool_calls") or []
    if len(calls) != len(reply.tool_calls):
        return False
    for call, sent in zip(calls, reply.tool_calls, strict=True):
        function = getattr(call, "function", None)
        if function is None or function.name != sent.name or not _same_arguments(function.arguments, sent.arguments):
            return False
    text = _squash(_text(echo.get("content")))
    return text == _squash(reply.text) or text == _squash(_strip_think(reply.thinking, reply.text, text))


def _same_arguments(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return bool(json.loads(a or "{}") == json.loads(b or "{}"))
    except ValueError:
        return _squash(a) == _squash(b)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(str(p.get("text") or "") for p in content if isinstance(p, dict) and p.get("type") == "text")


def _squash(text: str) -> str:
    return " ".join(text.split())


def _strip_think(thinking: str, text: str, echoed: str) -> str:
    """The reply as an agent that keeps reasoning inline (``<think>…</think>text``) echoes it."""
    return f"<think>{thinking}</think>{text}" if thinking and echoed.startswith("<think>") else text
