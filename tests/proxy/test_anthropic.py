"""The proxy through the real `anthropic` SDK: tool_use/tool_result, thinking, streaming."""

import anthropic
import pytest
from tinker_cookbook.renderers.base import Message, ToolCall

from tbconsole.proxy.render import full_render
from tbconsole.proxy.scripted import reply_tokens

from tests_support.proxy import ANTHROPIC_BASH, BASH_SPEC, anthropic_client, spliced_reference, text_reply, tool_reply


async def test_tool_use_round_trip_non_streaming(harness, renderer):
    h = await harness()
    first = tool_reply("ls", thinking="Check the files.")
    h.sampler.add(first)
    h.sampler.add(text_reply("Finished."))
    cred = h.proxy.register_trial("trial-a")
    api = anthropic_client(cred)
    system = [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "user", "content": [{"type": "text", "text": "Fix it."}]}]

    msg = await api.messages.create(
        model="policy",
        max_tokens=1000,
        system=system,
        messages=messages,
        tools=[ANTHROPIC_BASH],
        metadata={"user_id": "u"},
        extra_body={"temperature": 0.5},
    )
    assert msg.stop_reason == "tool_use"
    kinds = [block.type for block in msg.content]
    assert kinds == ["thinking", "tool_use"]
    assert msg.content[0].thinking == "Check the files."
    use = msg.content[1]
    assert use.name == "bash" and use.input == {"command": "ls"} and use.id.startswith("toolu_")

    messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in msg.content]})
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": [{"type": "text", "text": "a.txt"}]},
                {"type": "text", "text": "Keep going."},
            ],
        }
    )
    msg2 = await api.messages.create(
        model="policy", max_tokens=1000, system=system, messages=messages, tools=[ANTHROPIC_BASH]
    )
    assert msg2.stop_reason == "end_turn" and msg2.content[0].text == "Finished."

    expected_first = renderer.create_conversation_prefix_with_tools([BASH_SPEC], "You are Claude Code.") + [
        Message(role="user", content="Fix it.")
    ]
    expected_second = expected_first + [
        Message(
            role="assistant",
            content=[{"type": "thinking", "thinking": "Check the files."}],
            tool_calls=[
                ToolCall(id=use.id, function=ToolCall.FunctionBody(name="bash", arguments='{"command": "ls"}'))
            ],
        ),
        Message(role="tool", content="a.txt", tool_call_id=use.id),
        Message(role="user", content="Keep going."),
    ]
    turns = h.proxy.turns("trial-a")
    assert turns[0].prompt_tokens == full_render(renderer, expected_first)
    # The echo is the reply sampled: its tokens stay as sampled (token continuity), the rest is
    # the renderer's rendering of the converted messages.
    assert turns[1].continues == 0 and turns[1].new_datum is None
    echo = len(expected_first)
    assert turns[1].prompt_tokens == spliced_reference(renderer, expected_second, {echo: turns[0].output_tokens})
    assert turns[0].output_tokens == reply_tokens(renderer, first)
    assert msg.usage.input_tokens == len(turns[0].prompt_tokens)
    assert msg.usage.output_tokens == len(turns[0].output_tokens)
    assert h.sampler.calls[0].sampling_params.temperature == 0.5
    assert [e.api for e in h.kinds("proxy.request")] == ["anthropic", "anthropic"]


async def test_streaming_with_tools(harness):
    h = await harness()
    h.sampler.add(tool_reply("pwd", thinking="Where am I?", text="Checking."))
    cred = h.proxy.register_trial("trial-s")
    async with anthropic_client(cred).messages.stream(
        model="policy", max_tokens=500, tools=[ANTHROPIC_BASH], messages=[{"role": "user", "content": "go"}]
    ) as stream:
        texts = [text async for text in stream.text_stream]
        final = await stream.get_final_message()
    assert "".join(texts).strip() == "Checking."
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    assert final.content[2].input == {"command": "pwd"}
    assert final.stop_reason == "tool_use"
    turn = h.proxy.turns("trial-s")[0]
    assert final.usage.output_tokens == len(turn.output_tokens)
    assert final.usage.input_tokens == len(turn.prompt_tokens)


async def test_length_stop_streaming(harness):
    h = await harness()
    h.sampler.truncated(text_reply("many words " * 30), keep=12)
    cred = h.proxy.register_trial("trial-l")
    async with anthropic_client(cred).messages.stream(
        model="policy", max_tokens=12, messages=[{"role": "user", "content": "talk"}]
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "max_tokens"


async def test_context_window_refused_with_prompt_too_long(harness):
    h = await harness(default_max_tokens=50)
    cred = h.proxy.register_trial("trial-c", context_window=60)
    with pytest.raises(anthropic.BadRequestError) as info:
        await anthropic_client(cred).messages.create(
            model="policy", max_tokens=50, messages=[{"role": "user", "content": "hello " * 30}]
        )
    assert info.value.status_code == 400
    body = info.value.body
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("prompt is too long:")
    assert h.sampler.calls == []
    # Streaming requests are refused before the stream starts, as a plain 400.
    with pytest.raises(anthropic.BadRequestError):
        async with anthropic_client(cred).messages.stream(
            model="policy", max_tokens=50, messages=[{"role": "user", "content": "hello " * 30}]
        ) as stream:
            await stream.get_final_message()


async def test_count_tokens_and_models(harness, renderer):
    h = await harness()
    cred = h.proxy.register_trial("trial-t")
    api = anthropic_client(cred)
    count = await api.messages.count_tokens(model="policy", messages=[{"role": "user", "content": "hello there"}])
    assert count.input_tokens == len(full_render(renderer, [Message(role="user", content="hello there")]))
    models = await api.models.list()
    assert [m.id for m in models.data] == ["policy"]
    assert h.sampler.calls == []


async def test_pings_while_sampling_a_stream(harness):
    from tbconsole.proxy.scripted import Scripted

    h = await harness(keepalive_s=0.02)
    h.sampler.add(Scripted(tokens=reply_tokens(h.proxy.renderer, text_reply("slow answer")), delay=0.15))
    cred = h.proxy.register_trial("trial-p")
    async with anthropic_client(cred).messages.stream(
        model="policy", max_tokens=50, messages=[{"role": "user", "content": "x"}]
    ) as stream:
        final = await stream.get_final_message()
    assert final.content[0].text == "slow answer"


async def test_stop_sequence_is_reported_and_cut(harness, renderer):
    from tests_support.proxy import stopped_on_string

    h = await harness()
    h.sampler.add(stopped_on_string(renderer, "Counting: 1 2 STOP"))
    h.sampler.add(stopped_on_string(renderer, "Counting: 1 2 STOP"))
    h.sampler.add(text_reply("No stop here."))
    cred = h.proxy.register_trial("trial-q")
    api = anthropic_client(cred)
    msg = await api.messages.create(
        model="policy", max_tokens=100, stop_sequences=["STOP", "HALT"], messages=[{"role": "user", "content": "count"}]
    )
    assert msg.stop_reason == "stop_sequence" and msg.stop_sequence == "STOP"
    assert msg.content[0].text == "Counting: 1 2 "
    async with api.messages.stream(
        model="policy", max_tokens=100, stop_sequences=["HALT", "STOP"], messages=[{"role": "user", "content": "count"}]
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == "STOP"
    assert final.content[0].text == "Counting: 1 2 "
    # The capture keeps every sampled token, the stop string's included.
    assert renderer.tokenizer.decode(h.proxy.turns("trial-q")[0].output_tokens).endswith("STOP")
    # A turn the model ended itself is end_turn, stop strings or not.
    msg = await api.messages.create(
        model="policy", max_tokens=100, stop_sequences=["STOP"], messages=[{"role": "user", "content": "x"}]
    )
    assert msg.stop_reason == "end_turn" and msg.stop_sequence is None and msg.content[0].text == "No stop here."


async def test_tool_result_errors_reach_the_model(harness, renderer):
    h = await harness()
    cred = h.proxy.register_trial("trial-e")
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "cat x"}},
                {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {"command": "ls"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": True,
                    "content": "cat: x: No such file or directory",
                },
                {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": False, "content": "y"},
            ],
        },
    ]
    await anthropic_client(cred).messages.create(
        model="policy", max_tokens=100, tools=[ANTHROPIC_BASH], messages=messages
    )
    prompt = h.proxy.turns("trial-e")[0].prompt_tokens
    text = renderer.tokenizer.decode(prompt)
    assert "Error: cat: x: No such file or directory" in text
    assert "Error: y" not in text
    call = lambda i, c: ToolCall(id=i, function=ToolCall.FunctionBody(name="bash", arguments=c))  # noqa: E731
    expected = renderer.create_conversation_prefix_with_tools([BASH_SPEC], "") + [
        Message(role="user", content="go"),
        Message(
            role="assistant",
            content="",
            tool_calls=[call("toolu_1", '{"command": "cat x"}'), call("toolu_2", '{"command": "ls"}')],
        ),
        Message(role="tool", content="Error: cat: x: No such file or directory", tool_call_id="toolu_1"),
        Message(role="tool", content="y", tool_call_id="toolu_2"),
    ]
    assert prompt == full_render(renderer, expected)


async def test_tool_choice(harness, renderer):
    h = await harness()
    cred = h.proxy.register_trial("trial-c")
    api = anthropic_client(cred)
    h.sampler.add(tool_reply("ls"))
    msg = await api.messages.create(
        model="policy",
        max_tokens=100,
        tools=[ANTHROPIC_BASH],
        tool_choice={"type": "none"},
        messages=[{"role": "user", "content": "go"}],
    )
    # Not offered the tools; the call it wrote anyway comes back as text.
    assert msg.stop_reason == "end_turn" and [b.type for b in msg.content] == ["text"]
    assert '"name": "bash"' in msg.content[0].text
    assert h.proxy.turns("trial-c")[0].prompt_tokens == full_render(renderer, [Message(role="user", content="go")])
    await api.messages.create(
        model="policy",
        max_tokens=100,
        tools=[ANTHROPIC_BASH],
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
        messages=[{"role": "user", "content": "go"}],
    )
    assert h.proxy.turns("trial-c")[1].prompt_tokens == full_render(
        renderer, renderer.create_conversation_prefix_with_tools([BASH_SPEC], "") + [Message(role="user", content="go")]
    )
    for choice in ({"type": "any"}, {"type": "tool", "name": "bash"}):
        with pytest.raises(anthropic.BadRequestError) as info:
            await api.messages.create(
                model="policy",
                max_tokens=100,
                tools=[ANTHROPIC_BASH],
                tool_choice=choice,
                messages=[{"role": "user", "content": "go"}],
            )
        assert "the policy samples freely" in info.value.body["error"]["message"]
    # Counting tokens does not sample: any tool_choice is counted with the tools offered.
    count = await api.messages.count_tokens(
        model="policy",
        tools=[ANTHROPIC_BASH],
        tool_choice={"type": "any"},
        messages=[{"role": "user", "content": "go"}],
    )
    assert count.input_tokens == len(h.proxy.turns("trial-c")[1].prompt_tokens)
    assert len(h.sampler.calls) == 2


async def test_a_system_turn_inside_messages_renders_in_place(harness, renderer):
    """Claude Code under a model name it does not know sends its environment notes as a 'system'
    message after the first user turn: rendered as a system turn where it stands, not refused."""
    h = await harness()
    h.sampler.add(text_reply("ok"))
    cred = h.proxy.register_trial("trial-s")
    messages = [
        {"role": "user", "content": "Fix it."},
        {"role": "system", "content": [{"type": "text", "text": "cwd: /app"}]},
        {"role": "user", "content": "Go."},
    ]
    msg = await anthropic_client(cred).messages.create(
        model="policy", max_tokens=100, system="You are Claude Code.", messages=messages
    )
    assert msg.content[0].text == "ok"
    expected = [
        Message(role="system", content="You are Claude Code."),
        Message(role="user", content="Fix it."),
        Message(role="system", content="cwd: /app"),
        Message(role="user", content="Go."),
    ]
    assert h.proxy.turns("trial-s")[0].prompt_tokens == full_render(renderer, expected)


async def test_count_tokens_is_the_prompt_the_next_create_samples_from(harness, renderer):
    """Claude Code compacts its context from count_tokens: the count must be the length of the
    prompt a create of the same body samples from, token continuity's splice included (the
    earlier sampled tokens, thinking kept), for the trial in the URL, at every turn; and counting
    changes nothing (no sample, no capture, no continuity state)."""
    h = await harness()
    cred = h.proxy.register_trial("trial-cc")
    api = anthropic_client(cred)
    system = [
        {"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."},
        {"type": "text", "text": "Use the tools to help the user.", "cache_control": {"type": "ephemeral"}},
    ]
    main = {"model": "policy", "system": system, "tools": [ANTHROPIC_BASH]}
    # Turn 1's reply thinks and calls a tool; turn 2's is cut short by max_tokens (the end of
    # its turn is the renderer's, not sampled); the side request answers plainly.
    h.sampler.add(tool_reply("ls", thinking="Check the files first, then read the failing test."))
    h.sampler.truncated(tool_reply("cat a.txt", thinking="The file list shows a.txt; read it."), keep=14)
    h.sampler.add(text_reply("Fix the failing test"))
    h.sampler.add(text_reply("Done: the test passes now.", thinking="It passes."))
    messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "Fix the failing test."}]}]

    async def count_then_create(body: dict, *, stream: bool = False):
        counted = (await api.messages.count_tokens(**body)).input_tokens
        again = (await api.messages.count_tokens(**body)).input_tokens  # counting twice changes nothing
        if stream:
            async with api.messages.stream(max_tokens=100, **body) as s:
                msg = await s.get_final_message()
        else:
            msg = await api.messages.create(max_tokens=100, **body)
        assert counted == again == msg.usage.input_tokens
        return msg

    def echo(msg) -> dict:
        return {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]}

    msg1 = await count_then_create({**main, "messages": messages})
    # The same conversation counted again (Claude Code re-counts): the prompt its turn had.
    assert (await api.messages.count_tokens(**main, messages=messages)).input_tokens == msg1.usage.input_tokens
    use = msg1.content[-1]
    messages += [
        echo(msg1),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": [{"type": "text", "text": "a.txt b.txt"}]},
                {"type": "text", "text": "<system-reminder>Keep going.</system-reminder>"},
            ],
        },
    ]
    msg2 = await count_then_create({**main, "messages": messages})
    # A side request that continues nothing (title generation): the renderer's own prompt.
    side = {
        "model": "policy",
        "system": [{"type": "text", "text": "Write a 3-7 word title for the conversation."}],
        "messages": [{"role": "user", "content": "Fix the failing test."}],
    }
    await count_then_create(side)
    # The same body counted for another trial, which has no history: a fresh render.
    fresh = len(
        full_render(
            renderer,
            [
                Message(role="system", content="Write a 3-7 word title for the conversation."),
                Message(role="user", content="Fix the failing test."),
            ],
        )
    )
    other = anthropic_client(h.proxy.register_trial("trial-other"))
    assert (await other.messages.count_tokens(**side)).input_tokens == fresh
    # The main conversation carries on past the side request, the truncated reply's thinking
    # sent back; the count of turn 3 is taken first, then a side count in between.
    messages += [echo(msg2), {"role": "user", "content": "Now run the tests."}]
    counted = (await api.messages.count_tokens(**main, messages=messages)).input_tokens
    await api.messages.count_tokens(**side)
    msg3 = await count_then_create({**main, "messages": messages}, stream=True)
    assert msg3.usage.input_tokens == counted

    turns = h.proxy.turns("trial-cc")
    assert len(turns) == len(h.sampler.calls) == 4 and h.proxy.turns("trial-other") == []
    assert [t.continues for t in turns] == [None, 0, None, 1]
    assert [msg1.usage.input_tokens, msg2.usage.input_tokens, msg3.usage.input_tokens] == [
        len(turns[0].prompt_tokens),
        len(turns[1].prompt_tokens),
        len(turns[3].prompt_tokens),
    ]
    # What the old count (the conversation rendered alone) missed: the spliced prompt is longer.
    assert len(turns[3].prompt_tokens) > (await other.messages.count_tokens(**main, messages=messages)).input_tokens
