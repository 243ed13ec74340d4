"""Token continuity, as a property over random multi-turn conversations.

An agent converses through ``Continuity`` (the proxy's per-trial splicer) exactly as through the
proxy's pipeline: each request is spliced, the "policy" samples a reply (the renderer's own tokens
for a random reply: thinking, text, tool calls, now and then cut short by a length stop), the
reply is parsed back as the proxy parses it, and the agent echoes it in one of the forms agents
use (as answered, reasoning dropped, tool-call JSON re-serialised, whitespace trimmed) before
adding tool results or a user message. Now and then it rewrites its history or edits its echo.

Checked on every request, for several renderers:
- continuity on: the prompt is the renderer's ``build_generation_prompt`` layout of the
  conversation with each echoed reply replaced by the tokens sampled for it (the oracle
  ``spliced_reference`` renders message by message, no incremental renderer), it extends the
  previous prompt + sampled tokens, and the turn says which turn it continues; after a rewrite or an
  edited echo it is the renderer's own prompt and says why it starts a new datum;
- continuity off, or a renderer that cannot be spliced: the prompt is exactly the renderer's own;
- ``peek`` (count_tokens), before each request and for a side request, gives the splice's prompt
  and leaves the trial's renderer exactly as it was;
- the cookbook's ``trajectory_to_data`` makes one datum of an unrewritten trial, with the loss mask
  on the sampled tokens only and the trial's advantage on them.
"""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass, field

import pytest
from tinker_cookbook.renderers import get_renderer
from tinker_cookbook.renderers.base import Message, ToolCall
from tinker_cookbook.rl.data_processing import trajectory_to_data

from tbconsole.proxy.capture import CapturedTurn
from tbconsole.proxy.continuity import Continuity, same_reply
from tbconsole.proxy.render import IncrementalRenderer, full_render
from tbconsole.proxy.reply import parse_reply
from tbconsole.proxy.scripted import reply_tokens
from tbconsole.record.enums import NewDatum
from tbconsole.runner.datums import conversation_order, datum_stats
from tbconsole.runner.rollout import to_trajectory

from tests_support.proxy import BASH_SPEC, message_pieces, spliced_reference


@dataclass(frozen=True)
class Kind:
    name: str
    thinking: bool = True  # replies may carry reasoning
    tools: bool = True  # replies may carry tool calls
    spliceable: bool = True  # per-message renderer with token stops


KINDS = [
    Kind("qwen3_5"),
    Kind("qwen3_5_preserve_thinking"),
    Kind("qwen3"),
    Kind("qwen3_instruct", thinking=False),
    Kind("role_colon", thinking=False, tools=False, spliceable=False),  # stops on text
    Kind("kimi_k2", thinking=False, spliceable=False),  # renders whole conversations
]
WORDS = "alpha beta gamma delta  epsilon\tzeta eta\ntheta iota kappa".split(" ")


@dataclass
class Turn:
    """One request of the random agent and what the splicer made of it."""

    messages: list[Message]
    prompt: list[int]
    output: list[int]
    continues: int | None
    new_datum: NewDatum | None
    expected: str  # "continue" | "rewritten" | "echo_changed" | "first"
    echoes: dict[int, list[int]] = field(default_factory=dict)  # message index → sampled tokens
    kept: dict[int, list[int]] = field(default_factory=dict)  # replies the proxy did not sample, as first shown


def _words(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def _reply(rng: random.Random, kind: Kind, n: int) -> Message:
    text = _words(rng, 0, 8) if rng.random() < 0.7 else ""
    thinking = _words(rng, 1, 12) if kind.thinking and rng.random() < 0.6 else None
    content = [{"type": "thinking", "thinking": thinking}, {"type": "text", "text": text}] if thinking else text
    message = Message(role="assistant", content=content)
    if kind.tools and rng.random() < 0.7:
        message["tool_calls"] = [
            ToolCall(
                id=f"call_{n}_{k}",
                function=ToolCall.FunctionBody(
                    name="bash", arguments=json.dumps({"command": _words(rng, 1, 4), "timeout": rng.randint(1, 99)})
                ),
            )
            for k in range(rng.choice((1, 1, 2)))
        ]
    elif not text.strip():
        message["content"] = (
            [{"type": "thinking", "thinking": thinking}, {"type": "text", "text": "done"}] if thinking else "done"
        )
    return message


def _echo(rng: random.Random, parsed, form: str) -> Message:
    """The reply as the agent sends it back."""
    text = parsed.text
    if form == "trimmed":
        text = " ".join(text.split())
    content: str | list = text
    if form == "as_answered" and parsed.thinking:
        content = [{"type": "thinking", "thinking": parsed.thinking}, {"type": "text", "text": text}]
    echo = Message(role="assistant", content=content)
    if parsed.tool_calls:
        calls = []
        for call in parsed.tool_calls:
            arguments = call.arguments
            if form == "reserialised":
                arguments = json.dumps(json.loads(arguments), separators=(",", ":"), sort_keys=True)
            calls.append(ToolCall(id=call.id, function=ToolCall.FunctionBody(name=call.name, arguments=arguments)))
        echo["tool_calls"] = calls
    return echo


def converse(kind: Kind, seed: int, *, continuity: bool = True, rewrites: bool = True) -> list[Turn]:
    rng = random.Random(seed)
    renderer = get_renderer(kind.name, TOKENIZER)
    incremental = IncrementalRenderer(renderer)
    splicer = Continuity(incremental, enabled=continuity)
    if kind.tools:
        messages = list(renderer.create_conversation_prefix_with_tools([BASH_SPEC], "You are an agent."))
    else:
        messages = [Message(role="system", content="You are an agent.")]
    messages.append(Message(role="user", content="Task: " + _words(rng, 2, 6)))
    turns: list[Turn] = []
    chain: dict[int, list[int]] = {}  # the current conversation's echoes → sampled tokens
    kept: dict[int, list[int]] = {}  # its other replies → their tokens in the prompt that first held them
    expected = "first"
    for n in range(rng.randint(3, 7)):
        # count_tokens peeks first (this conversation, and a side request's): the same prompt
        # as the splice that follows, and the trial's renderer left exactly as it was.
        before = _renderer_state(incremental)
        peeked = splicer.peek(list(messages))
        splicer.peek([messages[0], Message(role="user", content="Write a title for this conversation.")])
        assert _renderer_state(incremental) == before
        splice = splicer.splice(list(messages))
        assert (peeked.prompt, peeked.continues, peeked.new_datum, peeked.shared) == (
            splice.prompt,
            splice.continues,
            splice.new_datum,
            splice.shared,
        )
        reply = _reply(rng, kind, n)
        output = reply_tokens(renderer, reply)
        stop_reason = "stop"
        if rng.random() < 0.15 and len(output) > 3:  # a length stop: cut before the end-of-turn token
            output, stop_reason = output[: rng.randint(2, len(output) - 1)], "length"
        parsed = parse_reply(incremental.working, output, stop_reason, len(splice.prompt), "call_", tools_offered=True)
        splicer.commit(splice, list(messages), n, output, parsed)
        turns.append(
            Turn(
                list(messages),
                splice.prompt,
                output,
                splice.continues,
                splice.new_datum,
                expected,
                dict(chain),
                dict(kept),
            )
        )
        if expected != "continue":  # a fresh render: the replies in it keep the tokens it gave them
            pieces = message_pieces(renderer, messages)[1]
            kept = {i: pieces[i] for i, m in enumerate(messages) if m["role"] == "assistant"}

        form = rng.choice(("as_answered", "dropped_reasoning", "reserialised", "trimmed"))
        echo = _echo(rng, parsed, form)
        expected = "continue"
        if rewrites and rng.random() < 0.08:  # the agent edits its echo: not the reply sampled
            echo["content"] = "I did something else."
            expected = "echo_changed"
        messages.append(echo)
        if expected == "continue":
            chain[len(messages) - 1] = output
        calls = echo.get("tool_calls") or []
        for call in calls:
            messages.append(Message(role="tool", content=_words(rng, 1, 10), tool_call_id=call.id, name="bash"))
        if not calls or rng.random() < 0.3:
            messages.append(Message(role="user", content=_words(rng, 1, 5)))
        if rewrites and expected == "continue" and rng.random() < 0.1 and len(messages) > 5:
            del messages[2:4]  # truncation: the agent dropped an early exchange
            expected = "rewritten"
        if expected != "continue":
            chain, kept = {}, {}
    return turns


def _renderer_state(incremental: IncrementalRenderer) -> tuple:
    """Everything a render keeps, by value (the messages by identity, as the renderer sees them)."""
    return (
        incremental.render_count,
        incremental.reused_tokens,
        incremental.rendered_last,
        incremental.reused_last,
        [id(m) for m in incremental._messages],
        list(incremental._keys),
        list(incremental._renders),
        list(incremental._offsets),
        list(incremental._tokens),
        incremental._last_user,
        incremental._turn_start,
    )


def check(kind: Kind, turns: list[Turn], continuity: bool) -> None:
    renderer = get_renderer(kind.name, TOKENIZER)
    for index, turn in enumerate(turns):
        own = full_render(renderer, turn.messages)
        bos, pieces, suffix = message_pieces(renderer, turn.messages)
        assert own == bos + [t for piece in pieces for t in piece] + suffix  # the oracle is the renderer's layout
        if not (continuity and kind.spliceable):
            assert turn.prompt == own, f"turn {index}: unchanged prompts when continuity does not apply"
            if index:
                prev = turns[index - 1]
                extends = turn.prompt[: len(prev.prompt) + len(prev.output)] == prev.prompt + prev.output
                assert (turn.continues == index - 1) == extends
                if not extends:
                    expected = NewDatum.CONTINUITY_OFF if not continuity else NewDatum.RENDERER
                    assert turn.new_datum == expected
            continue
        if turn.expected == "first":
            assert turn.prompt == own and turn.continues is None and turn.new_datum is None
        elif turn.expected == "continue":
            prev = turns[index - 1]
            assert turn.prompt == spliced_reference(renderer, turn.messages, turn.echoes, turn.kept), f"turn {index}"
            assert turn.prompt[: len(prev.prompt) + len(prev.output)] == prev.prompt + prev.output
            assert turn.continues == index - 1 and turn.new_datum is None
        else:
            why = NewDatum.HISTORY_REWRITTEN if turn.expected == "rewritten" else NewDatum.ECHO_CHANGED
            assert turn.new_datum == why, f"turn {index}: {turn.new_datum} (expected {why})"
            assert turn.prompt == own and turn.continues is None


def captured(turns: list[Turn]) -> list[CapturedTurn]:
    return [
        CapturedTurn(
            turn=i,
            prompt_tokens=t.prompt,
            output_tokens=t.output,
            logprobs=[-0.25 - 0.001 * k for k in range(len(t.output))],
            stop_reason="stop",
            api="openai",
            started_at=0.0,
            sample_ms=0.0,
            max_tokens=64,
            temperature=1.0,
            continues=t.continues,
            new_datum=t.new_datum,
        )
        for i, t in enumerate(turns)
    ]


TOKENIZER = None


@pytest.fixture(autouse=True, scope="module")
def _tokenizer(tokenizer):
    global TOKENIZER
    TOKENIZER = tokenizer


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_spliced_prompts_hold_the_sampled_tokens_and_nothing_else_changes(kind):
    for seed in range(30):
        check(kind, converse(kind, seed), continuity=True)


@pytest.mark.parametrize("kind", KINDS[:3], ids=[k.name for k in KINDS[:3]])
def test_with_continuity_off_prompts_are_the_renderers_own(kind):
    for seed in range(15):
        check(kind, converse(kind, seed, continuity=False), continuity=False)


@pytest.mark.parametrize("kind", [k for k in KINDS if k.spliceable], ids=[k.name for k in KINDS if k.spliceable])
def test_an_unrewritten_trial_trains_as_one_datum_with_the_loss_on_its_samples(kind):
    advantage = 0.7
    for seed in range(12):
        turns = converse(kind, seed, rewrites=False)
        capture = captured(turns)
        data = trajectory_to_data(to_trajectory(capture), advantage)
        assert len(data) == 1 == datum_stats(capture).datums
        datum = data[0]
        tokens = datum.model_input.to_ints() + [int(datum.loss_fn_inputs["target_tokens"].to_torch()[-1])]
        mask = datum.loss_fn_inputs["mask"].to_torch().tolist()
        advantages = datum.loss_fn_inputs["advantages"].to_torch().tolist()
        logprobs = datum.loss_fn_inputs["logprobs"].to_torch().tolist()
        # Target position i predicts token i+1: the sampled tokens are exactly the masked targets.
        expected_mask = [0.0] * (len(tokens) - 1)
        expected_logprobs = [0.0] * (len(tokens) - 1)
        for turn in capture:
            start = len(turn.prompt_tokens)
            assert tokens[start : start + len(turn.output_tokens)] == turn.output_tokens
            for k in range(len(turn.output_tokens)):
                expected_mask[start + k - 1] = 1.0
                expected_logprobs[start + k - 1] = turn.logprobs[k]
        assert mask == expected_mask
        assert advantages == pytest.approx([advantage * m for m in expected_mask])
        assert logprobs == pytest.approx(expected_logprobs)
        final = capture[-1]
        assert tokens == final.prompt_tokens + final.output_tokens  # the final context, trained once


def test_datum_stats_follow_the_cookbooks_merge_rule_with_side_conversations():
    """Interleaved conversations (a main one and side requests, as Claude Code makes): the stats
    agree with the cookbook's own datums, and ordering by conversation merges the main one."""
    kind = KINDS[0]
    for seed in range(10):
        main = captured(converse(kind, seed, rewrites=False))
        side = captured(converse(kind, 1000 + seed, rewrites=False))[:2]
        # Interleave: side turns land between main turns; links are renumbered to match.
        slots = {1, 3}  # between main turns (a trial has 3 or more)
        main_iter, side_iter = iter(main), iter(side)
        renumber: dict[tuple[str, int], int] = {}
        mixed: list[CapturedTurn] = []
        for position in range(len(main) + len(side)):
            source, turn = ("s", next(side_iter)) if position in slots else ("m", next(main_iter))
            renumber[(source, turn.turn)] = position
            link = None if turn.continues is None else renumber[(source, turn.continues)]
            mixed.append(dataclasses.replace(turn, turn=position, continues=link))
        stats = datum_stats(mixed)
        data = trajectory_to_data(to_trajectory(mixed), 1.0)
        assert stats.datums == len(data) == 2
        assert stats.trained_tokens == sum(d.model_input.length for d in data)
        assert [t.turn for t in conversation_order(mixed)][: len(main)] == sorted(renumber[("m", t.turn)] for t in main)
        # In capture order the cookbook would have split the main conversation at every side turn.
        in_arrival_order = trajectory_to_data(to_trajectory_unordered(mixed), 1.0)
        assert len(in_arrival_order) > 2


def to_trajectory_unordered(turns):
    return to_trajectory([dataclasses.replace(t, continues=None) for t in turns])


def test_amplification_without_continuity_grows_with_the_turns():
    """What continuity saves: the same conversations, continuity off, on the stripping renderer."""
    kind = KINDS[0]
    on = datum_stats(captured(converse(kind, 7, rewrites=False)))
    off = datum_stats(captured(converse(kind, 7, continuity=False, rewrites=False)))
    assert on.datums == 1 and on.amplification is not None and on.amplification < 1.0
    assert off.datums > 1 and off.amplification is not None and off.amplification > 1.5
    assert set(off.new_datum) == {NewDatum.CONTINUITY_OFF}


def test_an_echo_is_the_reply_whatever_form_the_agent_gives_it(tokenizer):
    renderer = get_renderer("qwen3_5", tokenizer)
    reply = Message(
        role="assistant",
        content=[{"type": "thinking", "thinking": "look"}, {"type": "text", "text": "  Listing  files.\n"}],
        tool_calls=[
            ToolCall(id="c1", function=ToolCall.FunctionBody(name="bash", arguments='{"command": "ls", "n": 1}'))
        ],
    )
    parsed = parse_reply(renderer, reply_tokens(renderer, reply), "stop", 0, "call_")
    for form in ("as_answered", "dropped_reasoning", "reserialised", "trimmed"):
        assert same_reply(_echo(random.Random(0), parsed, form), parsed), form
    edited = _echo(random.Random(0), parsed, "as_answered")
    edited["tool_calls"] = [
        ToolCall(id="c1", function=ToolCall.FunctionBody(name="bash", arguments='{"command": "ls -l"}'))
    ]
    assert not same_reply(edited, parsed)
    assert not same_reply(Message(role="assistant", content="Listing files."), parsed)  # the call is gone


def test_a_reply_the_agent_leaves_out_is_a_rewritten_history(tokenizer):
    """mini-swe-agent answers a reply with no tool call by sending its format-error message in
    place of the reply: that history no longer holds the sample, so a new datum, and why."""
    renderer = get_renderer("qwen3_5", tokenizer)
    splicer = Continuity(IncrementalRenderer(renderer), enabled=True)
    messages = [Message(role="system", content="s"), Message(role="user", content="task")]
    first = splicer.splice(list(messages))
    output = reply_tokens(renderer, Message(role="assistant", content="no call here"))
    splicer.commit(first, list(messages), 0, output, parse_reply(renderer, output, "stop", 0, "call_"))
    messages.append(Message(role="user", content="Tool call error: no tool calls found"))
    second = splicer.splice(list(messages))
    assert second.new_datum == NewDatum.HISTORY_REWRITTEN and second.continues is None
    assert second.prompt == full_render(renderer, messages)
