"""The HTTP side: the subset of Tinker's `/api/v1` that the tinker 0.38 SDK and the cookbook's
RL loop use, on aiohttp. Handlers parse a request (with the SDK's own request types, `wire.py`),
hand it to the engine's parts and shape the reply.

Mutating calls validate their input on the spot (bad input -> 4xx JSON the SDK raises as
`BadRequestError` & co.), then return a future `{request_id, model_id}` that `retrieve_future`
long-polls (`jobs.py`). Status codes avoid 408/409/429/5xx for refusals, since the SDK retries
those for minutes; a bug in a handler is a 500 and the server keeps serving.

Under the Miles contracts (`contract.py`) the routes also hold that gateway's rules: the SDK
version pin, JSON forward_backward (and `/api/v1/forward`), its refusals, 429 backpressure, and
one request per (model, seq_id) (`_Part._sequenced`: an identical retry gets its promise back,
another payload is a 422).

Not in Tinker's API: `GET /api/v1/status` (counters for the console) and `GET /health`
(liveness: 200 once the socket is up; readiness is `/api/v1/healthz`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import BaseModel
from tinker import types

from tbconsole.common.formatting import format_iso_time
from tbconsole.engine import wire
from tbconsole.engine.checkpoints import CheckpointRef
from tbconsole.engine.contract import (
    STARTING_MESSAGE,
    GatewayContract,
    MilesRefusals,
    client_config,
    fingerprint_forward_backward,
    fingerprint_json,
    sdk_version_refusal,
)
from tbconsole.engine.errors import BadRequest, EngineError, NotReady, UnsupportedMedia

if TYPE_CHECKING:
    from tbconsole.engine.server import Engine

log = logging.getLogger(__name__)

API = "/api/v1"
MAX_BODY_BYTES = 512 * 1024 * 1024


def make_runner(app: web.Application) -> web.AppRunner:
    # auto_decompress off: the SDK zstd-compresses forward_backward bodies, which aiohttp would
    # try (and, without an extra package, fail) to inflate before our handler sees them.
    return web.AppRunner(app, access_log=None, auto_decompress=False)


async def _json(request: web.Request) -> Any:
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadRequest(f"malformed JSON body: {e}") from None


async def _parse[Request: BaseModel](cls: type[Request], request: web.Request) -> Request:
    """The body as the SDK's request model `cls`; 400 if it is not one."""
    return wire.parse_json_model(cls, await _json(request))


def _is_json(request: web.Request) -> bool:
    """A JSON body (the 0.24.1 SDK's forward_backward), not protobuf."""
    return request.content_type == "application/json"


async def _field(request: web.Request, name: str) -> Any:
    """One field of a JSON object body, None if absent or not an object."""
    body = await _json(request)
    return body.get(name) if isinstance(body, dict) else None


class Routes:
    """The engine's HTTP app: its middleware (API key, errors as JSON) and the routes of each
    part of the API, one class a part."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[self._middleware])
        for part in (ServiceRoutes, TrainingRoutes, SamplingRoutes, RunRoutes):
            part(self.engine).add_to(app.router)
        app.on_startup.append(self._started)
        return app

    async def _started(self, app: web.Application) -> None:
        self.engine.readiness.start()

    @web.middleware
    async def _middleware(self, request: web.Request, handler):
        api_key = self.engine.settings.api_key
        if api_key and request.headers.get("X-API-Key") != api_key:
            return web.json_response({"error": "invalid API key", "detail": "invalid API key"}, status=401)
        try:
            return await handler(request)
        except EngineError as e:
            return web.json_response({"error": e.message, "detail": e.message}, status=e.status, headers=e.headers)
        except web.HTTPException:
            raise
        except Exception as e:  # a bug: report it, keep serving
            log.exception("unhandled error in %s", request.path)
            msg = f"internal error: {type(e).__name__}: {e}"
            return web.json_response({"error": msg, "detail": msg}, status=500)


class _Part:
    def __init__(self, engine: Engine):
        self.engine = engine

    @property
    def miles(self) -> bool:
        return self.engine.contract.is_miles

    async def _sequenced(self, scope: str | None, seq_id: int | None, fingerprint: str,
                         submit: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:  # fmt: skip
        """`submit()`'s promise, once per (scope, seq_id) under the Miles contracts: an identical
        retry gets the first promise back (410 if its future is gone), a different request on a
        spent seq_id is a 422. A request refused before it spends its seq_id (`submit` raises)
        leaves it unspent."""
        ledger = self.engine.ledger
        if ledger is None or scope is None or seq_id is None:
            return await submit()
        async with ledger.lock:
            prior = ledger.prior(scope, seq_id, fingerprint)
            if prior is not None:
                self.engine.jobs.check_live(prior["request_id"])
                return prior
            promise = await submit()
            ledger.spend(scope, seq_id, fingerprint, promise)
            return promise

    async def _refused_or(self, kind: str, model_id: str, refusal: str | None,
                          submit: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:  # fmt: skip
        """A future failed with `refusal` (the request spent its seq_id, as the Miles gateway
        counts it), else `submit()`'s promise."""
        if refusal is None:
            return await submit()
        run = await self.engine.runs.get(model_id)  # 404 for an unknown model first
        return self.engine.jobs.failed(kind, run.model_id, refusal)


class ServiceRoutes(_Part):
    """The client's configuration, sessions, telemetry, health and the console's status."""

    def add_to(self, r: web.UrlDispatcher) -> None:
        post, get = r.add_post, r.add_get
        post(f"{API}/client/config", self.client_config)
        post(f"{API}/client/dynamic_config", self.client_dynamic_config)
        post(f"{API}/create_session", self.create_session)
        post(f"{API}/session_heartbeat", self.session_heartbeat)
        post(f"{API}/sessions/{{session_id}}/finish", self.finish_session)
        post(f"{API}/telemetry", self.telemetry)
        get(f"{API}/healthz", self.healthz)
        get("/health", self.health)
        get(f"{API}/get_server_capabilities", self.capabilities)
        get(f"{API}/status", self.status)

    # ------------------------------------------------------------------ session/service
    def _check_sdk_version(self, body: Any) -> None:
        version = body.get("sdk_version") if isinstance(body, dict) else None
        refusal = sdk_version_refusal(self.engine.contract, version)
        if refusal is not None:
            raise BadRequest(refusal)

    async def client_config(self, request: web.Request) -> web.Response:
        if self.miles:
            self._check_sdk_version(await _json(request))
        return web.json_response(client_config(self.engine.contract, self.engine.settings.compress_fwdbwd))

    async def client_dynamic_config(self, request: web.Request) -> web.Response:
        return web.json_response({"refresh_interval_sec": 300, "sample_cancel_enabled": False})

    async def create_session(self, request: web.Request) -> web.Response:
        if self.miles:
            raw = await _json(request)
            self._check_sdk_version(raw)
            # The 0.24.1 SDK leaves out the fields that are None.
            body = wire.parse_json_model(types.CreateSessionRequest, {"tags": [], "user_metadata": None, **raw})
        else:
            body = await _parse(types.CreateSessionRequest, request)
        sid = self.engine.sessions.create(dict(body.user_metadata or {}))
        return web.json_response({"type": "create_session", "session_id": sid})

    async def session_heartbeat(self, request: web.Request) -> web.Response:
        self.engine.sessions.heartbeat(await _field(request, "session_id"))
        return web.json_response({"type": "session_heartbeat"})

    async def finish_session(self, request: web.Request) -> web.Response:
        self.engine.sessions.finish(request.match_info["session_id"])
        return web.json_response(None)

    async def telemetry(self, request: web.Request) -> web.Response:
        await request.read()  # accepted and dropped
        return web.json_response({"status": "accepted"})

    async def healthz(self, request: web.Request) -> web.Response:
        """Readiness: 503 while the engine is starting (`--starting-seconds`)."""
        remaining = self.engine.readiness.remaining()
        if remaining > 0:
            raise NotReady(f"{STARTING_MESSAGE} (ready in {remaining:.0f} s)")
        return web.json_response({"status": "ok"})

    async def health(self, request: web.Request) -> web.Response:
        """Liveness: the socket is up."""
        return web.json_response({"status": "ok"})

    async def status(self, request: web.Request) -> web.Response:
        return web.json_response(self.engine.status())

    async def capabilities(self, request: web.Request) -> web.Response:
        model = {"model_name": self.engine.model_name, "max_context_length": self.engine.max_context,
                 "trainable": True, "sampleable": True}  # fmt: skip
        return web.json_response({"supported_models": [model]})


class TrainingRoutes(_Part):
    """The training client's calls: each validated at once, then queued as a future."""

    def add_to(self, r: web.UrlDispatcher) -> None:
        post = r.add_post
        post(f"{API}/create_model", self.create_model)
        post(f"{API}/get_info", self.get_info)
        post(f"{API}/forward_backward", self.forward_backward)
        if self.miles:
            post(f"{API}/forward", self.forward)  # the 0.24.1 SDK's JSON forward
        post(f"{API}/optim_step", self.optim_step)
        post(f"{API}/save_weights", self.save_weights)
        post(f"{API}/save_weights_for_sampler", self.save_weights_for_sampler)
        post(f"{API}/load_weights", self.load_weights)
        post(f"{API}/unload_model", self.unload_model)

    async def create_model(self, request: web.Request) -> web.Response:
        body = await _parse(types.CreateModelRequest, request)
        if self.miles and (refusal := MilesRefusals.create_model(body.lora_config)):
            raise BadRequest(refusal)
        return web.json_response(self.engine.training.create_model(body))

    async def get_info(self, request: web.Request) -> web.Response:
        body = await _parse(types.GetInfoRequest, request)
        run = await self.engine.runs.get(body.model_id)
        name = self.engine.model_name
        return web.json_response(
            {
                "type": "get_info",
                "model_id": run.model_id,
                "model_name": name,
                "model_data": {
                    "arch": "qwen3",
                    "model_name": name,
                    "tokenizer_id": str(self.engine.local.tokenizer_dir),
                },  # fmt: skip
                "is_lora": True,
                "lora_rank": run.lora.rank,
                "optimizer_config": {"type": "adamw"},
            }
        )

    async def forward_backward(self, request: web.Request) -> web.Response:
        if self.miles and _is_json(request):
            req = wire.decode_json_forward_backward(await _json(request), input_key="forward_backward_input",
                                                    forward_only=False)  # fmt: skip
            return web.json_response(await self._submit_forward_backward(req, json_reply=True))
        if self.engine.contract is GatewayContract.MILES:
            raise UnsupportedMedia(
                "forward_backward must be JSON on this gateway (tinker 0.24.1's JSON body); a protobuf "
                "body comes from tinker 0.25 or later, which this deployment does not serve"
            )
        body = await request.read()
        req = wire.decode_forward_backward(body, request.headers.get("Content-Encoding"))
        return web.json_response(await self._submit_forward_backward(req, json_reply=False))

    async def forward(self, request: web.Request) -> web.Response:
        req = wire.decode_json_forward_backward(await _json(request), input_key="forward_input", forward_only=True)
        return web.json_response(await self._submit_forward_backward(req, json_reply=True))

    async def _submit_forward_backward(self, req: wire.ForwardBackwardIn, json_reply: bool) -> dict[str, Any]:
        def submit() -> Awaitable[dict[str, Any]]:
            return self.engine.training.forward_backward(req, json_reply=json_reply)

        if not self.miles or not req.seq_id:  # protobuf: seq_id 0 when unset
            return await submit()
        return await self._sequenced(req.model_id, req.seq_id, fingerprint_forward_backward(req), submit)

    async def optim_step(self, request: web.Request) -> web.Response:
        raw = await _json(request)
        body = wire.parse_json_model(types.OptimStepRequest, raw)
        promise = await self._sequenced(body.model_id, body.seq_id, fingerprint_json(raw),
                                        lambda: self.engine.training.optim_step(body))  # fmt: skip
        return web.json_response(promise)

    async def save_weights(self, request: web.Request) -> web.Response:
        raw = await _json(request)
        body = wire.parse_json_model(types.SaveWeightsRequest, raw)
        refusal = MilesRefusals.save_weights(body.ttl_seconds) if self.miles else None
        promise = await self._sequenced(body.model_id, body.seq_id, fingerprint_json(raw), lambda: self._refused_or(
            "save_weights", body.model_id, refusal, lambda: self.engine.training.save_weights(body)))  # fmt: skip
        return web.json_response(promise)

    async def save_weights_for_sampler(self, request: web.Request) -> web.Response:
        raw = await _json(request)
        body = wire.parse_json_model(types.SaveWeightsForSamplerRequest, raw)
        refusal = MilesRefusals.save_weights_for_sampler(body.path, body.ttl_seconds) if self.miles else None
        # The SDK mints a fresh sampling_session_seq_id on each attempt of the same seq_id, so it
        # is not part of the request's identity.
        fingerprint = fingerprint_json(raw, drop=("sampling_session_seq_id",))
        promise = await self._sequenced(body.model_id, body.seq_id, fingerprint, lambda: self._refused_or(
            "save_weights_for_sampler", body.model_id, refusal,
            lambda: self.engine.training.save_weights_for_sampler(body)))  # fmt: skip
        return web.json_response(promise)

    async def load_weights(self, request: web.Request) -> web.Response:
        raw = await _json(request)
        body = wire.parse_json_model(types.LoadWeightsRequest, raw)
        refusal = MilesRefusals.load_weights(body.optimizer) if self.miles else None
        if refusal is not None and body.model_id is None:  # creation from a checkpoint: no seq_id spent
            raise BadRequest(refusal)
        model_id = body.model_id
        promise = await self._sequenced(model_id, body.seq_id, fingerprint_json(raw), lambda: self._refused_or(
            "load_weights", str(model_id), refusal, lambda: self.engine.training.load_weights(body)))  # fmt: skip
        return web.json_response(promise)

    async def unload_model(self, request: web.Request) -> web.Response:
        model_id = await _field(request, "model_id")
        return web.json_response(await self.engine.training.unload_model(str(model_id)))


class SamplingRoutes(_Part):
    """Sampling sessions, samples, and the futures every queued call is retrieved through."""

    def add_to(self, r: web.UrlDispatcher) -> None:
        post = r.add_post
        post(f"{API}/create_sampling_session", self.create_sampling_session)
        post(f"{API}/asample", self.asample)
        post(f"{API}/retrieve_future", self.retrieve_future)
        post(f"{API}/cancel_future", self.cancel_future)
        r.add_get(f"{API}/samplers/{{sampler_id}}", self.get_sampler)

    async def create_sampling_session(self, request: web.Request) -> web.Response:
        body = await _parse(types.CreateSamplingSessionRequest, request)
        if self.miles and (refusal := MilesRefusals.sampling_source(body.model_path)):
            raise BadRequest(refusal)
        sid = await self.engine.sampling.create_session(body)
        return web.json_response({"type": "create_sampling_session", "sampling_session_id": sid})

    async def asample(self, request: web.Request) -> web.Response:
        raw = await _json(request)
        body = wire.parse_json_model(types.SampleRequest, raw)
        if not self.miles:
            return web.json_response(await self.engine.sampling.sample(body))
        if body.sampling_session_id is None:
            raise BadRequest(
                MilesRefusals.sampling_source(body.model_path)
                or "asample requires sampling_session_id (create a sampling session first)"
            )
        refusal = MilesRefusals.sample(body.topk_prompt_logprobs)

        async def submit() -> dict[str, Any]:
            if refusal is not None:
                await self.engine.samplers.get(str(body.sampling_session_id))  # 404 for an unknown one first
                return {**self.engine.jobs.failed("sample", None, refusal), "sample_sequence_ids": []}
            return await self.engine.sampling.sample(body)

        promise = await self._sequenced(f"sampler {body.sampling_session_id}", body.seq_id, fingerprint_json(raw),
                                        submit)  # fmt: skip
        return web.json_response(promise)

    # futures: every queued call is retrieved here
    async def retrieve_future(self, request: web.Request) -> web.Response:
        body = await _parse(types.FutureRetrieveRequest, request)
        outcome = await self.engine.jobs.retrieve(body.request_id)
        if outcome is None:
            return web.json_response({"type": "try_again", "request_id": body.request_id, "queue_state": "active"})
        if outcome.error is not None:
            return web.json_response({"error": outcome.error, "category": outcome.category})
        if isinstance(outcome.payload, bytes):
            return web.Response(body=outcome.payload, content_type=wire.PROTO_CONTENT_TYPE)
        return web.json_response(outcome.payload)

    async def cancel_future(self, request: web.Request) -> web.Response:
        await request.read()
        return web.json_response(None)

    async def get_sampler(self, request: web.Request) -> web.Response:
        sess = await self.engine.samplers.get(request.match_info["sampler_id"])
        return web.json_response({"sampler_id": sess.id, "base_model": sess.base_model, "model_path": sess.model_path})


class RunRoutes(_Part):
    """REST reads of training runs and their checkpoints, and checkpoint deletion."""

    def add_to(self, r: web.UrlDispatcher) -> None:
        get = r.add_get
        get(f"{API}/training_runs", self.list_training_runs)
        get(f"{API}/training_runs/{{run_id}}", self.get_training_run)
        get(f"{API}/training_runs/{{run_id}}/checkpoints", self.list_checkpoints)
        r.add_delete(f"{API}/training_runs/{{run_id}}/checkpoints/{{cid:.+}}", self.delete_checkpoint)
        get(f"{API}/checkpoints", self.list_all_checkpoints)
        r.add_post(f"{API}/weights_info", self.weights_info)

    def _run_json(self, run_id: str) -> dict[str, Any]:
        store = self.engine.store
        run = self.engine.runs.loaded(run_id)
        info = run.info() if run is not None else store.load_run(run_id)
        last_request = run.last_request if run is not None else info.get("created", time.time())
        ckpts = store.list(run_id) if store.run_dir(run_id).exists() else []
        training = [c for c in ckpts if c["checkpoint_type"] == "training"]
        sampler = [c for c in ckpts if c["checkpoint_type"] == "sampler"]
        return {
            "training_run_id": run_id,
            "base_model": info["base_model"],
            "model_owner": "local",
            "is_lora": True,
            "corrupted": False,
            "lora_rank": info["lora"]["rank"],
            "last_request_time": format_iso_time(last_request),
            "last_checkpoint": training[-1] if training else None,
            "last_sampler_checkpoint": sampler[-1] if sampler else None,
            "user_metadata": {str(k): str(v) for k, v in (info.get("user_metadata") or {}).items()},
        }

    async def get_training_run(self, request: web.Request) -> web.Response:
        return web.json_response(self._run_json(request.match_info["run_id"]))

    async def list_training_runs(self, request: web.Request) -> web.Response:
        limit = int(request.query.get("limit", 20))
        offset = int(request.query.get("offset", 0))
        ids = self.engine.store.list_runs()
        page = [self._run_json(r) for r in ids[offset : offset + limit]]
        cursor = {"offset": offset, "limit": limit, "total_count": len(ids)}
        return web.json_response({"training_runs": page, "cursor": cursor})

    async def list_checkpoints(self, request: web.Request) -> web.Response:
        run_id = request.match_info["run_id"]
        if self.engine.runs.loaded(run_id) is None:
            self.engine.store.load_run(run_id)  # 404 if unknown
        return web.json_response({"checkpoints": self.engine.store.list(run_id)})

    async def list_all_checkpoints(self, request: web.Request) -> web.Response:
        store = self.engine.store
        items = [c for r in store.list_runs() for c in store.list(r)]
        limit = int(request.query.get("limit", 100))
        offset = int(request.query.get("offset", 0))
        cursor = {"offset": offset, "limit": limit, "total_count": len(items)}
        return web.json_response({"checkpoints": items[offset : offset + limit], "cursor": cursor})

    async def delete_checkpoint(self, request: web.Request) -> web.Response:
        run_id, cid = request.match_info["run_id"], request.match_info["cid"]
        ref = CheckpointRef.parse(f"tinker://{run_id}/{cid}")
        self.engine.store.delete(ref)
        self.engine.samplers.forget_checkpoint(ref.tinker_path)
        return web.json_response(None)

    async def weights_info(self, request: web.Request) -> web.Response:
        ref = CheckpointRef.parse(await _field(request, "tinker_path"))
        _, meta, _ = self.engine.store.load(ref, optimizer=False)
        lora = meta["lora"]
        return web.json_response(
            {
                "base_model": meta["base_model"],
                "optimizer_config": {"type": "adamw"},
                "is_lora": True,
                "lora_rank": lora["rank"],
                "train_unembed": lora["train_unembed"],
                "train_mlp": lora["train_mlp"],
                "train_attn": lora["train_attn"],
            }
        )
