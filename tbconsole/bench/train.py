"""`tbconsole bench train`: what a long multi-turn trial costs to train, token continuity on vs off.

One synthetic agent trajectory of TB2's shape (default 200 turns, its prompt growing to about 60k
tokens) is driven through the real capture proxy by the real ``openai`` client, as mini-swe-agent
drives it: each turn sends the whole conversation, the proxy samples (a scripted policy: the
replies a real policy would have to sample, a thinking block and a bash tool call), and the agent
echoes the reply back as such agents do (reasoning dropped) with the command's output. The same
trajectory runs twice, once with ``continuity`` on (the default) and once off. The captured turns go
through the runner's ``to_trajectory`` and the cookbook's own ``trajectory_to_data`` (what the
training step gets): datums, trained tokens, and their ratio to the trial's final context.

Then the local engine's train step (``forward_backward`` with the PPO loss, then ``optim_step``, the
embedded engine over the SDK) on the datums of the trajectory's first ``--train-turns`` turns, on
and off: at the full 200 turns, continuity off means millions of tokens per trial, hours of a CPU
train step, so the step is timed on a prefix (use a GPU engine and ``--train-turns 200`` for the
whole). The tokens are the engine's own vocabulary, so the engine trains on exactly what the proxy
captured.

Target: at 200 turns, continuity trains >= 20x fewer tokens than without it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tbconsole.bench.proxy import BASH_TOOL, WORDS, filler_text

if TYPE_CHECKING:  # openai is only a test dependency, imported when the benchmark runs
    from openai.types.chat import ChatCompletionAssistantMessageParam, ChatCompletionMessageParam

TARGET_TOKEN_RATIO = 20.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--turns", type=int, default=200, help="model calls in the trajectory (default 200)")
    parser.add_argument(
        "--target-tokens", type=int, default=60_000, help="the last prompt's length, about (default 60000)"
    )
    parser.add_argument(
        "--train-turns",
        type=int,
        default=16,
        help="turns whose datums the train step is timed on (default 16; 0: no train step)",
    )
    parser.add_argument("--device", default="auto", help="the engine's device: auto, cpu or cuda (default auto)")
    parser.add_argument("--repeats", type=int, default=2, help="train steps timed per setting (median; default 2)")


@dataclass
class Trajectory:
    continuity: bool
    turns: list  # CapturedTurn
    proxy_ms: list[float]  # per call: the proxy's own time (total - sampling)

    @property
    def final_context(self) -> int:
        last = self.turns[-1]
        return len(last.prompt_tokens) + len(last.output_tokens)


def _policy(renderer, seed: int):
    """The scripted policy: a thinking block and one bash call per turn, as the renderer writes it."""
    from tinker_cookbook.renderers.base import Message, ToolCall

    from tbconsole.proxy.scripted import Scripted, ScriptedSampler, reply_tokens

    rng = random.Random(seed)
    counter = iter(range(1 << 30))

    def reply(_call) -> Scripted:
        n = next(counter)
        command = f"grep -n '{rng.choice(WORDS)}' /app/src/mod_{n}.py | head -40"
        message = Message(
            role="assistant",
            content=[{"type": "thinking", "thinking": filler_text(rng, 24)}, {"type": "text", "text": "Checking."}],
            tool_calls=[
                ToolCall(
                    id=f"call_{n}",
                    function=ToolCall.FunctionBody(name="bash", arguments=json.dumps({"command": command})),
                )
            ],
        )
        return Scripted(tokens=reply_tokens(renderer, message))

    return ScriptedSampler(renderer, default=reply, record_calls=False)


async def _drive(renderer, tokenizer, args, continuity: bool, capture_dir: Path) -> Trajectory:
    """The trajectory through a real proxy, by the real openai client."""
    import openai

    from tbconsole.proxy import CaptureProxy
    from tbconsole.record.events import Event, ProxyRequest

    requests: list[ProxyRequest] = []

    def publish(event: Event) -> None:
        if isinstance(event, ProxyRequest):
            requests.append(event)

    proxy = CaptureProxy(
        renderer=renderer,
        tokenizer=tokenizer,
        sampler=_policy(renderer, 1),
        default_max_tokens=512,
        capture_dir=capture_dir,
        publish=publish,
        continuity=continuity,
    )
    await proxy.start()
    try:
        credential = proxy.register_trial("bench-0")
        client = openai.AsyncOpenAI(base_url=credential.openai_base_url, api_key=credential.api_key, max_retries=0)
        rng = random.Random(7)
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": "You are a helpful assistant that can run bash commands."},
            {"role": "user", "content": "Please solve this task:\n" + filler_text(rng, 120)},
        ]
        # Each observation's size, so that the last prompt reaches about --target-tokens.
        per_turn_words = max(8, int(args.target_tokens / args.turns / 2.2) - 40)  # ~2.2 tokens a filler word
        for i in range(args.turns):
            response = await client.chat.completions.create(
                model="policy", messages=messages, tools=[BASH_TOOL], max_tokens=512
            )
            message = response.choices[0].message
            # The echo as mini-swe-agent's litellm sends it: content and tool calls, no reasoning.
            echo: ChatCompletionAssistantMessageParam = {"role": "assistant", "content": message.content or ""}
            calls = [c.model_dump() for c in message.tool_calls or []]
            if calls:
                echo["tool_calls"] = [{"id": c["id"], "type": "function", "function": c["function"]} for c in calls]
            messages.append(echo)
            call_id = calls[0]["id"] if calls else f"call_{i}"
            messages.append({"role": "tool", "tool_call_id": call_id, "content": filler_text(rng, per_turn_words)})
        await client.close()
        turns = proxy.turns("bench-0")
    finally:
        await proxy.stop()
    proxy_ms = [r.total_ms - (r.sample_ms or 0.0) for r in requests if r.total_ms is not None]
    return Trajectory(continuity, turns, proxy_ms)


def _datums(turns: list) -> list:
    from tinker_cookbook.rl.data_processing import trajectory_to_data

    from tbconsole.runner.rollout import to_trajectory

    return trajectory_to_data(to_trajectory(turns), 1.0)


def _train_times(args, datums_by_setting: dict[str, list]) -> dict[str, float]:
    """Median seconds of one train step (forward_backward with ppo + optim_step) per setting."""
    import tinker
    from tinker import types

    from tbconsole.engine import DEFAULT_MODEL, EmbeddedEngine

    longest = max(d.model_input.length for data in datums_by_setting.values() for d in data)
    budget = max(131_072, max(sum(d.model_input.length for d in data) for data in datums_by_setting.values()))
    out: dict[str, float] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedEngine(
            data_dir=tmp,
            device=args.device,
            model=DEFAULT_MODEL,
            max_context=longest + 16,
            max_tokens_per_request=budget,
        ) as engine,
    ):
        client = tinker.ServiceClient(base_url=engine.base_url, api_key=engine.api_key)
        training = client.create_lora_training_client(base_model=DEFAULT_MODEL, rank=32).result()
        for name, data in datums_by_setting.items():
            times = []
            for _ in range(max(1, args.repeats)):
                t0 = time.perf_counter()
                forward = training.forward_backward(data, "ppo")
                step = training.optim_step(types.AdamParams(learning_rate=1e-6))
                forward.result()
                step.result()
                times.append(time.perf_counter() - t0)
            out[name] = statistics.median(times)
    return out


def run(args: argparse.Namespace) -> int:
    from tbconsole.common import offline

    offline.apply_embedded_defaults()
    from tinker_cookbook.renderers import get_renderer

    from tbconsole.engine.registry import load_tokenizer, register_with_cookbook

    if args.turns < 2 or args.target_tokens < 1000:
        raise SystemExit("--turns must be at least 2 and --target-tokens at least 1000")
    register_with_cookbook()
    tokenizer = load_tokenizer()
    renderer = get_renderer("qwen3_5", tokenizer)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"machine: {platform.machine()}, {platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
        f"load average {load:.2f}, python {platform.python_version()}"
    )
    print(f"trajectory: {args.turns} turns through the capture proxy (openai client, renderer qwen3_5)")
    runs: dict[str, Trajectory] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, on in (("on", True), ("off", False)):
            t0 = time.perf_counter()
            runs[name] = asyncio.run(_drive(renderer, tokenizer, args, on, Path(tmp) / name))
            print(f"  continuity {name:3}: driven in {time.perf_counter() - t0:.1f} s")

    print()
    print(f"{'continuity':12} {'datums':>7} {'trained tokens':>15} {'final context':>14} {'amplification':>14} "
          f"{'proxy ms/call p50':>18}")  # fmt: skip
    figures = {}
    for name, trajectory in runs.items():
        data = _datums(trajectory.turns)
        trained = sum(d.model_input.length for d in data)
        figures[name] = (len(data), trained)
        p50 = statistics.median(trajectory.proxy_ms) if trajectory.proxy_ms else float("nan")
        print(
            f"{name:12} {len(data):>7} {trained:>15,} {trajectory.final_context:>14,} "
            f"{trained / trajectory.final_context:>13.2f}x {p50:>18.2f}"
        )
    ratio = figures["off"][1] / figures["on"][1]
    verdict = "PASS" if ratio >= TARGET_TOKEN_RATIO else "MISS"
    print(f"\ntrained tokens, off / on: {ratio:.1f}x  (target >= {TARGET_TOKEN_RATIO:.0f}x at 200 turns: {verdict})")

    if args.train_turns > 0:
        k = min(args.train_turns, args.turns)
        subsets = {name: _datums(trajectory.turns[:k]) for name, trajectory in runs.items()}
        sizes = {name: sum(d.model_input.length for d in data) for name, data in subsets.items()}
        print(f"\ntrain step on the first {k} turns' datums (local engine, {args.device}, median of {args.repeats}):")
        times = _train_times(args, subsets)
        for name, seconds in times.items():
            print(f"  continuity {name:3}: {len(subsets[name]):>4} datums, {sizes[name]:>8,} tokens, {seconds:8.2f} s")
        print(f"  train step, off / on: {times['off'] / times['on']:.1f}x")
    return 0 if ratio >= TARGET_TOKEN_RATIO or args.turns < 200 else 1
