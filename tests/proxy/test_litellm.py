"""The proxy the way mini-swe-agent calls it: its `LitellmModel.query` (litellm.completion with the
bash tool, model `openai/policy`, base URL and key from OPENAI_BASE_URL/OPENAI_API_KEY, the
model_kwargs Harbor's mini-swe-agent adds)."""

import asyncio

import pytest

from tests_support.proxy import text_reply, tool_reply


@pytest.fixture
def mswea(monkeypatch):
    monkeypatch.setenv("MSWEA_COST_TRACKING", "ignore_errors")
    monkeypatch.setenv("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")
    import litellm  # noqa: F401 - imported after the offline defaults (tests/conftest.py)
    from minisweagent.models.litellm_model import LitellmModel

    def make(cred, **model_kwargs):
        monkeypatch.setenv("OPENAI_BASE_URL", cred.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", cred.api_key)
        kwargs = {"max_tokens": 8192, "timeout": 30, "extra_headers": {"X-Session-ID": "session-1"}}
        kwargs.update(model_kwargs)
        return LitellmModel(model_name="openai/policy", model_kwargs=kwargs, cost_tracking="ignore_errors")

    return make


async def test_mini_swe_agent_query_with_tool_call(harness, mswea):
    h = await harness(default_max_tokens=256)
    h.sampler.add(tool_reply("ls -la /app", thinking="Start by looking."))
    h.sampler.add(tool_reply("echo done"))
    cred = h.proxy.register_trial("mswea-1", context_window=65536, temperature=0.8)
    model = mswea(cred)
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Solve the task."},
    ]
    message = await asyncio.to_thread(model.query, messages)
    assert message["extra"]["actions"][0]["command"] == "ls -la /app"
    # mini-swe-agent appends the assistant message and the tool observation, then asks again.
    messages.append(message)
    observation = {"output": "total 0", "returncode": 0, "exception_info": ""}
    messages += model.format_observation_messages(message, [observation])
    second = await asyncio.to_thread(model.query, messages)
    assert second["extra"]["actions"][0]["command"] == "echo done"

    turns = h.proxy.turns("mswea-1")
    assert len(turns) == 2 and not h.proxy.lost("mswea-1")
    assert h.sampler.calls[0].sampling_params.temperature == 0.8  # from the trial, not the request
    assert h.sampler.calls[0].sampling_params.max_tokens == 256  # min(8192, default)
    second_prompt = h.proxy.renderer.tokenizer.decode(turns[1].prompt_tokens)
    assert "<tool_response>" in second_prompt and "total 0" in second_prompt
    assert h.kinds("proxy.request")[0].error is None


async def test_context_window_is_litellm_context_window_exceeded(harness, mswea):
    import litellm

    h = await harness(default_max_tokens=100)
    cred = h.proxy.register_trial("mswea-2", context_window=150)
    model = mswea(cred)
    with pytest.raises(litellm.exceptions.ContextWindowExceededError):
        await asyncio.to_thread(model.query, [{"role": "user", "content": "word " * 100}])
    assert h.sampler.calls == []


async def test_format_error_when_no_tool_call(harness, mswea):
    from minisweagent.exceptions import FormatError

    h = await harness()
    h.sampler.add(text_reply("I will not call a tool."))
    model = mswea(h.proxy.register_trial("mswea-3"))
    with pytest.raises(FormatError):
        await asyncio.to_thread(model.query, [{"role": "user", "content": "go"}])
    assert len(h.proxy.turns("mswea-3")) == 1  # the turn is captured all the same
