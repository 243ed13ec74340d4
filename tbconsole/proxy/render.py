"""Incremental prompt rendering: the cookbook renderer's output, without re-tokenizing history.

``renderer.build_generation_prompt(messages)`` renders every message on every call: for an agent
at 60k tokens of history that is ~60k tokens of tokenization per turn, to add a few hundred.
The base implementation is a loop that calls ``render_message(message, ctx)`` once per message
and concatenates the chunks, then appends the generation suffix; each message is tokenized on
its own (nothing is tokenized across a message boundary). The prompt is therefore a pure
function of the per-message renders, and a message's render can be reused whenever its inputs
are unchanged.

``IncrementalRenderer.render(messages)`` performs that same loop (bos tokens, per-message
``render_message`` with the same ``RenderContext``, the generation suffix) but keeps, per
position, the render and the inputs it was made from, and reuses it when they are equal:

* the message itself, ``ctx.prev_message`` and ``ctx.next_message`` (compared with ``==``);
* ``idx``, ``is_last`` and ``in_last_assistant_turn``;
* ``last_user_index``: it moves every time the agent appends a user message, which would
  invalidate every entry; the renderers in ``_RELATIONAL_NAMES`` only ever compare it with
  ``idx`` or with 0 (read from their source; checked by the property test), so for them the key
  holds just those comparisons. Other renderers key on its exact value (still exact, reuses less).

When the conversation only grew, the leading messages whose inputs cannot have changed are taken
as one block, with their tokens, without per-message work. A renderer that overrides
``build_generation_prompt`` (it may restructure the conversation) is rendered in full every time.
tests/proxy/test_render.py checks, over random conversations, growth and edits and six renderers,
that the output is identical to ``renderer.build_generation_prompt(messages).to_ints()``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import tinker
from tinker_cookbook.renderers.base import Message, RenderContext, Renderer

_RELATIONAL_NAMES = {
    "Qwen3Renderer",
    "Qwen3DisableThinkingRenderer",
    "Qwen3InstructRenderer",
    "Qwen3VLRenderer",
    "Qwen3VLInstructRenderer",
    "Qwen3_5Renderer",
    "Qwen3_5DisableThinkingRenderer",
    "Llama3Renderer",
    "RoleColonRenderer",
}


def full_render(renderer: Renderer, messages: list[Message]) -> list[int]:
    """The reference: the renderer's generation prompt rendered from scratch."""
    return renderer.build_generation_prompt(messages).to_ints()


def supports_incremental(renderer: Renderer) -> bool:
    return type(renderer).build_generation_prompt is Renderer.build_generation_prompt


def _relational(renderer: Renderer) -> bool:
    cls = type(renderer)
    return cls.__name__ in _RELATIONAL_NAMES and cls.__module__.startswith("tinker_cookbook.renderers")


def _sign(value: int) -> int:
    return (value > 0) - (value < 0)


def message_chars(message: Message) -> int:
    """About how many characters rendering ``message`` tokenizes (its text, thinking and tool
    calls; not the template's few)."""
    content = message.get("content")
    if isinstance(content, str):
        n = len(content)
    else:
        n = 0
        for part in content or ():
            text = part.get("text") or part.get("thinking") if isinstance(part, dict) else None
            n += len(text) if isinstance(text, str) else 0
    for call in message.get("tool_calls") or ():
        n += len(call.function.name) + len(call.function.arguments)
    return n


def _chunk_tokens(chunk: Any) -> list[int]:
    if not isinstance(chunk, tinker.EncodedTextChunk):
        raise ValueError(f"only text can be sampled from, got a {type(chunk).__name__}")
    return list(chunk.tokens)


def _render_message(
    renderer: Renderer, messages: list[Message], idx: int, last_user: int, turn_start: int
) -> tuple[int, ...]:
    """Message ``idx``'s tokens (header and output) as the renderer's own loop renders it."""
    ctx = RenderContext(
        idx=idx,
        is_last=idx == len(messages) - 1,
        prev_message=messages[idx - 1] if idx > 0 else None,
        next_message=messages[idx + 1] if idx + 1 < len(messages) else None,
        last_user_index=last_user,
        in_last_assistant_turn=idx >= turn_start,
    )
    out = renderer.render_message(messages[idx], ctx)
    parts = []
    if out.header is not None:
        parts.extend(_chunk_tokens(out.header))
    for chunk in out.output:
        parts.extend(_chunk_tokens(chunk))
    return tuple(parts)  # a tuple of ints: the garbage collector stops tracking it


class _MemoTokenizer:
    """The tokenizer, with ``encode`` remembered for recent texts: when the conversation grows,
    the previous last message is rendered again (its context changed) and mostly tokenizes the
    same strings as last time. ``encode`` is deterministic, so the output is unchanged."""

    MAX_ENTRIES = 64
    MAX_TEXT = 256 * 1024

    def __init__(self, tokenizer: Any):
        self._tokenizer = tokenizer
        self._memo: OrderedDict[tuple, list[int]] = OrderedDict()

    def encode(self, text: str, *args: Any, **kwargs: Any) -> list[int]:
        if args or not isinstance(text, str) or len(text) > self.MAX_TEXT:
            return self._tokenizer.encode(text, *args, **kwargs)
        key = (text, *sorted(kwargs.items()))
        hit = self._memo.get(key)
        if hit is not None:
            self._memo.move_to_end(key)
            return list(hit)
        tokens = self._tokenizer.encode(text, **kwargs)
        self._memo[key] = list(tokens)
        if len(self._memo) > self.MAX_ENTRIES:
            self._memo.popitem(last=False)
        return tokens

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


def _clone_with_memo(renderer: Renderer) -> Renderer:
    """A private copy of the renderer (same class, same state) whose tokenizer remembers."""
    clone = object.__new__(type(renderer))
    clone.__dict__.update(renderer.__dict__)
    clone.tokenizer = _MemoTokenizer(renderer.tokenizer)  # type: ignore[assignment]  # a stand-in
    return clone


class IncrementalRenderer:
    """One per conversation (trial). ``render(messages)`` returns exactly
    ``renderer.build_generation_prompt(messages).to_ints()``. Not thread-safe."""

    def __init__(self, renderer: Renderer, *, incremental: bool = True):
        self.renderer = renderer
        self.incremental = incremental and supports_incremental(renderer)
        # Renders (and parses of this conversation's samples) go through a private clone.
        self.working = _clone_with_memo(renderer) if self.incremental else renderer
        self._relational = _relational(renderer)
        self.reset()

    def reset(self) -> None:
        self._messages: list[Message] = []
        self._keys: list[tuple] = []  # per message: the context scalars it was rendered with
        self._renders: list[tuple[int, ...]] = []  # per message: its tokens (header + output)
        self._offsets: list[int] = [0]  # start of each message's tokens in _tokens (after bos)
        self._tokens: list[int] = []  # bos + every message's tokens, no suffix
        self._last_user = -1
        self._turn_start = 0
        self.rendered_last = 0  # messages rendered by the last call
        self.reused_last = 0  # messages reused by the last call
        self.reused_tokens = 0  # leading prompt tokens the last call shares with the one before
        self.render_count = getattr(self, "render_count", 0)  # successful renders so far

    def _key(self, idx: int, n: int, last_user: int, turn_start: int) -> tuple:
        lu: tuple
        if self._relational:
            lu = (last_user < 0, _sign(idx - last_user))
        else:
            lu = (last_user,)
        return (idx == n - 1, idx >= turn_start, lu)

    @property
    def message_offsets(self) -> list[int] | None:
        """Where each message of the last render starts in its prompt (bos tokens first), and
        where the last one ends (the generation suffix follows); ``None`` when the renderer
        renders whole conversations (no per-message form). Replaced, never changed in place, by
        the next render."""
        return self._offsets if self.incremental else None

    def pending_chars(self, messages: list[Message]) -> int:
        """About how many characters ``render(messages)`` will tokenize: the messages from the
        one before the first that is not, by identity, last render's (the request converter
        hands over unchanged messages as the same objects). A cheap over-estimate, to decide
        whether a render is worth a thread."""
        prev = self._messages if self.incremental else []
        same, limit = 0, min(len(messages), len(prev))
        while same < limit and messages[same] is prev[same]:
            same += 1
        return sum(message_chars(m) for m in messages[max(0, same - 1) :])

    def render(self, messages: list[Message]) -> list[int]:
        """The prompt for ``messages``; its per-message renders are kept for the next call."""
        if not self.incremental:
            tokens = full_render(self.renderer, messages)
            self.rendered_last, self.reused_last, self.reused_tokens = len(messages), 0, 0
            self.render_count += 1
            return tokens
        try:
            return self._render(messages, keep=True)[0]
        except BaseException:
            self.reset()
            raise

    def peek(self, messages: list[Message]) -> tuple[list[int], list[int] | None]:
        """What ``render(messages)`` returns, and its ``message_offsets``, leaving this renderer
        as it was: the last render's messages and tokens, its counters and offsets (for
        ``count_tokens``, which must not disturb the trial it counts for). It reuses the kept
        renders all the same; only the tokenizer's memo of recent texts learns (same output)."""
        if not self.incremental:
            return full_render(self.renderer, messages), None
        return self._render(messages, keep=False)

    def _render(self, messages: list[Message], *, keep: bool) -> tuple[list[int], list[int]]:
        """The prompt for ``messages`` and its message offsets: the unchanged leading block taken
        whole, each later message reused where its inputs are equal, else rendered. ``keep``:
        this render becomes the one the next call reuses (``render``); else all stays (``peek``)."""
        renderer = self.working
        n = len(messages)
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
        turn_start = renderer._last_assistant_turn_start_index(messages)
        prev_n = len(self._messages)

        block = self._unchanged_block(messages, last_user, turn_start)
        bos = list(renderer._bos_tokens)
        if block and bos == self._tokens[: len(bos)]:
            if keep:
                tokens = self._tokens  # kept, cut back in place (no copy of the history's tokens)
                del tokens[self._offsets[block] :]
            else:  # a peek: a copy, the kept tokens stay whole
                tokens = self._tokens[: self._offsets[block]]
            keys, renders, offsets = self._keys[:block], self._renders[:block], self._offsets[: block + 1]
        else:
            block = 0
            tokens, keys, renders, offsets = bos, [], [], [len(bos)]
        rendered = 0
        first_changed = None  # first message whose tokens may differ from last time's
        for idx in range(block, n):
            key = self._key(idx, n, last_user, turn_start)
            if self._reusable(messages, idx, key):
                piece = self._renders[idx]
            else:
                if first_changed is None:
                    first_changed = idx
                piece = _render_message(renderer, messages, idx, last_user, turn_start)
                rendered += 1
            keys.append(key)
            renders.append(piece)
            tokens.extend(piece)
            offsets.append(len(tokens))

        if keep:
            if first_changed is None:
                first_changed = n
            self.reused_tokens = offsets[first_changed] if prev_n else 0
            self._messages, self._keys, self._renders = list(messages), keys, renders
            self._offsets, self._tokens = offsets, tokens
            self._last_user, self._turn_start = last_user, turn_start
            self.rendered_last, self.reused_last = rendered, n - rendered
            self.render_count += 1

        suffix_ctx = RenderContext(
            idx=n,
            is_last=True,
            prev_message=messages[-1] if messages else None,
            last_user_index=last_user,
            in_last_assistant_turn=True,
        )
        return tokens + list(renderer._get_generation_suffix("assistant", suffix_ctx)), offsets

    def _unchanged_block(self, messages: list[Message], last_user: int, turn_start: int) -> int:
        """How many leading messages are taken whole from last time's render, with their tokens."""
        prev = self._messages
        # Leading messages equal to last time's.
        same = 0
        limit = min(len(messages), len(prev))
        while same < limit and (messages[same] is prev[same] or messages[same] == prev[same]):
            same += 1
        # Of those, a message is certainly unchanged when its next neighbour is also unchanged
        # and no context scalar can have moved: before both the old and the new last user
        # message and turn start (relational renderers), or anywhere when they did not move.
        block = max(0, min(same - 1, len(messages) - 1))
        if last_user != self._last_user or turn_start != self._turn_start:
            if self._relational and (last_user < 0) == (self._last_user < 0):
                # Only messages before both the old and the new positions keep their relation.
                block = min(block, turn_start, self._turn_start, *[b for b in (last_user, self._last_user) if b >= 0])
            else:
                block = 0
        return max(0, block)

    def _reusable(self, messages: list[Message], idx: int, key: tuple) -> bool:
        """Whether last time's render of message ``idx`` is this one's: the same context scalars
        (``key``), and the message and both its neighbours equal (or both absent)."""
        prev, n, prev_n = self._messages, len(messages), len(self._messages)
        message = messages[idx]
        return (
            idx < prev_n
            and idx < len(self._keys)
            and self._keys[idx] == key
            and (message is prev[idx] or message == prev[idx])
            and (idx == 0 or messages[idx - 1] == prev[idx - 1])
            and ((idx + 1 >= n) == (idx + 1 >= prev_n))
            and (idx + 1 >= n or messages[idx + 1] == prev[idx + 1])
        )
