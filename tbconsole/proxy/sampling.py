"""One call to the sampler, bounded in time, and how its failure is told.

A sampler failure is infrastructure (the gateway, the SDK, a timeout), never the agent's doing:
the proxy answers 502 (504 for a timeout), counts it in ``TrialStats.sampler_failed`` and tells
the host through ``on_sampler_error``, so that a trial whose model calls failed is not scored.
``describe`` is the failure as one short line without credentials, for stats and logs.
"""

from __future__ import annotations

import asyncio
import inspect
import re
from dataclasses import dataclass
from typing import Any, Protocol

import tinker

from tbconsole.proxy.errors import ProxyError

# Header- or URL-style credentials an SDK error message might quote.
_SECRET = re.compile(
    r"(?i)(bearer\s+|(?:api[_-]?key|token|secret|password|authorization)[\"']?\s*[=:]\s*[\"']?)"
    r"[^\s\"',;&}]+|\b(?:sk|tml)-[A-Za-z0-9_-]{8,}"
)


class Sampler(Protocol):
    """What the proxy samples from: a ``tinker.SamplingClient``, or a stand-in with its
    ``sample_async`` (``proxy.scripted.ScriptedSampler``)."""

    async def sample_async(
        self, prompt: tinker.ModelInput, num_samples: int, sampling_params: tinker.SamplingParams
    ) -> tinker.SampleResponse: ...


@dataclass
class Sampled:
    tokens: list[int]
    logprobs: list[float] | None
    stop_reason: str


def model_input(tokens: list[int]) -> tinker.ModelInput:
    """``ModelInput.from_ints`` without pydantic re-validating every token of a long prompt
    (they are ints from the renderer)."""
    chunk = tinker.EncodedTextChunk.model_construct(tokens=tokens, type="encoded_text")
    return tinker.ModelInput.model_construct(chunks=[chunk])


async def sample_once(
    client: Any, prompt: list[int], params: tinker.SamplingParams, timeout_s: float | None
) -> Sampled:
    """One sequence; raises whatever the sampler raises, ``TimeoutError`` past ``timeout_s``."""
    async with asyncio.timeout(timeout_s):
        result = await _sample(client, model_input(prompt), params)
    sequence = result.sequences[0]
    return Sampled(list(sequence.tokens), sequence.logprobs, str(sequence.stop_reason))


async def _sample(client: Any, prompt: tinker.ModelInput, params: tinker.SamplingParams) -> tinker.SampleResponse:
    """Through the SDK's current call (``await client.sample(...)``; ``sample_async`` is
    deprecated in 0.38), or ``sample_async`` for samplers that only have that."""
    sample = getattr(client, "sample", None)
    if sample is not None:
        pending = sample(prompt=prompt, num_samples=1, sampling_params=params)
        if inspect.isawaitable(pending):
            return await pending
    return await client.sample_async(prompt=prompt, num_samples=1, sampling_params=params)


def describe(exc: BaseException, limit: int = 300) -> str:
    """``Type: message``, one line, credentials masked, at most ``limit`` characters."""
    text = " ".join(str(exc).split())
    text = _SECRET.sub(lambda m: (m.group(1) or "") + "***", text)
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line[:limit]


def client_error(exc: BaseException, timeout_s: float | None) -> ProxyError:
    if isinstance(exc, TimeoutError):
        waited = f" after {timeout_s:g} s" if timeout_s is not None else ""
        return ProxyError(504, f"sampling timed out{waited}")
    return ProxyError(502, f"sampling failed: {describe(exc)}")
