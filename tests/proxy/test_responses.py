"""The proxy's OpenAI Responses API through the real `openai` SDK: Codex's request shape, function
tools both ways, reasoning items, streaming events, length stops, refusals, and the capture."""

import json

import httpx
import openai
import pytest
from tinker_cookbook.renderers.base import Message, ToolCall

from tbconsole.proxy import read_capture
from tbconsole.proxy.render import full_render
from tbconsole.proxy.scripted import Scripted, reply_tokens

from tests_support.proxy import openai_client, spliced_reference, text_reply, tool_reply

EXEC_PARAMS = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
# Codex's tools: flat function tools, and web_search, which is no function tool.
EXEC = {
    "type": "function",
    "name": "exec_command",
    "description": "Run a command",
    "strict": False,
    "parameters": EXEC_PARAMS,
}
STDIN = {
    "type": "function",
    "name": "write_stdin",
    "description": "Write to a session",
    "strict": False,
    "parameters": {"type": "object", "properties": {"chars": {"type": "string"}}},
}
ASK = {
    "type": "function",
    "name": "request_user_input",
    "description": "Ask the user",
    "strict": False,
    "parameters": {"type": "object", "properties": {"questions": {"type": "array", "items": {"type": "string"}}}},
}
VIEW = {
    "type": "function",
    "name": "view_image",
    "description": "Attach a local image",
    "strict": False,
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}
CODEX_TOOLS = [EXEC, STDIN, ASK, VIEW, {"type": "web_search", "external_web_access": False}]
EXEC_SPEC = {"name": "exec_command", "description": "Run a command", "parameters": EXEC_PARAMS}
STDIN_SPEC = {"name": "write_stdin", "description": "Write to a session", "parameters": STDIN["parameters"]}
CODEX_SPECS = (
    EXEC_SPEC,
    STDIN_SPEC,
    {"name": "request_user_input", "description": "Ask the user", "parameters": ASK["parameters"]},
    {"name": "view_image", "description": "Attach a local image", "parameters": VIEW["parameters"]},
)
# Codex's base instructions are ~35 KB: long enough that the proxy renders them off the event loop.
INSTRUCTIONS = "You are Codex, a coding agent.\n" + "- Follow the repository's conventions.\n" * 900
CODEX_INPUT = [
    {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "<permissions>full</permissions>"}],
    },
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context/>"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the bug."}]},
]
CODEX_EXTRAS = {
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "conv-1",
}


def codex_prefix(renderer, tools=CODEX_SPECS):
    """What Codex's opening request renders as: one system prompt (instructions, then the
    developer message) carried by the tool declarations, then the two user messages."""
    system = INSTRUCTIONS + "\n\n<permissions>full</permissions>"
    head = (
        renderer.create_conversation_prefix_with_tools(list(tools), system)
        if tools
        else [Message(role="system", content=system)]
    )
    return head + [Message(role="user", content="<environment_context/>"), Message(role="user", content="Fix the bug.")]


async def test_function_call_round_trip_non_streaming(harness, renderer):
    h = await harness()
    first = tool_reply("ls -la", thinking="Look around first.", name="exec_command")
    h.sampler.add(first)
    h.sampler.add(text_reply("Fixed it."))
    cred = h.proxy.register_trial("trial-a")
    api = openai_client(cred)

    res = await api.responses.create(
        model="policy", instructions=INSTRUCTIONS, input=CODEX_INPUT, tools=CODEX_TOOLS, **CODEX_EXTRAS
    )
    assert res.object == "response" and res.id.startswith("resp_") and res.status == "completed"
    assert [item.type for item in res.output] == ["reasoning", "function_call"]
    reasoning, call = res.output
    assert reasoning.summary[0].text == "Look around first." and reasoning.content[0].text == "Look around first."
    assert reasoning.encrypted_content is None
    assert call.name == "exec_command" and json.loads(call.arguments) == {"command": "ls -la"}
    assert call.call_id.startswith("call_") and call.id.startswith("fc_") and call.status == "completed"
    assert res.parallel_tool_calls is False and res.tool_choice == "auto" and res.store is False
    assert [t.name for t in res.tools] == [
        "exec_command",
        "write_stdin",
        "request_user_input",
        "view_image",
    ]  # web_search was dropped
    assert res.prompt_cache_key == "conv-1" and res.reasoning.effort == "medium"

    # Codex sends the output back (the reasoning without its content) with the call's output.
    echoed = [item.model_dump(exclude_none=True) for item in res.output]
    echoed[0].pop("content")
    second_input = (
        CODEX_INPUT + echoed + [{"type": "function_call_output", "call_id": call.call_id, "output": "a.txt\nb.txt"}]
    )
    res2 = await api.responses.create(
        model="policy", instructions=INSTRUCTIONS, input=second_input, tools=CODEX_TOOLS, **CODEX_EXTRAS
    )
    assert res2.status == "completed" and res2.output_text == "Fixed it."
    assert [item.type for item in res2.output] == ["message"]
    assert res2.output[0].content[0].annotations == []

    # The capture: exactly what the renderer renders, exactly what the policy sampled.
    expected_first = codex_prefix(renderer)
    expected_second = expected_first + [
        Message(
            role="assistant",
            content=[{"type": "thinking", "thinking": "Look around first."}],
            tool_calls=[
                ToolCall(id=call.call_id, function=ToolCall.FunctionBody(name="exec_command", arguments=call.arguments))
            ],
        ),
        Message(role="tool", content="a.txt\nb.txt", tool_call_id=call.call_id, name="exec_command"),
    ]
    turns = h.proxy.turns("trial-a")
    assert turns[0].prompt_tokens == full_render(renderer, expected_first)
    # The echo is the reply sampled: its tokens stay as sampled (token continuity), the rest is
    # the renderer's rendering of the converted messages.
    echo = len(expected_first)
    assert turns[1].continues == 0 and turns[1].new_datum is None
    assert turns[1].prompt_tokens == spliced_reference(renderer, expected_second, {echo: turns[0].output_tokens})
    assert turns[0].output_tokens == reply_tokens(renderer, first)
    assert turns[0].logprobs == [-0.5] * len(turns[0].output_tokens)
    assert [t.api for t in turns] == ["responses", "responses"]
    assert res.usage.input_tokens == len(turns[0].prompt_tokens)
    assert res.usage.output_tokens == len(turns[0].output_tokens)
    assert res.usage.total_tokens == res.usage.input_tokens + res.usage.output_tokens
    assert res.usage.input_tokens_details.cached_tokens == 0 and res.usage.output_tokens_details.reasoning_tokens == 0
    assert read_capture(h.proxy.capture_path("trial-a")) == turns
    events = h.kinds("proxy.request")
    assert [(e.status, e.captured, e.turn, e.api, e.stream) for e in events] == [
        (200, True, 0, "responses", False),
        (200, True, 1, "responses", False),
    ]


async def test_streaming_events_and_the_final_response(harness, renderer):
    h = await harness()
    h.sampler.add(tool_reply("cat README.md", thinking="Read it.", text="Reading.", name="exec_command"))
    h.sampler.add(text_reply("Hello there."))
    cred = h.proxy.register_trial("trial-s")
    api = openai_client(cred)

    stream = await api.responses.create(
        model="policy", instructions=INSTRUCTIONS, input=CODEX_INPUT, tools=CODEX_TOOLS, stream=True, **CODEX_EXTRAS
    )
    events = [event async for event in stream]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert kinds[-1] == "response.completed"
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    added = [e.item.type for e in events if e.type == "response.output_item.added"]
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert added == [item.type for item in done] == ["reasoning", "message", "function_call"]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    arguments = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert text.strip() == "Reading." and summary == "Read it."
    assert json.loads(arguments) == {"command": "cat README.md"}
    final = events[-1].response
    assert final.status == "completed" and [item.type for item in final.output] == [
        "reasoning",
        "message",
        "function_call",
    ]
    assert final.output[2].call_id == done[2].call_id and final.output[2].arguments == arguments
    turn = h.proxy.turns("trial-s")[0]
    assert final.usage.input_tokens == len(turn.prompt_tokens)
    assert final.usage.output_tokens == len(turn.output_tokens)
    assert turn.prompt_tokens == full_render(renderer, codex_prefix(renderer))

    # The SDK's own accumulator agrees.
    async with api.responses.stream(model="policy", input="Say hello.") as managed:
        deltas = [event.delta async for event in managed if event.type == "response.output_text.delta"]
        response = await managed.get_final_response()
    assert "".join(deltas) == response.output_text == "Hello there."
    assert [e.stream for e in h.kinds("proxy.request")] == [True, True]
    assert h.proxy.turns("trial-s")[1].prompt_tokens == full_render(
        renderer, [Message(role="user", content="Say hello.")]
    )


async def test_a_length_stop_is_incomplete(harness):
    h = await harness(default_max_tokens=64)
    h.sampler.truncated(text_reply("word " * 50), keep=10)
    h.sampler.truncated(text_reply("word " * 50), keep=10)
    cred = h.proxy.register_trial("trial-l", temperature=0.7)
    api = openai_client(cred)
    res = await api.responses.create(model="policy", input="talk", max_output_tokens=4096, temperature=0.2, top_p=0.9)
    assert res.status == "incomplete" and res.incomplete_details.reason == "max_output_tokens"
    assert res.output[-1].status == "incomplete"
    params = h.sampler.calls[0].sampling_params
    assert params.max_tokens == 64 and params.temperature == 0.7 and params.top_p == 0.9
    assert res.temperature == 0.7  # the temperature the policy was sampled at
    stream = await api.responses.create(model="policy", input="talk", max_output_tokens=10, stream=True)
    events = [event async for event in stream]
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    assert h.sampler.calls[1].sampling_params.max_tokens == 10
    assert [t.stop_reason for t in h.proxy.turns("trial-l")] == ["length", "length"]


async def test_stateless_fields_are_refused(harness):
    h = await harness()
    cred = h.proxy.register_trial("trial-p")
    api = openai_client(cred)
    with pytest.raises(openai.BadRequestError) as info:
        await api.responses.create(model="policy", input="hi", previous_response_id="resp_123")
    assert info.value.status_code == 400 and info.value.param == "previous_response_id"
    assert "stateless" in info.value.message and "whole conversation" in info.value.message
    with pytest.raises(openai.BadRequestError) as info:
        await api.responses.create(model="policy", input="hi", conversation="conv_1")
    assert info.value.param == "conversation"
    with pytest.raises(openai.BadRequestError) as info:
        await api.responses.create(model="policy", input=[{"type": "item_reference", "id": "msg_1"}])
    assert "stateless" in info.value.message
    with pytest.raises(openai.BadRequestError):  # the stream is refused before it starts
        await api.responses.create(model="policy", input="hi", previous_response_id="resp_123", stream=True)
    assert h.sampler.calls == [] and h.proxy.stats("trial-p").rejected == 4
    # Nothing is stored, so nothing can be fetched.
    with pytest.raises(openai.NotFoundError):
        await api.responses.retrieve("resp_123")


async def test_hosted_tools_are_dropped_and_reasoning_items_render_as_thinking(harness, renderer):
    h = await harness()
    cred = h.proxy.register_trial("trial-w")
    api = openai_client(cred)
    tools = [
        {"type": "web_search"},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "custom", "name": "apply_patch", "description": "freeform"},
        EXEC,
    ]
    history = [
        {"role": "user", "content": "What is here?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Plan: look."}],
            "encrypted_content": None,
        },
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
        {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": '{"command": "ls"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": [{"type": "input_text", "text": "a.txt"}]},
    ]
    res = await api.responses.create(model="policy", input=history, tools=tools)
    assert res.output_text == "ok" and [t.name for t in res.tools] == ["exec_command"]
    expected = renderer.create_conversation_prefix_with_tools([EXEC_SPEC], "") + [
        Message(role="user", content="What is here?"),
        Message(
            role="assistant",
            content=[{"type": "thinking", "thinking": "Plan: look."}, {"type": "text", "text": "Looking."}],
            tool_calls=[
                ToolCall(
                    id="call_1", function=ToolCall.FunctionBody(name="exec_command", arguments='{"command": "ls"}')
                )
            ],
        ),
        Message(role="tool", content="a.txt", tool_call_id="call_1", name="exec_command"),
    ]
    assert h.proxy.turns("trial-w")[0].prompt_tokens == full_render(renderer, expected)
    # Only hosted tools: the conversation is rendered without tools.
    await api.responses.create(model="policy", input="hi", tools=[{"type": "web_search"}])
    assert h.proxy.turns("trial-w")[1].prompt_tokens == full_render(renderer, [Message(role="user", content="hi")])


async def test_tool_choice(harness, renderer):
    h = await harness()
    cred = h.proxy.register_trial("trial-t")
    api = openai_client(cred)
    # "none": the tools are not offered; a call the model writes anyway comes back as text.
    h.sampler.add(tool_reply("ls", name="exec_command", text="Let me look."))
    res = await api.responses.create(
        model="policy", instructions=INSTRUCTIONS, input=CODEX_INPUT, tools=CODEX_TOOLS, tool_choice="none"
    )
    assert [item.type for item in res.output] == ["message"]
    lines = res.output_text.strip().splitlines()
    assert lines[0] == "Let me look." and json.loads(lines[-1]) == {
        "name": "exec_command",
        "arguments": '{"command": "ls"}',
    }
    assert h.proxy.turns("trial-t")[0].prompt_tokens == full_render(renderer, codex_prefix(renderer, tools=()))
    # allowed_tools with mode "auto": the listed subset is offered.
    await api.responses.create(
        model="policy",
        instructions=INSTRUCTIONS,
        input=CODEX_INPUT,
        tools=CODEX_TOOLS,
        tool_choice={"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "write_stdin"}]},
    )
    assert h.proxy.turns("trial-t")[1].prompt_tokens == full_render(renderer, codex_prefix(renderer, (STDIN_SPEC,)))
    # Forcing a call is refused, clearly.
    for choice in (
        "required",
        {"type": "function", "name": "exec_command"},
        {"type": "web_search_preview"},
        {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "write_stdin"}]},
    ):
        with pytest.raises(openai.BadRequestError) as info:
            await api.responses.create(model="policy", input="hi", tools=CODEX_TOOLS, tool_choice=choice)
        assert info.value.param == "tool_choice" and "the policy samples freely" in info.value.message, choice
    assert len(h.sampler.calls) == 2


async def test_context_window_refusal_plain_and_in_the_stream(harness):
    h = await harness(default_max_tokens=100)
    cred = h.proxy.register_trial("trial-c", context_window=120)
    api = openai_client(cred)
    with pytest.raises(openai.BadRequestError) as info:
        await api.responses.create(model="policy", input="hello " * 40)
    assert info.value.code == "context_length_exceeded" and info.value.param == "input"
    assert "maximum context length is 120 tokens" in info.value.message
    # Streaming: the refusal is a response.failed event, which Codex reads as context-window-exceeded.
    stream = await api.responses.create(model="policy", input="hello " * 40, stream=True)
    events = [event async for event in stream]
    assert [e.type for e in events] == ["response.created", "response.in_progress", "error", "response.failed"]
    assert [e.sequence_number for e in events] == [0, 1, 2, 3]
    assert events[2].code == "context_length_exceeded" and events[2].param == "input"
    failed = events[3].response
    assert failed.status == "failed" and failed.error.code == "context_length_exceeded"
    assert failed.id == events[0].response.id
    assert h.sampler.calls == [] and h.proxy.turns("trial-c") == []
    assert h.proxy.stats("trial-c").context_refused == 2
    # A short prompt fits.
    res = await api.responses.create(model="policy", input="hi", max_output_tokens=10)
    assert res.output_text == "ok"


async def test_sampler_failures(harness):
    h = await harness()
    h.sampler.add(Scripted(error=RuntimeError("gateway down")))
    h.sampler.add(Scripted(tokens=reply_tokens(h.proxy.renderer, text_reply("x")), delay=0.05))
    h.sampler.add(Scripted(error=RuntimeError("gateway down")))
    cred = h.proxy.register_trial("trial-f")
    api = openai_client(cred)
    with pytest.raises(openai.InternalServerError) as info:
        await api.responses.create(model="policy", input="x")
    assert info.value.status_code == 502
    res = await api.responses.create(model="policy", input="x")
    assert res.output_text == "x"
    stream = await api.responses.create(model="policy", input="x", stream=True)
    events = [event async for event in stream]
    assert [e.type for e in events] == ["response.created", "response.in_progress", "error", "response.failed"]
    assert events[3].response.error.code == "server_error" and "gateway down" in events[3].response.error.message
    stats = h.proxy.stats("trial-f")
    assert stats.failed == 2 and stats.sampler_failed == 2 and stats.captured == 1


async def test_keepalive_comments_while_sampling(harness):
    h = await harness(keepalive_s=0.02)
    h.sampler.add(Scripted(tokens=reply_tokens(h.proxy.renderer, text_reply("slow answer")), delay=0.15))
    cred = h.proxy.register_trial("trial-k")
    async with openai_client(cred).responses.stream(model="policy", input="x") as stream:
        response = await stream.get_final_response()
    assert response.output_text == "slow answer"


@pytest.mark.parametrize(
    "patch, param, words",
    [
        ({"input": None}, "input", "required"),
        ({"input": []}, "input", "empty"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:x"}]}]},
            "input[0].content[0]",
            "text-only",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
            "input[0].content[0]",
            "text-only",
        ),
        ({"input": [{"role": "robot", "content": "x"}]}, "input[0]", "role"),
        (
            {"input": [{"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": "x"}]},
            "input[0]",
            "function tools only",
        ),
        (
            {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": 1}}]},
            "input[0]",
            "JSON string",
        ),
        (
            {"input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image"}]}]},
            "input[0].output[0]",
            "text-only",
        ),
        ({"input": [{"type": "compaction", "encrypted_content": "x"}]}, "input[0]", "not a known input item"),
        ({"input": ["hi"]}, "input[0]", "object"),
        ({"instructions": ["x"]}, "instructions", "string"),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools[0]", "flat"),
        ({"tools": [{"type": "function", "name": ""}]}, "tools[0]", "name"),
        ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {}}}}, "text.format", "constrained"),
        ({"background": True}, "background", "background"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt", "prompt"),
        ({"truncation": "middle"}, "truncation", "truncation"),
        ({"max_output_tokens": 0}, "max_output_tokens", "greater than 0"),
        ({"temperature": 3}, "temperature", "between"),
        ({"include": "reasoning.encrypted_content"}, "include", "array"),
        ({"store": "no"}, "store", "boolean"),
        ({"tool_choice": "sometimes"}, "tool_choice", "'auto'"),
    ],
)
async def test_validation(harness, patch, param, words):
    h = await harness()
    cred = h.proxy.register_trial("trial-v")
    body = {"model": "policy", "input": "hi", **patch}
    async with httpx.AsyncClient(
        base_url=cred.openai_base_url, headers={"Authorization": f"Bearer {cred.api_key}"}
    ) as http:
        r = await http.post("/responses", json=body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert set(r.json()) == {"error"} and error["type"] == "invalid_request_error"
    assert error["param"] == param and words in error["message"], error


async def test_accepted_extras_and_string_input(harness, renderer):
    h = await harness()
    cred = h.proxy.register_trial("trial-x")
    async with httpx.AsyncClient(
        base_url=cred.openai_base_url, headers={"Authorization": f"Bearer {cred.api_key}"}
    ) as http:
        r = await http.post(
            "/responses",
            json={
                "model": "policy",
                "input": "hi",
                "instructions": "Be brief.",
                "store": True,
                "metadata": {"k": "v"},
                "user": "u",
                "truncation": "auto",
                "text": {"format": {"type": "text"}, "verbosity": "low"},
                "service_tier": "auto",
                "safety_identifier": "s",
                "top_logprobs": 0,
                "max_tool_calls": 3,
                "stream_options": {"include_obfuscation": False},
                "prompt_cache_retention": "24h",
                "some_future": 1,
            },
        )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["metadata"] == {"k": "v"} and body["store"] is True and body["truncation"] == "auto"
    assert body["text"] == {"format": {"type": "text"}, "verbosity": "low"} and body["instructions"] == "Be brief."
    assert body["output"][0]["content"][0]["text"] == "ok"
    assert h.proxy.turns("trial-x")[0].prompt_tokens == full_render(
        renderer, [Message(role="system", content="Be brief."), Message(role="user", content="hi")]
    )
