"""The capture proxy: an aiohttp server per group that agents call as their model.

Routes (``{trial}`` is the trial id given to ``register_trial``)::

    POST /t/{trial}/v1/chat/completions        OpenAI Chat Completions (stream or not)
    POST /t/{trial}/v1/responses               OpenAI Responses (stream or not; stateless)
    GET  /t/{trial}/v1/models                  model list (OpenAI or Anthropic shape)
    POST /t/{trial}/v1/messages                Anthropic Messages (stream or not)
    POST /t/{trial}/v1/messages/count_tokens   Anthropic token count

Every route needs that trial's own key (``Authorization: Bearer`` or ``x-api-key``; see
``keys``): a trial's key opens no other trial's routes. Per request: auth → trial → body (≤ 16
MiB, ``gzip``/``deflate`` decoded; see ``body``) → JSON → validation → (trial lock) render (on
the proxy's thread pool when it has much text to tokenize; see ``offload``) → context-window
check → sample → **persist the turn** → parse → answer.

Errors before sampling are the client's: 4xx in the API's own error shape, logged without a
traceback, the connection kept. A sampler failure (it raised, or ran past ``sample_timeout_s``)
is 502 (504 for the timeout), captures nothing, counts in ``TrialStats.sampler_failed`` and
calls ``on_sampler_error(trial_id, exc)``; a turn that cannot be persisted is ``CaptureLost``
(503, trial marked lost); a turn the renderer cannot parse is kept and answered with 502.

Streaming: the SSE headers (200) go out before sampling. After that, any error, an unexpected
one included, ends the stream with the API's own error event (OpenAI: a ``data: {"error": …}``
chunk; Anthropic: ``event: error``; Responses: ``event: error`` then ``response.failed``), never a
second HTTP response. A streaming Responses request over the context window gets its refusal in
the stream (``response.failed`` with code ``context_length_exceeded``, where Codex recognises it);
the other APIs refuse it before the stream, as a plain 400.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tinker
from aiohttp import web
from tinker_cookbook.renderers.base import Renderer

from tbconsole.events import CaptureLost, Event, ProxyRequest
from tbconsole.proxy import anthropic_api, openai_api, responses_api
from tbconsole.proxy.body import read_json
from tbconsole.proxy.capture import CapturedTurn, CaptureWriter
from tbconsole.proxy.chat import ChatRequest, ConversionCache, new_id, parse_reply
from tbconsole.proxy.errors import ContextWindowExceeded, ProxyError
from tbconsole.proxy.keys import TrialKeys
from tbconsole.proxy.offload import off_loop
from tbconsole.proxy.render import IncrementalRenderer, full_render, message_chars
from tbconsole.proxy.sampling import Sampled, client_error, describe, sample_once
from tbconsole.proxy.server_log import ServerLog

try:  # 5-10x faster on long histories; the standard library is the fallback
    import orjson
except ImportError:  # pragma: no cover
    orjson = None

log = logging.getLogger("tbconsole.proxy")

MAX_BODY_BYTES = 16 * 1024 * 1024
TRIAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
RENDER_THREADS = 4  # per proxy: a long render in one trial leaves room for the others'
# Renders that tokenize fewer characters (a few ms) stay on the loop: a thread hop costs more
# than that under load (a thread waits up to the 5 ms GIL switch interval for the busy loop).
INLINE_RENDER_CHARS = 32 * 1024
_STREAM = web.RequestKey("tbconsole_proxy_stream", tuple)  # (api, response) once SSE headers are out
_ANSWER = web.RequestKey("tbconsole_proxy_answer", responses_api.Answer)  # a Responses stream's sequence state
ID_PREFIXES = {"openai": "chatcmpl-", "anthropic": "msg_", "responses": "resp_"}
PARSERS = {"openai": openai_api.parse_request, "anthropic": anthropic_api.parse_request,
           "responses": responses_api.parse_request}


@dataclass(frozen=True)
class TrialCredential:
    """What an agent needs to call the proxy as one trial. ``api_key`` is a secret: keep it out
    of logs and events (``repr`` hides it)."""

    trial_id: str
    proxy_url: str  # OpenAI clients: {proxy_url}/v1; Anthropic clients: {proxy_url}
    api_key: str = field(repr=False)  # this trial's own key; it opens no other trial's routes

    @property
    def openai_base_url(self) -> str:
        return self.proxy_url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.proxy_url


@dataclass
class TrialStats:
    requests: int = 0
    captured: int = 0
    rejected: int = 0  # 4xx
    context_refused: int = 0  # of which: prompt + max_tokens over the trial's context window
    failed: int = 0  # 5xx (sampler, parse, capture)
    sampler_failed: int = 0  # of which: the sampler raised or timed out (infrastructure, not the agent)
    last_sampler_error: str | None = None  # "Type: message" of the latest, short, credentials masked
    prompt_tokens: int = 0
    output_tokens: int = 0


@dataclass
class _Outcome:
    """What one request did, for its ProxyRequest event."""

    t0: float
    started_at: float
    api: str
    stream: bool = False
    status: int = 200
    error: str | None = None
    response: web.StreamResponse | None = None  # set once SSE headers are out
    turn: int | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None
    sample_ms: float | None = None


@dataclass
class _StoredTurn:
    meta: CapturedTurn  # prompt_tokens holds only the tail
    shared: int


class _Trial:
    def __init__(self, trial_id: str, renderer: Renderer, writer: CaptureWriter, *, context_window: int | None,
                 temperature: float | None, incremental: bool):
        self.id = trial_id
        self.context_window = context_window
        self.temperature = temperature
        self.lock = asyncio.Lock()
        self.renderer = IncrementalRenderer(renderer, incremental=incremental)
        self.conversion = ConversionCache()
        self.writer = writer
        self.renders_at_capture = -1  # renderer.render_count right after the last captured turn
        self.turns: list[_StoredTurn] = []
        self.lost: str | None = None
        self.stats = TrialStats()


class CaptureProxy:
    """One per group. See the package docstring for the contract."""

    def __init__(self, *, renderer: Renderer, sampler: Any, default_max_tokens: int, capture_dir: Path | str,
                 tokenizer: Any = None, publish: Callable[[Event], None] | None = None, step: int = 0,
                 group: int = 0, listen_host: str = "127.0.0.1", advertised_host: str | None = None,
                 port: int = 0, model_name: str = "policy", fsync: bool = False, incremental: bool = True,
                 keepalive_s: float = 10.0, max_body_bytes: int = MAX_BODY_BYTES,
                 sample_timeout_s: float | None = None,
                 on_sampler_error: Callable[[str, BaseException], None] | None = None):
        if default_max_tokens <= 0:
            raise ValueError("default_max_tokens must be positive")
        if sample_timeout_s is not None and not sample_timeout_s > 0:
            raise ValueError("sample_timeout_s must be positive")
        self.renderer = renderer
        self.tokenizer = tokenizer if tokenizer is not None else renderer.tokenizer
        self._sampler = sampler
        self.default_max_tokens = int(default_max_tokens)
        self.capture_dir = Path(capture_dir)
        self._publish_fn = publish
        self.step = step
        self.group = group
        self.listen_host = listen_host
        self.advertised_host = advertised_host or listen_host
        self._port = port
        self.model_name = model_name
        self.fsync = fsync
        self.incremental = incremental
        self.keepalive_s = keepalive_s
        self.max_body_bytes = max_body_bytes
        self.sample_timeout_s = sample_timeout_s
        self._on_sampler_error = on_sampler_error
        self._keys = TrialKeys()
        self._executor: ThreadPoolExecutor | None = None
        self._trials: dict[str, _Trial] = {}
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        stops = renderer.get_stop_sequences()
        self._stop_ints = all(isinstance(s, int) for s in stops)
        self._stop_strings = [s if isinstance(s, str) else self.tokenizer.decode([s]) for s in stops]
        self._default_stop = list(stops)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("proxy not started")
        host = self.advertised_host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.max_body_bytes, middlewares=[self._errors])
        routes = [("POST", "/t/{trial}/v1/chat/completions", self._openai_completions),
                  ("GET", "/t/{trial}/v1/models", self._models),
                  ("POST", "/t/{trial}/v1/responses", self._openai_responses),
                  ("POST", "/t/{trial}/v1/messages", self._anthropic_messages),
                  ("POST", "/t/{trial}/v1/messages/count_tokens", self._anthropic_count_tokens)]
        for method, path, handler in routes:
            resource = app.router.add_resource(path)
            resource.add_route(method, handler)
            resource.add_route("*", self._method_not_allowed)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        return app

    async def start(self) -> None:
        if self._runner is not None:
            return
        # auto_decompress off: bodies are decoded in ``body``, where a bad one is a 4xx, not a reset.
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False, shutdown_timeout=2.0,
                               auto_decompress=False, logger=ServerLog())
        await runner.setup()
        site = web.TCPSite(runner, self.listen_host, self._port)
        await site.start()
        self._runner = runner
        self.port = int(runner.addresses[0][1])
        log.info("capture proxy for step %s group %s listening on %s:%s", self.step, self.group,
                 self.listen_host, self.port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False)
        for trial in self._trials.values():
            try:
                trial.writer.close()
            except OSError as exc:
                if trial.turns:
                    self._lose(trial, f"the capture file could not be synced at the end: {exc}")

    async def __aenter__(self) -> CaptureProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- trials --------------------------------------------------------------------------------

    def register_trial(self, trial_id: str, *, context_window: int | None = None,
                       temperature: float | None = None) -> TrialCredential:
        if not TRIAL_ID.match(trial_id):
            raise ValueError(f"trial id {trial_id!r} must be 1-128 characters of [A-Za-z0-9._-], "
                             "starting with a letter or digit")
        if trial_id in self._trials:
            raise ValueError(f"trial {trial_id!r} is already registered")
        if context_window is not None and context_window <= 0:
            raise ValueError("context_window must be positive")
        if temperature is not None and not 0 <= temperature <= 2:
            raise ValueError("temperature must be between 0 and 2")
        writer = CaptureWriter(self.capture_dir / f"{trial_id}.jsonl", trial_id, fsync=self.fsync)
        self._trials[trial_id] = _Trial(trial_id, self.renderer, writer, context_window=context_window,
                                        temperature=temperature, incremental=self.incremental)
        return TrialCredential(trial_id=trial_id, proxy_url=f"{self.url}/t/{trial_id}",
                               api_key=self._keys.key(trial_id))

    def _trial(self, trial_id: str) -> _Trial:
        try:
            return self._trials[trial_id]
        except KeyError:
            raise KeyError(f"unknown trial {trial_id!r}") from None

    def turns(self, trial_id: str) -> list[CapturedTurn]:
        """The trial's captured turns, in order, with full prompts."""
        out = []
        prev: list[int] = []
        for stored in self._trial(trial_id).turns:
            meta = stored.meta
            prompt = prev[: stored.shared] + list(meta.prompt_tokens)
            out.append(dataclasses.replace(meta, prompt_tokens=prompt, output_tokens=list(meta.output_tokens),
                                           logprobs=list(meta.logprobs)))
            prev = prompt
        return out

    def lost(self, trial_id: str) -> bool:
        return self._trial(trial_id).lost is not None

    def lost_reason(self, trial_id: str) -> str | None:
        return self._trial(trial_id).lost

    def stats(self, trial_id: str) -> TrialStats:
        return self._trial(trial_id).stats

    def capture_path(self, trial_id: str) -> Path:
        return self._trial(trial_id).writer.path

    # -- plumbing -------------------------------------------------------------------------------

    def _publish(self, event: Event) -> None:
        if self._publish_fn is None:
            return
        try:
            self._publish_fn(event)
        except Exception:  # noqa: BLE001 - an observer must never break a model call
            log.exception("publishing %s failed", event.kind)

    async def _render(self, chars: int, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, on the proxy's thread pool when it tokenizes ``chars`` or more."""
        if chars < INLINE_RENDER_CHARS:
            return fn(*args)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(RENDER_THREADS, thread_name_prefix=f"proxy-g{self.group}")
        return await off_loop(self._executor, fn, *args)

    def _sampler_failed(self, trial: _Trial, exc: BaseException) -> None:
        line = describe(exc)
        trial.stats.sampler_failed += 1
        trial.stats.last_sampler_error = line
        log.warning("trial %s: sampling failed: %s", trial.id, line)
        if self._on_sampler_error is not None:
            try:
                self._on_sampler_error(trial.id, exc)
            except Exception:  # noqa: BLE001 - the host's callback must never break a model call
                log.exception("on_sampler_error failed")

    @staticmethod
    def _api_for(request: web.Request) -> str:
        """The API whose error shape a request gets: by route, else by the anthropic-version header."""
        path = request.path
        if "/v1/messages" in path:
            return "anthropic"
        if "/v1/responses" in path:
            return "responses"
        if request.headers.get("anthropic-version") is not None:
            return "anthropic"
        return "openai"

    @staticmethod
    def _error_response(api: str, error: ProxyError) -> web.Response:
        body = (error.anthropic_body() if api == "anthropic" else
                responses_api.error_body(error) if api == "responses" else error.openai_body())
        headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
        return web.json_response(body, status=error.status, headers=headers)

    @web.middleware
    async def _errors(self, request: web.Request, handler):
        try:
            return await handler(request)
        except ProxyError as exc:
            error = exc
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            error = ProxyError(exc.status, exc.reason)
        except asyncio.CancelledError:
            raise
        except ConnectionError as exc:  # the client went away: nobody to answer, nothing to report
            log.debug("capture proxy: %s %s: client gone: %s", request.method, request.path[:200], exc)
            error = ProxyError(400, "connection lost")
        except Exception:  # noqa: BLE001 - a bug: answer in the API's shape, keep serving
            log.exception("capture proxy: unexpected error on %s %s", request.method, request.path[:200])
            error = ProxyError(500, "internal proxy error")
        stream = request.get(_STREAM)
        if stream is not None:  # SSE headers are out: the error goes into the stream
            api, response = stream
            await _end_stream(response, api, error, request.get(_ANSWER))
            return response
        return self._error_response(self._api_for(request), error)

    async def _method_not_allowed(self, request: web.Request) -> web.Response:
        raise ProxyError(405, f"{request.method} is not allowed on {request.path[:200]}")

    async def _not_found(self, request: web.Request) -> web.Response:
        raise ProxyError(404, f"no route for {request.method} {request.path[:200]}")

    def _authorize(self, request: web.Request) -> _Trial:
        trial_id = request.match_info["trial"]
        if not self._keys.accepts(trial_id, request.headers):
            raise ProxyError(401, "invalid or missing API key", code="invalid_api_key")
        trial = self._trials.get(trial_id)
        if trial is None:
            raise ProxyError(404, "unknown trial")
        return trial

    async def _read_json(self, request: web.Request) -> Any:
        return await read_json(request, self.max_body_bytes)

    # -- routes -----------------------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        self._authorize(request)
        if self._api_for(request) == "anthropic":
            return web.json_response(anthropic_api.models(self.model_name))
        return web.json_response(openai_api.models(self.model_name))

    async def _anthropic_count_tokens(self, request: web.Request) -> web.Response:
        self._authorize(request)
        body = await self._read_json(request)
        _, messages = _parse(functools.partial(anthropic_api.parse_messages, count_only=True), body, self.renderer)
        try:
            tokens = await self._render(sum(map(message_chars, messages)), full_render, self.renderer, messages)
        except ProxyError:
            raise
        except Exception as exc:  # noqa: BLE001 - the conversation cannot be rendered
            raise ProxyError(400, f"the conversation cannot be rendered: {str(exc)[:300]}") from None
        return web.json_response({"input_tokens": len(tokens)})

    async def _openai_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, "openai")

    async def _openai_responses(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, "responses")

    async def _anthropic_messages(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, "anthropic")

    async def _complete(self, request: web.Request, api: str) -> web.StreamResponse:
        out = _Outcome(t0=time.perf_counter(), started_at=time.time(), api=api)
        trial: _Trial | None = None
        try:
            trial = self._authorize(request)
            body = await self._read_json(request)
            out.t0 = time.perf_counter()  # total_ms: from the whole request being in hand
            chat = _parse(PARSERS[api], body, self.renderer, trial.conversion)
            out.stream = chat.stream
            async with trial.lock:
                return await self._turn(request, trial, chat, out)
        except ProxyError as exc:
            out.status, out.error = exc.status, exc.message
            if isinstance(exc, ContextWindowExceeded) and trial is not None:
                trial.stats.context_refused += 1
            if out.response is None:
                return self._error_response(api, exc)
            # headers (200) are out: the error goes into the stream
            await _end_stream(out.response, api, exc, request.get(_ANSWER))
            return out.response
        except asyncio.CancelledError:  # the proxy is stopping (or the client went away)
            out.status, out.error = 499, "cancelled before the answer was sent"
            raise
        except ConnectionError as exc:  # the client went away mid-answer
            out.status, out.error = 499, f"client went away: {type(exc).__name__}"
            if out.response is None:
                raise
            return out.response
        except Exception:  # noqa: BLE001 - a bug; once SSE headers are out, it must end the stream
            if out.response is None:
                raise  # the middleware answers 500 in the API's shape
            log.exception("capture proxy: unexpected error in trial %s's stream", trial.id if trial else "?")
            out.status, out.error = 500, "internal proxy error"
            await _end_stream(out.response, api, ProxyError(500, "internal proxy error"), request.get(_ANSWER))
            return out.response
        finally:
            if trial is not None:
                stats = trial.stats
                stats.requests += 1
                if out.status >= 500:
                    stats.failed += 1
                elif out.status >= 400:
                    stats.rejected += 1
            self._publish(ProxyRequest(
                step=self.step, group=self.group, trial=trial.id if trial else request.match_info.get("trial", "")[:128],
                api=api, stream=out.stream, status=200 if out.response is not None else out.status,
                captured=out.turn is not None, turn=out.turn, prompt_tokens=out.prompt_tokens,
                output_tokens=out.output_tokens, stop_reason=out.stop_reason, sample_ms=out.sample_ms,
                total_ms=_ms(out.t0), error=out.error[:500] if out.error else None))

    def _sampling_client(self) -> Any:
        sampler = self._sampler
        return sampler if hasattr(sampler, "sample_async") or hasattr(sampler, "sample") else sampler()

    async def _sample(self, trial: _Trial, prompt: list[int], params: tinker.SamplingParams) -> Sampled:
        try:
            return await sample_once(self._sampling_client(), prompt, params, self.sample_timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the sampler's failure (or timeout), not the client's
            self._sampler_failed(trial, exc)
            raise client_error(exc, self.sample_timeout_s) from None

    def _plan(self, trial: _Trial, chat: ChatRequest, prompt_len: int) -> tuple[int, float, list]:
        max_tokens = min(chat.max_tokens or self.default_max_tokens, self.default_max_tokens)
        window = trial.context_window
        if window is not None:
            max_tokens = min(max_tokens, window)
            if prompt_len + max_tokens > window:
                raise ContextWindowExceeded(prompt_len, max_tokens, window)
        temperature = _temperature(trial, chat)
        if chat.stop:
            # One kind per request: strings (the renderer's own stops decoded, then the client's).
            stop: list = list(dict.fromkeys(self._stop_strings + chat.stop))
        else:
            stop = list(self._default_stop)
        return max_tokens, temperature, stop

    async def _turn(self, request: web.Request, trial: _Trial, chat: ChatRequest, out: _Outcome) -> web.StreamResponse:
        api = chat.api
        try:
            chars = trial.renderer.pending_chars(chat.messages)
            prompt = await self._render(chars, trial.renderer.render, chat.messages)
        except Exception as exc:  # noqa: BLE001 - the renderer refuses this conversation
            raise ProxyError(400, f"the conversation cannot be rendered: {type(exc).__name__}: {str(exc)[:300]}") \
                from None
        out.prompt_tokens = len(prompt)
        response_id = new_id(ID_PREFIXES[api])
        if api == "responses":
            request[_ANSWER] = responses_api.Answer(chat, response_id, _temperature(trial, chat))
        try:
            max_tokens, temperature, stop = self._plan(trial, chat, len(prompt))
        except ContextWindowExceeded:
            if api == "responses" and chat.stream:  # Codex knows this refusal as a response.failed event
                await self._open_stream(request, out, chat, response_id, len(prompt))
            raise
        try:
            params = tinker.SamplingParams(max_tokens=max_tokens, temperature=temperature, stop=stop,
                                           top_p=chat.top_p if chat.top_p is not None else 1.0,
                                           top_k=chat.top_k if chat.top_k is not None else -1, seed=chat.seed)
        except ValueError as exc:  # pydantic's ValidationError: a value the SDK refuses
            raise ProxyError(400, f"invalid sampling parameters: {str(exc)[:300]}") from None
        keepalive: asyncio.Task | None = None
        if chat.stream:
            stream = await self._open_stream(request, out, chat, response_id, len(prompt))
            keepalive = asyncio.create_task(self._keepalive(stream, api))
        try:
            # -- sample
            t_sample = time.perf_counter()
            try:
                sampled = await self._sample(trial, prompt, params)
            finally:
                out.sample_ms = _ms(t_sample)
            output, logprobs, stop_reason = sampled.tokens, sampled.logprobs, sampled.stop_reason
            out.output_tokens, out.stop_reason = len(output), stop_reason

            # -- persist, before anything can go wrong in parsing
            turn_index = len(trial.turns)
            if logprobs is None or len(logprobs) != len(output):
                self._lose(trial, f"turn {turn_index}: the sampler returned "
                                  f"{'no' if logprobs is None else len(logprobs)} log-probs for {len(output)} tokens")
                raise ProxyError(502, "the sampler returned no log-probs for this turn; it cannot be trained on")
            turn = CapturedTurn(turn=turn_index, prompt_tokens=prompt, output_tokens=output,
                                logprobs=[float(x) for x in logprobs], stop_reason=stop_reason, api=api,
                                started_at=out.started_at, sample_ms=out.sample_ms, max_tokens=max_tokens,
                                temperature=temperature)
            # The renderer knows how much of this prompt repeats its previous one; that is the
            # previous *captured* prompt when nothing was rendered in between.
            renderer = trial.renderer
            known = (renderer.reused_tokens or None) if renderer.render_count == trial.renders_at_capture + 1 else None
            try:
                shared = trial.writer.write(turn, known_shared=known)
            except Exception as exc:  # noqa: BLE001 - disk full, permissions, NaN log-prob…
                self._lose(trial, f"turn {turn_index} could not be persisted: {type(exc).__name__}: {exc}")
                raise ProxyError(503, "the turn could not be captured; this trial cannot be trained on") from None
            if trial.writer.fsync:
                try:
                    trial.writer.sync()
                except Exception as exc:  # noqa: BLE001 - the disk refused the fsync
                    self._lose(trial, f"turn {turn_index} could not be persisted: {type(exc).__name__}: {exc}")
                    raise ProxyError(503, "the turn could not be captured; this trial cannot be trained on") \
                        from None
            # Kept compactly: the prompt as its new tail only, all as tuples (untracked by the GC).
            trial.turns.append(_StoredTurn(meta=dataclasses.replace(
                turn, prompt_tokens=tuple(prompt[shared:]), output_tokens=tuple(output),
                logprobs=tuple(turn.logprobs)), shared=shared))
            out.turn = turn_index
            trial.renders_at_capture = renderer.render_count
            trial.stats.captured += 1
            trial.stats.prompt_tokens += len(prompt)
            trial.stats.output_tokens += len(output)

            # -- parse and answer
            try:
                reply = parse_reply(renderer.working, output, stop_reason, len(prompt),
                                    "toolu_" if api == "anthropic" else "call_", stops=chat.stop,
                                    tools_offered=chat.tool_choice != "none")
            except Exception as exc:  # noqa: BLE001 - the renderer could not parse the sample
                log.warning("trial %s turn %s: unparseable sample: %s", trial.id, turn_index, exc)
                raise ProxyError(502, f"the model's response could not be parsed: {str(exc)[:300]}") from None
            answer = request.get(_ANSWER)
            if out.response is None:
                body = (anthropic_api.message(reply, chat.model, response_id) if api == "anthropic"
                        else answer.response(reply) if answer is not None
                        else openai_api.response(reply, chat.model, response_id))
                return web.Response(body=_dumps_bytes(body), content_type="application/json")
            await _stop_task(keepalive)
            chunks = (anthropic_api.stream_events(reply) if api == "anthropic"
                      else answer.stream_events(reply) if answer is not None
                      else openai_api.stream_events(reply, chat.model, response_id, chat.include_usage))
            try:
                await out.response.write(b"".join(chunks))
                await out.response.write_eof()
            except (ConnectionError, RuntimeError) as exc:
                out.error = f"client went away: {type(exc).__name__}"
            return out.response
        finally:
            await _stop_task(keepalive)

    async def _open_stream(self, request: web.Request, out: _Outcome, chat: ChatRequest, response_id: str,
                           prompt_tokens: int) -> web.StreamResponse:
        """SSE headers (200) and the API's opening events: from here on, errors go into the stream."""
        api = chat.api
        stream = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream",
                                                         "Cache-Control": "no-cache"})
        await stream.prepare(request)
        out.response = stream
        request[_STREAM] = (api, stream)
        if api == "anthropic":
            await stream.write(anthropic_api.stream_start(chat.model, response_id, prompt_tokens))
        elif api == "responses":
            await stream.write(request[_ANSWER].stream_start())
        return stream

    def _lose(self, trial: _Trial, reason: str) -> None:
        if trial.lost is None:
            trial.lost = reason
        log.error("trial %s: capture lost: %s", trial.id, reason)
        self._publish(CaptureLost(step=self.step, group=self.group, trial=trial.id, error=reason))

    async def _keepalive(self, stream: web.StreamResponse, api: str) -> None:
        beat = {"anthropic": anthropic_api.KEEPALIVE, "responses": responses_api.KEEPALIVE}.get(
            api, openai_api.KEEPALIVE)
        try:
            while True:
                await asyncio.sleep(self.keepalive_s)
                await stream.write(beat)
        except (ConnectionError, RuntimeError):
            return


def _parse(parse: Callable[..., Any], body: Any, *args: Any) -> Any:
    """A request parser, with any slip of its validation still the client's 400: its only input
    is the client's body. Logged without a traceback (at debug level, with one)."""
    try:
        return parse(body, *args)
    except ProxyError:
        raise
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as exc:
        log.debug("capture proxy: malformed request: %s", describe(exc), exc_info=True)
        raise ProxyError(400, f"malformed request: {describe(exc, 200)}") from None


async def _end_stream(response: web.StreamResponse, api: str, error: ProxyError,
                      answer: responses_api.Answer | None = None) -> None:
    """End an SSE response with the API's own error event (no ``[DONE]`` for OpenAI: the SDKs
    raise on the error chunk; for Responses, ``error`` then ``response.failed``, numbered on from
    the stream's last event)."""
    if api == "anthropic":
        data = anthropic_api.stream_error(error.anthropic_body())
    elif api == "responses":
        data = answer.stream_error(error) if answer is not None else responses_api.stream_error(error)
    else:
        data = openai_api.stream_error(error.openai_body())
    try:
        await response.write(data)
        await response.write_eof()
    except (ConnectionError, RuntimeError):  # the client is gone, or the stream already ended
        pass


def _dumps_bytes(value: Any) -> bytes:
    if orjson is not None:
        try:
            return orjson.dumps(value)
        except TypeError:  # e.g. a lone surrogate echoed from the request: escape it instead
            pass
    return json.dumps(value).encode()


def _temperature(trial: _Trial, chat: ChatRequest) -> float:
    """The trial's temperature, else the request's, else 1."""
    if trial.temperature is not None:
        return trial.temperature
    return chat.temperature if chat.temperature is not None else 1.0


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1000.0, 3)


async def _stop_task(task: asyncio.Task | None) -> None:
    if task is None or task.done():
        return
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):  # noqa: BLE001
        pass
