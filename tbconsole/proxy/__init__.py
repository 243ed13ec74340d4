"""The capture proxy: agents call it as their model; it samples the current policy and records
every turn as training data.

One ``CaptureProxy`` per group (an aiohttp server on ``listen_host``, OS-assigned port, a fresh
256-bit secret from which each trial's key is derived)::

    proxy = CaptureProxy(renderer=renderer, sampler=lambda: current_sampling_client,
                         default_max_tokens=config.max_tokens,
                         capture_dir=RunFolder(log_path).capture_group(step, group, attempt),
                         publish=bus.publish, step=step, group=group,
                         listen_host="127.0.0.1", advertised_host="127.0.0.1",
                         sample_timeout_s=600, on_sampler_error=on_error)  # both optional
    await proxy.start()
    cred = proxy.register_trial(trial_id, context_window=65536, temperature=0.8)  # both optional
    cred.proxy_url     # http://HOST:PORT/t/<trial_id>: OpenAI base {proxy_url}/v1 (Chat Completions and
                       # Responses), Anthropic base {proxy_url}
    cred.api_key       # this trial's own key (Authorization: Bearer … or x-api-key: …)
    ...                # the agent runs
    proxy.turns(trial_id)   # [CapturedTurn]: prompt_tokens, output_tokens, logprobs, stop_reason, timing
    proxy.lost(trial_id)    # True when a sampled turn could not be persisted (lost_reason() says why)
    proxy.stats(trial_id)   # TrialStats: requests, captured, rejected (4xx), context_refused, failed (5xx),
                            # sampler_failed, last_sampler_error, prompt_tokens, output_tokens
    await proxy.stop()

``sampler`` is a ``tinker.SamplingClient`` or a zero-argument callable returning the current one
(called per request). ``renderer`` is a cookbook renderer (``tinker_cookbook.renderers.
get_renderer(name, tokenizer)``); ``tokenizer`` defaults to ``renderer.tokenizer``.

Per trial: one sampling request at a time (later requests wait their turn). ``temperature`` given
at registration overrides the request's; ``context_window`` refuses, before sampling, a request
whose prompt + max_tokens exceeds it, with the error each client reads as context-length-exceeded.
``max_tokens = min(request's or default, default, window)``. Stop sequences are the renderer's
(plus the client's strings, if it sent any; a reply that stopped on one of the client's is cut
before it, and Anthropic reports ``stop_reason: "stop_sequence"``). ``tool_choice`` is honoured
or refused, never ignored: "auto" offers the tools, "none" renders without them, forcing a call
is a 400 (the policy samples freely); see ``tools``.

Keys: a trial's ``api_key`` is HMAC-SHA256(group secret, trial id), base64url: it opens that
trial's routes only (trial ids are guessable, and a sibling must not post into another trial's
capture). There is no group-wide key. Keys never appear in logs, events, captures or ``repr``.

Sampler failures: a sampling call that raises, or runs past ``sample_timeout_s`` (``None``: no
bound), is answered 502 (504 for the timeout) in the API's shape, captures nothing, counts in
``TrialStats.sampler_failed`` (``last_sampler_error``: "Type: message", short, credentials
masked) and calls ``on_sampler_error(trial_id, exception)`` on the event loop, at once: the host
learns of a dead gateway within one call, and must not score a trial whose calls failed this way.
Parse failures (502) and capture losses (503) are not sampler failures.

Client mistakes are 4xx in the API's own error shape (OpenAI ``{"error": {…}}``, Anthropic
``{"type": "error", "error": {…}}``), logged without a traceback, on a connection that stays
usable: malformed fields anywhere (400; the Responses API's stateful features, e.g.
``previous_response_id``, too: the proxy stores nothing), bodies in an unsupported or mismatched
``Content-Encoding`` (415/400; ``gzip`` and ``deflate`` are decoded), wrong keys (401). Once a
stream's SSE headers are out, every error (an unexpected one included) ends the stream with the
API's own error event (OpenAI: a ``data: {"error": …}`` chunk; Anthropic: ``event: error``;
Responses: ``event: error`` then ``response.failed``), never a second HTTP response. (Bytes that
are not HTTP at all never reach a route: aiohttp's parser answers them with its own plain-text
400 and closes; ``server_log`` keeps their tracebacks out of the log.)

Long prompts: rendering runs on the proxy's thread pool, not the event loop, so a trial with a
multi-megabyte prompt does not stall its group (HF fast tokenizers release the GIL; the offline
``tokenizer`` encodes long texts in pieces cut at pre-token boundaries: the same tokens, no
backtracking-limit failure, and the GIL held for milliseconds at a time).

Events: a ``ProxyRequest`` per model call (captured or rejected; ``total_ms`` runs from the
request body being read to the answer being ready, ``sample_ms`` is the sampler's part of it), a
``CaptureLost`` when a sampled turn could not be persisted (or came without log-probs).
Captures: ``capture_dir/<trial_id>.jsonl`` (see ``capture``; ``capture_dir`` is the attempt's
folder of the run folder, ``tbconsole.record.runfolder``), each turn written (one ``write``) before it is parsed or
answered, so a crashed process loses at most the turn in flight; fsync'd at ``stop()`` (or per
turn with ``fsync=True``); ``read_capture(path)`` reads one back.

Modules: ``server`` (``CaptureProxy``, which wires the rest), ``trials`` (registry, per-trial
keys from ``keys``, capture writers, stats), ``pipeline`` (parse → render → sample → capture →
answer), ``http`` (aiohttp app, routes, auth, API-shaped answers and errors), ``body`` (reading and
decoding request bodies), ``validation`` (pydantic request models, errors in the APIs' words),
``apis`` (the three APIs as one table); per API: ``openai_api`` (Chat Completions),
``responses_input``/``responses_items``/``responses_api`` (OpenAI Responses, as Codex CLI
speaks it: the request, its input items, the answer) and ``anthropic_input``/``anthropic_api``
(Messages); shared by them: ``chat`` (request/reply types, the conversion cache), ``tools``
(declarations, calls, ``tool_choice``), ``reply`` (parsing the sample back); ``render``
(incremental rendering identical to a full render), ``continuity`` (earlier samples' exact
tokens spliced into later prompts, so that a trial trains as one datum), ``offload`` (rendering off the event loop),
``sampling`` (one bounded sampler call, failure descriptions), ``server_log`` (aiohttp's log
without tracebacks for malformed HTTP), ``capture`` (durable per-trial capture files),
``errors`` (API-shaped errors), ``tokenizer`` (HF-style facade over tml_renderers tokenizers, for
offline use), ``scripted`` (a sampler that replays chosen replies, for tests and benchmarks).

Host process: call ``gc.freeze()`` once after startup imports (torch, the cookbook): otherwise
every full garbage collection walks ~270k startup objects (~130 ms), a pause for every request
in flight (``tbconsole bench proxy`` shows the difference with ``--no-gc-freeze``).
"""

from tbconsole.proxy.body import MAX_BODY_BYTES
from tbconsole.proxy.capture import CapturedTurn, CaptureError, read_capture
from tbconsole.proxy.server import CaptureProxy
from tbconsole.proxy.trials import TrialCredential, TrialStats

__all__ = [
    "MAX_BODY_BYTES",
    "CaptureError",
    "CaptureProxy",
    "CapturedTurn",
    "TrialCredential",
    "TrialStats",
    "read_capture",
]
