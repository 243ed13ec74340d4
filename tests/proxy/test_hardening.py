"""What the fuzzing of the proxy with real clients found, one test per finding: content
encodings, type confusion, errors after SSE headers, per-trial keys, sampler failures."""

import asyncio
import gzip
import json
import logging
import zlib

import aiohttp
import pytest

from tbconsole.proxy.scripted import Scripted, reply_tokens

from tests_support.proxy import text_reply

OPENAI = "/v1/chat/completions"
ANTHROPIC = "/v1/messages"
RESPONSES = "/v1/responses"
HI = {"model": "policy", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
HI_RESPONSES = {"model": "policy", "max_output_tokens": 16, "input": "hi"}


def hi(path: str) -> dict:
    return HI_RESPONSES if path == RESPONSES else HI


def auth(cred) -> dict:
    return {"Authorization": f"Bearer {cred.api_key}"}


def assert_error_shape(path: str, body: dict) -> dict:
    if "/messages" in path:
        assert body["type"] == "error" and {"type", "message"} <= set(body["error"]), body
    else:
        assert set(body) == {"error"} and {"message", "type", "param", "code"} <= set(body["error"]), body
    return body["error"]


async def post(session, cred, path, data: bytes, headers=None):
    async with session.post(cred.proxy_url + path, data=data, headers={**auth(cred), **(headers or {})}) as r:
        return r.status, r.headers, await r.read()


@pytest.fixture
async def session():
    # One connection: every request reuses it, so a request that broke it breaks the next one.
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as s:
        yield s


# -- 1. content encodings --------------------------------------------------------------------------


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC, RESPONSES])
async def test_content_encodings_are_decoded_or_refused_in_the_api_shape(harness, session, path):
    h = await harness()
    cred = h.proxy.register_trial("t")
    raw = json.dumps(hi(path)).encode()
    raw_deflate = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    raw_deflate = raw_deflate.compress(raw) + raw_deflate.flush()
    accepted = [
        ({"Content-Encoding": "gzip"}, gzip.compress(raw)),
        ({"Content-Encoding": "GZip"}, gzip.compress(raw[:10]) + gzip.compress(raw[10:])),  # two members
        ({"Content-Encoding": "deflate"}, zlib.compress(raw)),
        ({"Content-Encoding": "deflate"}, raw_deflate),
        ({"Content-Encoding": "identity"}, raw),
        ({"Content-Encoding": "gzip, deflate"}, zlib.compress(gzip.compress(raw))),
    ]
    refused = [
        ({"Content-Encoding": "gzip"}, raw, 400),  # a plain body that says gzip
        ({"Content-Encoding": "deflate"}, raw, 400),
        ({"Content-Encoding": "gzip"}, gzip.compress(raw)[:-6], 400),  # truncated
        ({"Content-Encoding": "gzip"}, gzip.compress(raw) + b"junk", 400),
        ({"Content-Encoding": "br"}, raw, 415),
        ({"Content-Encoding": "zstd"}, raw, 415),
        ({"Content-Encoding": "gzip, gzip, gzip, gzip, gzip"}, raw, 415),
        ({"Content-Encoding": "gzip"}, gzip.compress(b" " * (17 * 1024 * 1024)), 413),
    ]  # a bomb
    for headers, data, status in refused:
        code, got_headers, body = await post(session, cred, path, data, headers)
        assert code == status, (headers, body[:200])
        assert got_headers["Content-Type"].startswith("application/json")
        assert_error_shape(path, json.loads(body))
        # The connection is still good: the next request on it is answered.
        code, _, body = await post(session, cred, path, raw)
        assert code == 200, body[:200]
    for headers, data in accepted:
        code, _, body = await post(session, cred, path, data, headers)
        assert code == 200, (headers, body[:200])
    assert h.proxy.stats("t").captured == len(refused) + len(accepted)


async def test_requests_that_are_not_http_are_refused_without_a_traceback(harness, session, caplog):
    """aiohttp's own parser refuses these before any route (a plain-text 400, connection closed):
    no API client sends them, but they must not fill the log with tracebacks either."""
    caplog.set_level(logging.DEBUG)
    h = await harness()
    cred = h.proxy.register_trial("t")
    path = "/t/t/v1/chat/completions"
    for raw in [
        b"GARBAGE\r\n\r\n",
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello".encode(),
        f"POST {path} HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * 9000}\r\n\r\n".encode(),
        f"POST {path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhi\r\n0\r\n\r\n".encode(),
        f"GET {path} HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n".encode(),
    ]:
        reader, writer = await asyncio.open_connection("127.0.0.1", h.proxy.port)
        writer.write(raw)
        await writer.drain()
        assert (await reader.read(1000)).startswith(b"HTTP/1.0 400 Bad Request"), raw[:40]
        writer.close()
    # The proxy's and aiohttp's records only: a tinker client another test left behind may log its
    # own heartbeat's connection error here, which says nothing about these requests.
    ours = [r for r in caplog.records if r.name.split(".")[0] in ("tbconsole", "aiohttp")]
    assert not [r for r in ours if r.exc_info], caplog.text
    assert caplog.text.count("refused a malformed HTTP request") == 5
    code, _, _ = await post(session, cred, OPENAI, json.dumps(HI).encode())
    assert code == 200


# -- 2. type confusion -----------------------------------------------------------------------------

WRONG = [5, 1.5, True, None, [], ["text"], {}, {"type": "text"}]


@pytest.mark.parametrize("value", WRONG)
@pytest.mark.parametrize("field", ["type", "content", "tool_use_id", "is_error", "block_type", "block_text"])
async def test_anthropic_tool_result_fields_of_the_wrong_type_are_400(harness, session, field, value):
    h = await harness()
    cred = h.proxy.register_trial("t")
    block = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "out"}]}
    if field == "block_type":
        block["content"][0]["type"] = value
    elif field == "block_text":
        block["content"][0]["text"] = value
    else:
        block[field] = value
    body = {
        **HI,
        "messages": [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}]},
            {"role": "user", "content": [block]},
        ],
    }
    code, _, raw = await post(session, cred, ANTHROPIC, json.dumps(body).encode())
    valid = (
        (field in ("content", "tool_use_id", "is_error") and value is None)
        or (field == "content" and value == [])
        or (field == "is_error" and value is True)
    )
    assert code == (200 if valid else 400), raw[:300]
    if code == 400:
        assert assert_error_shape(ANTHROPIC, json.loads(raw))["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "path, body",
    [
        (ANTHROPIC, {**HI, "tools": [{"name": "bash", "input_schema": {"type": "object", "properties": 5}}]}),
        (ANTHROPIC, {**HI, "tools": [{"name": "bash", "input_schema": {"properties": {"x": []}}}]}),
        (OPENAI, {**HI, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"properties": "x"}}}]}),
        (OPENAI, {**HI, "messages": [{"role": "user", "content": [{"type": {"x": 1}, "text": "hi"}]}]}),
        (ANTHROPIC, {**HI, "system": [{"type": ["text"], "text": "x"}]}),
        (ANTHROPIC, {**HI, "tools": [{"type": ["custom"], "name": "bash"}]}),
        (RESPONSES, {**HI_RESPONSES, "tools": [{"type": "function", "name": "f", "parameters": {"properties": "x"}}]}),
        (RESPONSES, {**HI_RESPONSES, "input": [{"role": "user", "content": [{"type": {"x": 1}, "text": "hi"}]}]}),
        (
            RESPONSES,
            {
                **HI_RESPONSES,
                "input": [{"type": "reasoning", "summary": {"text": "x"}}, {"role": "user", "content": "hi"}],
            },
        ),
        (RESPONSES, {**HI_RESPONSES, "input": [{"type": ["message"], "role": "user", "content": "hi"}]}),
        (RESPONSES, {**HI_RESPONSES, "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": "all"}}),
    ],
)
async def test_malformed_fields_anywhere_are_4xx_without_a_traceback(harness, session, caplog, path, body):
    caplog.set_level(logging.INFO)
    h = await harness()
    cred = h.proxy.register_trial("t")
    code, _, raw = await post(session, cred, path, json.dumps(body).encode())
    assert code < 500, raw[:300]
    if code >= 400:
        assert_error_shape(path, json.loads(raw))
    assert not [r for r in caplog.records if r.exc_info], caplog.text


# -- 3. errors after the SSE headers ------------------------------------------------------------------


def sse_events(raw: bytes) -> list[tuple[str | None, str]]:
    events = []
    for block in raw.decode().split("\n\n"):
        kind, data = None, []
        for line in block.splitlines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        if data:
            events.append((kind, "\n".join(data)))
    return events


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC, RESPONSES])
@pytest.mark.parametrize("failure", ["sampler", "bug"])
async def test_an_error_after_sse_headers_ends_the_stream_with_the_apis_error_event(
    harness, session, monkeypatch, caplog, path, failure
):
    from tbconsole.proxy import anthropic_api, openai_api, responses_api

    h = await harness()
    cred = h.proxy.register_trial("t")
    if failure == "sampler":
        h.sampler.add(Scripted(error=RuntimeError("gateway down")))
    else:  # an unexpected exception while answering: a bug, which must still not break the stream

        def broken(*args, **kwargs):
            raise KeyError("boom")

        target = {ANTHROPIC: anthropic_api, OPENAI: openai_api, RESPONSES: responses_api.Answer}[path]
        monkeypatch.setattr(target, "stream_events", broken)
    code, headers, raw = await post(session, cred, path, json.dumps({**hi(path), "stream": True}).encode())
    assert code == 200 and headers["Content-Type"] == "text/event-stream"
    assert b"HTTP/1.1" not in raw  # no second response inside the stream
    kind, data = sse_events(raw)[-1]
    error = json.loads(data)
    if path == ANTHROPIC:
        assert kind == "error" and error["type"] == "error"
        assert error["error"]["type"] == "api_error"
    elif path == RESPONSES:  # error, then response.failed, numbered on from response.created
        events = sse_events(raw)
        assert [k for k, _ in events] == ["response.created", "response.in_progress", "error", "response.failed"]
        assert [json.loads(d)["sequence_number"] for _, d in events] == [0, 1, 2, 3]
        assert json.loads(events[2][1])["code"] == error["response"]["error"]["code"] == "server_error"
        assert error["response"]["status"] == "failed"
    else:
        assert set(error) == {"error"} and error["error"]["type"] == "server_error"
        assert b"[DONE]" not in raw
    status = 502 if failure == "sampler" else 500
    assert h.proxy.stats("t").failed == 1
    assert [e.error is not None for e in h.kinds("proxy.request")] == [True]
    if failure == "bug":
        assert "internal proxy error" in h.kinds("proxy.request")[0].error
    # The connection is still good.
    monkeypatch.undo()
    code, _, raw = await post(session, cred, path, json.dumps(hi(path)).encode())
    assert code == 200, (status, raw[:200])


@pytest.mark.parametrize("api", ["openai", "anthropic", "responses"])
async def test_the_middleware_ends_a_started_stream_instead_of_answering_twice(harness, session, caplog, api):
    """The safety net for any handler: an exception that escapes after SSE headers reaches the
    middleware, which ends the stream with the API's error event."""
    from aiohttp import web

    import tbconsole.proxy.http as server

    h = await harness()

    async def handler(request):
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        request[server._STREAM] = (api, stream)
        await stream.write(b": started\n\n")
        raise KeyError("a bug")

    app = web.Application(middlewares=[h.proxy._errors])
    app.router.add_post("/x", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/x"
    try:
        for _ in range(2):  # the second on the same connection
            async with session.post(url, data=b"{}") as r:
                raw = await r.read()
            assert r.status == 200 and b"HTTP/1.1" not in raw
            kind, data = sse_events(raw)[-1]
            error = json.loads(data)
            assert (kind == "error") == (api != "openai")
            if api == "responses":
                assert error["type"] == "error" and error["code"] == "server_error"
                assert error["message"] == "internal proxy error"
                continue
            assert error["error"]["message"] == "internal proxy error"
            assert_error_shape("/v1/messages" if api == "anthropic" else OPENAI, error)
    finally:
        await runner.cleanup()
    assert "unexpected error" in caplog.text  # a bug is logged as one, with its traceback


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC, RESPONSES])
async def test_a_lone_surrogate_echoed_into_a_stream_is_escaped(harness, session, path):
    """Found by the fuzzer: ``model`` is echoed in every SSE event, and a lone surrogate (valid
    JSON) cannot be written as UTF-8."""
    h = await harness()
    cred = h.proxy.register_trial("t")
    raw = json.dumps({**hi(path), "model": "\ud800x", "stream": True}).encode()
    code, _, body = await post(session, cred, path, raw)
    assert code == 200 and b"internal proxy error" not in body
    kind, data = sse_events(body)[-1]
    assert {OPENAI: data == "[DONE]", ANTHROPIC: kind == "message_stop", RESPONSES: kind == "response.completed"}[path]
    assert b'"\\ud800x"' in body


# -- 5. per-trial keys ----------------------------------------------------------------------------------


async def test_each_trial_has_its_own_key(harness, session, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    h = await harness()
    a, b = h.proxy.register_trial("g-t0"), h.proxy.register_trial("g-t1")
    assert a.api_key != b.api_key and len(a.api_key) == 43
    assert set(a.api_key) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert not hasattr(h.proxy, "api_key")  # no group-wide key any more
    for path in (OPENAI, ANTHROPIC, RESPONSES, "/v1/models", "/v1/messages/count_tokens"):
        data = json.dumps(hi(path)).encode()
        for cred, key, want in ((a, a.api_key, 200), (a, b.api_key, 401), (b, a.api_key, 401), (b, b.api_key, 200)):
            for header in ({"Authorization": f"Bearer {key}"}, {"x-api-key": key}):
                method, payload = ("GET", None) if path == "/v1/models" else ("POST", data)
                async with session.request(method, cred.proxy_url + path, data=payload, headers=header) as r:
                    assert r.status == want, (path, cred.trial_id, header)
                    if want == 401:
                        assert_error_shape(path, await r.json())
                    await r.read()
    assert sorted(e.trial for e in h.kinds("proxy.request") if e.status == 200) == ["g-t0"] * 6 + ["g-t1"] * 6
    assert len(h.proxy.turns("g-t0")) == len(h.proxy.turns("g-t1")) == 6
    captures = "".join(p.read_text() for p in h.proxy.capture_dir.rglob("*") if p.is_file())
    texts = [
        captures,
        caplog.text,
        repr(h.proxy),
        repr(h.proxy._keys),
        repr(a),
        repr(h.proxy.stats("g-t0")),
        "".join(repr(e) for e in h.events),
    ]
    for text in texts:
        assert a.api_key not in text and b.api_key not in text


# -- 6. sampler failures ---------------------------------------------------------------------------------


async def test_sampler_failures_are_counted_and_reported(harness, session, caplog):
    caplog.set_level(logging.DEBUG)
    reported = []
    h = await harness(on_sampler_error=lambda trial, exc: reported.append((trial, exc)))
    cred = h.proxy.register_trial("t")
    h.sampler.add(Scripted(error=RuntimeError("gateway down: Authorization: Bearer sk-secretsecret123")))
    h.sampler.add(Scripted(error=ConnectionRefusedError("refused")))
    h.sampler.add(Scripted(tokens=[1, 2, 3], omit_logprobs=True))  # a capture loss, not a sampler failure
    code, _, raw = await post(session, cred, OPENAI, json.dumps(HI).encode())
    assert code == 502 and "gateway down" in assert_error_shape(OPENAI, json.loads(raw))["message"]
    assert b"secretsecret" not in raw
    stats = h.proxy.stats("t")
    assert stats.sampler_failed == 1 and stats.failed == 1
    assert stats.last_sampler_error.startswith("RuntimeError: gateway down")
    assert "secretsecret" not in stats.last_sampler_error and "secretsecret" not in caplog.text
    code, _, raw = await post(session, cred, ANTHROPIC, json.dumps({**HI, "stream": True}).encode())
    assert code == 200 and sse_events(raw)[-1][0] == "error"
    assert stats.sampler_failed == 2 and stats.last_sampler_error == "ConnectionRefusedError: refused"
    code, _, raw = await post(session, cred, OPENAI, json.dumps(HI).encode())
    assert code == 502 and h.proxy.lost("t")
    assert stats.sampler_failed == 2 and stats.failed == 3
    assert [(t, type(e)) for t, e in reported] == [("t", RuntimeError), ("t", ConnectionRefusedError)]
    assert not [r for r in caplog.records if r.exc_info]


@pytest.mark.parametrize("path", [OPENAI, ANTHROPIC, RESPONSES])
async def test_a_sampling_call_past_its_timeout_is_a_504_sampler_failure(harness, session, path):
    reported = []
    h = await harness(sample_timeout_s=0.05, on_sampler_error=lambda trial, exc: reported.append(exc))
    cred = h.proxy.register_trial("t")
    slow = Scripted(tokens=reply_tokens(h.proxy.renderer, text_reply("late")), delay=5)
    h.sampler.add(slow)
    code, _, raw = await post(session, cred, path, json.dumps(hi(path)).encode())
    assert code == 504
    error = assert_error_shape(path, json.loads(raw))
    assert "timed out after 0.05 s" in error["message"]
    assert error["type"] == ("timeout_error" if path == ANTHROPIC else "server_error")
    assert [type(e) for e in reported] == [TimeoutError]
    stats = h.proxy.stats("t")
    assert stats.sampler_failed == 1 and stats.last_sampler_error.startswith("TimeoutError")
    assert h.proxy.turns("t") == [] and not h.proxy.lost("t")
    code, _, _ = await post(session, cred, path, json.dumps(hi(path)).encode())  # the trial carries on
    assert code == 200


async def test_a_failing_callback_does_not_break_the_answer(harness, session, caplog):
    def callback(trial, exc):
        raise ValueError("observer bug")

    h = await harness(on_sampler_error=callback)
    cred = h.proxy.register_trial("t")
    h.sampler.add(Scripted(error=RuntimeError("down")))
    code, _, _ = await post(session, cred, OPENAI, json.dumps(HI).encode())
    assert code == 502 and h.proxy.stats("t").sampler_failed == 1
    assert "on_sampler_error failed" in caplog.text


def test_constructor_checks_the_timeout(renderer, tmp_path):
    from tests_support.proxy import make_harness

    with pytest.raises(ValueError):
        make_harness(renderer, tmp_path, sample_timeout_s=0)


async def test_a_cancelled_render_returns_only_when_its_thread_is_done():
    """The caller holds the trial's lock: it must not let go while the thread still renders."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tbconsole.proxy.offload import off_loop

    started, finished = threading.Event(), threading.Event()

    def render():
        started.set()
        finished.wait(0.3)
        finished.set()
        return "done"

    with ThreadPoolExecutor(1) as pool:
        task = asyncio.create_task(off_loop(pool, render))
        await asyncio.to_thread(started.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert finished.is_set()
        assert await off_loop(pool, render) == "done"
