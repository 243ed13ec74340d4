"""The training requests: create_model, forward_backward, optim_step, save/load weights, unload.

Each is checked on the server's loop (bad input is refused before it queues: a 4xx the SDK
raises), then its work is queued on the training thread (`jobs.py`). A run's state is journaled
after every optim_step and load, before the request resolves.
"""

from __future__ import annotations

import secrets
from typing import Any

import torch
from tinker import types

from tbconsole.engine import wire
from tbconsole.engine.checkpoints import CheckpointRef, CheckpointStore, check_name
from tbconsole.engine.errors import BadRequest, Conflict, NotFound
from tbconsole.engine.jobs import Jobs
from tbconsole.engine.journal import Journal
from tbconsole.engine.lora import LoraAdapter
from tbconsole.engine.registry import check_base_model
from tbconsole.engine.sampler_sessions import SamplerSession, SamplerSessions
from tbconsole.engine.sessions import Sessions, TrainingRuns
from tbconsole.engine.trainer import LoraSettings, Trainer, TrainingRun

Promise = dict[str, Any]  # {request_id, model_id}: what `retrieve_future` polls


class TrainingOps:
    def __init__(self, *, sessions: Sessions, runs: TrainingRuns, samplers: SamplerSessions, jobs: Jobs,
                 trainer: Trainer, store: CheckpointStore, journal: Journal, model_name: str,
                 device: torch.device):  # fmt: skip
        self.sessions = sessions
        self.runs = runs
        self.samplers = samplers
        self.jobs = jobs
        self.trainer = trainer
        self.store = store
        self.journal = journal
        self.model_name = model_name
        self.device = device

    def _new_model_id(self, session_id: str, model_seq_id: int) -> str:
        model_id = f"{session_id}:train:{model_seq_id}"
        if self.runs.exists(model_id):
            raise Conflict(f"model {model_id} already exists")
        return model_id

    def create_model(self, body: types.CreateModelRequest) -> Promise:
        self.sessions.check(body.session_id)
        check_base_model(body.base_model, self.model_name)
        if body.lora_config is None:
            raise BadRequest("full fine-tuning is not supported; pass a LoRA config")
        if getattr(body.optimizer_config, "type", "adamw") != "adamw":
            raise BadRequest(f"optimizer {body.optimizer_config.type!r} is not supported (adamw only)")
        lc = body.lora_config
        lora = LoraSettings(lc.rank, lc.train_attn, lc.train_mlp, lc.train_unembed, lc.seed)
        model_id = self._new_model_id(body.session_id, body.model_seq_id)
        adapter = self.trainer.new_adapter(lora)  # validates rank/targets now (400 on bad input)
        run = TrainingRun(model_id, self.model_name, lora, adapter, dict(body.user_metadata or {}))
        self.runs.add(run)

        def job():
            self.store.save_run(model_id, run.info())
            self.journal.create_run(model_id, {"model_id": model_id, **run.info()})
            return {"model_id": model_id, "type": "create_model"}

        return self.jobs.submit_training("create_model", model_id, job)

    async def forward_backward(self, req: wire.ForwardBackwardIn, *, json_reply: bool = False) -> Promise:
        """`json_reply`: the result as JSON (a JSON request's), else protobuf."""
        run = await self.runs.get(req.model_id)
        self.trainer.validate(req.data, req.loss_fn, req.loss_fn_config)

        def job() -> bytes | dict[str, Any]:
            first = not run.pending_grad
            outputs, metrics = self.trainer.forward_backward(
                run, req.data, req.loss_fn, req.loss_fn_config, req.forward_only
            )
            if first and run.pending_grad:  # a restart now would lose gradients: say so then
                self.journal.mark_grads(run.model_id)
            if json_reply:
                return wire.forward_backward_output_json(outputs, metrics)
            return wire.encode_forward_backward_output(outputs, metrics)

        return self.jobs.submit_training("forward" if req.forward_only else "forward_backward", run.model_id, job)

    async def optim_step(self, body: types.OptimStepRequest) -> Promise:
        run = await self.runs.get(body.model_id)
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
            self.runs.journal_state(run)
            return {"metrics": metrics}

        return self.jobs.submit_training("optim_step", run.model_id, job)

    # ------------------------------------------------------------------ checkpoints
    async def save_weights(self, body: types.SaveWeightsRequest) -> Promise:
        run = await self.runs.get(body.model_id)
        name = check_name(body.path or f"state-{run.steps:06d}-{secrets.token_hex(3)}")
        ref = CheckpointRef(run.model_id, "weights", name)
        if not body.overwrite and self.store.exists(ref):
            raise Conflict(f"checkpoint {ref.tinker_path} exists (pass overwrite=True)")

        def job():
            self._save_adapter(run, ref, body, optimizer=self.trainer.optimizer_state(run),
                               overwrite=body.overwrite)  # fmt: skip
            return {"path": ref.tinker_path, "type": "save_weights"}

        return self.jobs.submit_training("save_weights", run.model_id, job)

    async def save_weights_for_sampler(self, body: types.SaveWeightsForSamplerRequest) -> Promise:
        run = await self.runs.get(body.model_id)
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
            version = self.samplers.publish(run.model_id)
            info = {"kind": "snapshot", "base_model": run.base_model, "snapshot_of": run.model_id,
                    "rank": snap.rank, "alpha": snap.alpha, "version": version}  # fmt: skip
            self.journal.save_sampler(sid, info, snap.state_dict())
            self.samplers.add(SamplerSession(sid, run.base_model, None, snap, ("snapshot", sid), run.model_id,
                                             version=version))  # fmt: skip
            return {"sampling_session_id": sid, "type": "save_weights_for_sampler"}

        return self.jobs.submit_training("save_weights_for_sampler", run.model_id, job)

    async def load_weights(self, body: types.LoadWeightsRequest) -> Promise:
        ref = CheckpointRef.parse(body.path)
        if ref.kind != "weights" and body.optimizer:
            raise BadRequest(f"{body.path} is a sampler checkpoint: it has no optimizer state")
        if body.session_id is not None:
            return self._create_from_checkpoint(body.session_id, body, ref)
        if body.model_id is None:
            raise BadRequest("load_weights needs model_id or session_id")
        run = await self.runs.get(body.model_id)
        if not self.store.exists(ref):
            raise NotFound(f"checkpoint {body.path} not found")

        def job():
            self._load_into(run, ref, body.optimizer)
            return {"path": body.path, "model_id": run.model_id, "type": "load_weights"}

        return self.jobs.submit_training("load_weights", run.model_id, job)

    def _create_from_checkpoint(self, session_id: str, body: types.LoadWeightsRequest, ref: CheckpointRef) -> Promise:
        """Create-via-load: the model is born from the checkpoint (the resume path)."""
        self.sessions.check(session_id)
        check_base_model(body.base_model, self.model_name)
        if body.model_seq_id is None:
            raise BadRequest("model_seq_id is required with session_id")
        model_id = self._new_model_id(session_id, body.model_seq_id)
        if not self.store.exists(ref):
            raise NotFound(f"checkpoint {body.path} not found")
        user_metadata = dict(body.user_metadata or {})

        def job():
            _, meta, _ = self.store.load(ref, optimizer=False)
            check_base_model(meta.get("base_model"), self.model_name)
            lora = LoraSettings.from_dict(meta["lora"])
            run = TrainingRun(model_id, self.model_name, lora, self.trainer.new_adapter(lora), user_metadata)
            self._load_into(run, ref, body.optimizer)
            self.journal.create_run(model_id, {"model_id": model_id, **run.info()})
            self.runs.journal_state(run)
            self.runs.add(run)
            self.store.save_run(model_id, run.info())
            return {"path": body.path, "model_id": model_id, "type": "load_weights"}

        return self.jobs.submit_training("load_weights", model_id, job)

    async def unload_model(self, model_id: str) -> Promise:
        run = await self.runs.get(model_id)

        def job():
            self.runs.drop(run.model_id)
            return {"model_id": run.model_id, "type": "unload_model"}

        return self.jobs.submit_training("unload_model", run.model_id, job)

    # ------------------------------------------------------------------ training thread
    def _save_adapter(self, run: TrainingRun, ref: CheckpointRef, body: Any, *,
                      optimizer: dict[str, Any] | None, overwrite: bool) -> None:  # fmt: skip
        """Persist the run's adapter (and optimizer state, for `save_weights`) under ref."""
        self.store.save(
            ref,
            adapter=run.adapter.state_dict(),
            adapter_config=self._adapter_config(run.lora, run.adapter),
            meta={
                "base_model": run.base_model,
                "lora": run.lora.to_dict(),
                "user_metadata": body.user_metadata or {},
                "step": run.steps,
            },  # fmt: skip
            optimizer=optimizer,
            ttl_seconds=body.ttl_seconds,
            overwrite=overwrite,
        )
        self.samplers.forget_checkpoint(ref.tinker_path)  # an overwrite must not serve stale weights

    def _adapter_config(self, lora: LoraSettings, adapter: LoraAdapter) -> dict[str, Any]:
        """PEFT-style adapter_config.json, plus our LoRA flags."""
        return {
            "peft_type": "LORA",
            "base_model_name_or_path": self.model_name,
            "r": lora.rank,
            "lora_alpha": lora.alpha,
            "target_modules": sorted({n.rsplit(".", 1)[-1] for n in adapter.weights}),
            "tbconsole_lora": lora.to_dict(),
        }

    def _load_into(self, run: TrainingRun, ref: CheckpointRef, optimizer: bool) -> None:
        sd, meta, opt = self.store.load(ref, optimizer=optimizer)
        lora = LoraSettings.from_dict(meta["lora"])
        shape = ("rank", "alpha", "train_attn", "train_mlp", "train_unembed")
        if any(getattr(lora, k) != getattr(run.lora, k) for k in shape):
            raise BadRequest(
                f"{ref.tinker_path} has LoRA settings {lora.to_dict()}, the model has {run.lora.to_dict()}"
            )
        run.adapter.copy_(LoraAdapter.from_state_dict(sd, rank=lora.rank, alpha=lora.alpha, device=self.device))
        self.trainer.zero_grad(run)
        run.optimizer = None
        run.lost_grads = False
        if opt is not None:
            self.trainer.load_optimizer_state(run, opt)
        self.runs.journal_state(run)
