"""End to end through the real SDK: agent client → proxy → tinker.SamplingClient → the local
engine (tiny random-init Qwen3, the engine's shipped tokenizer, the qwen3_5 renderer)."""

import json

import anthropic
import openai
import pytest

from tbconsole.proxy import CaptureProxy, read_capture
from tbconsole.proxy.render import full_render

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from tbconsole.engine import EmbeddedEngine

    with EmbeddedEngine(data_dir=tmp_path_factory.mktemp("engine"), max_context=4096, long_poll_s=5.0) as eng:
        yield eng


@pytest.fixture(scope="module")
def engine_renderer():
    from tinker_cookbook.renderers import get_renderer

    from tbconsole.engine.registry import load_tokenizer

    return get_renderer("qwen3_5", load_tokenizer())


@pytest.fixture(scope="module")
def sampling_client(engine):
    import tinker

    from tbconsole.engine import DEFAULT_MODEL

    service = tinker.ServiceClient(base_url=engine.base_url, api_key=engine.api_key)
    yield service.create_sampling_client(base_model=DEFAULT_MODEL).result()
    # Closed before the engine stops: left open, its session's heartbeat goes on failing against
    # the dead port for the rest of the test session, in every later test's log.
    service.close("success").result()


async def test_openai_responses_and_anthropic_clients_through_the_engine(engine_renderer, sampling_client, tmp_path):
    events = []
    proxy = CaptureProxy(
        renderer=engine_renderer,
        sampler=lambda: sampling_client,
        default_max_tokens=24,
        capture_dir=tmp_path / "capture",
        publish=events.append,
    )
    async with proxy:
        cred = proxy.register_trial("engine-1", context_window=4096, temperature=0.8)
        async with openai.AsyncOpenAI(base_url=cred.openai_base_url, api_key=cred.api_key, max_retries=0) as api:
            messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "List files."}]
            tools = [
                {
                    "type": "function",
                    "function": {
                        "name": "bash",
                        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
                    },
                }
            ]
            res = await api.chat.completions.create(model="policy", messages=messages, tools=tools, max_tokens=16)
            assert res.choices[0].finish_reason in ("stop", "length", "tool_calls")
            stream = await api.chat.completions.create(model="policy", messages=messages, stream=True)
            chunks = [chunk async for chunk in stream]
            assert chunks[-1].choices[0].finish_reason in ("stop", "length", "tool_calls")
            responses_tools = [
                {"type": "function", "name": "bash", "parameters": tools[0]["function"]["parameters"]},
                {"type": "web_search"},
            ]
            events_out = [
                event
                async for event in await api.responses.create(
                    model="policy",
                    instructions="You are an agent.",
                    input="List files.",
                    tools=responses_tools,
                    max_output_tokens=16,
                    stream=True,
                )
            ]
            assert [e.sequence_number for e in events_out] == list(range(len(events_out)))
            assert events_out[-1].type in ("response.completed", "response.incomplete")
        async with anthropic.AsyncAnthropic(
            base_url=cred.anthropic_base_url, api_key=cred.api_key, max_retries=0
        ) as claude:
            async with claude.messages.stream(
                model="policy", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
            ) as s:
                final = await s.get_final_message()
            assert final.stop_reason in ("end_turn", "max_tokens", "tool_use")

    turns = proxy.turns("engine-1")
    assert len(turns) == 4 and not proxy.lost("engine-1")
    assert read_capture(proxy.capture_path("engine-1")) == turns
    for turn in turns:
        assert 0 < len(turn.output_tokens) <= 24
        assert len(turn.logprobs) == len(turn.output_tokens)
        assert all(lp <= 0.0 for lp in turn.logprobs)
        assert turn.temperature == 0.8
    assert len(turns[0].output_tokens) <= 16
    assert res.usage.completion_tokens == len(turns[0].output_tokens)
    tools_spec = [{"name": "bash", "description": "", "parameters": tools[0]["function"]["parameters"]}]
    expected = engine_renderer.create_conversation_prefix_with_tools(tools_spec, "You are an agent.") + [
        {"role": "user", "content": "List files."}
    ]
    assert turns[0].prompt_tokens == full_render(engine_renderer, expected)
    assert turns[2].prompt_tokens == turns[0].prompt_tokens  # the same conversation through the Responses API
    assert events_out[-1].response.usage.output_tokens == len(turns[2].output_tokens) <= 16
    assert [json.loads(e.to_json())["status"] for e in events] == [200, 200, 200, 200]


async def test_anthropic_count_tokens_is_the_prompt_the_engine_samples_from(engine_renderer, sampling_client, tmp_path):
    """Claude Code's shape (system blocks with cache_control, tools, its replies' thinking sent
    back) over turns sampled by the engine: count_tokens is, at each turn, the length of the
    prompt the create that follows samples from (token continuity's, the sampled thinking kept),
    and a side request's count is its own fresh render's."""
    proxy = CaptureProxy(
        renderer=engine_renderer,
        sampler=lambda: sampling_client,
        default_max_tokens=8,
        capture_dir=tmp_path / "capture",
        publish=lambda event: None,
    )
    system = [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]
    tools = [{"name": "bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
    side = {"model": "policy", "system": "Write a title.", "messages": [{"role": "user", "content": "List files."}]}
    async with proxy:
        cred = proxy.register_trial("engine-count", context_window=4096, temperature=0.0)  # greedy: repeatable
        async with anthropic.AsyncAnthropic(
            base_url=cred.anthropic_base_url, api_key=cred.api_key, max_retries=0
        ) as claude:
            messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": "List files."}]}]
            counts, usages = [], []
            for turn in range(3):
                body = {"model": "policy", "system": system, "tools": tools, "messages": messages}
                counts.append((await claude.messages.count_tokens(**body)).input_tokens)
                msg = await claude.messages.create(max_tokens=8, **body)
                usages.append(msg.usage.input_tokens)
                if turn == 0:  # a side request between turns: its count is its create's too
                    side_count = (await claude.messages.count_tokens(**side)).input_tokens
                    assert side_count == (await claude.messages.create(max_tokens=4, **side)).usage.input_tokens
                reply = {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]}
                messages = [*messages, reply, {"role": "user", "content": "Go on."}]
    assert counts == usages
    turns = proxy.turns("engine-count")
    assert [len(t.prompt_tokens) for t in turns] == [usages[0], side_count, usages[1], usages[2]]
    assert [t.continues for t in turns] == [None, None, 0, 2]
    assert side_count == len(
        full_render(
            engine_renderer,
            [{"role": "system", "content": "Write a title."}, {"role": "user", "content": "List files."}],
        )
    )
