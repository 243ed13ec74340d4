"""The engine: one base model, its training runs and samplers, and the HTTP app that serves them.

`Engine` builds the parts and wires them together: `sessions.py` (client sessions, training
runs), `sampler_sessions.py`, `training.py` and `sampling.py` (the requests), `jobs.py` (queued
work and its futures), `routes.py` (HTTP). Nothing a client sends can take the model down:
failures inside a job fail only that job's future.

Restarts: sessions, training runs (after each optim_step) and sampler sessions are journaled
under `<data dir>/live/` (`journal.py`) and come back on the first request that names them, so
an engine killed and restarted on the same data dir and port serves the SDK clients it had.
Futures are not journaled: polling one from before the restart gets 410 for a sample (the SDK
then sends the sample again) and 404 saying it was lost for anything else.

`EngineSettings.contract` picks the gateway the engine behaves as (`contract.py`): hosted Tinker
(the default) or the Miles gateway (`miles`, `miles-next`), with the parts that contract needs.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from aiohttp import web

from tbconsole.engine.checkpoints import CheckpointStore
from tbconsole.engine.contract import (
    MILES_DEFAULT_MAX_ACTIVE_SAMPLES,
    MILES_FUTURE_RETENTION_S,
    MILES_GAP_TIMEOUT_S,
    ExpiryFault,
    GatewayContract,
    Readiness,
    SampleAdmission,
    SeqLedger,
)
from tbconsole.engine.futures import FutureStore
from tbconsole.engine.jobs import Jobs
from tbconsole.engine.journal import Journal
from tbconsole.engine.lora import merge_adapter_into_base
from tbconsole.engine.model import Qwen3LM, build_model
from tbconsole.engine.registry import DEFAULT_MODEL, LocalModel, get_local_model, load_tokenizer
from tbconsole.engine.routes import Routes
from tbconsole.engine.sampler import Sampler
from tbconsole.engine.sampler_sessions import SamplerSessions
from tbconsole.engine.sampling import SamplingOps
from tbconsole.engine.sessions import Sessions, TrainingRuns
from tbconsole.engine.trainer import Limits, Trainer
from tbconsole.engine.training import TrainingOps

log = logging.getLogger(__name__)


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
    # The gateway contract (`contract.py`) and what goes with it.
    contract: GatewayContract = GatewayContract.TINKER
    starting_seconds: float = 0.0  # healthz answers 503 this long after the app starts (any contract)
    expire_futures: float = 0.0  # share of completed training results dropped at retrieval (any contract)
    fault_seed: int = 0  # seeds the draws of expire_futures
    max_active_samples: int = MILES_DEFAULT_MAX_ACTIVE_SAMPLES  # sub-generations in flight (Miles contracts)
    # Miles' --tinker-operation-gap-timeout: accepted for parity, bounds nothing here, since this
    # engine runs operations in arrival order and never waits for a missing seq_id.
    operation_gap_timeout: float = MILES_GAP_TIMEOUT_S
    future_replay_seconds: float = 300.0  # a delivered result is kept this long for re-polls
    # A completed result never retrieved is reaped after this (Miles contracts; 410 afterwards).
    future_retention_seconds: float = MILES_FUTURE_RETENTION_S

    def __post_init__(self) -> None:
        self.contract = GatewayContract.parse(self.contract)
        if not 0.0 <= self.expire_futures <= 1.0:
            raise ValueError(f"--expire-futures must be a share in [0, 1], got {self.expire_futures}")
        if self.starting_seconds < 0:
            raise ValueError(f"--starting-seconds must be >= 0, got {self.starting_seconds}")
        if self.max_active_samples < 1:
            raise ValueError(f"--max-active-samples must be >= 1, got {self.max_active_samples}")
        if self.future_replay_seconds < 0 or self.future_retention_seconds <= 0:
            raise ValueError("--future-replay-seconds must be >= 0 and --future-retention-seconds > 0")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda requested but CUDA is not available")
    return dev


def load_base_model(local: LocalModel, base_weights: Path | None, device: torch.device) -> Qwen3LM:
    """The served base model: seeded weights, or `base_weights`, plus the preset's warm start."""
    model = build_model(local.config, seed=local.seed, device=device)
    if base_weights:
        from safetensors.torch import load_file

        model.load_base_state_dict(load_file(str(base_weights)))
        model.to(device)
    if local.warm_start is not None:
        merge_adapter_into_base(model, local.warm_start)
    model.base_layers()  # build fused weights before threads share the model
    return model


class Engine:
    def __init__(self, settings: EngineSettings):
        self.settings = settings
        if settings.threads:
            torch.set_num_threads(settings.threads)
        self.threads = torch.get_num_threads()
        self.device = resolve_device(settings.device)
        self.local = get_local_model(settings.model)
        self.model_name = self.local.name
        self.cfg = self.local.config
        self.max_context = min(settings.max_context or self.cfg.max_position_embeddings,
                               self.cfg.max_position_embeddings)  # fmt: skip
        self.model = load_base_model(self.local, settings.base_weights, self.device)
        tokenizer = load_tokenizer()
        data_dir = Path(settings.data_dir).expanduser()
        self.store = CheckpointStore(data_dir)
        self.journal = Journal(data_dir / "live")
        self.contract = settings.contract
        miles = self.contract.is_miles
        self.readiness = Readiness(settings.starting_seconds)
        self.fault = ExpiryFault(settings.expire_futures, settings.fault_seed)
        futures = FutureStore(keep_after_read_s=settings.future_replay_seconds,
                              retention_s=settings.future_retention_seconds if miles else None,
                              tombstones=miles)  # fmt: skip
        self.jobs = Jobs(self.threads, settings.long_poll_s, futures=futures, fault=self.fault, unknown_is_gone=miles)
        self.ledger = SeqLedger() if miles else None
        self.admission = SampleAdmission(settings.max_active_samples) if miles else None
        self.trainer = Trainer(
            self.model, self.cfg, self.device,
            Limits(self.max_context, settings.max_tokens_per_request, settings.micro_batch_tokens),
        )  # fmt: skip
        self.sampler = Sampler(
            self.model, tokenizer, self.device,
            kv_budget_tokens=settings.kv_budget_tokens, max_rows=settings.max_rows,
            decode_threads=settings.decode_threads,
        )  # fmt: skip
        self.started = time.time()
        self.journal.prune()  # before the sampler sessions of an earlier process are read back
        self.sessions = Sessions(self.journal)
        self.runs = TrainingRuns(self.journal, self.trainer, self.model_name, self.device)
        self.samplers = SamplerSessions(self.journal, self.store, self.sampler, self.model_name, self.device)
        self.training = TrainingOps(
            sessions=self.sessions, runs=self.runs, samplers=self.samplers, jobs=self.jobs,
            trainer=self.trainer, store=self.store, journal=self.journal, model_name=self.model_name,
            device=self.device,
        )  # fmt: skip
        self.sampling = SamplingOps(
            sessions=self.sessions, samplers=self.samplers, jobs=self.jobs, journal=self.journal,
            sampler=self.sampler, model=self.model, model_name=self.model_name,
            max_context=self.max_context, eos_ids=frozenset({tokenizer.eos_token_id}),
            max_num_samples=settings.max_num_samples, kv_budget_tokens=settings.kv_budget_tokens,
            admission=self.admission, latest_only=miles,
        )  # fmt: skip
        runs = self.journal.run_count()
        if runs or len(self.samplers):
            log.info("journal %s: %d training runs and %d sampling sessions of an earlier engine "
                     "process come back when a client uses them", self.journal.root, runs,
                     len(self.samplers))  # fmt: skip

    def app(self) -> web.Application:
        return Routes(self).app()

    def close(self) -> None:
        self.sampler.close()
        self.jobs.close()

    def status(self) -> dict[str, Any]:
        """Counters for the console (`GET /api/v1/status`)."""
        s = self.sampler.stats
        return {
            "model": self.model_name,
            "device": str(self.device),
            "uptime_s": time.time() - self.started,
            "sessions": len(self.sessions),
            "training_runs": len(self.runs),
            "samplers": len(self.samplers),
            "pending_futures": self.jobs.pending(),
            "contract": self.contract.value,
            "faults": self.fault.stats(),
            **({"sampling_admission": self.admission.stats()} if self.admission is not None else {}),
            "journal": dict(self.journal.stats),
            "sampler": {
                "requests": s.requests, "sampled_tokens": s.sampled_tokens,
                "prefill_tokens": s.prefill_tokens, "prefix_hit_tokens": s.prefix_hit_tokens,
                "active_rows": s.active_rows,
                "queued": s.queued, "kv_tokens_in_use": s.kv_tokens_in_use,
            },
        }  # fmt: skip
