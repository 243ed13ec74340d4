"""The HTTP side: the subset of Tinker's `/api/v1` that the tinker 0.38 SDK and the cookbook's
RL loop use, on aiohttp.

Mutating calls validate their input on the spot (bad input -> 4xx JSON the SDK raises as
`BadRequestError` & co.), then return a future `{request_id, model_id}` that `retrieve_future`
long-polls. Training work (create/forward/forward_backward/optim/save/load) runs in arrival order
on one worker thread; sampling goes to the batched decode thread (`sampler.py`). Nothing a client
sends can take the model down: failures inside a job fail only that job's future.

Not in Tinker's API: `GET /api/v1/status` (counters for the console). Status codes avoid
408/409/429/5xx for refusals, since the SDK retries those for minutes.

Restarts: sessions, training runs (after each optim_step) and sampler sessions are journaled
under `<data dir>/live/` (`journal.py`) and come back on the first request that names them, so
an engine killed and restarted on the same data dir and port serves the SDK clients it had.
Futures are not journaled: polling one from before the restart gets 410 for a sample (the SDK
then sends the sample again) and 404 saying it was lost for anything else.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch
from aiohttp import web
from tinker import types

from tbconsole.engine import wire
from tbconsole.engine.checkpoints import CheckpointRef, CheckpointStore, check_name
from tbconsole.engine.errors import BadRequest, Conflict, EngineError, Gone, NotFound, TooLarge
from tbconsole.engine.futures import FutureStore, Outcome
from tbconsole.engine.journal import Journal
from tbconsole.engine.model import LoraAdapter, Weights, build_model
from tbconsole.engine.registry import DEFAULT_MODEL, get_local_model, load_tokenizer
from tbconsole.engine.sampler import Sampler, SampleJob, SampleParams
from tbconsole.engine.trainer import Limits, LoraSettings, Trainer, TrainingRun

log = logging.getLogger(__name__)

API = "/api/v1"


@dataclass
class EngineSettings:
    host: str = "127.0.0.1"
    port: int = 0  # 0: let the OS pick
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    data_dir: Path = Path("~/.tbconsole/engine").expanduser()
    model: str = DEFAULT_MODEL
    base_weights: Path | None = None  # safetensors state dict in HF Qwen3 naming
    max_context: int | None = None  # default: the model's
    max_tokens_per_request: int = 131_072
    micro_batch_tokens: int = 8_192
    kv_budget_tokens: int = 262_144
    max_num_samples: int = 128
    max_rows: int = 64
    long_poll_s: float = 20.0
    compress_fwdbwd: bool = False
    api_key: str | None = None  # if set, X-API-Key must match
    threads: int | None = None  # torch intra-op threads (default: all cores)
    decode_threads: int | None = None  # threads for decode steps (default: 1 on CPU)


def merge_adapter_into_base(model, folder: Path) -> None:
    """Fold a saved LoRA adapter (PEFT folder) into the base weights: W += (alpha/r)·B·A."""
    from safetensors.torch import load_file

    config_path, weights_path = folder / "adapter_config.json", folder / "adapter_model.safetensors"
    if not (config_path.is_file() and weights_path.is_file()):
        raise FileNotFoundError(f"{folder}: no adapter (run `tbconsole warmup --out {folder}` to make it)")
    config = json.loads(config_path.read_text())
    adapter = LoraAdapter.from_state_dict(load_file(str(weights_path)), rank=int(config["r"]),
                                          alpha=float(config["lora_alpha"]), device=torch.device("cpu"))
    linears = dict(model.named_linears())
    with torch.no_grad():
        for name, (a, b) in adapter.weights.items():
            weight = linears[name].weight
            weight += ((b @ a) * adapter.scale).to(weight.device, weight.dtype)
    model.base_weights_changed()


def make_runner(app: web.Application) -> web.AppRunner:
    # auto_decompress off: the SDK zstd-compresses forward_backward bodies, which aiohttp would
    # try (and, without an extra package, fail) to inflate before our handler sees them.
    return web.AppRunner(app, access_log=None, auto_decompress=False)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda requested but CUDA is not available")
    return dev


def _iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc).isoformat()


@dataclass
class SamplerSession:
    id: str
    base_model: str
    model_path: str | None
    adapter: LoraAdapter | None
    key: Any
    snapshot_of: str | None = None  # training run, for in-memory snapshots
    # False: known from the journal of an earlier engine process (`restore` is its record there),
    # weights not loaded yet.
    loaded: bool = True
    restore: dict[str, Any] | None = None


# Sampler sessions hold adapter weights in memory: an RL loop makes one per step, so old ones
# are dropped (a later sample on one gets a 404 saying so).
MAX_SNAPSHOTS_PER_RUN = 8
MAX_SAMPLER_SESSIONS = 256


@dataclass
class Session:
    id: str
    created: float = field(default_factory=time.time)
    last_heartbeat: float = field(default_factory=time.time)
    user_metadata: dict[str, Any] = field(default_factory=dict)


class Engine:
    """One base model, its training runs and samplers, and the HTTP app that serves them."""

    def __init__(self, settings: EngineSettings):
        self.settings = settings
        if settings.threads:
            torch.set_num_threads(settings.threads)
        # Each worker sets its thread count before its work: the sampler drops to fewer threads
        # for decode steps, and torch's setting is not reliably per-thread.
        self.threads = torch.get_num_threads()
        self.device = resolve_device(settings.device)
        self.local = get_local_model(settings.model)
        self.model_name = self.local.name
        self.cfg = self.local.config
        self.max_context = min(settings.max_context or self.cfg.max_position_embeddings,
                               self.cfg.max_position_embeddings)  # fmt: skip
        self.model = build_model(self.cfg, seed=self.local.seed, device=self.device)
        if settings.base_weights:
            from safetensors.torch import load_file

            self.model.load_base_state_dict(load_file(str(settings.base_weights)))
            self.model.to(self.device)
        if self.local.warm_start is not None:
            merge_adapter_into_base(self.model, self.local.warm_start)
        self.model.base_layers()  # build fused weights before threads share the model
        self.tokenizer = load_tokenizer()
        self.eos_ids = frozenset({self.tokenizer.eos_token_id})
        self.store = CheckpointStore(Path(settings.data_dir).expanduser())
        self.journal = Journal(Path(settings.data_dir).expanduser() / "live")
        self.futures = FutureStore()
        self.trainer = Trainer(
            self.model, self.cfg, self.device,
            Limits(self.max_context, settings.max_tokens_per_request, settings.micro_batch_tokens),
        )  # fmt: skip
        self.sampler = Sampler(
            self.model, self.tokenizer, self.device,
            kv_budget_tokens=settings.kv_budget_tokens, max_rows=settings.max_rows,
            decode_threads=settings.decode_threads,
        )  # fmt: skip
        self.train_pool = concurrent.futures.ThreadPoolExecutor(1, "tbconsole-train")
        self.sessions: dict[str, Session] = {}
        self.runs: dict[str, TrainingRun] = {}
        self.sampler_sessions: OrderedDict[str, SamplerSession] = OrderedDict()  # LRU order
        self._evicted_sessions: set[str] = set()
        self._path_adapters: OrderedDict[str, LoraAdapter] = OrderedDict()  # loaded checkpoints
        self.started = time.time()
        self._lock = threading.Lock()  # guards runs/sampler_sessions across threads
        self._restore_lock = threading.Lock()  # one restore from the journal at a time
        self._wake_lock: asyncio.Lock | None = None  # sampler restores (on the server's loop)
        self.journal.prune()
        for info in self.journal.samplers():  # oldest first, so eviction order carries over
            self._add_sampler_session(self._dormant_sampler(info))
        runs = self.journal.run_count()
        if runs or self.sampler_sessions:
            log.info("journal %s: %d training runs and %d sampling sessions of an earlier engine "
                     "process come back when a client uses them", self.journal.root, runs,
                     len(self.sampler_sessions))  # fmt: skip

    def _add_sampler_session(self, sess: SamplerSession) -> None:
        """Register a sampler session, evicting the oldest ones beyond the caps."""
        with self._lock:
            self.sampler_sessions.pop(sess.id, None)
            self.sampler_sessions[sess.id] = sess
            evict: list[SamplerSession] = []
            if sess.snapshot_of is not None:
                mine = [s for s in self.sampler_sessions.values() if s.snapshot_of == sess.snapshot_of]
                evict += mine[: max(0, len(mine) - MAX_SNAPSHOTS_PER_RUN)]
            evicted = {s.id for s in evict}
            others = [s for s in self.sampler_sessions.values() if s.id not in evicted]
            evict += others[: max(0, len(others) - MAX_SAMPLER_SESSIONS)]
            for old in evict:
                del self.sampler_sessions[old.id]
                self._evicted_sessions.add(old.id)
        for old in evict:
            self.journal.drop_sampler(old.id)
            if not any(s.key == old.key for s in self.sampler_sessions.values()):
                self.sampler.forget_weights(old.key)

    async def _sampler_session(self, sid: str) -> SamplerSession:
        with self._lock:
            sess = self.sampler_sessions.get(sid)
            if sess is not None:
                self.sampler_sessions.move_to_end(sid)
        if sess is not None:
            return sess if sess.loaded else await self._wake_sampler(sid)
        if sid in self._evicted_sessions:
            raise NotFound(
                f"sampling session {sid!r} was dropped to free memory (only the newest "
                f"{MAX_SNAPSHOTS_PER_RUN} snapshots per training run are kept); create a new one"
            )
        raise NotFound(f"unknown sampling session {sid!r}")

    # ------------------------------------------------------------------ restore after a restart
    @staticmethod
    def _dormant_sampler(info: dict[str, Any]) -> SamplerSession:
        key: Any = {"snapshot": ("snapshot", info["id"]), "path": ("path", info.get("model_path")),
                    "base": ("base",)}.get(info.get("kind"), ("base",))  # fmt: skip
        return SamplerSession(info["id"], info.get("base_model", ""), info.get("model_path"), None,
                              key, info.get("snapshot_of"), loaded=False, restore=info)  # fmt: skip

    async def _wake_sampler(self, sid: str) -> SamplerSession:
        """Load the weights of a sampler session recorded by an earlier engine process."""
        if self._wake_lock is None:
            self._wake_lock = asyncio.Lock()
        async with self._wake_lock:
            with self._lock:
                dormant = self.sampler_sessions.get(sid)
            if dormant is None:
                raise NotFound(f"unknown sampling session {sid!r}")
            if dormant.loaded:
                return dormant
            self._check_base_model(dormant.base_model)
            kind = dormant.key[0]
            if kind == "path":
                sess = await self._sampler_session_for(sid, dormant.model_path, None)
            elif kind == "snapshot":
                info = dormant.restore or {}
                try:
                    sd = await asyncio.to_thread(self.journal.load_sampler_adapter, sid)
                except Exception as e:
                    raise NotFound(f"sampling session {sid!r}: its journaled snapshot is unreadable "
                                   f"({type(e).__name__}: {e})") from None  # fmt: skip
                if sd is None:
                    raise NotFound(f"sampling session {sid!r}: its snapshot is gone from the journal")
                adapter = LoraAdapter.from_state_dict(sd, rank=int(info["rank"]), alpha=float(info["alpha"]),
                                                      device=self.device)  # fmt: skip
                sess = SamplerSession(sid, self.model_name, None, adapter, dormant.key, dormant.snapshot_of)
            else:
                sess = SamplerSession(sid, self.model_name, None, None, ("base",))
            with self._lock:
                if sid in self.sampler_sessions:  # keeps its place in the LRU order
                    self.sampler_sessions[sid] = sess
            log.info("restored sampling session %s from the journal", sid)
            return sess

    def _restore_run(self, model_id: str) -> TrainingRun | None:
        """The training run as of its last journaled state (worker thread), or None."""
        with self._restore_lock:
            run = self.runs.get(model_id)
            if run is not None:
                return run
            try:
                rec = self.journal.load_run(model_id)
            except Exception as e:  # never a fresh adapter in place of a state that is unreadable
                log.exception("journal of %s is unreadable", model_id)
                raise NotFound(f"training run {model_id!r} cannot be restored: its journal is "
                               f"unreadable ({type(e).__name__}: {e})") from None  # fmt: skip
            if rec is None:
                return None
            meta = rec.meta
            self._check_base_model(meta.get("base_model"))
            lora = LoraSettings.from_dict(meta["lora"])
            run = TrainingRun(model_id, self.model_name, lora, self.trainer.new_adapter(lora),
                              dict(meta.get("user_metadata") or {}),
                              created=float(meta.get("created", time.time())))  # fmt: skip
            if rec.state is not None:
                loaded = LoraAdapter.from_state_dict(rec.state["adapter"], rank=lora.rank,
                                                     alpha=lora.alpha, device=self.device)  # fmt: skip
                with torch.no_grad():
                    for name, (a, b) in run.adapter.weights.items():
                        a.copy_(loaded.weights[name][0])
                        b.copy_(loaded.weights[name][1])
                self.trainer.load_optimizer_state(run, rec.state)
            run.lost_grads = rec.lost_grads
            self.runs[model_id] = run
            log.info("restored training run %s at step %d from the journal%s", model_id, run.steps,
                     " (gradients accumulated before the restart were lost)" if run.lost_grads else "")
            return run

    def _journal_state(self, run: TrainingRun) -> None:
        """Record the run's state (training thread) before the request that changed it resolves:
        a client that saw the result finds it after a restart. If that fails, the journal's
        older state must not come back silently, so the run is dropped from it."""
        try:
            optimizer = run.optimizer.state_dict() if run.optimizer is not None else None
            self.journal.save_state(run.model_id, run.adapter.state_dict(), optimizer, run.steps)
        except Exception:
            log.exception("could not journal %s; it will not survive an engine restart", run.model_id)
            self.journal.drop_run(run.model_id)

    def close(self) -> None:
        self.sampler.close()
        self.train_pool.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------------ status (console)
    def status(self) -> dict[str, Any]:
        s = self.sampler.stats
        return {
            "model": self.model_name,
            "device": str(self.device),
            "uptime_s": time.time() - self.started,
            "sessions": len(self.sessions),
            "training_runs": len(self.runs),
            "samplers": len(self.sampler_sessions),
            "pending_futures": self.futures.pending(),
            "journal": dict(self.journal.stats),
            "sampler": {
                "requests": s.requests, "sampled_tokens": s.sampled_tokens,
                "prefill_tokens": s.prefill_tokens, "prefix_hit_tokens": s.prefix_hit_tokens,
                "active_rows": s.active_rows,
                "queued": s.queued, "kv_tokens_in_use": s.kv_tokens_in_use,
            },
        }  # fmt: skip

    # ------------------------------------------------------------------ app
    def app(self) -> web.Application:
        app = web.Application(client_max_size=512 * 1024 * 1024, middlewares=[self._middleware])
        r = app.router
        post, get = r.add_post, r.add_get
        post(f"{API}/client/config", self.client_config)
        post(f"{API}/client/dynamic_config", self.client_dynamic_config)
        post(f"{API}/create_session", self.create_session)
        post(f"{API}/session_heartbeat", self.session_heartbeat)
        post(f"{API}/sessions/{{session_id}}/finish", self.finish_session)
        post(f"{API}/telemetry", self.telemetry)
        get(f"{API}/healthz", self.healthz)
        get(f"{API}/get_server_capabilities", self.capabilities)
        get(f"{API}/status", self.status_handler)
        post(f"{API}/create_model", self.create_model)
        post(f"{API}/get_info", self.get_info)
        post(f"{API}/forward_backward", self.forward_backward)
        post(f"{API}/optim_step", self.optim_step)
        post(f"{API}/save_weights", self.save_weights)
        post(f"{API}/save_weights_for_sampler", self.save_weights_for_sampler)
        post(f"{API}/load_weights", self.load_weights)
        post(f"{API}/unload_model", self.unload_model)
        post(f"{API}/create_sampling_session", self.create_sampling_session)
        post(f"{API}/asample", self.asample)
        post(f"{API}/retrieve_future", self.retrieve_future)
        post(f"{API}/cancel_future", self.cancel_future)
        get(f"{API}/training_runs", self.list_training_runs)
        get(f"{API}/training_runs/{{run_id}}", self.get_training_run)
        get(f"{API}/training_runs/{{run_id}}/checkpoints", self.list_checkpoints)
        r.add_delete(f"{API}/training_runs/{{run_id}}/checkpoints/{{cid:.+}}", self.delete_checkpoint)
        get(f"{API}/checkpoints", self.list_all_checkpoints)
        post(f"{API}/weights_info", self.weights_info)
        get(f"{API}/samplers/{{sampler_id}}", self.get_sampler)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler):
        if self.settings.api_key and request.headers.get("X-API-Key") != self.settings.api_key:
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

    @staticmethod
    async def _json(request: web.Request) -> Any:
        try:
            return await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise BadRequest(f"malformed JSON body: {e}") from None

    # ------------------------------------------------------------------ futures plumbing
    def _finish(self, loop: asyncio.AbstractEventLoop, rid: str, fn: Callable[[], Any]):
        """Wrap a job so its result/exception resolves future `rid` on the loop."""

        def run() -> None:
            try:
                outcome = Outcome(payload=fn())
            except EngineError as e:
                outcome = Outcome(error=e.message, category="user")
            except Exception as e:
                log.exception("job %s failed", rid)
                outcome = Outcome(error=f"{type(e).__name__}: {e}", category="server")
            loop.call_soon_threadsafe(self.futures.resolve, rid, outcome)

        return run

    def _train_job(self, kind: str, model_id: str | None, fn: Callable[[], Any]) -> web.Response:
        rid = self.futures.create(kind, model_id)

        def with_threads():
            torch.set_num_threads(self.threads)
            return fn()

        self.train_pool.submit(self._finish(asyncio.get_running_loop(), rid, with_threads))
        return web.json_response({"request_id": rid, "model_id": model_id})

    async def _run(self, model_id: str) -> TrainingRun:
        run = self.runs.get(model_id)
        if run is None and self.journal.has_run(model_id):
            run = await asyncio.to_thread(self._restore_run, model_id)
        if run is None:
            raise NotFound(f"unknown model_id {model_id!r} (create it with create_model)")
        run.touch()
        return run

    # ------------------------------------------------------------------ session/service
    async def client_config(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "pjwt_auth_enabled": False,
                "use_pyqwest_transport": False,
                # Chunks in arrival order: the training worker processes requests as they come.
                "parallel_fwdbwd_chunks": False,
                "proto_compress_fwdbwd": self.settings.compress_fwdbwd,
                "sample_use_retrieve_futures": False,
                "custom_loss_server_side": False,
                "sample_join_sampling_session": False,
            }
        )

    async def client_dynamic_config(self, request: web.Request) -> web.Response:
        return web.json_response({"refresh_interval_sec": 300, "sample_cancel_enabled": False})

    async def create_session(self, request: web.Request) -> web.Response:
        body = wire.parse_json_model(types.CreateSessionRequest, await self._json(request))
        sid = f"tbc-{secrets.token_hex(6)}"  # journal.SESSION_ID
        meta = dict(body.user_metadata or {})
        self.journal.add_session(sid, meta)
        self.sessions[sid] = Session(sid, user_metadata=meta)
        return web.json_response({"type": "create_session", "session_id": sid})

    def _session(self, session_id: Any) -> Session | None:
        """A live session; one of an earlier engine process on this data dir comes back."""
        sess = self.sessions.get(session_id) if isinstance(session_id, str) else None
        if sess is None and isinstance(session_id, str):
            rec = self.journal.load_session(session_id)
            if rec is not None:
                sess = self.sessions.setdefault(
                    session_id, Session(session_id, created=float(rec.get("created", time.time())),
                                        user_metadata=dict(rec.get("user_metadata") or {})))  # fmt: skip
                log.info("restored session %s from the journal", session_id)
        return sess

    async def session_heartbeat(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        sess = self._session(body.get("session_id") if isinstance(body, dict) else None)
        if sess is None:
            raise NotFound("unknown session")
        sess.last_heartbeat = time.time()
        self.journal.touch_session(sess.id)
        return web.json_response({"type": "session_heartbeat"})

    async def finish_session(self, request: web.Request) -> web.Response:
        sid = request.match_info["session_id"]
        self.sessions.pop(sid, None)
        self.journal.finish_session(sid)
        return web.json_response(None)

    async def telemetry(self, request: web.Request) -> web.Response:
        await request.read()  # accepted and dropped
        return web.json_response({"status": "accepted"})

    async def healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def status_handler(self, request: web.Request) -> web.Response:
        return web.json_response(self.status())

    async def capabilities(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "supported_models": [
                    {
                        "model_name": self.model_name,
                        "max_context_length": self.max_context,
                        "trainable": True,
                        "sampleable": True,
                    }
                ]
            }
        )

    def _check_base_model(self, name: str | None) -> None:
        if name is not None and name.split(":", 1)[0] != self.model_name:
            raise BadRequest(
                f"base model {name!r} is not served here; this engine serves {self.model_name!r}"
            )

    def _check_session(self, session_id: str) -> None:
        if self._session(session_id) is None:
            raise NotFound(f"unknown session {session_id!r}")

    def _model_exists(self, model_id: str) -> bool:
        return model_id in self.runs or self.journal.has_run(model_id)

    # ------------------------------------------------------------------ training
    async def create_model(self, request: web.Request) -> web.Response:
        body = wire.parse_json_model(types.CreateModelRequest, await self._json(request))
        self._check_session(body.session_id)
        self._check_base_model(body.base_model)
        if body.lora_config is None:
            raise BadRequest("full fine-tuning is not supported; pass a LoRA config")
        if getattr(body.optimizer_config, "type", "adamw") != "adamw":
            raise BadRequest(f"optimizer {body.optimizer_config.type!r} is not supported (adamw only)")
        lc = body.lora_config
        lora = LoraSettings(lc.rank, lc.train_attn, lc.train_mlp, lc.train_unembed, lc.seed)
        model_id = f"{body.session_id}:train:{body.model_seq_id}"
        if self._model_exists(model_id):
            raise Conflict(f"model {model_id} already exists")
        adapter = self.trainer.new_adapter(lora)  # validates rank/targets now (400 on bad input)
        run = TrainingRun(model_id, self.model_name, lora, adapter, dict(body.user_metadata or {}))
        self.runs[model_id] = run

        def job():
            self.store.save_run(model_id, run.info())
            self.journal.create_run(model_id, {"model_id": model_id, **run.info()})
            return {"model_id": model_id, "type": "create_model"}

        return self._train_job("create_model", model_id, job)

    async def get_info(self, request: web.Request) -> web.Response:
        body = wire.parse_json_model(types.GetInfoRequest, await self._json(request))
        run = await self._run(body.model_id)
        return web.json_response(
            {
                "type": "get_info",
                "model_id": run.model_id,
                "model_name": self.model_name,
                "model_data": {
                    "arch": "qwen3",
                    "model_name": self.model_name,
                    "tokenizer_id": str(self.local.tokenizer_dir),
                },
                "is_lora": True,
                "lora_rank": run.lora.rank,
                "optimizer_config": {"type": "adamw"},
            }
        )

    async def forward_backward(self, request: web.Request) -> web.Response:
        body = await request.read()
        req = wire.decode_forward_backward(body, request.headers.get("Content-Encoding"))
        run = await self._run(req.model_id)
        self.trainer.validate(req.data, req.loss_fn, req.loss_fn_config)

        def job() -> bytes:
            first = not run.pending_grad
            outputs, metrics = self.trainer.forward_backward(
                run, req.data, req.loss_fn, req.loss_fn_config, req.forward_only
            )
            if first and run.pending_grad:  # a restart now would lose gradients: say so then
                self.journal.mark_grads(run.model_id)
            return wire.encode_forward_backward_output(outputs, metrics)

        return self._train_job("forward" if req.forward_only else "forward_backward", run.model_id, job)

    async def optim_step(self, request: web.Request) -> web.Response:
        body = wire.parse_json_model(types.OptimStepRequest, await self._json(request))
        run = await self._run(body.model_id)
        params = body.optim_params
        if not isinstance(params, types.AdamParams):
            raise BadRequest("only AdamParams are supported")

        def job():
            if run.lost_grads:
                run.lost_grads = False
                self.trainer.zero_grad(run)
                raise BadRequest(
                    f"the engine restarted after forward_backward calls on {run.model_id} whose "
                    f"gradients no optim_step had applied; those gradients were lost. The model is "
                    f"as after its last completed optim_step (step {run.steps}): redo this step's "
                    f"forward_backward calls, then optim_step"
                )
            metrics = self.trainer.optim_step(run, params)
            self._journal_state(run)
            return {"metrics": metrics}

        return self._train_job("optim_step", run.model_id, job)

    def _adapter_config(self, run_lora: LoraSettings, adapter: LoraAdapter) -> dict[str, Any]:
        """PEFT-style adapter_config.json, plus our LoRA flags."""
        return {
            "peft_type": "LORA",
            "base_model_name_or_path": self.model_name,
            "r": run_lora.rank,
            "lora_alpha": run_lora.alpha,
            "target_modules": sorted({n.rsplit(".", 1)[-1] for n in adapter.weights}),
            "tbconsole_lora": run_lora.to_dict(),
        }

    async def save_weights(self, request: web.Request) -> web.Response:
        body = wire.parse_json_model(types.SaveWeightsRequest, await self._json(request))
        run = await self._run(body.model_id)
        name = check_name(body.path or f"state-{run.steps:06d}-{secrets.token_hex(3)}")
        ref = CheckpointRef(run.model_id, "weights", name)
        if not body.overwrite and self.store.exists(ref):
            raise Conflict(f"checkpoint {ref.tinker_path} exists (pass overwrite=True)")

        def job():
            self._save_adapter(run, ref, body, optimizer=self.trainer.optimizer_state(run),
                               overwrite=body.overwrite)
            return {"path": ref.tinker_path, "type": "save_weights"}

        return self._train_job("save_weights", run.model_id, job)

    def _save_adapter(self, run, ref: CheckpointRef, body, *, optimizer, overwrite: bool) -> None:
        """Persist the run's adapter (and optimizer state, for `save_weights`) under ref."""
        self.store.save(
            ref,
            adapter=run.adapter.state_dict(),
            adapter_config=self._adapter_config(run.lora, run.adapter),
            meta={"base_model": run.base_model, "lora": run.lora.to_dict(),
                  "user_metadata": body.user_metadata or {}, "step": run.steps},
            optimizer=optimizer,
            ttl_seconds=body.ttl_seconds,
            overwrite=overwrite,
        )
        self._path_adapters.pop(ref.tinker_path, None)  # an overwrite must not serve stale weights

    async def save_weights_for_sampler(self, request: web.Request) -> web.Response:
        body = wire.parse_json_model(types.SaveWeightsForSamplerRequest, await self._json(request))
        run = await self._run(body.model_id)
        session_id = run.model_id.split(":train:", 1)[0]
        if body.path is not None:
            ref = CheckpointRef(run.model_id, "sampler_weights", check_name(body.path))
        elif body.sampling_session_seq_id is None:
            raise BadRequest("pass a path (name) or a sampling_session_seq_id")

        def job():
            if body.path is not None:
                self._save_adapter(run, ref, body, optimizer=None, overwrite=True)
                return {"path": ref.tinker_path, "type": "save_weights_for_sampler"}
            # Ephemeral snapshot (save_weights_and_get_sampling_client): memory, and the journal.
            sid = f"{session_id}:sample:{body.sampling_session_seq_id}"
            snap = run.adapter.snapshot()
            info = {"kind": "snapshot", "base_model": run.base_model, "snapshot_of": run.model_id,
                    "rank": snap.rank, "alpha": snap.alpha}  # fmt: skip
            self.journal.save_sampler(sid, info, snap.state_dict())
            self._add_sampler_session(
                SamplerSession(sid, run.base_model, None, snap, ("snapshot", sid), run.model_id)
            )
            return {"sampling_session_id": sid, "type": "save_weights_for_sampler"}

        return self._train_job("save_weights_for_sampler", run.model_id, job)

    def _load_into(self, run: TrainingRun, ref: CheckpointRef, optimizer: bool) -> None:
        sd, meta, opt = self.store.load(ref, optimizer=optimizer)
        lora = LoraSettings.from_dict(meta["lora"])
        shape = ("rank", "alpha", "train_attn", "train_mlp", "train_unembed")
        if any(getattr(lora, k) != getattr(run.lora, k) for k in shape):
            raise BadRequest(
                f"{ref.tinker_path} has LoRA settings {lora.to_dict()}, the model has "
                f"{run.lora.to_dict()}"
            )
        loaded = LoraAdapter.from_state_dict(sd, rank=lora.rank, alpha=lora.alpha, device=self.device)
        with torch.no_grad():
            for name, (a, b) in run.adapter.weights.items():
                a.copy_(loaded.weights[name][0])
                b.copy_(loaded.weights[name][1])
        self.trainer.zero_grad(run)
        run.optimizer = None
        run.lost_grads = False
        if opt is not None:
            self.trainer.load_optimizer_state(run, opt)
        self._journal_state(run)

    async def load_weights(self, request: web.Request) -> web.Response:
        body = wire.parse_json_model(types.LoadWeightsRequest, await self._json(request))
        ref = CheckpointRef.parse(body.path)
        if ref.kind != "weights" and body.optimizer:
            raise BadRequest(f"{body.path} is a sampler checkpoint: it has no optimizer state")
        if body.session_id is not None:
            # Create-via-load: the model is born from the checkpoint (resume path).
            self._check_session(body.session_id)
            self._check_base_model(body.base_model)
            if body.model_seq_id is None:
                raise BadRequest("model_seq_id is required with session_id")
            model_id = f"{body.session_id}:train:{body.model_seq_id}"
            if self._model_exists(model_id):
                raise Conflict(f"model {model_id} already exists")
            if not self.store.exists(ref):
                raise NotFound(f"checkpoint {body.path} not found")
            user_metadata = dict(body.user_metadata or {})

            def create_job():
                _, meta, _ = self.store.load(ref, optimizer=False)
                self._check_base_model(meta.get("base_model"))
                lora = LoraSettings.from_dict(meta["lora"])
                run = TrainingRun(model_id, self.model_name, lora, self.trainer.new_adapter(lora),
                                  user_metadata)  # fmt: skip
                self._load_into(run, ref, body.optimizer)
                self.journal.create_run(model_id, {"model_id": model_id, **run.info()})
                self._journal_state(run)
                self.runs[model_id] = run
                self.store.save_run(model_id, run.info())
                return {"path": body.path, "model_id": model_id, "type": "load_weights"}

            return self._train_job("load_weights", model_id, create_job)

        if body.model_id is None:
            raise BadRequest("load_weights needs model_id or session_id")
        run = await self._run(body.model_id)
        if not self.store.exists(ref):
            raise NotFound(f"checkpoint {body.path} not found")

        def job():
            self._load_into(run, ref, body.optimizer)
            return {"path": body.path, "model_id": run.model_id, "type": "load_weights"}

        return self._train_job("load_weights", run.model_id, job)

    async def unload_model(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        model_id = body.get("model_id") if isinstance(body, dict) else None
        run = await self._run(str(model_id))

        def job():
            with self._restore_lock:
                self.journal.drop_run(run.model_id)
                self.runs.pop(run.model_id, None)
            return {"model_id": run.model_id, "type": "unload_model"}

        return self._train_job("unload_model", run.model_id, job)

    # ------------------------------------------------------------------ sampling
    async def create_sampling_session(self, request: web.Request) -> web.Response:
        body = wire.parse_json_model(types.CreateSamplingSessionRequest, await self._json(request))
        self._check_session(body.session_id)
        sid = f"{body.session_id}:sample:{body.sampling_session_seq_id}"
        sess = await self._sampler_session_for(sid, body.model_path, body.base_model)
        kind = "path" if sess.model_path else "base"
        self.journal.save_sampler(sid, {"kind": kind, "base_model": self.model_name,
                                        "model_path": sess.model_path}, None)  # fmt: skip
        self._add_sampler_session(sess)
        return web.json_response({"type": "create_sampling_session", "sampling_session_id": sid})

    async def _sampler_session_for(self, sid: str, model_path: str | None, base_model: str | None):
        if model_path:
            ref = CheckpointRef.parse(model_path)
            adapter = self._path_adapters.get(model_path)
            if adapter is None:
                loop = asyncio.get_running_loop()
                sd, meta, _ = await loop.run_in_executor(
                    None, lambda: self.store.load(ref, optimizer=False)
                )
                self._check_base_model(meta.get("base_model"))
                lora = meta["lora"]
                adapter = LoraAdapter.from_state_dict(
                    sd, rank=lora["rank"], alpha=lora["alpha"], device=self.device
                )
                self._path_adapters[model_path] = adapter
                while len(self._path_adapters) > 16:
                    self._path_adapters.popitem(last=False)
            return SamplerSession(sid, self.model_name, model_path, adapter, ("path", model_path))
        if base_model is None:
            raise BadRequest("pass model_path or base_model")
        self._check_base_model(base_model)
        return SamplerSession(sid, self.model_name, None, None, ("base",))

    def _sample_params(self, sp: Any, prompt_len: int) -> SampleParams:
        room = self.max_context - prompt_len
        if room < 1:
            raise TooLarge(
                f"prompt of {prompt_len} tokens leaves no room in the {self.max_context}-token context"
            )
        max_tokens = room if sp.max_tokens is None else int(sp.max_tokens)
        if max_tokens < 1:
            raise BadRequest(f"max_tokens must be >= 1, got {max_tokens}")
        if prompt_len + max_tokens > self.max_context:
            raise TooLarge(
                f"prompt ({prompt_len}) + max_tokens ({max_tokens}) exceeds the model's context "
                f"of {self.max_context} tokens"
            )
        if not (sp.temperature >= 0) or not (0 < sp.top_p <= 1) or sp.top_k < -1 or sp.top_k == 0:
            raise BadRequest(
                f"invalid sampling params: temperature={sp.temperature} (>= 0), "
                f"top_p={sp.top_p} (0 < top_p <= 1), top_k={sp.top_k} (-1 or >= 1)"
            )
        stop = sp.stop
        stop_tokens: frozenset[int] = frozenset()
        stop_strings: tuple[str, ...] = ()
        if stop is None:
            stop_tokens = self.eos_ids
        elif isinstance(stop, str):
            stop_strings = (stop,)
        else:
            items = list(stop)
            if all(isinstance(s, str) for s in items):
                stop_strings = tuple(items)
            elif all(isinstance(s, int) for s in items):
                stop_tokens = frozenset(items)
            else:
                raise BadRequest("stop must be strings or token ids, not a mix")
        if any(s == "" for s in stop_strings):
            raise BadRequest("empty stop string")
        return SampleParams(
            max_tokens=max_tokens,
            temperature=float(sp.temperature),
            top_k=int(sp.top_k),
            top_p=float(sp.top_p),
            seed=None if sp.seed is None else int(sp.seed),
            stop_tokens=stop_tokens,
            stop_strings=stop_strings,
        )

    async def asample(self, request: web.Request) -> web.Response:
        body = wire.parse_json_model(types.SampleRequest, await self._json(request))
        if body.sampling_session_id is not None:
            sess = await self._sampler_session(body.sampling_session_id)
        else:
            sess = await self._sampler_session_for("adhoc", body.model_path, body.base_model)
        unsupported = [
            name
            for name, on in (
                ("topk_prompt_logprobs", body.topk_prompt_logprobs),
                ("topk_sample_logprobs", body.topk_sample_logprobs),
                ("target_prompt_logprobs", body.target_prompt_logprobs is not None),
                ("prompt_alt_tokens_k", body.prompt_alt_tokens_k),
                ("prompt_logprobs_last_n", body.prompt_logprobs_last_n is not None),
            )
            if on
        ]
        if unsupported:
            raise BadRequest(f"not supported by this engine: {unsupported}")
        prompt = wire.model_input_tokens(body.prompt.chunks, "prompt")
        if not prompt:
            raise BadRequest("empty prompt")
        if min(prompt) < 0 or max(prompt) >= self.cfg.vocab_size:
            raise BadRequest(f"prompt has token ids outside [0, {self.cfg.vocab_size})")
        if not (1 <= body.num_samples <= self.settings.max_num_samples):
            raise BadRequest(
                f"num_samples must be in [1, {self.settings.max_num_samples}], got {body.num_samples}"
            )
        params = self._sample_params(body.sampling_params, len(prompt))
        need = body.num_samples * (len(prompt) + params.max_tokens)
        if need > self.settings.kv_budget_tokens:
            raise TooLarge(
                f"num_samples x (prompt + max_tokens) = {need} tokens exceeds the engine's "
                f"KV budget of {self.settings.kv_budget_tokens}"
            )
        rid = self.futures.create("sample")
        loop = asyncio.get_running_loop()

        def done(seqs, prompt_lp, hit_tokens, exc) -> None:
            if exc is not None:
                cat = "user" if isinstance(exc, EngineError) else "server"
                outcome = Outcome(error=getattr(exc, "message", str(exc)), category=cat)
            else:
                outcome = Outcome(payload=wire.encode_sample_response(seqs, prompt_lp, hit_tokens))
            loop.call_soon_threadsafe(self.futures.resolve, rid, outcome)

        adapter = sess.adapter
        self.sampler.submit(
            SampleJob(
                prompt=prompt,
                num_samples=body.num_samples,
                params=params,
                weights_key=sess.key,
                get_weights=lambda: Weights.merged(self.model, adapter),
                prompt_logprobs=bool(body.prompt_logprobs),
                done=done,
            )
        )
        seq_ids = [f"{rid}:{i}" for i in range(body.num_samples)]
        return web.json_response({"request_id": rid, "model_id": None, "sample_sequence_ids": seq_ids})

    async def retrieve_future(self, request: web.Request) -> web.Response:
        body = wire.parse_json_model(types.FutureRetrieveRequest, await self._json(request))
        try:
            outcome = await self.futures.wait(body.request_id, self.settings.long_poll_s)
        except KeyError:
            lost = self.futures.lost_kind(body.request_id)
            if lost == "sample":  # safe to run again: the SDK re-sends it on a 410
                raise Gone(f"request {body.request_id!r} was lost when the engine restarted") from None
            if lost is not None:
                raise NotFound(
                    f"{lost} request {body.request_id!r} was lost: the engine restarted before it "
                    f"finished or before its result was read. Training runs are as after their last "
                    f"completed optim_step; send the request again (for a training step, its "
                    f"forward_backward calls and then optim_step)"
                ) from None
            raise NotFound(f"unknown request_id {body.request_id!r}") from None
        if outcome is None:
            return web.json_response(
                {"type": "try_again", "request_id": body.request_id, "queue_state": "active"}
            )
        if outcome.error is not None:
            return web.json_response({"error": outcome.error, "category": outcome.category})
        if isinstance(outcome.payload, bytes):
            return web.Response(body=outcome.payload, content_type=wire.PROTO_CONTENT_TYPE)
        return web.json_response(outcome.payload)

    async def cancel_future(self, request: web.Request) -> web.Response:
        await request.read()
        return web.json_response(None)

    # ------------------------------------------------------------------ REST reads
    def _run_json(self, run_id: str) -> dict[str, Any]:
        run = self.runs.get(run_id)
        info = run.info() if run is not None else self.store.load_run(run_id)
        last_request = run.last_request if run is not None else info.get("created", time.time())
        ckpts = self.store.list(run_id) if self.store.run_dir(run_id).exists() else []
        training = [c for c in ckpts if c["checkpoint_type"] == "training"]
        sampler = [c for c in ckpts if c["checkpoint_type"] == "sampler"]
        return {
            "training_run_id": run_id,
            "base_model": info["base_model"],
            "model_owner": "local",
            "is_lora": True,
            "corrupted": False,
            "lora_rank": info["lora"]["rank"],
            "last_request_time": _iso(last_request),
            "last_checkpoint": training[-1] if training else None,
            "last_sampler_checkpoint": sampler[-1] if sampler else None,
            "user_metadata": {str(k): str(v) for k, v in (info.get("user_metadata") or {}).items()},
        }

    async def get_training_run(self, request: web.Request) -> web.Response:
        return web.json_response(self._run_json(request.match_info["run_id"]))

    async def list_training_runs(self, request: web.Request) -> web.Response:
        limit = int(request.query.get("limit", 20))
        offset = int(request.query.get("offset", 0))
        ids = self.store.list_runs()
        page = [self._run_json(r) for r in ids[offset : offset + limit]]
        cursor = {"offset": offset, "limit": limit, "total_count": len(ids)}
        return web.json_response({"training_runs": page, "cursor": cursor})

    async def list_checkpoints(self, request: web.Request) -> web.Response:
        run_id = request.match_info["run_id"]
        if run_id not in self.runs:
            self.store.load_run(run_id)  # 404 if unknown
        return web.json_response({"checkpoints": self.store.list(run_id)})

    async def list_all_checkpoints(self, request: web.Request) -> web.Response:
        items = [c for r in self.store.list_runs() for c in self.store.list(r)]
        limit = int(request.query.get("limit", 100))
        offset = int(request.query.get("offset", 0))
        cursor = {"offset": offset, "limit": limit, "total_count": len(items)}
        return web.json_response({"checkpoints": items[offset : offset + limit], "cursor": cursor})

    async def delete_checkpoint(self, request: web.Request) -> web.Response:
        run_id, cid = request.match_info["run_id"], request.match_info["cid"]
        ref = CheckpointRef.parse(f"tinker://{run_id}/{cid}")
        self.store.delete(ref)
        self._path_adapters.pop(ref.tinker_path, None)
        return web.json_response(None)

    async def weights_info(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        path = body.get("tinker_path") if isinstance(body, dict) else None
        ref = CheckpointRef.parse(path)
        _, meta, _ = self.store.load(ref, optimizer=False)
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

    async def get_sampler(self, request: web.Request) -> web.Response:
        sess = await self._sampler_session(request.match_info["sampler_id"])
        return web.json_response(
            {"sampler_id": sess.id, "base_model": sess.base_model, "model_path": sess.model_path}
        )
