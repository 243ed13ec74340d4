"""A sampler that replays chosen assistant replies, for tests and the proxy benchmark.

``ScriptedSampler`` stands in for the *policy's choices*, not for the Tinker SDK: a random-init
model never emits a valid tool call or a chosen length stop, so tests that need a specific reply
script it. It has the SDK's interface (``await sample_async(prompt, num_samples,
sampling_params)``) and returns the SDK's own ``SampleResponse``/``SampledSequence`` types, with
tokens produced by the renderer from the chosen assistant message — exactly the tokens a model
would have had to sample for the renderer to parse that message back. Tests that exercise the
real SDK path use the local engine instead.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import tinker
from tinker_cookbook.renderers.base import Message, Renderer


def reply_tokens(renderer: Renderer, reply: Message) -> list[int]:
    """The tokens a policy samples to produce ``reply`` after a generation prompt (including
    the end-of-message token), taken from the renderer's own supervised rendering."""
    conversation = [Message(role="user", content="."), reply]
    model_input, weights = renderer.build_supervised_example(conversation)
    tokens = model_input.to_ints()
    weight_list = weights.tolist() if hasattr(weights, "tolist") else list(weights)
    first = next(i for i, w in enumerate(weight_list) if w > 0)
    return tokens[first:]


@dataclass
class ScriptedCall:
    prompt: list[int]
    num_samples: int
    sampling_params: tinker.SamplingParams


@dataclass
class Scripted:
    """One scripted outcome: tokens to return, or an exception to raise."""

    tokens: list[int] = field(default_factory=list)
    stop_reason: Literal["stop", "length"] = "stop"
    logprobs: list[float] | None = None  # default: -0.5 per token
    omit_logprobs: bool = False
    error: BaseException | None = None
    delay: float = 0.0
    gate: asyncio.Event | None = None  # wait for this before answering


class ScriptedSampler:
    """Answers each ``sample_async`` with the next scripted outcome; when the script has run
    out, ``default`` (a reply, or a function of the call) answers."""

    def __init__(
        self,
        renderer: Renderer,
        script: list[Scripted | Message] | None = None,
        default: Callable[[ScriptedCall], Scripted] | Message | None = None,
        *,
        record_calls: bool = True,
    ):
        self.renderer = renderer
        self._fixed: Scripted | None = None
        if default is not None and not callable(default):
            self._fixed = Scripted(tokens=reply_tokens(renderer, default))
            default = None
        self.record_calls = record_calls  # False: keep nothing per call (benchmarks)
        self.script: deque[Scripted] = deque()
        self.calls: list[ScriptedCall] = []
        self.default = default
        self.in_flight = 0
        self.max_in_flight = 0
        self._ids = itertools.count()
        for item in script or []:
            self.add(item)

    def add(self, item: Scripted | Message, **kwargs: Any) -> Scripted:
        if not isinstance(item, Scripted):
            item = Scripted(tokens=reply_tokens(self.renderer, item), **kwargs)
        self.script.append(item)
        return item

    def truncated(self, reply: Message, keep: int) -> Scripted:
        """A length stop: the first ``keep`` tokens of ``reply``."""
        return self.add(Scripted(tokens=reply_tokens(self.renderer, reply)[:keep], stop_reason="length"))

    def _next(self, prompt: tinker.ModelInput, num_samples: int, params: tinker.SamplingParams) -> Scripted:
        call = None
        if self.record_calls or (not self.script and self.default is not None):
            call = ScriptedCall(prompt.to_ints(), num_samples, params)
            if self.record_calls:
                self.calls.append(call)
        if self.script:
            return self.script.popleft()
        if self.default is not None and call is not None:
            return self.default(call)
        if self._fixed is not None:
            return self._fixed
        raise RuntimeError("ScriptedSampler: script exhausted")

    async def sample_async(
        self, prompt: tinker.ModelInput, num_samples: int, sampling_params: tinker.SamplingParams, **_: Any
    ) -> tinker.SampleResponse:
        outcome = self._next(prompt, num_samples, sampling_params)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if outcome.gate is not None:
                await outcome.gate.wait()
            if outcome.delay:
                await asyncio.sleep(outcome.delay)
            if outcome.error is not None:
                raise outcome.error
        finally:
            self.in_flight -= 1
        tokens = list(outcome.tokens)
        max_tokens = sampling_params.max_tokens
        stop_reason = outcome.stop_reason
        if max_tokens is not None and len(tokens) > max_tokens:
            tokens, stop_reason = tokens[:max_tokens], "length"
        logprobs = (
            None
            if outcome.omit_logprobs
            else (list(outcome.logprobs) if outcome.logprobs is not None else [-0.5] * len(tokens))
        )
        sequence = tinker.SampledSequence(
            stop_reason=stop_reason,
            sequence_id=f"scripted-{next(self._ids)}",
            _tokens_list=tokens,
            _logprobs_list=logprobs,
        )
        return tinker.SampleResponse(sequences=[sequence] * num_samples)

    def sample(
        self, prompt: tinker.ModelInput, num_samples: int, sampling_params: tinker.SamplingParams, **kwargs: Any
    ):
        """The SDK's current spelling: returns an awaitable."""
        return self.sample_async(prompt, num_samples, sampling_params, **kwargs)

    # Samplers are handed to the proxy as "a callable returning the current sampling client".
    def __call__(self) -> ScriptedSampler:
        return self
