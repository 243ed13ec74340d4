"""Ten thousand seeded requests through raw keep-alive connections: valid and mutated OpenAI Chat
Completions, OpenAI Responses and Anthropic bodies, streaming and not, odd headers and encodings,
wrong keys, methods and paths, and sampler failures provoked on purpose. Nothing may be a 5xx
except a provoked 502/503/504, every error is JSON in its API's shape (in the stream, once SSE
headers are out), every Responses stream is a well-numbered event sequence that ends in a
terminal event, and no connection breaks."""

import asyncio
import copy
import gzip
import json
import logging
import random
import time
import zlib
from dataclasses import dataclass, field

import aiohttp
import pytest

from tbconsole.proxy.scripted import Scripted, ScriptedSampler, reply_tokens

from tests_support.proxy import ANTHROPIC_BASH, BASH_TOOL, json_slots, make_harness, text_reply, tool_reply

SEED = 20260601
REQUESTS = 10_000
WORKERS = 8  # each with one keep-alive connection
TRIALS = 6
# A stop sequence that tells the sampler to fail this call, and the statuses it allows.
PROVOKE = {"@@fail": 502, "@@slow": 504, "@@nolp": 502, "@@junk": 502}
# The Responses API has no stop strings: a top_p no random draw hits says the same.
PROVOKE_TOP_P = {"@@fail": 0.0625, "@@slow": 0.125, "@@nolp": 0.1875, "@@junk": 0.25}
RESPONSES_EXEC = {
    "type": "function",
    "name": "bash",
    "description": "Execute a bash command",
    "strict": False,
    "parameters": BASH_TOOL["function"]["parameters"],
}
APIS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "responses": "/v1/responses"}

TEXTS = [
    "hi",
    "",
    "Fix the bug.",
    "<think>",
    "</think>",
    "<|im_end|>",
    "<tool_call>",
    "\n\n",
    "naïve café 中文",
    "\x00",
    "😀" * 3,
    "a" * 300,
    '{"json": true}',
    " ",
    "\r\n",
    "'s 'll",
    "x" * 5000,
]
WRONG = [
    None,
    True,
    False,
    0,
    -1,
    2**70,
    1.5,
    -1e308,
    "",
    "x",
    "\ud800",
    [],
    [None],
    [1, "a"],
    {},
    {"type": None},
    {"type": "text"},
    {"type": "image"},
    {"type": "tool_result", "content": 5},
    {"type": {"x": 1}},
    {"role": "user"},
    {"role": "tool", "content": []},
    "text",
    "tool_result",
    "function",
    ["text"],
]
BLOCK_TYPES = [
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "search_result",
    "server_tool_use",
    "custom",
    "function",
    "image_url",
    "input_audio",
    "refusal",
    "",
    "TEXT",
    "input_text",
    "output_text",
    "input_image",
    "input_file",
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "item_reference",
    "custom_tool_call",
    "web_search",
    "web_search_call",
    "summary_text",
    "reasoning_text",
    "allowed_tools",
    "json_schema",
]


@dataclass
class Case:
    index: int
    method: str
    path: str  # after the trial's base
    trial: int
    headers: dict
    data: bytes | None
    api: str  # the body's API
    allowed: set = field(default_factory=set)  # 5xx statuses provoked on purpose
    url: str | None = None  # overrides trial + path


# -- bodies ----------------------------------------------------------------------------------------


def _text(rng):
    return rng.choice(TEXTS)


def _openai_body(rng) -> dict:
    messages = []
    if rng.random() < 0.5:
        messages.append({"role": rng.choice(["system", "developer"]), "content": _text(rng)})
    for turn in range(rng.randint(1, 3)):
        if rng.random() < 0.3:
            messages.append({"role": "user", "content": [{"type": "text", "text": _text(rng)}]})
        else:
            messages.append({"role": "user", "content": _text(rng)})
        if turn and rng.random() < 0.7:
            call = {
                "id": f"call_{turn}",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": _text(rng)})},
            }
            messages.insert(
                -1,
                {
                    "role": "assistant",
                    "content": rng.choice([None, _text(rng)]),
                    "tool_calls": [call],
                    **({"reasoning_content": _text(rng)} if rng.random() < 0.3 else {}),
                },
            )
            messages.insert(-1, {"role": "tool", "tool_call_id": f"call_{turn}", "content": _text(rng)})
    body = {"model": "policy", "messages": messages}
    optional = {
        "max_tokens": rng.randint(1, 64),
        "temperature": rng.uniform(0, 2),
        "top_p": rng.uniform(0.01, 1),
        "stop": [_text(rng) or "z"],
        "seed": rng.randint(0, 2**31),
        "tools": [BASH_TOOL],
        "n": 1,
        "stream_options": {"include_usage": True},
        "user": "u",
        "tool_choice": "auto",
        "max_completion_tokens": rng.randint(1, 64),
    }
    for key in rng.sample(sorted(optional), rng.randint(0, len(optional))):
        body[key] = optional[key]
    return body


def _anthropic_body(rng) -> dict:
    messages = []
    for turn in range(rng.randint(1, 3)):
        if turn and rng.random() < 0.7:
            use_id = f"toolu_{turn}"
            assistant = [{"type": "tool_use", "id": use_id, "name": "bash", "input": {"command": _text(rng)}}]
            if rng.random() < 0.4:
                assistant.insert(0, {"type": "thinking", "thinking": _text(rng), "signature": ""})
            messages.append({"role": "assistant", "content": assistant})
            result = {
                "type": "tool_result",
                "tool_use_id": use_id,
                "content": rng.choice([_text(rng), [{"type": "text", "text": _text(rng)}]]),
            }
            if rng.random() < 0.3:
                result["is_error"] = rng.random() < 0.5
            messages.append({"role": "user", "content": [result, {"type": "text", "text": _text(rng)}]})
        else:
            content = rng.choice([_text(rng), [{"type": "text", "text": _text(rng)}]])
            messages.append({"role": "user", "content": content})
    body = {"model": "policy", "max_tokens": rng.randint(1, 64), "messages": messages}
    optional = {
        "system": rng.choice(
            [_text(rng), [{"type": "text", "text": _text(rng), "cache_control": {"type": "ephemeral"}}]]
        ),
        "temperature": rng.uniform(0, 1),
        "top_k": rng.randint(0, 50),
        "top_p": rng.uniform(0.01, 1),
        "stop_sequences": [_text(rng) or "z"],
        "tools": [ANTHROPIC_BASH],
        "metadata": {"user_id": "u"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    for key in rng.sample(sorted(optional), rng.randint(0, len(optional))):
        body[key] = optional[key]
    return body


def _responses_body(rng) -> dict:
    if rng.random() < 0.15:
        body = {"model": "policy", "input": _text(rng)}
    else:
        items = []
        if rng.random() < 0.5:
            items.append(
                {
                    "type": "message",
                    "role": rng.choice(["developer", "system"]),
                    "content": [{"type": "input_text", "text": _text(rng)}],
                }
            )
        for turn in range(rng.randint(1, 3)):
            if turn and rng.random() < 0.7:
                call_id = f"call_{turn}"
                if rng.random() < 0.4:
                    items.append(
                        {
                            "type": "reasoning",
                            "id": f"rs_{turn}",
                            "encrypted_content": None,
                            "summary": [{"type": "summary_text", "text": _text(rng)}],
                        }
                    )
                if rng.random() < 0.3:
                    items.append(
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": _text(rng)}],
                        }
                    )
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call_id,
                        "name": "bash",
                        "arguments": json.dumps({"command": _text(rng)}),
                    }
                )
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": call_id,
                        "output": rng.choice([_text(rng), [{"type": "input_text", "text": _text(rng)}]]),
                    }
                )
            content = rng.choice([_text(rng), [{"type": "input_text", "text": _text(rng)}]])
            items.append(
                {"type": "message", "role": "user", "content": content}
                if rng.random() < 0.7
                else {"role": "user", "content": content}
            )
        body = {"model": "policy", "input": items}
    optional = {
        "instructions": _text(rng),
        "max_output_tokens": rng.randint(1, 64),
        "temperature": rng.uniform(0, 2),
        "top_p": rng.uniform(0.01, 1),
        "tools": [RESPONSES_EXEC, {"type": "web_search"}],
        "tool_choice": rng.choice(["auto", "none"]),
        "parallel_tool_calls": rng.random() < 0.5,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": rng.random() < 0.5,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "k",
        "metadata": {"a": "b"},
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "user": "u",
    }
    for key in rng.sample(sorted(optional), rng.randint(0, len(optional))):
        body[key] = optional[key]
    return body


def _nested(depth: int):
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def _mutate(rng, body):
    body = copy.deepcopy(body)  # it holds shared dicts (the tool declarations)
    for _ in range(rng.randint(1, 3)):
        slots = json_slots(body)
        if not slots:
            break
        container, key = rng.choice(slots)
        roll = rng.random()
        if isinstance(container, dict) and roll < 0.25:
            del container[key]
        elif key == "type" and roll < 0.6:
            container[key] = rng.choice(BLOCK_TYPES)
        elif roll < 0.7:
            container[key] = _nested(300) if rng.random() < 0.02 else copy.deepcopy(rng.choice(WRONG))
        else:
            container[key] = copy.deepcopy(rng.choice(WRONG))
    return body


def _provoke(rng, body, api) -> set:
    marker = rng.choice(sorted(PROVOKE))
    if api == "responses":
        body["top_p"] = PROVOKE_TOP_P[marker]
    else:
        body["stop_sequences" if api == "anthropic" else "stop"] = [marker]
    return {502, 503, 504}


# -- requests ----------------------------------------------------------------------------------------


def _encode(rng, data: bytes, headers: dict) -> tuple[bytes, int | None]:
    """Maybe a Content-Encoding; returns the data and the status it must get (None: the body's own)."""
    roll = rng.random()
    if roll < 0.05:
        headers["Content-Encoding"] = rng.choice(["gzip", "x-gzip"])
        return gzip.compress(data), None
    if roll < 0.08:
        headers["Content-Encoding"] = "deflate"
        return zlib.compress(data), None
    if roll < 0.11:
        headers["Content-Encoding"] = rng.choice(["gzip", "deflate"])  # a plain body that says otherwise
        return data, 400
    if roll < 0.13:
        headers["Content-Encoding"] = rng.choice(["br", "zstd", "compress", "gzip;q=1", "x-unknown"])
        return data, 415
    if roll < 0.14:
        headers["Content-Encoding"] = "identity"
    return data, None


def make_case(index: int, keys: list[str]) -> tuple[Case, int | None]:
    rng = random.Random(SEED * 1_000_003 + index)
    trial = rng.randrange(TRIALS)
    headers = {"Authorization": f"Bearer {keys[trial]}"}
    roll = rng.random()
    api = rng.choice(["anthropic", "anthropic", "openai", "openai", "responses", "responses", "responses"])
    path = APIS[api]
    body = {"anthropic": _anthropic_body, "openai": _openai_body, "responses": _responses_body}[api](rng)
    allowed: set = set()
    expect = None
    if api == "anthropic" and rng.random() < 0.5:
        headers = {"x-api-key": keys[trial], "anthropic-version": "2023-06-01"}
    if rng.random() < 0.35:
        body["stream"] = True
    if rng.random() < 0.02:  # long enough to be rendered on the proxy's thread pool
        long = {"role": "user", "content": "long observation\n" * 3000}
        if api != "responses":
            body["messages"].append(long)
        elif isinstance(body["input"], list):
            body["input"].append(long)
        else:
            body["input"] += long["content"]
    if rng.random() < 0.04:
        allowed = _provoke(rng, body, api)
    if roll < 0.40:
        data = json.dumps(body).encode()
    elif roll < 0.78:
        data = json.dumps(_mutate(rng, body)).encode()
    elif roll < 0.84:
        data = rng.choice(
            [
                b"",
                b"{",
                b"[]",
                b"null",
                b'"x"',
                b"\xff\xfe\x00",
                b'{"messages": NaN}',
                b"1e999",
                b"[" * 5000 + b"]" * 5000,
                json.dumps(body).encode()[: rng.randrange(1, 40)],
                bytes(rng.randrange(256) for _ in range(64)),
            ]
        )
    elif roll < 0.88:
        path = "/v1/messages/count_tokens"
        api = "anthropic"
        data = json.dumps(_mutate(rng, _anthropic_body(rng)) if rng.random() < 0.5 else _anthropic_body(rng)).encode()
    elif roll < 0.90:
        case = Case(index, "GET", "/v1/models", trial, headers, None, api)
        return case, None
    elif roll < 0.95:  # wrong credentials
        data = json.dumps(body).encode()
        headers = rng.choice(
            [
                {},
                {"Authorization": f"Bearer {keys[(trial + 1) % TRIALS]}"},
                {"Authorization": f"Basic {keys[trial]}"},
                {"Authorization": "Bearer"},
                {"x-api-key": ""},
                {"Authorization": f"Bearer {keys[trial]}x"},
                {"x-api-key": keys[trial].upper()},
            ]
        )
        expect = 401
    else:  # wrong method, route or trial
        data = json.dumps(body).encode()
        choice = rng.randrange(3)
        if choice == 0:
            case = Case(index, rng.choice(["GET", "PUT", "DELETE", "PATCH"]), path, trial, headers, None, api)
            return case, 405
        if choice == 1:
            case = Case(index, "POST", path, trial, headers, data, api, url=f"/t/trial-{trial}/v2/{rng.randrange(9)}")
            return case, 404
        case = Case(index, "POST", path, trial, headers, data, api, url=f"/t/no-such-trial{path}")
        return case, 401
    if rng.random() < 0.15:
        headers["Content-Type"] = rng.choice(
            [
                "text/plain",
                "application/x-www-form-urlencoded",
                "",
                "multipart/form-data; boundary=x",
                "application/json; charset=latin-1",
            ]
        )
    if rng.random() < 0.05:
        headers["Accept"] = rng.choice(["text/html", "*/*", "application/xml"])
    if rng.random() < 0.05:
        headers["X-Padding"] = "p" * rng.randrange(1, 4000)
    data, encoded_status = _encode(rng, data, headers)
    if expect is None:
        expect = encoded_status
    return Case(index, "POST", path, trial, headers, data, api, allowed=allowed), expect


# -- checks --------------------------------------------------------------------------------------------


def _error_shape_ok(api: str, body) -> bool:
    if not isinstance(body, dict):
        return False
    if api == "anthropic":
        error = body.get("error")
        return body.get("type") == "error" and isinstance(error, dict) and {"type", "message"} <= set(error)
    error = body.get("error")
    return set(body) == {"error"} and isinstance(error, dict) and {"message", "type", "param", "code"} <= set(error)


SERVER_ERROR_TYPES = {"api_error", "overloaded_error", "timeout_error", "server_error"}


def check(case: Case, expect: int | None, status: int, headers, raw: bytes) -> str | None:
    try:
        return _check(case, expect, status, headers, raw)
    except ValueError as exc:  # JSON that does not parse
        return f"{status}: unreadable answer ({exc}): {raw[:200]!r}"


def _check(case: Case, expect: int | None, status: int, headers, raw: bytes) -> str | None:
    # The error shape follows the route, or the anthropic-version header where the route says nothing.
    route = case.url or case.path
    shape = (
        "anthropic"
        if "/v1/messages" in route or ("/v1/responses" not in route and "anthropic-version" in case.headers)
        else "openai"
    )
    if status >= 500 and status not in case.allowed:
        return f"unprovoked {status}: {raw[:300]!r}"
    if expect is not None and status != expect:
        return f"expected {expect}, got {status}: {raw[:300]!r}"
    if status >= 400:
        if not headers.get("Content-Type", "").startswith("application/json"):
            return f"{status} is not JSON: {headers.get('Content-Type')} {raw[:200]!r}"
        if not _error_shape_ok(shape, json.loads(raw)):
            return f"{status} not in the {shape} error shape: {raw[:300]!r}"
        return None
    if b"HTTP/1." in raw:
        return "a second HTTP response inside the body"
    if headers.get("Content-Type", "").startswith("text/event-stream") and case.api == "responses":
        return _check_responses_stream(case, raw)
    if headers.get("Content-Type", "").startswith("text/event-stream"):
        events = [block for block in raw.decode().split("\n\n") if block.strip()]
        last = events[-1] if events else ""
        data = "\n".join(line[6:] for line in last.splitlines() if line.startswith("data: "))
        if data == "[DONE]" or '"message_stop"' in data:
            return None
        try:
            error = json.loads(data)
        except ValueError:
            return f"stream ends without a final or error event: {last[:200]!r}"
        if case.api == "anthropic" and not last.startswith("event: error"):
            return f"anthropic stream ends with a non-error event: {last[:200]!r}"
        if not _error_shape_ok(case.api, error):
            return f"stream error not in the {case.api} shape: {data[:200]!r}"
        if error["error"]["type"] in SERVER_ERROR_TYPES and not case.allowed:
            return f"unprovoked server error in the stream: {data[:200]!r}"
        return None
    body = json.loads(raw)
    if case.path == APIS["responses"] and (
        body.get("object") != "response" or body.get("status") not in ("completed", "incomplete")
    ):
        return f"not a finished response object: {raw[:200]!r}"
    return None


RESPONSES_TERMINAL = {"response.completed", "response.incomplete", "response.failed"}


def _check_responses_stream(case: Case, raw: bytes) -> str | None:
    """Every event named (``event:``) as its data's type, numbered 0, 1, 2…; the first
    response.created, the last a terminal event; a failure an ``error`` event then
    response.failed, a server-side one only when provoked."""
    events = []
    for block in raw.decode().split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith(":")]
        if not lines:
            continue
        if len(lines) != 2 or not lines[0].startswith("event: ") or not lines[1].startswith("data: "):
            return f"malformed event block: {block[:200]!r}"
        data = json.loads(lines[1][6:])
        if data.get("type") != lines[0][7:]:
            return f"event name {lines[0][7:]!r} is not its type {data.get('type')!r}"
        events.append(data)
    if [e.get("sequence_number") for e in events] != list(range(len(events))):
        return f"sequence numbers {[e.get('sequence_number') for e in events][:20]}"
    if not events or events[0]["type"] != "response.created" or events[-1]["type"] not in RESPONSES_TERMINAL:
        return f"events {[e['type'] for e in events][:3]}…{[e['type'] for e in events][-2:]}"
    ids = {e["response"]["id"] for e in events if "response" in e}
    if len(ids) != 1:
        return f"the response changed id: {ids}"
    last = events[-1]
    if last["type"] == "response.failed":
        error = events[-2] if len(events) > 1 else {}
        code = last["response"].get("error", {}).get("code")
        if error.get("type") != "error" or error.get("code") != code or not isinstance(error.get("message"), str):
            return f"a failed stream without its error event: {events[-2:]}"
        if code == "server_error" and not case.allowed:
            return f"unprovoked server error in the stream: {error}"
    elif last["response"]["status"] != last["type"].rsplit(".", 1)[1]:
        return f"{last['type']} with status {last['response']['status']!r}"
    return None


# -- the test --------------------------------------------------------------------------------------------


def _sampler(renderer) -> tuple[ScriptedSampler, list]:
    end = renderer.get_stop_sequences()[0]
    answers = [
        Scripted(tokens=reply_tokens(renderer, text_reply("ok"))),
        Scripted(tokens=reply_tokens(renderer, tool_reply("ls -la", thinking="look"))),
    ]
    outcomes = {
        "@@fail": Scripted(error=RuntimeError("injected gateway failure")),
        "@@slow": Scripted(tokens=answers[0].tokens, delay=5),
        "@@nolp": Scripted(tokens=answers[0].tokens, omit_logprobs=True),
        "@@junk": Scripted(tokens=[9707, end, 9707, end]),
    }
    provoked = []

    by_top_p = {top_p: marker for marker, top_p in PROVOKE_TOP_P.items()}

    def decide(call):
        marker = by_top_p.get(call.sampling_params.top_p)
        if marker is not None:
            provoked.append(marker)
            return outcomes[marker]
        for marker in call.sampling_params.stop or ():
            if marker in outcomes:
                provoked.append(marker)
                return outcomes[marker]
        return answers[len(call.prompt) % 2]

    return ScriptedSampler(renderer, default=decide, record_calls=False), provoked


@pytest.mark.e2e  # ten thousand requests through the proxy over loopback HTTP: 15 s
async def test_fuzz_ten_thousand_requests(renderer, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    sampler, provoked = _sampler(renderer)
    reported = []
    h = make_harness(
        renderer,
        tmp_path / "capture",
        sampler=sampler,
        default_max_tokens=64,
        sample_timeout_s=0.2,
        on_sampler_error=lambda trial, exc: reported.append(type(exc)),
    )
    await h.proxy.start()
    creds = [h.proxy.register_trial(f"trial-{i}") for i in range(TRIALS)]
    keys = [c.api_key for c in creds]
    base = h.proxy.url
    failures: list[str] = []
    statuses: dict[int, int] = {}
    per_api: dict[tuple[str, int, bool], int] = {}
    streamed = 0
    t0 = time.perf_counter()

    async def worker(w: int) -> None:
        nonlocal streamed
        connector = aiohttp.TCPConnector(limit=1)
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
            for index in range(w, REQUESTS, WORKERS):
                case, expect = make_case(index, keys)
                url = base + (case.url or f"/t/trial-{case.trial}{case.path}")
                try:
                    async with session.request(case.method, url, data=case.data, headers=case.headers) as r:
                        raw = await r.read()
                        status, headers = r.status, r.headers
                except (TimeoutError, aiohttp.ClientError) as exc:
                    failures.append(f"#{index}: connection broke: {type(exc).__name__}: {exc}")
                    continue
                statuses[status] = statuses.get(status, 0) + 1
                sse = headers.get("Content-Type", "").startswith("text/event-stream")
                streamed += sse
                per_api[case.api, status, sse] = per_api.get((case.api, status, sse), 0) + 1
                problem = check(case, expect, status, headers, raw)
                if problem:
                    failures.append(f"#{index} {case.method} {case.path} {case.headers}: {problem}")

    try:
        await asyncio.gather(*[worker(w) for w in range(WORKERS)])
    finally:
        await h.proxy.stop()
    elapsed = time.perf_counter() - t0
    assert not failures, f"{len(failures)} failures, e.g.\n" + "\n".join(failures[:15])
    assert sum(statuses.values()) == REQUESTS
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert not tracebacks, tracebacks[0].getMessage()
    # The mix reached every kind of answer.
    assert statuses[200] > 3000 and streamed > 500, statuses
    for status in (400, 401, 404, 405, 415, 502, 504):
        assert statuses.get(status, 0) > 5, (status, statuses)
    for api in APIS:  # each API answered, streamed and refused often
        assert (
            min(per_api.get((api, 200, False), 0), per_api.get((api, 200, True), 0), per_api.get((api, 400, False), 0))
            > 300
        ), (api, per_api)
    # Sampler failures (raised or timed out) are counted, reported, and nothing else is.
    stats = [h.proxy.stats(c.trial_id) for c in creds]
    sampler_failures = sum(provoked.count(m) for m in ("@@fail", "@@slow"))
    assert sampler_failures > 20
    assert sum(s.sampler_failed for s in stats) == sampler_failures == len(reported)
    assert set(reported) == {RuntimeError, TimeoutError}
    print(
        f"\nfuzz: {REQUESTS} requests in {elapsed:.1f} s; statuses {dict(sorted(statuses.items()))}; "
        f"{streamed} streamed; provoked {len(provoked)}; per API {dict(sorted(per_api.items()))}"
    )
