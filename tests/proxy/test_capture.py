"""Durable capture, attribution of turns to trials, per-trial serialisation, lost captures, secrets."""

import asyncio
import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tbconsole.proxy import CaptureError, read_capture
from tbconsole.proxy.scripted import Scripted, reply_tokens
from tbconsole.record.events import EventBus, read_events

from tests_support.proxy import text_reply

HERE = Path(__file__).parent


def chat(cred, content: str, **extra) -> dict:
    return {
        "url": cred.openai_base_url + "/chat/completions",
        "headers": {"Authorization": f"Bearer {cred.api_key}"},
        "json": {"model": "policy", "messages": [{"role": "user", "content": content}], **extra},
    }


async def post(http: httpx.AsyncClient, request: dict) -> httpx.Response:
    return await http.post(request["url"], headers=request["headers"], json=request["json"])


@pytest.mark.e2e
def test_kill_mid_run_keeps_every_answered_turn(tmp_path, renderer):
    capture_dir, info = tmp_path / "capture", tmp_path / "info.json"
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "crash_server.py"), str(capture_dir), str(info)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 180  # importing the renderer takes a while on a busy machine
        while not info.exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "proxy subprocess did not start"
            time.sleep(0.1)
        server = json.loads(info.read_text())
        path = capture_dir / "crash.jsonl"
        with httpx.Client(
            base_url=server["url"], headers={"Authorization": f"Bearer {server['key']}"}, timeout=30
        ) as http:
            for i, expected in enumerate(["first", "second"]):
                r = http.post("/chat/completions", json={"messages": [{"role": "user", "content": f"q{i}"}]})
                assert r.json()["choices"][0]["message"]["content"] == expected
                # The turn was on disk before the agent got its answer.
                assert len(read_capture(path)) == i + 1
            with pytest.raises(httpx.ReadTimeout):  # the third turn is sampling when the process dies
                http.post("/chat/completions", json={"messages": [{"role": "user", "content": "q2"}]}, timeout=1.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.stderr.close()
    assert path.read_bytes().endswith(b"\n")  # whole lines only
    turns = read_capture(path)
    assert [t.turn for t in turns] == [0, 1]
    assert turns[0].output_tokens == reply_tokens(renderer, text_reply("first"))
    assert turns[1].output_tokens == reply_tokens(renderer, text_reply("second"))
    assert "q1" in renderer.tokenizer.decode(turns[1].prompt_tokens)


@pytest.mark.parametrize("fsync", [False, True])
async def test_capture_file_round_trip_and_damage(harness, tmp_path, fsync):
    h = await harness(fsync=fsync)
    cred = h.proxy.register_trial("t")
    async with httpx.AsyncClient(timeout=30) as http:
        history = []
        for i in range(4):  # a growing conversation: each prompt extends the previous one
            history.append({"role": "user", "content": f"step {i} " * 20})
            r = await post(http, {**chat(cred, ""), "json": {"messages": history}})
            history.append(r.json()["choices"][0]["message"])
    turns = h.proxy.turns("t")
    path = h.proxy.capture_path("t")
    assert read_capture(path) == turns
    lines = path.read_bytes().splitlines()
    records = [json.loads(line) for line in lines]
    assert records[0]["prompt_shared"] == 0
    assert all(r["prompt_shared"] > 0 and len(r["prompt_tail"]) < r["prompt_len"] for r in records[1:])
    # the replies the runner's reward-hacking watch reads are the capture lines' own
    assert h.proxy.replies("t") == [(r["turn"], r["reply"]) for r in records]

    torn = tmp_path / "torn.jsonl"  # a power cut in the middle of the last write
    torn.write_bytes(b"\n".join(lines) + b"\n" + lines[-1][: len(lines[-1]) // 2])
    assert read_capture(torn) == turns
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"\n".join([lines[0], lines[1][:10], *lines[2:]]) + b"\n")
    with pytest.raises(CaptureError):
        read_capture(damaged)


async def test_turns_are_attributed_to_their_trials_and_serialised_per_trial(harness):
    h = await harness()
    intervals: dict[str, list[tuple[float, float]]] = {}
    tokenizer = h.proxy.renderer.tokenizer
    ok = reply_tokens(h.proxy.renderer, text_reply("ok"))

    def default(call):
        marker = "alpha" if "alpha" in tokenizer.decode(call.prompt) else "beta"
        start = time.perf_counter()
        intervals.setdefault(marker, []).append((start, start + 0.05))
        return Scripted(tokens=ok, delay=0.05)

    h.sampler.default = default
    a, b = h.proxy.register_trial("trial-alpha"), h.proxy.register_trial("trial-beta")
    async with httpx.AsyncClient(timeout=30) as http:
        responses = await asyncio.gather(
            *[post(http, chat(cred, f"{word} {i}")) for i in range(3) for cred, word in ((a, "alpha"), (b, "beta"))]
        )
    assert all(r.status_code == 200 for r in responses)
    for trial, word in (("trial-alpha", "alpha"), ("trial-beta", "beta")):
        turns = h.proxy.turns(trial)
        assert len(turns) == 3
        assert all(word in tokenizer.decode(t.prompt_tokens) for t in turns)
        spans = sorted(intervals[word])
        assert all(end <= next_start + 1e-3 for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False)), spans
    assert h.sampler.max_in_flight == 2  # trials sample in parallel, each one at a time
    events = h.kinds("proxy.request")
    assert sorted(e.trial for e in events) == ["trial-alpha"] * 3 + ["trial-beta"] * 3
    assert sorted(e.turn for e in events if e.trial == "trial-beta") == [0, 1, 2]


async def test_unwritable_capture_is_a_lost_capture(harness, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    h = await harness(capture_dir=blocker / "capture")
    cred = h.proxy.register_trial("t")
    async with httpx.AsyncClient(timeout=30) as http:
        r = await post(http, chat(cred, "hi"))
    assert r.status_code == 503
    assert h.proxy.lost("t") and "could not be persisted" in h.proxy.lost_reason("t")
    [lost] = h.kinds("proxy.capture_lost")
    assert lost.trial == "t" and lost.step == 0 and lost.group == 0


@pytest.mark.parametrize(
    "outcome, why",
    [
        (Scripted(tokens=[1, 2, 3], omit_logprobs=True), "no log-probs"),
        (Scripted(tokens=[1, 2, 3], logprobs=[-1.0]), "1 log-probs for 3 tokens"),
        (Scripted(tokens=[1, 2, 3], logprobs=[-1.0, float("nan"), -1.0]), "could not be persisted"),
    ],
)
async def test_samples_that_cannot_be_trained_on_mark_the_trial(harness, outcome, why):
    h = await harness()
    h.sampler.add(outcome)
    cred = h.proxy.register_trial("t")
    async with httpx.AsyncClient(timeout=30) as http:
        r = await post(http, chat(cred, "hi"))
    assert r.status_code >= 500
    assert h.proxy.lost("t") and why in h.proxy.lost_reason("t")
    assert h.kinds("proxy.capture_lost")


async def test_unparseable_sample_is_an_error_but_the_turn_is_kept(harness, renderer):
    h = await harness()
    end = renderer.get_stop_sequences()[0]
    for _ in range(2):
        h.sampler.add(Scripted(tokens=[9707, end, 9707, end]))  # two end-of-message tokens: the parser refuses
    cred = h.proxy.register_trial("t")
    async with httpx.AsyncClient(timeout=30) as http:
        r = await post(http, chat(cred, "hi"))
        assert r.status_code == 502 and "could not be parsed" in r.json()["error"]["message"]
        r2 = await post(http, chat(cred, "hi", stream=True))
        # Streaming: the headers are out before sampling, so the error arrives as an SSE error event.
        assert r2.status_code == 200 and b'"error"' in r2.content and b"[DONE]" not in r2.content
    assert len(h.proxy.turns("t")) == 2 and not h.proxy.lost("t")
    event = h.kinds("proxy.request")[0]
    assert event.captured and event.status == 502 and event.turn == 0


async def test_secrets_never_leave_the_proxy(harness, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    bus = EventBus(tmp_path / "run")
    h = await harness()
    h.proxy._publish_fn = bus.publish
    h.sampler.add(Scripted(error=RuntimeError("boom")))
    cred = h.proxy.register_trial("t")
    assert cred.api_key not in repr(cred)
    async with httpx.AsyncClient(timeout=30) as http:
        await post(http, chat(cred, "hi"))  # sampler failure
        await post(http, chat(cred, "hi"))
        await post(http, {**chat(cred, "hi"), "headers": {"Authorization": f"Bearer {cred.api_key}x"}})
        await post(http, chat(cred, "hi", n=3))
    bus.close()
    events_text = (tmp_path / "run" / "events.jsonl").read_text()
    assert len(list(read_events(tmp_path / "run" / "events.jsonl"))) == 4
    captures = "".join(p.read_text() for p in h.proxy.capture_dir.rglob("*") if p.is_file())
    assert captures
    for text in (events_text, captures, caplog.text):
        assert cred.api_key not in text
    assert len(cred.api_key) >= 43  # 32 random bytes, base64url


async def test_prompts_survive_refusals_and_edits_between_turns(harness, renderer):
    """The capture stores each prompt as a tail after what it shares with the previous captured
    prompt; refused requests and history edits in between must not confuse it."""
    from tinker_cookbook.renderers.base import Message

    from tbconsole.proxy.render import full_render

    h = await harness(default_max_tokens=32)
    cred = h.proxy.register_trial("t", context_window=400)
    conversations = [
        ["alpha"],
        ["alpha", "beta"],
        ["alpha", "beta " * 600],  # the third is refused (window)
        ["alpha", "beta", "gamma"],
        ["edited", "beta", "gamma"],
        ["edited"],
        ["edited", "delta"],
    ]
    expected = []
    async with httpx.AsyncClient(timeout=30) as http:
        for texts in conversations:
            messages = [{"role": "user", "content": t} for t in texts]
            r = await post(http, {**chat(cred, ""), "json": {"messages": messages}})
            if r.status_code == 200:
                expected.append(full_render(renderer, [Message(role="user", content=t) for t in texts]))
            else:
                assert r.json()["error"]["code"] == "context_length_exceeded"
    turns = h.proxy.turns("t")
    assert [t.prompt_tokens for t in turns] == expected and len(expected) == 6
    assert read_capture(h.proxy.capture_path("t")) == turns


def test_captured_prompts_equal_full_renders_through_the_api(renderer, tmp_path):
    """End to end over random conversations: conversion cache + incremental render + the
    capture's prompt sharing give, for every turn, exactly the full render of that request.
    Token continuity is off here: with it on, a request that echoes the sampled reply ("ok") is
    spliced from the sampled tokens on purpose, not rendered (tests/proxy/test_continuity.py)."""
    import itertools

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tbconsole.proxy import openai_api
    from tbconsole.proxy.render import full_render

    from tests_support.proxy import BASH_TOOL, ThreadedProxy, make_harness

    texts = st.sampled_from(["ls", "ok", "error: x\n" * 3, "<think>", "", "a b c " * 10])
    call = st.builds(
        lambda i, c: {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": c})},
        },
        st.integers(0, 3),
        texts,
    )
    message = st.one_of(
        st.builds(lambda t: {"role": "user", "content": t}, texts),
        st.builds(
            lambda t, r, calls: {
                "role": "assistant",
                "content": t,
                "reasoning_content": r,
                **({"tool_calls": calls} if calls else {}),
            },
            texts,
            texts,
            st.lists(call, max_size=2),
        ),
        st.builds(lambda t: {"role": "tool", "tool_call_id": "c0", "content": t}, texts),
    )
    step = st.one_of(
        st.lists(message, min_size=1, max_size=3).map(lambda m: ("grow", m)),
        st.integers(1, 6).map(lambda n: ("cut", n)),
        st.tuples(st.integers(0, 6), message).map(lambda x: ("edit", x)),
    )
    counter = itertools.count()
    harness = make_harness(renderer, tmp_path / "capture", continuity=False)
    with ThreadedProxy(harness) as threaded, httpx.Client(timeout=30) as http:

        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
        @given(tools=st.booleans(), steps=st.lists(step, min_size=1, max_size=6))
        def check(tools, steps):
            cred = threaded.call(harness.proxy.register_trial, f"prop-{next(counter)}")
            messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
            expected = []
            for kind, arg in steps:
                if kind == "grow":
                    messages = messages + arg
                elif kind == "cut":
                    messages = messages[: max(1, len(messages) - arg)]
                else:
                    messages = list(messages)
                    messages[arg[0] % len(messages)] = arg[1]
                body = {"model": "policy", "messages": messages, **({"tools": [BASH_TOOL]} if tools else {})}
                r = http.post(
                    cred.openai_base_url + "/chat/completions",
                    json=body,
                    headers={"Authorization": f"Bearer {cred.api_key}"},
                )
                if r.status_code == 200:
                    expected.append(full_render(renderer, openai_api.parse_request(body, renderer).messages))
                else:
                    assert r.status_code == 400, r.text
            turns = threaded.call(harness.proxy.turns, cred.trial_id)
            assert [t.prompt_tokens for t in turns] == expected
            if turns:
                assert read_capture(threaded.call(harness.proxy.capture_path, cred.trial_id)) == turns

        check()


def test_a_capture_file_is_never_appended_to_another_attempts(tmp_path):
    from tbconsole.proxy.capture import CapturedTurn, CaptureError, CaptureWriter

    path = tmp_path / "t.jsonl"
    path.write_text('{"v": 1}\n')  # an earlier attempt's file
    turn = CapturedTurn(
        turn=0,
        prompt_tokens=[1, 2],
        output_tokens=[3],
        logprobs=[-0.1],
        stop_reason="stop",
        api="openai",
        started_at=0.0,
        sample_ms=1.0,
        max_tokens=8,
        temperature=1.0,
    )
    with pytest.raises(CaptureError, match="already exists"):
        CaptureWriter(path, "t").write(turn)
    assert path.read_text() == '{"v": 1}\n'
