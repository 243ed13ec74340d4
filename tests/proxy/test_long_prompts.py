"""Multi-megabyte prompts: they render (long runs of one character class included), to the same
tokens as one tokenizer call for ordinary text, and off the event loop, so the other trials of
the group are answered meanwhile."""

import asyncio
import json
import random
import threading
import time

import aiohttp
import pytest
from tinker_cookbook.renderers import get_renderer

from tbconsole.proxy.tokenizer import _safe, encode_in_pieces, split_points

from tests_support.paths import REPO
from tests_support.proxy import make_harness


def _texts() -> dict[str, str]:
    rng = random.Random(7)
    words = [
        "the",
        "Cat's",
        "DON'T",
        "naïve",
        "cafe\u0301",
        "中文",
        "日本語です",
        "Ωmega",
        "x1",
        "42",
        "3.14",
        "foo_bar",
        "CamelCase",
        "ÉCOLE",
        "it’s",
        "👍🏽",
        "\u0915\u094d\u0937",
        "ß",
    ]
    seps = [
        " ",
        "  ",
        ", ",
        ". ",
        "\n",
        "\n\n",
        "\t",
        " - ",
        "(",
        ")",
        "'",
        '"',
        "/",
        "\r\n",
        "…",
        "，",
        "。",
        "\n    ",
        " \n",
        "'s ",
        "\u00a0",
    ]
    source = "".join(p.read_text() for p in sorted((REPO / "tbconsole" / "proxy").glob("*.py")))
    prose = "".join(rng.choice(words) + rng.choice(seps) for _ in range(30000))
    data = json.dumps(
        [{"id": i, "name": rng.choice(words), "v": [rng.random(), None, True]} for i in range(3000)], ensure_ascii=False
    )
    log_lines = "".join(
        f"2026-05-{i % 28 + 1:02d} INFO worker[{i}]: processed {i * 7} items in {i / 3:.2f}s\n" for i in range(4000)
    )
    return {"source": source, "prose": prose, "json": data, "log": log_lines}


@pytest.mark.parametrize("name", ["source", "prose", "json", "log"])
def test_pieces_encode_to_the_tokens_of_one_call(tokenizer, name):
    text = _texts()[name]
    encode = tokenizer.tml_tokenizer.encode_ordinary
    whole = encode(text)
    for max_chars in (512, 4096):  # small pieces: hundreds of cut points per text
        assert len(split_points(text, max_chars)) > len(text) // max_chars // 2
        assert encode_in_pieces(encode, text, max_chars) == whole
    assert tokenizer.encode(text, split_special_tokens=True) == whole


def test_every_cut_point_is_a_pre_token_boundary(tokenizer):
    """The property ``split_points`` relies on, checked at every point it may cut, in strings made
    of the characters that pre-tokenizers treat specially."""
    encode = tokenizer.tml_tokenizer.encode_ordinary
    alphabet = list("aZé\u0301中 \n\r\t'’.,1_-/\u00a0") + ["'s", "'LL", "\r\n", "  "]
    rng = random.Random(3)
    checked = 0
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 30)))
        whole = encode(text)
        for i in range(1, len(text)):
            if _safe(text, i):
                assert encode(text[:i]) + encode(text[i:]) == whole, (text, i)
                checked += 1
    assert checked > 1000


@pytest.mark.parametrize("char", [" ", "a", ".", "\n", "é", "中", "1"])
def test_long_runs_of_one_character_class_encode(tokenizer, char):
    text = "start " + char * 1_500_000 + " end"
    tokens = tokenizer.encode(text)
    assert tokenizer.decode(tokens) == text


def _post(session, cred, content: str):
    body = {"model": "policy", "max_tokens": 8, "messages": [{"role": "user", "content": content}]}
    return session.post(
        cred.openai_base_url + "/chat/completions", json=body, headers={"Authorization": f"Bearer {cred.api_key}"}
    )


async def test_a_multi_megabyte_prompt_with_a_long_run_renders(harness):
    h = await harness()
    cred = h.proxy.register_trial("big")
    content = "cat output:\n" + "x" * 2_000_000 + "\n" + "lorem ipsum dolor sit amet\n" * 100_000
    async with aiohttp.ClientSession() as session, _post(session, cred, content) as r:
        assert r.status == 200, await r.text()
    [turn] = h.proxy.turns("big")
    assert content.strip() in h.proxy.tokenizer.decode(turn.prompt_tokens)  # the template strips it


class _GatedTokenizer:
    """The real tokenizer, except that encoding a multi-MB text signals ``started`` and waits
    for ``release``: if rendering ran on the event loop, nothing else could be answered until
    then."""

    def __init__(self, inner):
        self._inner = inner
        self.started = threading.Event()
        self.release = threading.Event()

    def encode(self, text, *args, **kwargs):
        if isinstance(text, str) and len(text) > 1_000_000:
            self.started.set()
            self.release.wait(20)
        return self._inner.encode(text, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


async def test_other_trials_are_answered_while_a_long_prompt_renders(tokenizer, tmp_path):
    gated = _GatedTokenizer(tokenizer)
    h = make_harness(get_renderer("qwen3_5", gated), tmp_path / "capture")
    await h.proxy.start()
    try:
        big, small = h.proxy.register_trial("big"), h.proxy.register_trial("small")
        async with aiohttp.ClientSession() as session:

            async def call(cred, content):
                async with _post(session, cred, content) as r:
                    return r.status, await r.json()

            slow = asyncio.create_task(call(big, "word " * 1_000_000))  # 5 MB
            assert await asyncio.to_thread(gated.started.wait, 30)
            status, body = await asyncio.wait_for(call(small, "hi"), 60)
            assert status == 200 and body["choices"][0]["message"]["content"] == "ok"
            assert not slow.done()  # held at its gate: the small call did not wait behind it
            gated.release.set()
            status, body = await slow
            assert status == 200 and body["usage"]["prompt_tokens"] > 1_000_000
    finally:
        gated.release.set()
        await h.proxy.stop()


async def test_the_event_loop_keeps_running_during_a_real_long_render(harness):
    """Without a gate: the real tokenizer on 5 MB, while a ticker measures the loop's longest
    stall (one call for the whole text holds the GIL for ~0.7 s; pieces keep it to milliseconds)."""
    h = await harness()
    cred = h.proxy.register_trial("big")
    gaps = []
    done = asyncio.Event()

    async def ticker():
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    content = "lorem ipsum dolor sit amet, consectetur adipiscing elit.\n" * 90_000  # 5 MB
    async with aiohttp.ClientSession() as session:
        body = json.dumps({"model": "policy", "messages": [{"role": "user", "content": content}]}).encode()
        t0 = time.perf_counter()
        async with session.post(
            cred.openai_base_url + "/chat/completions", data=body, headers={"Authorization": f"Bearer {cred.api_key}"}
        ) as r:
            assert r.status == 200
        elapsed = time.perf_counter() - t0
    done.set()
    await tick
    assert max(gaps) < max(0.3, elapsed / 3), (max(gaps), elapsed)


def test_only_renders_of_much_new_text_leave_the_loop(renderer):
    """``pending_chars`` decides: a growing conversation re-renders its tail only (the new
    messages and the previous last one), so the turns that bring a long observation or follow
    it right after go to a thread, and the later ones stay on the loop."""
    from tbconsole.proxy import openai_api
    from tbconsole.proxy.chat import ConversionCache
    from tbconsole.proxy.pipeline import INLINE_RENDER_CHARS
    from tbconsole.proxy.render import IncrementalRenderer

    cache, incremental = ConversionCache(), IncrementalRenderer(renderer)
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "go"}]

    def pending(messages):
        chat = openai_api.parse_request({"messages": messages}, renderer, cache)
        chars = incremental.pending_chars(chat.messages)
        incremental.render(chat.messages)
        return chars

    assert pending(history) == len("Be brief.go")
    history += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "y" * 200_000}]
    assert pending(history) >= 200_000 > INLINE_RENDER_CHARS
    history += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]
    assert pending(history) == len("y" * 200_000) + len("donenext")  # the previous last message, re-rendered
    history += [{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]
    assert pending(history) == len("nextab") < INLINE_RENDER_CHARS
