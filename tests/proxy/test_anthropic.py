"""The proxy through the real `anthropic` SDK: tool_use/tool_result, thinking, streaming."""

import anthropic
import pytest
from tinker_cookbook.renderers.base import Message, ToolCall

from proxy_support import ANTHROPIC_BASH, BASH_SPEC, text_reply, tool_reply
from tbconsole.proxy.render import full_render
from tbconsole.proxy.scripted import reply_tokens

_clients = []


def client(cred) -> anthropic.AsyncAnthropic:
    api = anthropic.AsyncAnthropic(base_url=cred.anthropic_base_url, api_key=cred.api_key, max_retries=0)
    _clients.append(api)
    return api


@pytest.fixture(autouse=True)
async def _close_clients():
    yield
    while _clients:
        await _clients.pop().close()


async def test_tool_use_round_trip_non_streaming(harness, renderer):
    h = await harness()
    first = tool_reply("ls", thinking="Check the files.")
    h.sampler.add(first)
    h.sampler.add(text_reply("Finished."))
    cred = h.proxy.register_trial("trial-a")
    api = client(cred)
    system = [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]
    messages = [{"role": "user", "content": [{"type": "text", "text": "Fix it."}]}]

    msg = await api.messages.create(model="policy", max_tokens=1000, system=system, messages=messages,
                                    tools=[ANTHROPIC_BASH], metadata={"user_id": "u"},
                                    extra_body={"temperature": 0.5})
    assert msg.stop_reason == "tool_use"
    kinds = [block.type for block in msg.content]
    assert kinds == ["thinking", "tool_use"]
    assert msg.content[0].thinking == "Check the files."
    use = msg.content[1]
    assert use.name == "bash" and use.input == {"command": "ls"} and use.id.startswith("toolu_")

    messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in msg.content]})
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": use.id, "content": [{"type": "text", "text": "a.txt"}]},
        {"type": "text", "text": "Keep going."}]})
    msg2 = await api.messages.create(model="policy", max_tokens=1000, system=system, messages=messages,
                                     tools=[ANTHROPIC_BASH])
    assert msg2.stop_reason == "end_turn" and msg2.content[0].text == "Finished."

    expected_first = renderer.create_conversation_prefix_with_tools([BASH_SPEC], "You are Claude Code.") + [
        Message(role="user", content="Fix it.")]
    expected_second = expected_first + [
        Message(role="assistant", content=[{"type": "thinking", "thinking": "Check the files."}],
                tool_calls=[ToolCall(id=use.id, function=ToolCall.FunctionBody(name="bash",
                                                                              arguments='{"command": "ls"}'))]),
        Message(role="tool", content="a.txt", tool_call_id=use.id),
        Message(role="user", content="Keep going."),
    ]
    turns = h.proxy.turns("trial-a")
    assert turns[0].prompt_tokens == full_render(renderer, expected_first)
    assert turns[1].prompt_tokens == full_render(renderer, expected_second)
    assert turns[0].output_tokens == reply_tokens(renderer, first)
    assert msg.usage.input_tokens == len(turns[0].prompt_tokens)
    assert msg.usage.output_tokens == len(turns[0].output_tokens)
    assert h.sampler.calls[0].sampling_params.temperature == 0.5
    assert [e.api for e in h.kinds("proxy.request")] == ["anthropic", "anthropic"]


async def test_streaming_with_tools(harness):
    h = await harness()
    h.sampler.add(tool_reply("pwd", thinking="Where am I?", text="Checking."))
    cred = h.proxy.register_trial("trial-s")
    async with client(cred).messages.stream(model="policy", max_tokens=500, tools=[ANTHROPIC_BASH],
                                            messages=[{"role": "user", "content": "go"}]) as stream:
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
    async with client(cred).messages.stream(model="policy", max_tokens=12,
                                            messages=[{"role": "user", "content": "talk"}]) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "max_tokens"


async def test_context_window_refused_with_prompt_too_long(harness):
    h = await harness(default_max_tokens=50)
    cred = h.proxy.register_trial("trial-c", context_window=60)
    with pytest.raises(anthropic.BadRequestError) as info:
        await client(cred).messages.create(model="policy", max_tokens=50,
                                           messages=[{"role": "user", "content": "hello " * 30}])
    assert info.value.status_code == 400
    body = info.value.body
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("prompt is too long:")
    assert h.sampler.calls == []
    # Streaming requests are refused before the stream starts, as a plain 400.
    with pytest.raises(anthropic.BadRequestError):
        async with client(cred).messages.stream(model="policy", max_tokens=50,
                                                messages=[{"role": "user", "content": "hello " * 30}]) as stream:
            await stream.get_final_message()


async def test_count_tokens_and_models(harness, renderer):
    h = await harness()
    cred = h.proxy.register_trial("trial-t")
    api = client(cred)
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
    async with client(cred).messages.stream(model="policy", max_tokens=50,
                                            messages=[{"role": "user", "content": "x"}]) as stream:
        final = await stream.get_final_message()
    assert final.content[0].text == "slow answer"
