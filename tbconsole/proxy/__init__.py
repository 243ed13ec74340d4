"""The capture proxy: agents call it as their model; it samples the current policy and records
every turn as training data.

One ``CaptureProxy`` per group (an aiohttp server on ``listen_host``, OS-assigned port, a fresh
256-bit token)::

    proxy = CaptureProxy(renderer=renderer, sampler=lambda: current_sampling_client,
                         default_max_tokens=config.max_tokens,
                         capture_dir=Path(log_path) / "capture" / f"step_{step:06d}" / f"group_{group:03d}",
                         publish=bus.publish, step=step, group=group,
                         listen_host="127.0.0.1", advertised_host="127.0.0.1")
    await proxy.start()
    cred = proxy.register_trial(trial_id, context_window=65536, temperature=0.8)  # both optional
    cred.proxy_url     # http://HOST:PORT/t/<trial_id>: OpenAI base {proxy_url}/v1, Anthropic base {proxy_url}
    cred.api_key       # the group's token (Authorization: Bearer … or x-api-key: …)
    ...                # the agent runs
    proxy.turns(trial_id)   # [CapturedTurn]: prompt_tokens, output_tokens, logprobs, stop_reason, timing
    proxy.lost(trial_id)    # True when a sampled turn could not be persisted (lost_reason() says why)
    proxy.stats(trial_id)   # TrialStats: requests, captured, rejected (4xx), context_refused, failed (5xx), tokens
    await proxy.stop()

``sampler`` is a ``tinker.SamplingClient`` or a zero-argument callable returning the current one
(called per request). ``renderer`` is a cookbook renderer (``tinker_cookbook.renderers.
get_renderer(name, tokenizer)``); ``tokenizer`` defaults to ``renderer.tokenizer``.

Per trial: one sampling request at a time (later requests wait their turn). ``temperature`` given
at registration overrides the request's; ``context_window`` refuses, before sampling, a request
whose prompt + max_tokens exceeds it, with the error each client reads as context-length-exceeded.
``max_tokens = min(request's or default, default, window)``. Stop sequences are the renderer's
(plus the client's strings, if it sent any).

Events: a ``ProxyRequest`` per model call (captured or rejected; ``total_ms`` runs from the
request body being read to the answer being ready, ``sample_ms`` is the sampler's part of it), a
``CaptureLost`` when a sampled turn could not be persisted (or came without log-probs).
Captures: ``capture_dir/
<trial_id>.jsonl`` (see ``capture``), each turn written (one ``write``) before it is parsed or
answered, so a crashed process loses at most the turn in flight; fsync'd at ``stop()`` (or per
turn with ``fsync=True``); ``read_capture(path)`` reads one back. The token never appears in
logs, events or captures.

Modules: ``server`` (aiohttp app, routes, auth, the per-request pipeline), ``openai_api`` and
``anthropic_api`` (request/response/SSE translation), ``chat`` (shared request/reply types,
validation, parsing the sample back), ``render`` (incremental rendering identical to a full
render), ``capture`` (durable per-trial capture files), ``errors`` (API-shaped errors),
``tokenizer`` (HF-style facade over tml_renderers tokenizers, for offline use), ``scripted`` (a
sampler that replays chosen replies, for tests and benchmarks).

Host process: call ``gc.freeze()`` once after startup imports (torch, the cookbook): otherwise
every full garbage collection walks ~270k startup objects (~130 ms), a pause for every request
in flight (``tbconsole bench proxy`` shows the difference with ``--no-gc-freeze``).
"""

from tbconsole.proxy.capture import CapturedTurn, CaptureError, read_capture
from tbconsole.proxy.server import MAX_BODY_BYTES, CaptureProxy, TrialCredential, TrialStats

__all__ = ["MAX_BODY_BYTES", "CaptureError", "CaptureProxy", "CapturedTurn", "TrialCredential", "TrialStats",
           "read_capture"]
