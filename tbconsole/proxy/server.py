"""The capture proxy: an aiohttp server per group that agents call as their model.

Routes (``{trial}`` is the trial id given to ``register_trial``)::

    POST /t/{trial}/v1/chat/completions        OpenAI Chat Completions (stream or not)
    GET  /t/{trial}/v1/models                  model list (OpenAI or Anthropic shape)
    POST /t/{trial}/v1/messages                Anthropic Messages (stream or not)
    POST /t/{trial}/v1/messages/count_tokens   Anthropic token count

Every route needs the group's token (``Authorization: Bearer`` or ``x-api-key``, compared in
constant time). Per request: auth → trial → body (≤ 16 MiB) → JSON → validation → (trial lock)
render → context-window check → sample → **persist the turn** → parse → answer. Errors before
sampling are the client's (4xx, the API's own error shape); a sampler failure is 502 and
captures nothing; a turn that cannot be persisted is ``CaptureLost`` (503, trial marked lost);
a turn the renderer cannot parse is kept and answered with 502.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import inspect
import json
import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tinker
from aiohttp import web
from tinker_cookbook.renderers.base import Renderer

from tbconsole.events import CaptureLost, Event, ProxyRequest
from tbconsole.proxy import anthropic_api, openai_api
from tbconsole.proxy.capture import CapturedTurn, CaptureWriter
from tbconsole.proxy.chat import ChatRequest, ConversionCache, new_id, parse_reply
from tbconsole.proxy.errors import ContextWindowExceeded, ProxyError
from tbconsole.proxy.render import IncrementalRenderer, full_render

try:  # 5-10x faster on long histories; the standard library is the fallback
    import orjson
except ImportError:  # pragma: no cover
    orjson = None

log = logging.getLogger("tbconsole.proxy")

MAX_BODY_BYTES = 16 * 1024 * 1024
TRIAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class TrialCredential:
    """What an agent needs to call the proxy as one trial. ``api_key`` is a secret: keep it out
    of logs and events (``repr`` hides it)."""

    trial_id: str
    proxy_url: str  # OpenAI clients: {proxy_url}/v1; Anthropic clients: {proxy_url}
    api_key: str = field(repr=False)

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
                 keepalive_s: float = 10.0, max_body_bytes: int = MAX_BODY_BYTES):
        if default_max_tokens <= 0:
            raise ValueError("default_max_tokens must be positive")
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
        self._token = secrets.token_urlsafe(32)  # 256 bits
        self._token_bytes = self._token.encode()
        self._trials: dict[str, _Trial] = {}
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        stops = renderer.get_stop_sequences()
        self._stop_ints = all(isinstance(s, int) for s in stops)
        self._stop_strings = [s if isinstance(s, str) else self.tokenizer.decode([s]) for s in stops]
        self._default_stop = list(stops)

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def api_key(self) -> str:
        return self._token

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
        runner = web.AppRunner(self.app(), access_log=None, handle_signals=False, shutdown_timeout=2.0)
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
        return TrialCredential(trial_id=trial_id, proxy_url=f"{self.url}/t/{trial_id}", api_key=self._token)

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

    def _authorized(self, request: web.Request) -> bool:
        presented = []
        key = request.headers.get("x-api-key")
        if key is not None:
            presented.append(key)
        auth = request.headers.get("Authorization")
        if auth is not None:
            scheme, _, value = auth.strip().partition(" ")
            if scheme.lower() == "bearer":
                presented.append(value.strip())
        ok = False
        for value in presented:
            ok |= hmac.compare_digest(value.encode("utf-8", "surrogateescape"), self._token_bytes)
        return ok

    @staticmethod
    def _api_for(request: web.Request) -> str:
        path = request.path
        if "/v1/messages" in path or request.headers.get("anthropic-version") is not None:
            return "anthropic"
        return "openai"

    @staticmethod
    def _error_response(api: str, error: ProxyError) -> web.Response:
        body = error.anthropic_body() if api == "anthropic" else error.openai_body()
        headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
        return web.json_response(body, status=error.status, headers=headers)

    @web.middleware
    async def _errors(self, request: web.Request, handler):
        try:
            return await handler(request)
        except ProxyError as exc:
            return self._error_response(self._api_for(request), exc)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            return self._error_response(self._api_for(request), ProxyError(exc.status, exc.reason))
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a bug: answer in the API's shape, keep serving
            log.exception("capture proxy: unexpected error on %s %s", request.method, request.path)
            return self._error_response(self._api_for(request), ProxyError(500, "internal proxy error"))

    async def _method_not_allowed(self, request: web.Request) -> web.Response:
        raise ProxyError(405, f"{request.method} is not allowed on {request.path[:200]}")

    async def _not_found(self, request: web.Request) -> web.Response:
        raise ProxyError(404, f"no route for {request.method} {request.path[:200]}")

    def _authorize(self, request: web.Request) -> _Trial:
        if not self._authorized(request):
            raise ProxyError(401, "invalid or missing API key", code="invalid_api_key")
        trial = self._trials.get(request.match_info["trial"])
        if trial is None:
            raise ProxyError(404, "unknown trial")
        return trial

    async def _read_json(self, request: web.Request) -> Any:
        if request.content_length is not None and request.content_length > self.max_body_bytes:
            raise ProxyError(413, f"request body exceeds {self.max_body_bytes} bytes")
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise ProxyError(413, f"request body exceeds {self.max_body_bytes} bytes") from None
        if orjson is not None:
            try:
                return orjson.loads(raw)
            except orjson.JSONDecodeError:
                pass  # let the standard parser decide (it takes integers beyond 64 bits) and explain
        try:
            return json.loads(raw, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise ProxyError(400, f"request body is not valid JSON: {str(exc)[:200]}") from None

    # -- routes -----------------------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        self._authorize(request)
        if self._api_for(request) == "anthropic":
            return web.json_response(anthropic_api.models(self.model_name))
        return web.json_response(openai_api.models(self.model_name))

    async def _anthropic_count_tokens(self, request: web.Request) -> web.Response:
        self._authorize(request)
        body = await self._read_json(request)
        _, messages = anthropic_api.parse_messages(body, self.renderer)
        try:
            tokens = full_render(self.renderer, messages)
        except ProxyError:
            raise
        except Exception as exc:  # noqa: BLE001 - the conversation cannot be rendered
            raise ProxyError(400, f"the conversation cannot be rendered: {str(exc)[:300]}") from None
        return web.json_response({"input_tokens": len(tokens)})

    async def _openai_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, "openai")

    async def _anthropic_messages(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, "anthropic")

    async def _complete(self, request: web.Request, api: str) -> web.StreamResponse:
        out = _Outcome(t0=time.perf_counter(), started_at=time.time(), api=api)
        trial: _Trial | None = None
        try:
            trial = self._authorize(request)
            body = await self._read_json(request)
            out.t0 = time.perf_counter()  # total_ms: from the whole request being in hand
            parse = anthropic_api.parse_request if api == "anthropic" else openai_api.parse_request
            chat = parse(body, self.renderer, trial.conversion)
            out.stream = chat.stream
            async with trial.lock:
                return await self._turn(request, trial, chat, out)
        except ProxyError as exc:
            out.status, out.error = exc.status, exc.message
            if isinstance(exc, ContextWindowExceeded) and trial is not None:
                trial.stats.context_refused += 1
            if out.response is None:
                return self._error_response(api, exc)
            # Headers (200) are out: the error goes into the stream, in the API's event format.
            body = exc.anthropic_body() if api == "anthropic" else exc.openai_body()
            try:
                await out.response.write(anthropic_api.stream_error(body) if api == "anthropic"
                                         else openai_api.stream_error(body))
                await out.response.write_eof()
            except (ConnectionError, RuntimeError):
                pass
            return out.response
        except asyncio.CancelledError:  # the proxy is stopping (or the client went away)
            out.status, out.error = 499, "cancelled before the answer was sent"
            raise
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

    def _plan(self, trial: _Trial, chat: ChatRequest, prompt_len: int) -> tuple[int, float, list]:
        max_tokens = min(chat.max_tokens or self.default_max_tokens, self.default_max_tokens)
        window = trial.context_window
        if window is not None:
            max_tokens = min(max_tokens, window)
            if prompt_len + max_tokens > window:
                raise ContextWindowExceeded(prompt_len, max_tokens, window)
        temperature = trial.temperature if trial.temperature is not None else (
            chat.temperature if chat.temperature is not None else 1.0)
        if chat.stop:
            # One kind per request: strings (the renderer's own stops decoded, then the client's).
            stop: list = list(dict.fromkeys(self._stop_strings + chat.stop))
        else:
            stop = list(self._default_stop)
        return max_tokens, temperature, stop

    async def _turn(self, request: web.Request, trial: _Trial, chat: ChatRequest, out: _Outcome) -> web.StreamResponse:
        api = chat.api
        try:
            prompt = trial.renderer.render(chat.messages)
        except Exception as exc:  # noqa: BLE001 - the renderer refuses this conversation
            raise ProxyError(400, f"the conversation cannot be rendered: {type(exc).__name__}: {str(exc)[:300]}") \
                from None
        out.prompt_tokens = len(prompt)
        max_tokens, temperature, stop = self._plan(trial, chat, len(prompt))
        params = tinker.SamplingParams(max_tokens=max_tokens, temperature=temperature, stop=stop,
                                       top_p=chat.top_p if chat.top_p is not None else 1.0,
                                       top_k=chat.top_k if chat.top_k is not None else -1, seed=chat.seed)
        response_id = new_id("msg_" if api == "anthropic" else "chatcmpl-")
        keepalive: asyncio.Task | None = None
        if chat.stream:
            stream = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream",
                                                             "Cache-Control": "no-cache"})
            await stream.prepare(request)
            out.response = stream
            if api == "anthropic":
                await stream.write(anthropic_api.stream_start(chat.model, response_id, len(prompt)))
            keepalive = asyncio.create_task(self._keepalive(stream, api))
        try:
            # -- sample
            t_sample = time.perf_counter()
            try:
                result = await _sample(self._sampling_client(), _model_input(prompt), params)
                sequence = result.sequences[0]
                output = list(sequence.tokens)
                logprobs = sequence.logprobs
                stop_reason = str(sequence.stop_reason)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the sampler's failure, not the client's
                log.warning("trial %s: sampling failed: %s: %s", trial.id, type(exc).__name__, exc)
                raise ProxyError(502, f"sampling failed: {type(exc).__name__}: {str(exc)[:300]}") from None
            finally:
                out.sample_ms = _ms(t_sample)
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
                                    "toolu_" if api == "anthropic" else "call_")
            except Exception as exc:  # noqa: BLE001 - the renderer could not parse the sample
                log.warning("trial %s turn %s: unparseable sample: %s", trial.id, turn_index, exc)
                raise ProxyError(502, f"the model's response could not be parsed: {str(exc)[:300]}") from None
            if out.response is None:
                body = (anthropic_api.message(reply, chat.model, response_id) if api == "anthropic"
                        else openai_api.response(reply, chat.model, response_id))
                return web.Response(body=_dumps_bytes(body), content_type="application/json")
            await _stop_task(keepalive)
            chunks = (anthropic_api.stream_events(reply) if api == "anthropic"
                      else openai_api.stream_events(reply, chat.model, response_id, chat.include_usage))
            try:
                await out.response.write(b"".join(chunks))
                await out.response.write_eof()
            except (ConnectionError, RuntimeError) as exc:
                out.error = f"client went away: {type(exc).__name__}"
            return out.response
        finally:
            await _stop_task(keepalive)

    def _lose(self, trial: _Trial, reason: str) -> None:
        if trial.lost is None:
            trial.lost = reason
        log.error("trial %s: capture lost: %s", trial.id, reason)
        self._publish(CaptureLost(step=self.step, group=self.group, trial=trial.id, error=reason))

    async def _keepalive(self, stream: web.StreamResponse, api: str) -> None:
        beat = anthropic_api.KEEPALIVE if api == "anthropic" else openai_api.KEEPALIVE
        try:
            while True:
                await asyncio.sleep(self.keepalive_s)
                await stream.write(beat)
        except (ConnectionError, RuntimeError):
            return


def _model_input(tokens: list[int]) -> tinker.ModelInput:
    """``ModelInput.from_ints`` without pydantic re-validating every token of a long prompt
    (they are ints from the renderer)."""
    chunk = tinker.EncodedTextChunk.model_construct(tokens=tokens, type="encoded_text")
    return tinker.ModelInput.model_construct(chunks=[chunk])


async def _sample(client: Any, prompt: tinker.ModelInput, params: tinker.SamplingParams) -> tinker.SampleResponse:
    """One sample through the SDK's current call (``await client.sample(...)``; ``sample_async``
    is deprecated in 0.38), or ``sample_async`` for samplers that only have that."""
    sample = getattr(client, "sample", None)
    if sample is not None:
        pending = sample(prompt=prompt, num_samples=1, sampling_params=params)
        if inspect.isawaitable(pending):
            return await pending
    return await client.sample_async(prompt=prompt, num_samples=1, sampling_params=params)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _dumps_bytes(value: Any) -> bytes:
    if orjson is not None:
        try:
            return orjson.dumps(value)
        except TypeError:  # e.g. a lone surrogate echoed from the request: escape it instead
            pass
    return json.dumps(value).encode()


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
