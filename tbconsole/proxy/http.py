"""The proxy's HTTP side: the aiohttp app, its routes, per-trial auth, and every answer and
error in its API's shape.

Routes (``{trial}`` is the trial id given to ``register_trial``)::

    POST /t/{trial}/v1/chat/completions        OpenAI Chat Completions (stream or not)
    POST /t/{trial}/v1/responses               OpenAI Responses (stream or not; stateless)
    GET  /t/{trial}/v1/models                  model list (OpenAI or Anthropic shape)
    POST /t/{trial}/v1/messages                Anthropic Messages (stream or not)
    POST /t/{trial}/v1/messages/count_tokens   Anthropic token count

Every route needs that trial's own key (``Authorization: Bearer`` or ``x-api-key``; see
``keys``): a trial's key opens no other trial's routes. Per request: auth → trial → body (≤ 16
MiB, ``gzip``/``deflate`` decoded; see ``body``) → the ``pipeline`` (under the trial's lock).
Errors are 4xx/5xx in the API's own error shape, logged without a traceback when they are the
client's, on a connection that stays usable.

Streaming: the SSE headers (200) go out before sampling. After that, any error, an unexpected
one included, ends the stream with the API's own error event (OpenAI: a ``data: {"error": …}``
chunk; Anthropic: ``event: error``; Responses: ``event: error`` then ``response.failed``), never a
second HTTP response. While the sampler works, the API's keep-alive goes out every
``keepalive_s``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from tbconsole.proxy import anthropic_api, openai_api
from tbconsole.proxy.apis import APIS, Answer, Api
from tbconsole.proxy.body import read_json
from tbconsole.proxy.chat import ChatReply
from tbconsole.proxy.errors import ContextWindowExceeded, ProxyError
from tbconsole.proxy.pipeline import Outcome, Pipeline, elapsed_ms
from tbconsole.proxy.trials import Trial, TrialRegistry
from tbconsole.record.events import Event, ProxyRequest

log = logging.getLogger("tbconsole.proxy")

_STREAM = web.RequestKey("tbconsole_proxy_stream", tuple)  # (api name, response) once SSE headers are out
_ANSWER = web.RequestKey("tbconsole_proxy_answer", object)  # that stream's Answer (its event numbering)


class ProxyHttp:
    """Routes and answers for one proxy. ``publish`` gets a ``ProxyRequest`` per model call."""

    def __init__(
        self,
        trials: TrialRegistry,
        pipeline: Pipeline,
        *,
        model_name: str,
        max_body_bytes: int,
        keepalive_s: float,
        publish: Callable[[Event], None],
        step: int,
        group: int,
    ):
        self.trials = trials
        self.pipeline = pipeline
        self.model_name = model_name
        self.max_body_bytes = max_body_bytes
        self.keepalive_s = keepalive_s
        self.publish = publish
        self.step = step
        self.group = group

    def app(self) -> web.Application:
        # ``errors`` wraps each handler rather than being the app's middleware: aiohttp caches
        # every (handler, app) pair it has wrapped in middlewares in a module-level cache of 1024
        # entries, which kept every group's proxy (its trials and captured turns, renderers and
        # sampling client) alive long after the group ended (tbconsole bench soak: one proxy more
        # per step, none ever freed).
        app = web.Application(client_max_size=self.max_body_bytes)
        routes = [
            ("POST", "/t/{trial}/v1/chat/completions", self._openai_completions),
            ("GET", "/t/{trial}/v1/models", self._models),
            ("POST", "/t/{trial}/v1/responses", self._openai_responses),
            ("POST", "/t/{trial}/v1/messages", self._anthropic_messages),
            ("POST", "/t/{trial}/v1/messages/count_tokens", self._anthropic_count_tokens),
        ]
        for method, path, handler in routes:
            resource = app.router.add_resource(path)
            resource.add_route(method, self._guarded(handler))
            resource.add_route("*", self._guarded(self._method_not_allowed))
        app.router.add_route("*", "/{tail:.*}", self._guarded(self._not_found))
        return app

    def _guarded(self, handler: Any) -> Any:
        async def guarded(request: web.Request) -> web.StreamResponse:
            return await self.errors(request, handler)

        return guarded

    @web.middleware
    async def errors(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Any error a handler raises, answered in the request's API's shape (into the stream,
        once SSE headers are out); the server keeps serving."""
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
            answer = request.get(_ANSWER)
            await _end_stream(
                response, answer.stream_error(error) if answer is not None else APIS[api].stream_error(error)
            )
            return response
        return _error_response(APIS[_api_for(request)], error)

    async def _method_not_allowed(self, request: web.Request) -> web.Response:
        raise ProxyError(405, f"{request.method} is not allowed on {request.path[:200]}")

    async def _not_found(self, request: web.Request) -> web.Response:
        raise ProxyError(404, f"no route for {request.method} {request.path[:200]}")

    def _authorize(self, request: web.Request) -> Trial:
        return self.trials.authorize(request.match_info["trial"], request.headers)

    # -- routes -----------------------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        self._authorize(request)
        if _api_for(request) == "anthropic":
            return web.json_response(anthropic_api.models(self.model_name))
        return web.json_response(openai_api.models(self.model_name))

    async def _anthropic_count_tokens(self, request: web.Request) -> web.Response:
        trial = self._authorize(request)
        body = await read_json(request, self.max_body_bytes)
        messages = self.pipeline.count_request(body)
        # Under the trial's lock, as a create: the count is that of the prompt a create sent now
        # would sample from (after the trial's call in flight has kept its turn), and the trial's
        # renderer serves one render at a time.
        async with trial.lock:
            tokens = await self.pipeline.count_tokens(trial, messages)
        return web.json_response({"input_tokens": tokens})

    async def _openai_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, APIS["openai"])

    async def _openai_responses(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, APIS["responses"])

    async def _anthropic_messages(self, request: web.Request) -> web.StreamResponse:
        return await self._complete(request, APIS["anthropic"])

    async def _complete(self, request: web.Request, api: Api) -> web.StreamResponse:
        out = Outcome(t0=time.perf_counter(), started_at=time.time(), api=api.name)
        exchange = _Exchange(request, api, self.keepalive_s, out)
        trial: Trial | None = None
        try:
            trial = self._authorize(request)
            body = await read_json(request, self.max_body_bytes)
            out.t0 = time.perf_counter()  # total_ms: from the whole request being in hand
            chat = self.pipeline.parse(api, body, trial.conversion)
            out.stream = chat.stream
            async with trial.lock:
                await self.pipeline.turn(api, trial, chat, exchange, out)
            return exchange.result()
        except ProxyError as exc:
            out.status, out.error = exc.status, exc.message
            if isinstance(exc, ContextWindowExceeded) and trial is not None:
                trial.stats.context_refused += 1
            if exchange.response is None:
                return _error_response(api, exc)
            return await exchange.fail(exc)  # headers (200) are out: the error goes into the stream
        except asyncio.CancelledError:  # the proxy is stopping (or the client went away)
            out.status, out.error = 499, "cancelled before the answer was sent"
            raise
        except ConnectionError as exc:  # the client went away mid-answer
            out.status, out.error = 499, f"client went away: {type(exc).__name__}"
            if exchange.response is None:
                raise
            return exchange.response
        except Exception:  # noqa: BLE001 - a bug; once SSE headers are out, it must end the stream
            if exchange.response is None:
                raise  # the middleware answers 500 in the API's shape
            log.exception("capture proxy: unexpected error in trial %s's stream", trial.id if trial else "?")
            out.status, out.error = 500, "internal proxy error"
            return await exchange.fail(ProxyError(500, "internal proxy error"))
        finally:
            await exchange.close()
            if trial is not None:
                trial.stats.count_request(out.status)
            self.publish(
                ProxyRequest(
                    step=self.step,
                    group=self.group,
                    trial=trial.id if trial else request.match_info.get("trial", "")[:128],
                    api=api.name,
                    stream=out.stream,
                    status=200 if exchange.response is not None else out.status,
                    captured=out.turn is not None,
                    turn=out.turn,
                    prompt_tokens=out.prompt_tokens,
                    output_tokens=out.output_tokens,
                    stop_reason=out.stop_reason,
                    sample_ms=out.sample_ms,
                    total_ms=elapsed_ms(out.t0),
                    error=out.error[:500] if out.error else None,
                    weights=out.weights,
                )
            )


class _Exchange:
    """One model call's HTTP side, as the pipeline drives it (``pipeline.Exchange``)."""

    def __init__(self, request: web.Request, api: Api, keepalive_s: float, out: Outcome):
        self.request = request
        self.api = api
        self.keepalive_s = keepalive_s
        self.out = out
        self.response: web.StreamResponse | None = None  # set once SSE headers are out
        self._answer: Answer | None = None
        self._body: web.Response | None = None
        self._keepalive: asyncio.Task | None = None

    async def open_stream(self, answer: Answer, prompt_tokens: int, *, keepalive: bool) -> None:
        stream = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await stream.prepare(self.request)
        self.response, self._answer = stream, answer
        self.request[_STREAM] = (self.api.name, stream)
        self.request[_ANSWER] = answer
        opening = answer.stream_start(prompt_tokens)
        if opening:
            await stream.write(opening)
        if keepalive:
            self._keepalive = asyncio.create_task(self._beat(stream))

    async def send(self, answer: Answer, reply: ChatReply) -> None:
        if self.response is None:
            self._body = web.Response(body=_dumps_bytes(answer.body(reply)), content_type="application/json")
            return
        await self.close()
        try:
            await self.response.write(b"".join(answer.stream_events(reply)))
            await self.response.write_eof()
        except (ConnectionError, RuntimeError) as exc:
            self.out.error = f"client went away: {type(exc).__name__}"

    def result(self) -> web.StreamResponse:
        response = self._body if self._body is not None else self.response
        if response is None:
            raise RuntimeError("the pipeline ended without an answer")
        return response

    async def fail(self, error: ProxyError) -> web.StreamResponse:
        """End the open stream with the API's error event (for Responses, numbered on)."""
        assert self.response is not None
        await self.close()
        answer = self._answer
        await _end_stream(
            self.response, answer.stream_error(error) if answer is not None else self.api.stream_error(error)
        )
        return self.response

    async def close(self) -> None:
        """Stop the keep-alive, if it runs."""
        task, self._keepalive = self._keepalive, None
        if task is None or task.done():
            return
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001
            pass

    async def _beat(self, stream: web.StreamResponse) -> None:
        try:
            while True:
                await asyncio.sleep(self.keepalive_s)
                await stream.write(self.api.keepalive)
        except (ConnectionError, RuntimeError):
            return


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


def _error_response(api: Api, error: ProxyError) -> web.Response:
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return web.json_response(api.error_body(error), status=error.status, headers=headers)


async def _end_stream(response: web.StreamResponse, data: bytes) -> None:
    """End an SSE response with ``data`` (the API's error event)."""
    try:
        await response.write(data)
        await response.write_eof()
    except (ConnectionError, RuntimeError):  # the client is gone, or the stream already ended
        pass


def _dumps_bytes(value: Any) -> bytes:
    try:  # orjson: 5-10x faster on long histories
        return orjson.dumps(value)
    except TypeError:  # e.g. a lone surrogate echoed from the request: escape it instead
        return json.dumps(value).encode()
