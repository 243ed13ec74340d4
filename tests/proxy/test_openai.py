"""The proxy through the real `openai` SDK: tools both ways, streaming and not, capture contents."""

import json

import openai
import pytest
from tinker_cookbook.renderers.base import Message, ToolCall

from tbconsole.proxy import read_capture
from tbconsole.proxy.render import full_render
from tbconsole.proxy.scripted import reply_tokens

from tests_support.proxy import BASH_SPEC, BASH_TOOL, openai_client, spliced_reference, text_reply, tool_reply


async def test_tool_call_round_trip_non_streaming(harness, renderer):
    h = await harness()
    first = tool_reply("ls -la", thinking="Look around first.", text="Listing.")
    h.sampler.add(first)
    h.sampler.add(text_reply("All done."))
    cred = h.proxy.register_trial("trial-a")
    api = openai_client(cred)
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Fix the bug."}]

    res = await api.chat.completions.create(
        model="policy",
        messages=messages,
        tools=[BASH_TOOL],
        user="u1",
        metadata={"k": "v"},
        store=False,
        parallel_tool_calls=False,
    )
    choice = res.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "bash" and json.loads(call.function.arguments) == {"command": "ls -la"}
    assert call.id.startswith("call_")
    assert choice.message.reasoning_content == "Look around first."
    assert choice.message.content.strip() == "Listing."

    # The agent sends back the assistant message and the tool result.
    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "file_a\nfile_b"})
    res2 = await api.chat.completions.create(model="policy", messages=messages, tools=[BASH_TOOL])
    assert res2.choices[0].finish_reason == "stop"
    assert res2.choices[0].message.content == "All done."

    # The capture: exactly what the renderer renders, and exactly what the policy sampled.
    expected_first = renderer.create_conversation_prefix_with_tools([BASH_SPEC], "You are an agent.") + [
        Message(role="user", content="Fix the bug.")
    ]
    expected_second = expected_first + [
        Message(
            role="assistant",
            content=[
                {"type": "thinking", "thinking": "Look around first."},
                {"type": "text", "text": choice.message.content},
            ],
            tool_calls=[
                ToolCall(id=call.id, function=ToolCall.FunctionBody(name="bash", arguments=call.function.arguments))
            ],
        ),
        Message(role="tool", content="file_a\nfile_b", tool_call_id=call.id),
    ]
    turns = h.proxy.turns("trial-a")
    assert [t.turn for t in turns] == [0, 1]
    assert turns[0].prompt_tokens == full_render(renderer, expected_first)
    # The echo is the reply sampled: its tokens stay as sampled (token continuity), the rest is
    # the renderer's rendering of the converted messages.
    echo = len(expected_first)
    assert turns[1].continues == 0 and turns[1].new_datum is None
    assert turns[1].prompt_tokens == spliced_reference(renderer, expected_second, {echo: turns[0].output_tokens})
    assert turns[0].output_tokens == reply_tokens(renderer, first)
    assert turns[0].logprobs == [-0.5] * len(turns[0].output_tokens)
    assert turns[0].stop_reason == "stop"
    assert res.usage.prompt_tokens == len(turns[0].prompt_tokens)
    assert res.usage.completion_tokens == len(turns[0].output_tokens)
    assert read_capture(h.proxy.capture_path("trial-a")) == turns
    assert not h.proxy.lost("trial-a")
    events = h.kinds("proxy.request")
    assert [(e.status, e.captured, e.turn, e.api, e.stream) for e in events] == [
        (200, True, 0, "openai", False),
        (200, True, 1, "openai", False),
    ]


async def test_streaming_with_tools(harness):
    h = await harness()
    h.sampler.add(tool_reply("cat README.md", thinking="Read it."))
    cred = h.proxy.register_trial("trial-s")
    stream = await openai_client(cred).chat.completions.create(
        model="policy",
        messages=[{"role": "user", "content": "go"}],
        tools=[BASH_TOOL],
        stream=True,
        stream_options={"include_usage": True},
    )
    reasoning, content, calls, finish, usage = "", "", {}, None, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            reasoning += getattr(delta, "reasoning_content", None) or ""
            content += delta.content or ""
            for tc in delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = tc.id or slot["id"]
                slot["name"] += tc.function.name or ""
                slot["arguments"] += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    assert reasoning == "Read it."
    assert finish == "tool_calls"
    assert calls[0]["name"] == "bash" and json.loads(calls[0]["arguments"]) == {"command": "cat README.md"}
    turn = h.proxy.turns("trial-s")[0]
    assert usage.prompt_tokens == len(turn.prompt_tokens) and usage.completion_tokens == len(turn.output_tokens)
    assert h.kinds("proxy.request")[0].stream is True


async def test_length_stop_and_sampling_parameters(harness, renderer):
    h = await harness(default_max_tokens=64)
    h.sampler.truncated(text_reply("word " * 50), keep=10)
    cred = h.proxy.register_trial("trial-l", temperature=0.8)
    res = await openai_client(cred).chat.completions.create(
        model="policy",
        messages=[{"role": "user", "content": "talk"}],
        max_tokens=4096,
        temperature=0.1,
        top_p=0.9,
        seed=7,
    )
    assert res.choices[0].finish_reason == "length"
    params = h.sampler.calls[0].sampling_params
    assert params.max_tokens == 64  # min(request, default)
    assert params.temperature == 0.8  # the trial's temperature wins over the request's
    assert params.top_p == 0.9 and params.seed == 7
    assert params.stop == renderer.get_stop_sequences()
    assert h.proxy.turns("trial-l")[0].stop_reason == "length"

    await openai_client(cred).chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "x"}], max_completion_tokens=16, stop=["END"]
    )
    params = h.sampler.calls[1].sampling_params
    assert params.max_tokens == 16
    assert params.stop == ["<|im_end|>", "END"]


async def test_models_endpoint(harness):
    h = await harness()
    cred = h.proxy.register_trial("trial-m")
    models = await openai_client(cred).models.list()
    assert [m.id for m in models.data] == ["policy"]


async def test_context_window_refused_before_sampling(harness):
    h = await harness(default_max_tokens=100)
    cred = h.proxy.register_trial("trial-c", context_window=120)
    with pytest.raises(openai.BadRequestError) as info:
        await openai_client(cred).chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "hello " * 40}]
        )
    assert info.value.code == "context_length_exceeded"
    assert "maximum context length is 120 tokens" in info.value.message
    assert h.sampler.calls == []
    assert h.proxy.turns("trial-c") == []
    event = h.kinds("proxy.request")[0]
    assert event.status == 400 and not event.captured and "context length" in event.error
    assert h.proxy.stats("trial-c").context_refused == 1
    # A short prompt fits: prompt + min(default, window) <= window.
    res = await openai_client(cred).chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "hi"}], max_tokens=10
    )
    assert res.choices[0].message.content == "ok"


async def test_sampler_failure_is_a_server_error_and_captures_nothing(harness):
    from tbconsole.proxy.scripted import Scripted

    h = await harness()
    h.sampler.add(Scripted(error=RuntimeError("gateway down")))
    h.sampler.add(Scripted(error=RuntimeError("gateway down")))
    cred = h.proxy.register_trial("trial-f")
    with pytest.raises(openai.InternalServerError):
        await openai_client(cred).chat.completions.create(model="policy", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.APIError):
        stream = await openai_client(cred).chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "x"}], stream=True
        )
        async for _ in stream:
            pass
    assert h.proxy.turns("trial-f") == [] and not h.proxy.lost("trial-f")
    assert h.proxy.stats("trial-f").failed == 2


async def test_history_edits_are_rendered_not_cached(harness, renderer):
    h = await harness()
    cred = h.proxy.register_trial("trial-e")
    api = openai_client(cred)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "one"}]
    await api.chat.completions.create(model="policy", messages=messages, tools=[BASH_TOOL])
    # The agent rewrites its history (e.g. summarises): the prompt follows the new history.
    edited = [{"role": "system", "content": "Be very brief."}, {"role": "user", "content": "one, again"}]
    await api.chat.completions.create(model="policy", messages=edited, tools=[BASH_TOOL])
    expected = renderer.create_conversation_prefix_with_tools([BASH_SPEC], "Be very brief.") + [
        Message(role="user", content="one, again")
    ]
    assert h.proxy.turns("trial-e")[1].prompt_tokens == full_render(renderer, expected)
    # A message that was valid last time and is now malformed is refused.
    with pytest.raises(openai.BadRequestError):
        await api.chat.completions.create(model="policy", messages=[edited[0], {"role": "user", "content": 5}])


async def test_keepalive_while_sampling_a_stream(harness):
    from tbconsole.proxy.scripted import Scripted

    h = await harness(keepalive_s=0.02)
    h.sampler.add(Scripted(tokens=reply_tokens(h.proxy.renderer, text_reply("slow answer")), delay=0.15))
    cred = h.proxy.register_trial("trial-k")
    stream = await openai_client(cred).chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "x"}], stream=True
    )
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
    assert text == "slow answer"


async def test_stop_strings_are_cut_from_the_reply(harness, renderer):
    from tests_support.proxy import stopped_on_string

    h = await harness()
    h.sampler.add(stopped_on_string(renderer, "Counting: 1 2 STOP"))
    h.sampler.add(stopped_on_string(renderer, "Counting: 1 2 STOP"))
    cred = h.proxy.register_trial("trial-q")
    api = openai_client(cred)
    res = await api.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "count"}], stop=["STOP"]
    )
    assert res.choices[0].finish_reason == "stop" and res.choices[0].message.content == "Counting: 1 2 "
    stream = await api.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "count"}], stop="STOP", stream=True
    )
    text = "".join([chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices])
    assert text == "Counting: 1 2 "


async def test_tool_choice(harness, renderer):
    h = await harness()
    cred = h.proxy.register_trial("trial-t")
    api = openai_client(cred)
    h.sampler.add(tool_reply("ls"))
    res = await api.chat.completions.create(
        model="policy", messages=[{"role": "user", "content": "go"}], tools=[BASH_TOOL], tool_choice="none"
    )
    choice = res.choices[0]
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    assert json.loads(choice.message.content.strip().splitlines()[-1])["name"] == "bash"
    assert h.proxy.turns("trial-t")[0].prompt_tokens == full_render(renderer, [Message(role="user", content="go")])
    other = {"type": "function", "function": {"name": "other", "parameters": {"type": "object"}}}
    await api.chat.completions.create(
        model="policy",
        messages=[{"role": "user", "content": "go"}],
        tools=[BASH_TOOL, other],
        tool_choice={
            "type": "allowed_tools",
            "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "bash"}}]},
        },
    )
    assert h.proxy.turns("trial-t")[1].prompt_tokens == full_render(
        renderer, renderer.create_conversation_prefix_with_tools([BASH_SPEC], "") + [Message(role="user", content="go")]
    )
    for forced in (
        "required",
        {"type": "function", "function": {"name": "bash"}},
        {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}},
    ):
        with pytest.raises(openai.BadRequestError) as info:
            await api.chat.completions.create(
                model="policy", messages=[{"role": "user", "content": "go"}], tools=[BASH_TOOL], tool_choice=forced
            )
        assert info.value.param == "tool_choice" and "the policy samples freely" in info.value.message
    assert len(h.sampler.calls) == 2
