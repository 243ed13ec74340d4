"""Client mistakes get 4xx JSON in the API's own error shape; a fuzzer finds no 5xx."""

import copy
import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests_support.proxy import ThreadedProxy, json_slots, make_harness

OPENAI = "/v1/chat/completions"
ANTHROPIC = "/v1/messages"
RESPONSES = "/v1/responses"


@pytest.fixture(scope="module")
def served(renderer, tmp_path_factory):
    harness = make_harness(renderer, tmp_path_factory.mktemp("capture"))
    with ThreadedProxy(harness) as threaded:
        cred = threaded.call(harness.proxy.register_trial, "fuzz")
        with httpx.Client(
            base_url=cred.proxy_url, timeout=30, headers={"Authorization": f"Bearer {cred.api_key}"}
        ) as http:
            yield harness, cred, http


def openai_error(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body) == {"error"} and {"message", "type", "param", "code"} <= set(body["error"]), body
    return body["error"]


def anthropic_error(response: httpx.Response) -> dict:
    body = response.json()
    assert body["type"] == "error" and {"type", "message"} <= set(body["error"]), body
    return body["error"]


def test_auth(served):
    harness, cred, http = served
    body = {"messages": [{"role": "user", "content": "hi"}]}
    for headers in (
        {"Authorization": ""},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic " + cred.api_key},
        {"Authorization": "Bearer " + cred.api_key[:-1]},
    ):
        r = http.post(OPENAI, json=body, headers=headers)
        assert r.status_code == 401, headers
        assert openai_error(r)["message"] == "invalid or missing API key"
    r = http.post(ANTHROPIC, json=body, headers={"Authorization": "", "x-api-key": "nope"})
    assert r.status_code == 401 and anthropic_error(r)["type"] == "authentication_error"
    r = http.post(ANTHROPIC, json=body, headers={"Authorization": "", "x-api-key": cred.api_key})
    assert r.status_code == 200
    # Auth comes first, with the key of the trial in the path: another trial's key is 401 (so is
    # any key for an unknown trial, unless it is the key that trial id would have: then 404).
    base = cred.proxy_url.rsplit("/t/", 1)[0]
    r = httpx.post(base + "/t/other" + OPENAI, json=body, headers={"Authorization": "Bearer x"})
    assert r.status_code == 401
    r = httpx.post(base + "/t/other" + OPENAI, json=body, headers={"Authorization": f"Bearer {cred.api_key}"})
    assert r.status_code == 401 and openai_error(r)["code"] == "invalid_api_key"
    other_key = harness.proxy._keys.key("other")
    r = httpx.post(base + "/t/other" + OPENAI, json=body, headers={"Authorization": f"Bearer {other_key}"})
    assert r.status_code == 404 and openai_error(r)["message"] == "unknown trial"
    r = httpx.post(base + "/t/other" + ANTHROPIC, json=body, headers={"x-api-key": other_key})
    assert r.status_code == 404 and anthropic_error(r)["type"] == "not_found_error"
    r = httpx.get(base + "/nowhere")
    assert r.status_code == 404 and openai_error(r)
    r = http.get(OPENAI)
    assert r.status_code == 405 and openai_error(r)


def test_body_limits_and_json(served):
    harness, cred, http = served
    big = b'{"messages": [{"role": "user", "content": "' + b"x" * (16 * 1024 * 1024) + b'"}]}'
    r = http.post(OPENAI, content=big)
    assert r.status_code == 413 and openai_error(r)
    r = http.post(ANTHROPIC, content=big)
    assert r.status_code == 413 and anthropic_error(r)["type"] == "request_too_large"
    for raw in (b"", b"{", b"[]", b'"x"', b'{"messages": NaN}', b"\xff\xfe", b"[" * 100000 + b"]" * 100000):
        r = http.post(OPENAI, content=raw)
        assert r.status_code == 400, raw[:20]
        assert openai_error(r)["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "patch, param",
    [
        ({"n": 2}, "n"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": -5}, "max_tokens"),
        ({"max_tokens": "10"}, "max_tokens"),
        ({"max_completion_tokens": True}, "max_completion_tokens"),
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"stop": 5}, "stop"),
        ({"stop": ["a"] * 17}, "stop"),
        ({"stream": "yes"}, "stream"),
        ({"messages": []}, "messages"),
        ({"messages": "hi"}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0]"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "messages[0]",
        ),
        ({"messages": [{"role": "user"}]}, "messages[0]"),
        ({"tools": {"type": "function"}}, "tools"),
        ({"tools": [{"type": "function", "function": {"name": ""}}]}, "tools[0].function"),
        (
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "1", "type": "function", "function": {"name": "bash", "arguments": "{not json"}}
                        ],
                    },
                ]
            },
            None,
        ),
    ],
)
def test_openai_validation(served, patch, param):
    harness, cred, http = served
    body = {"model": "policy", "messages": [{"role": "user", "content": "hi"}], **patch}
    r = http.post(OPENAI, json=body)
    assert r.status_code == 400, r.text
    error = openai_error(r)
    assert error["type"] == "invalid_request_error"
    if param is not None:
        assert error["param"] == param


def test_openai_accepts_harmless_extras(served):
    harness, cred, http = served
    body = {
        "model": "policy",
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "be brief"}]},
            {"role": "user", "content": "hi", "name": "me"},
        ],
        "user": "u",
        "metadata": {"a": "b"},
        "store": True,
        "stream_options": {"include_usage": True},
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "response_format": {"type": "text"},
        "logprobs": False,
        "frequency_penalty": 0,
        "presence_penalty": 0,
        "reasoning_effort": "low",
        "some_future_field": {"x": 1},
        "max_tokens": 10,
        "n": 1,
    }
    r = http.post(OPENAI, json=body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == "ok"


@pytest.mark.parametrize(
    "patch",
    [
        {"messages": [{"role": "developer", "content": "x"}]},  # a system turn is rendered; other roles are not
        {"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
        {
            "messages": [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "1", "name": "bash", "input": []}]}
            ]
        },
        {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": 5}]}]},
        {"system": 5},
        {"max_tokens": 0},
        {"stop_sequences": "x" * 0},
        {"top_k": -3},
        {"tools": [{"name": "x", "input_schema": "schema"}]},
    ],
)
def test_anthropic_validation(served, patch):
    harness, cred, http = served
    body = {"model": "policy", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], **patch}
    r = http.post(ANTHROPIC, json=body, headers={"x-api-key": cred.api_key})
    assert r.status_code == 400, r.text
    assert anthropic_error(r)["type"] == "invalid_request_error"


def test_register_trial_validation(renderer, tmp_path):
    harness = make_harness(renderer, tmp_path)
    harness.proxy.port = 1  # not started; registration only needs a URL
    for bad in ("", "../x", "a/b", "x" * 129, ".hidden"):
        with pytest.raises(ValueError):
            harness.proxy.register_trial(bad)
    harness.proxy.register_trial("ok-1")
    with pytest.raises(ValueError):
        harness.proxy.register_trial("ok-1")


# -- the fuzzer ---------------------------------------------------------------------------------
# Valid requests of each API with a few random mutations (a value replaced by arbitrary JSON, a
# key deleted), so the fuzzer reaches every level of validation; plus arbitrary JSON and bytes.

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=30) | st.sampled_from(
    ["<think>", "</think>", "<|im_end|>", "<tool_call>", "\n", "", "\ud800", "\x00"]
)
command = st.fixed_dictionaries({"command": texts}).map(json.dumps)

openai_call = st.fixed_dictionaries(
    {
        "id": st.text(min_size=1, max_size=8),
        "type": st.just("function"),
        "function": st.fixed_dictionaries({"name": st.just("bash"), "arguments": command}),
    }
)
openai_message = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["system", "developer", "user"]),
            "content": texts | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": texts}), max_size=2),
        }
    ),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.none() | texts},
        optional={"tool_calls": st.lists(openai_call, max_size=2), "reasoning_content": texts},
    ),
    st.fixed_dictionaries({"role": st.just("tool"), "content": texts, "tool_call_id": st.text(max_size=8)}),
)
openai_body = st.fixed_dictionaries(
    {"model": st.just("policy"), "messages": st.lists(openai_message, min_size=1, max_size=5)},
    optional={
        "max_tokens": st.integers(1, 64),
        "temperature": st.floats(0, 2),
        "top_p": st.floats(0.01, 1),
        "stop": st.lists(st.text(min_size=1, max_size=4), max_size=2),
        "stream": st.booleans(),
        "n": st.just(1),
        "stream_options": st.just({"include_usage": True}),
        "seed": st.integers(0, 2**31),
        "tools": st.just([{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]),
    },
)

text_block = st.fixed_dictionaries({"type": st.just("text"), "text": texts})
anthropic_user = st.fixed_dictionaries(
    {
        "role": st.just("user"),
        "content": texts
        | st.lists(
            st.one_of(
                text_block,
                st.fixed_dictionaries(
                    {
                        "type": st.just("tool_result"),
                        "tool_use_id": st.text(max_size=8),
                        "content": texts | st.lists(text_block, max_size=2),
                    },
                    optional={"is_error": st.booleans()},
                ),
            ),
            min_size=1,
            max_size=3,
        ),
    }
)
anthropic_assistant = st.fixed_dictionaries(
    {
        "role": st.just("assistant"),
        "content": texts
        | st.lists(
            st.one_of(
                text_block,
                st.fixed_dictionaries({"type": st.just("thinking"), "thinking": texts, "signature": st.just("")}),
                st.fixed_dictionaries(
                    {
                        "type": st.just("tool_use"),
                        "id": st.text(max_size=8),
                        "name": st.just("bash"),
                        "input": st.fixed_dictionaries({"command": texts}),
                    }
                ),
            ),
            min_size=1,
            max_size=3,
        ),
    }
)
anthropic_body = st.fixed_dictionaries(
    {
        "model": st.just("policy"),
        "max_tokens": st.integers(1, 64),
        "messages": st.lists(st.one_of(anthropic_user, anthropic_assistant), min_size=1, max_size=5),
    },
    optional={
        "system": texts | st.lists(text_block, max_size=2),
        "temperature": st.floats(0, 1),
        "top_k": st.integers(0, 50),
        "stop_sequences": st.lists(st.text(min_size=1, max_size=4), max_size=2),
        "stream": st.booleans(),
        "metadata": st.just({"user_id": "x"}),
        "tools": st.just([{"name": "bash", "input_schema": {"type": "object"}}]),
    },
)


input_text = st.fixed_dictionaries({"type": st.sampled_from(["input_text", "output_text"]), "text": texts})
responses_item = st.one_of(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["system", "developer", "user", "assistant"]),
            "content": texts | st.lists(input_text, max_size=2),
        },
        optional={"type": st.just("message")},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("reasoning"),
            "summary": st.lists(st.fixed_dictionaries({"type": st.just("summary_text"), "text": texts}), max_size=2),
        },
        optional={"id": st.just("rs_1")},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call"),
            "call_id": st.text(min_size=1, max_size=8),
            "name": st.just("bash"),
            "arguments": command,
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("function_call_output"),
            "call_id": st.text(min_size=1, max_size=8),
            "output": texts | st.lists(input_text, max_size=2),
        }
    ),
    st.fixed_dictionaries({"type": st.just("web_search_call"), "id": st.just("ws_1")}),
)
responses_body = st.fixed_dictionaries(
    {"model": st.just("policy"), "input": texts | st.lists(responses_item, min_size=1, max_size=5)},
    optional={
        "instructions": texts,
        "max_output_tokens": st.integers(1, 64),
        "temperature": st.floats(0, 2),
        "top_p": st.floats(0.01, 1),
        "stream": st.booleans(),
        "store": st.booleans(),
        "tool_choice": st.sampled_from(["auto", "none"]),
        "parallel_tool_calls": st.booleans(),
        "include": st.just(["reasoning.encrypted_content"]),
        "reasoning": st.just({"effort": "low"}),
        "tools": st.just(
            [{"type": "function", "name": "bash", "parameters": {"type": "object"}}, {"type": "web_search"}]
        ),
    },
)


@st.composite
def mutated(draw, base):
    body = copy.deepcopy(draw(base))  # st.just values are shared between examples
    for _ in range(draw(st.integers(0, 2))):
        slots = json_slots(body)
        if not slots:
            break
        container, key = draw(st.sampled_from(slots))
        if isinstance(container, dict) and draw(st.booleans()):
            del container[key]
        else:
            container[key] = draw(json_values)
    return body


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    case=st.one_of(
        st.tuples(st.just(OPENAI), mutated(openai_body)),
        st.tuples(st.sampled_from([ANTHROPIC, "/v1/messages/count_tokens"]), mutated(anthropic_body)),
        st.tuples(st.just(RESPONSES), mutated(responses_body)),
        st.tuples(st.sampled_from([OPENAI, ANTHROPIC, RESPONSES]), json_values),
    )
)
def test_fuzz_json_bodies_never_5xx(served, case):
    harness, cred, http = served
    path, body = case
    r = http.post(path, content=json.dumps(body).encode())
    assert r.status_code < 500, (r.status_code, r.text[:500])
    if r.status_code >= 400:
        (anthropic_error if "/messages" in path else openai_error)(r)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(raw=st.binary(max_size=200), path=st.sampled_from([OPENAI, ANTHROPIC, RESPONSES]))
def test_fuzz_raw_bytes_never_5xx(served, raw, path):
    harness, cred, http = served
    r = http.post(path, content=raw)
    assert r.status_code < 500, (r.status_code, r.text[:500])


def test_lone_surrogates_and_huge_integers(served):
    harness, cred, http = served
    raw = (
        b'{"model": "\\ud800x", "messages": [{"role": "user", "content": "hi"}], '
        b'"max_tokens": 100000000000000000000000}'
    )
    r = http.post(OPENAI, content=raw)
    assert r.status_code == 200 and r.json()["model"] == "\ud800x"
    raw = b'{"messages": [{"role": "user", "content": "bad \\udfff text"}]}'
    r = http.post(OPENAI, content=raw)
    assert r.status_code < 500, r.text
    r = http.post(ANTHROPIC, content=raw.replace(b"}]}", b'}], "max_tokens": 5}'))
    assert r.status_code < 500, r.text
    raw = b'{"model": "\\ud800x", "input": "hi", "max_output_tokens": 100000000000000000000000}'
    r = http.post(RESPONSES, content=raw)
    assert r.status_code == 200 and r.json()["model"] == "\ud800x"
    r = http.post(RESPONSES, content=b'{"input": [{"role": "user", "content": "bad \\udfff text"}]}')
    assert r.status_code < 500, r.text
