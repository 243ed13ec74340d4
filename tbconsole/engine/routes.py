"""The HTTP side: the subset of Tinker's `/api/v1` that the tinker 0.38 SDK and the cookbook's
RL loop use, on aiohttp. Handlers parse a request (with the SDK's own request types, `wire.py`),
hand it to the engine's parts and shape the reply.

Mutating calls validate their input on the spot (bad input -> 4xx JSON the SDK raises as
`BadRequestError` & co.), then return a future `{request_id, model_id}` that `retrieve_future`
long-polls (`jobs.py`). Status codes avoid 408/409/429/5xx for refusals, since the SDK retries
those for minutes; a bug in a handler is a 500 and the server keeps serving.

Not in Tinker's API: `GET /api/v1/status` (counters for the console).
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import BaseModel
from tinker import types

from tbconsole.common.formatting import format_iso_time
from tbconsole.engine import wire
from tbconsole.engine.checkpoints import CheckpointRef
from tbconsole.engine.errors import BadRequest, EngineError

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
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler):
        api_key = self.engine.settings.api_key
        if api_key and request.headers.get("X-API-Key") != api_key:
            return web.json_response({"error": "invalid API key", "detail": "invalid API key"}, status=401)
        try:
            return await handler(request)
        except EngineError as e:
            return web.json_response({"error": e.message, "detail": e.message}, status=e.status)
        except web.HTTPException:
            raise
        except Exception as e:  # a bug: report it, keep serving
            log.exception("unhandled error in %s", request.path)
            msg = f"internal error: {type(e).__name__}: {e}"
            return web.json_response({"error": msg, "detail": msg}, status=500)


class _Part:
    def __init__(self, engine: Engine):
        self.engine = engine


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
        get(f"{API}/get_server_capabilities", self.capabilities)
        get(f"{API}/status", self.status)

    # ------------------------------------------------------------------ session/service
    async def client_config(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "pjwt_auth_enabled": False,
                "use_pyqwest_transport": False,
                # Chunks in arrival order: the training worker processes requests as they come.
                "parallel_fwdbwd_chunks": False,
                "proto_compress_fwdbwd": self.engine.settings.compress_fwdbwd,
                "sample_use_retrieve_futures": False,
                "custom_loss_server_side": False,
                "sample_join_sampling_session": False,
            }
        )

    async def client_dynamic_config(self, request: web.Request) -> web.Response:
        return web.json_response({"refresh_interval_sec": 300, "sample_cancel_enabled": False})

    async def create_session(self, request: web.Request) -> web.Response:
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
        post(f"{API}/optim_step", self.optim_step)
        post(f"{API}/save_weights", self.save_weights)
        post(f"{API}/save_weights_for_sampler", self.save_weights_for_sampler)
        post(f"{API}/load_weights", self.load_weights)
        post(f"{API}/unload_model", self.unload_model)

    async def create_model(self, request: web.Request) -> web.Response:
        body = await _parse(types.CreateModelRequest, request)
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
        body = await request.read()
        req = wire.decode_forward_backward(body, request.headers.get("Content-Encoding"))
        return web.json_response(await self.engine.training.forward_backward(req))

    async def optim_step(self, request: web.Request) -> web.Response:
        body = await _parse(types.OptimStepRequest, request)
        return web.json_response(await self.engine.training.optim_step(body))

    async def save_weights(self, request: web.Request) -> web.Response:
        body = await _parse(types.SaveWeightsRequest, request)
        return web.json_response(await self.engine.training.save_weights(body))

    async def save_weights_for_sampler(self, request: web.Request) -> web.Response:
        body = await _parse(types.SaveWeightsForSamplerRequest, request)
        return web.json_response(await self.engine.training.save_weights_for_sampler(body))

    async def load_weights(self, request: web.Request) -> web.Response:
        body = await _parse(types.LoadWeightsRequest, request)
        return web.json_response(await self.engine.training.load_weights(body))

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
        sid = await self.engine.sampling.create_session(body)
        return web.json_response({"type": "create_sampling_session", "sampling_session_id": sid})

    async def asample(self, request: web.Request) -> web.Response:
        body = await _parse(types.SampleRequest, request)
        return web.json_response(await self.engine.sampling.sample(body))

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
