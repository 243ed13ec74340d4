"""Incremental rendering is token-for-token the renderer's full render, and it does reuse work."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tinker_cookbook.renderers import get_renderer
from tinker_cookbook.renderers.base import Message, ToolCall

from tbconsole.proxy.render import IncrementalRenderer, full_render, supports_incremental

from tests_support.proxy import BASH_SPEC

RENDERERS = [
    "qwen3_5",
    "qwen3_5_disable_thinking",
    "qwen3_5_preserve_thinking",
    "qwen3",
    "qwen3_disable_thinking",
    "qwen3_instruct",
]

words = st.sampled_from(
    [
        "ls",
        "the",
        " ",
        "\n",
        "\n\n",
        "<think>",
        "</think>",
        "<tool_call>",
        "<|im_end|>",
        "error:",
        "café",
        "{}",
        "  indented",
        "x" * 40,
    ]
)
texts = st.lists(words, max_size=12).map("".join)


def tool_call(draw_text):
    return ToolCall(id=None, function=ToolCall.FunctionBody(name="bash", arguments=json.dumps({"command": draw_text})))


assistant = st.builds(
    lambda thinking, text, commands: Message(
        role="assistant",
        content=([{"type": "thinking", "thinking": thinking}] + ([{"type": "text", "text": text}] if text else []))
        if thinking
        else text,
        **({"tool_calls": [tool_call(c) for c in commands]} if commands else {}),
    ),
    st.one_of(st.none(), texts),
    texts,
    st.lists(texts, max_size=2),
)
user = st.builds(lambda t: Message(role="user", content=t), texts)
system = st.builds(lambda t: Message(role="system", content=t), texts)
tool = st.builds(lambda t: Message(role="tool", content=t, tool_call_id="c"), texts)
# A step of a conversation's life: most often growth, sometimes an edit of the history (agents
# truncate and rewrite history too).
step = st.one_of(
    st.tuples(st.just("append"), st.lists(user, min_size=1, max_size=1)),
    st.tuples(st.just("agent_turn"), st.tuples(assistant, st.lists(tool, max_size=3))),
    st.tuples(st.just("agent_turn"), st.tuples(assistant, st.lists(tool, max_size=3))),
    st.tuples(st.just("append"), st.lists(st.one_of(assistant, user, tool, system), min_size=1, max_size=3)),
    st.tuples(st.just("truncate"), st.integers(0, 30)),
    st.tuples(st.just("replace"), st.tuples(st.integers(0, 30), st.one_of(assistant, user, tool))),
)


@pytest.fixture(scope="module")
def renderers(tokenizer):
    return {name: get_renderer(name, tokenizer) for name in RENDERERS}


def apply(messages, action):
    kind, arg = action
    if kind == "append":
        return messages + arg
    if kind == "agent_turn":
        return messages + [arg[0]] + arg[1]
    if kind == "truncate":
        return messages[: max(1, min(arg, len(messages)))]
    index, message = arg
    if messages:
        messages = list(messages)
        messages[index % len(messages)] = message
    return messages


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(RENDERERS),
    tools=st.booleans(),
    first=st.lists(st.one_of(user, system), min_size=1, max_size=2),
    steps=st.lists(step, min_size=1, max_size=12),
)
def test_incremental_equals_full_render(renderers, name, tools, first, steps):
    renderer = renderers[name]
    prefix = renderer.create_conversation_prefix_with_tools([BASH_SPEC], "sys") if tools else []
    messages = prefix + first
    incremental = IncrementalRenderer(renderer)
    assert incremental.incremental
    for action in [("append", [])] + steps:
        messages = apply(messages, action)
        try:
            expected = full_render(renderer, messages)
        except Exception as exc:  # noqa: BLE001 - the renderer refuses this conversation
            with pytest.raises(type(exc)):
                incremental.render(messages)
            continue
        assert incremental.render(messages) == expected


@pytest.mark.parametrize("name", RENDERERS)
def test_a_new_user_message_re_renders_the_turn_before_it(renderers, name):
    # qwen3_5 frames an assistant turn after the last user message differently from one before
    # it; appending a user message changes no neighbour of that turn, only its context.
    renderer = renderers[name]
    incremental = IncrementalRenderer(renderer)
    messages = [
        Message(role="user", content="q"),
        Message(role="assistant", content="x"),
        Message(role="tool", content="t", tool_call_id="c"),
    ]
    assert incremental.render(messages) == full_render(renderer, messages)
    messages = messages + [Message(role="user", content="again")]
    assert incremental.render(messages) == full_render(renderer, messages)


def test_growth_re_renders_only_the_tail(renderer):
    messages = renderer.create_conversation_prefix_with_tools([BASH_SPEC], "You are an agent.") + [
        Message(role="user", content="Fix the bug.")
    ]
    incremental = IncrementalRenderer(renderer)
    incremental.render(messages)
    for i in range(20):
        messages = messages + [
            Message(role="assistant", content=[{"type": "thinking", "thinking": "hmm"}], tool_calls=[tool_call("ls")]),
            Message(role="tool", content=f"output {i} " * 50, tool_call_id="c"),
        ]
        prompt = incremental.render(messages)
        assert prompt == full_render(renderer, messages)
        # The previous last message (its ctx changed) and the two new ones; everything else reused.
        assert incremental.rendered_last <= 3
        assert incremental.reused_last == len(messages) - incremental.rendered_last
        assert incremental.reused_tokens > 0


def test_renderers_that_restructure_the_conversation_render_in_full(tokenizer):
    from tinker_cookbook.renderers.base import Renderer

    class Restructuring(type(get_renderer("qwen3", tokenizer))):
        def build_generation_prompt(self, messages, role="assistant", prefill=None):
            return Renderer.build_generation_prompt(self, list(reversed(messages)), role, prefill)

    renderer = Restructuring(tokenizer)
    assert not supports_incremental(renderer)
    incremental = IncrementalRenderer(renderer)
    messages = [
        Message(role="user", content="a"),
        Message(role="assistant", content="b"),
        Message(role="user", content="c"),
    ]
    assert incremental.render(messages) == full_render(renderer, messages)
    assert incremental.rendered_last == 3
