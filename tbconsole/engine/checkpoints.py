"""Checkpoints on disk under the engine's data dir, addressed by `tinker://` paths.

    tinker://<run_id>/weights/<name>          -> <data>/runs/<run_id>/weights/<name>/
    tinker://<run_id>/sampler_weights/<name>  -> <data>/runs/<run_id>/sampler_weights/<name>/

Each folder holds the LoRA adapter in PEFT layout (`adapter_model.safetensors`,
`adapter_config.json`), `meta.json` (creation/expiry time, user metadata, base model, LoRA
settings) and, for training state (`save_state`), `optimizer.pt`. `<data>/runs/<run_id>/run.json`
describes the training run (what `rest_client.get_training_run` returns). `ttl_seconds` is kept
as an expiry time; expired checkpoints are deleted by `prune_expired`.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from tbconsole.common import atomic
from tbconsole.common.formatting import format_iso_time
from tbconsole.engine.errors import BadRequest, Conflict, NotFound

SCHEME = "tinker://"
KINDS = {"weights": "training", "sampler_weights": "sampler"}
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:_\-]{0,200}$")
_NAME = re.compile(r"^[A-Za-z0-9_\-][A-Za-z0-9._\-]{0,200}$")


def check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise BadRequest(f"invalid checkpoint name {name!r}: use letters, digits, '.', '_', '-'")
    return name


@dataclass(frozen=True)
class CheckpointRef:
    run_id: str
    kind: str  # "weights" | "sampler_weights"
    name: str

    @property
    def tinker_path(self) -> str:
        return f"{SCHEME}{self.run_id}/{self.kind}/{self.name}"

    @property
    def checkpoint_id(self) -> str:
        return f"{self.kind}/{self.name}"

    @classmethod
    def parse(cls, path: str) -> CheckpointRef:
        if not isinstance(path, str) or not path.startswith(SCHEME):
            raise BadRequest(f"invalid tinker path {path!r}: expected tinker://<run>/<kind>/<name>")
        parts = path[len(SCHEME) :].split("/")
        if len(parts) != 3 or parts[1] not in KINDS:
            raise BadRequest(f"invalid tinker path {path!r}: expected tinker://<run>/weights|sampler_weights/<name>")
        run_id, kind, name = parts
        if not _RUN_ID.match(run_id):
            raise BadRequest(f"invalid training run id in {path!r}")
        return cls(run_id, kind, check_name(name))


class CheckpointStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        (self.root / "runs").mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ runs
    def run_dir(self, run_id: str) -> Path:
        if not _RUN_ID.match(run_id):
            raise BadRequest(f"invalid training run id {run_id!r}")
        return self.root / "runs" / run_id

    def save_run(self, run_id: str, info: dict[str, Any]) -> None:
        atomic.write_json(self.run_dir(run_id) / "run.json", info)

    def load_run(self, run_id: str) -> dict[str, Any]:
        p = self.run_dir(run_id) / "run.json"
        if not p.is_file():
            raise NotFound(f"unknown training run {run_id!r}")
        return json.loads(p.read_text())

    def list_runs(self) -> list[str]:
        runs = [p.parent.name for p in (self.root / "runs").glob("*/run.json")]
        return sorted(runs, key=lambda r: -(self.root / "runs" / r / "run.json").stat().st_mtime)

    # ------------------------------------------------------------------ checkpoints
    def dir_for(self, ref: CheckpointRef) -> Path:
        return self.run_dir(ref.run_id) / ref.kind / ref.name

    def exists(self, ref: CheckpointRef) -> bool:
        return (self.dir_for(ref) / "meta.json").is_file()

    def save(
        self,
        ref: CheckpointRef,
        *,
        adapter: dict[str, torch.Tensor],
        adapter_config: dict[str, Any],
        meta: dict[str, Any],
        optimizer: dict[str, Any] | None,
        ttl_seconds: int | None,
        overwrite: bool = True,
    ) -> int:
        d = self.dir_for(ref)
        if self.exists(ref) and not overwrite:
            raise Conflict(f"checkpoint {ref.tinker_path} exists (pass overwrite=True)")
        # The folder is built under a hidden name and put in place whole, so the files inside it
        # need no renames of their own.
        with atomic.replace_dir(d) as tmp:
            save_file({k: v.contiguous() for k, v in adapter.items()}, tmp / "adapter_model.safetensors")
            (tmp / "adapter_config.json").write_text(json.dumps(adapter_config, indent=1))
            if optimizer is not None:
                torch.save(optimizer, tmp / "optimizer.pt")
            now = time.time()
            meta = {
                **meta,
                "tinker_path": ref.tinker_path,
                "checkpoint_type": KINDS[ref.kind],
                "created": now,
                "expires_at": now + ttl_seconds if ttl_seconds else None,
            }
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
        return sum(p.stat().st_size for p in d.iterdir())

    def load(self, ref: CheckpointRef, *, optimizer: bool):
        d = self.dir_for(ref)
        if not self.exists(ref):
            raise NotFound(f"checkpoint {ref.tinker_path} not found")
        meta = json.loads((d / "meta.json").read_text())
        if meta.get("expires_at") and meta["expires_at"] < time.time():
            raise NotFound(f"checkpoint {ref.tinker_path} expired")
        adapter = load_file(d / "adapter_model.safetensors")
        opt = None
        if optimizer:
            p = d / "optimizer.pt"
            if not p.is_file():
                raise BadRequest(f"{ref.tinker_path} has no optimizer state (saved for sampler?)")
            opt = torch.load(p, map_location="cpu", weights_only=True)
        return adapter, meta, opt

    def describe(self, ref: CheckpointRef) -> dict[str, Any]:
        """The SDK's `Checkpoint` JSON for one checkpoint."""
        d = self.dir_for(ref)
        meta = json.loads((d / "meta.json").read_text())
        return {
            "checkpoint_id": ref.checkpoint_id,
            "checkpoint_type": KINDS[ref.kind],
            "time": format_iso_time(meta["created"]),
            "tinker_path": ref.tinker_path,
            "size_bytes": sum(p.stat().st_size for p in d.iterdir()),
            "public": False,
            "user_metadata": meta.get("user_metadata") or None,
            "expires_at": format_iso_time(meta.get("expires_at")),
        }

    def refs(self, run_id: str) -> list[CheckpointRef]:
        out = []
        base = self.run_dir(run_id)
        for kind in KINDS:
            for meta in (base / kind).glob("*/meta.json"):
                if not meta.parent.name.startswith("."):  # a save in progress, or one cut by a crash
                    out.append(CheckpointRef(run_id, kind, meta.parent.name))
        return out

    def list(self, run_id: str) -> list[dict[str, Any]]:
        self.prune_expired(run_id)
        items = [self.describe(r) for r in self.refs(run_id)]
        return sorted(items, key=lambda c: c["time"])

    def delete(self, ref: CheckpointRef) -> None:
        d = self.dir_for(ref)
        if not self.exists(ref):
            raise NotFound(f"checkpoint {ref.tinker_path} not found")
        shutil.rmtree(d)

    def prune_expired(self, run_id: str | None = None) -> int:
        now = time.time()
        removed = 0
        for run in [run_id] if run_id else self.list_runs():
            for ref in self.refs(run):
                try:
                    meta = json.loads((self.dir_for(ref) / "meta.json").read_text())
                except (OSError, ValueError):
                    continue
                if meta.get("expires_at") and meta["expires_at"] < now:
                    shutil.rmtree(self.dir_for(ref), ignore_errors=True)
                    removed += 1
        return removed
