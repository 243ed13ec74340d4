"""Live state on disk, so that an engine killed (even with SIGKILL) and restarted on the same data
dir serves the clients it had: sessions, training runs and sampler sessions come back lazily, on
the first request that names them.

    <data>/live/sessions/<session_id>.json    created/user metadata; mtime = last heartbeat
    <data>/live/runs/<model_id>/meta.json     base model, LoRA settings, user metadata
    <data>/live/runs/<model_id>/state.{0,1}.safetensors   adapter + AdamW state + step count,
                                              after every optim_step and load, generation N in
                                              slot N % 2 (`state_slots.py`; none: the fresh adapter)
    <data>/live/runs/<model_id>/grads         "gradients pending since state generation N"
    <data>/live/samplers/<sampler_id>.json    what a sampler session samples from
    <data>/live/samplers/<sampler_id>.safetensors   its adapter, for in-memory snapshots

Every other file is written whole (`tbconsole.common.atomic`), so a kill leaves either the old or the
new version, never half of one; a state slot torn by a kill is recognised and the other slot
used. Nothing is fsynced: the page cache outlives a killed process, not a power cut. Sampler
entries go when the engine drops the session from memory; everything of a session goes when it
is finished, or at startup once it has had no heartbeat for `STALE_AFTER_S`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from safetensors.torch import save as save_safetensors

from tbconsole.common import atomic
from tbconsole.engine.state_slots import SLOTS, SlotWriter, read_slot, slot_path

# The engine's own session ids (sessions.Sessions.create); nothing else is looked up on disk.
SESSION_ID = re.compile(r"^tbc-[0-9a-f]{12}$")
_ENTRY_ID = re.compile(r"^(tbc-[0-9a-f]{12}):(train|sample):[0-9]{1,18}$")
STALE_AFTER_S = 7 * 24 * 3600


def session_of(entry_id: str) -> str | None:
    """The session a model id (`<session>:train:<n>`) or sampler id (`:sample:`) belongs to,
    or None if the id is not one this engine makes."""
    m = _ENTRY_ID.match(entry_id or "")
    return m.group(1) if m else None


def _flatten(adapter: dict[str, torch.Tensor], optimizer: dict[str, Any] | None):
    """Adapter and AdamW state as one flat tensor dict (safetensors: no pickle; the tensors stay
    where they are, `state_slots.py` copies them to the host) plus JSON."""
    tensors = {f"adapter/{k}": v for k, v in adapter.items()}
    meta: dict[str, Any] = {"optimizer": None}
    if optimizer is not None:
        extra: dict[str, dict[str, Any]] = {}
        for idx, st in optimizer["state"].items():
            for k, v in st.items():
                if isinstance(v, torch.Tensor):
                    tensors[f"opt/{idx}/{k}"] = v
                else:
                    extra.setdefault(str(idx), {})[k] = v
        meta["optimizer"] = {"param_groups": optimizer["param_groups"], "extra": extra}
    return tensors, meta


def _unflatten(tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    adapter = {k.split("/", 1)[1]: v for k, v in tensors.items() if k.startswith("adapter/")}
    optimizer = None
    if meta.get("optimizer") is not None:
        state: dict[int, dict[str, Any]] = {}
        for k, v in tensors.items():
            if k.startswith("opt/"):
                _, idx, name = k.split("/", 2)
                state.setdefault(int(idx), {})[name] = v
        for idx, values in meta["optimizer"]["extra"].items():
            state.setdefault(int(idx), {}).update(values)
        optimizer = {"state": state, "param_groups": meta["optimizer"]["param_groups"]}
    return {"adapter": adapter, "optimizer": optimizer, "steps": meta["steps"], "gen": meta["gen"]}


@dataclass
class RunRecord:
    meta: dict[str, Any]
    # {"adapter", "optimizer" (state_dict or None), "steps", "gen"}; None: no optim_step or
    # load yet (the fresh adapter)
    state: dict[str, Any] | None
    lost_grads: bool  # forward_backward had accumulated gradients that no optim_step applied


class Journal:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.sessions_dir = self.root / "sessions"
        self.runs_dir = self.root / "runs"
        self.samplers_dir = self.root / "samplers"
        for d in (self.sessions_dir, self.runs_dir, self.samplers_dir):
            d.mkdir(parents=True, exist_ok=True)
        self._gen: dict[str, int] = {}  # model_id -> generation of its state file
        self._slots = SlotWriter()
        self._stats_lock = threading.Lock()
        self.stats = {"state_writes": 0, "state_bytes": 0, "state_ms": 0.0,
                      "snapshot_writes": 0, "snapshot_bytes": 0, "snapshot_ms": 0.0}  # fmt: skip

    # ------------------------------------------------------------------ files
    @staticmethod
    def _write(path: Path, data: bytes) -> int:
        atomic.write_bytes(path, data)
        return len(data)

    def _write_json(self, path: Path, data: dict[str, Any]) -> int:
        return self._write(path, json.dumps(data).encode())

    def _count(self, kind: str, size: int, t0: float) -> None:
        with self._stats_lock:
            self.stats[f"{kind}_writes"] += 1
            self.stats[f"{kind}_bytes"] += size
            self.stats[f"{kind}_ms"] += (time.perf_counter() - t0) * 1000

    def _run_dir(self, model_id: str) -> Path | None:
        return self.runs_dir / model_id if session_of(model_id) else None

    def _sampler_path(self, sid: str, suffix: str) -> Path | None:
        return self.samplers_dir / f"{sid}{suffix}" if session_of(sid) else None

    # ------------------------------------------------------------------ sessions
    def add_session(self, sid: str, user_metadata: dict[str, Any]) -> None:
        self._write_json(self.sessions_dir / f"{sid}.json",
                         {"session_id": sid, "created": time.time(), "user_metadata": user_metadata})  # fmt: skip

    def load_session(self, sid: str) -> dict[str, Any] | None:
        """A session this engine created on this data dir and nobody finished, else None."""
        if not SESSION_ID.match(sid or ""):
            return None
        try:
            return json.loads((self.sessions_dir / f"{sid}.json").read_text())
        except (OSError, ValueError):
            return None

    def touch_session(self, sid: str) -> None:
        try:
            os.utime(self.sessions_dir / f"{sid}.json")
        except OSError:
            pass

    def finish_session(self, sid: str) -> None:
        """Forget a session and all it made (its clients may not use it any more)."""
        if not SESSION_ID.match(sid or ""):
            return
        (self.sessions_dir / f"{sid}.json").unlink(missing_ok=True)
        self._drop_entries_of({sid})

    def _drop_entries_of(self, sessions: set[str], keep: set[str] | None = None) -> None:
        """Remove the runs and samplers of `sessions`, or (keep given) of every session not kept."""
        for d in list(self.runs_dir.iterdir()):
            s = session_of(d.name)
            if (s in sessions) if keep is None else (s not in keep):
                shutil.rmtree(d, ignore_errors=True)
        for f in list(self.samplers_dir.iterdir()):
            s = session_of(f.name.split(".", 1)[0])
            if (s in sessions) if keep is None else (s not in keep):
                f.unlink(missing_ok=True)

    # ------------------------------------------------------------------ training runs
    def run_count(self) -> int:
        return sum(1 for _ in self.runs_dir.iterdir())

    def has_run(self, model_id: str) -> bool:
        d = self._run_dir(model_id)
        return d is not None and (d / "meta.json").is_file()

    def create_run(self, model_id: str, meta: dict[str, Any]) -> None:
        d = self._run_dir(model_id)
        if d is None:
            return
        d.mkdir(parents=True, exist_ok=True)
        for stale in (*SLOTS, "state.safetensors", "grads"):  # state.safetensors: older versions
            (d / stale).unlink(missing_ok=True)
        self._gen[model_id] = 0
        self._write_json(d / "meta.json", meta)

    def save_state(
        self, model_id: str, adapter: dict[str, torch.Tensor], optimizer: dict[str, Any] | None, steps: int
    ) -> int:
        """Replace the run's state: adapter tensors (on any device), optimizer `state_dict()`
        (None before the first step), step count. Returns the bytes written."""
        d = self._run_dir(model_id)
        if d is None or not (d / "meta.json").is_file():
            return 0
        t0 = time.perf_counter()
        gen = self._gen.get(model_id, 0) + 1
        tensors, meta = _flatten(adapter, optimizer)
        meta.update(steps=steps, gen=gen)
        size = self._slots.write(slot_path(d, gen), tensors, {"journal": json.dumps(meta)})
        self._gen[model_id] = gen
        self._count("state", size, t0)
        return size

    def mark_grads(self, model_id: str) -> None:
        """Gradients are accumulating on top of the current state (cleared by the next state)."""
        d = self._run_dir(model_id)
        if d is not None and d.is_dir():
            self._write(d / "grads", str(self._gen.get(model_id, 0)).encode())

    def load_run(self, model_id: str) -> RunRecord | None:
        d = self._run_dir(model_id)
        if d is None:
            return None
        try:
            meta = json.loads((d / "meta.json").read_text())
        except (OSError, ValueError):
            return None
        state = None
        # The newer whole slot (a kill during a write tears only the slot being written).
        for slot in SLOTS:
            got = read_slot(d / slot)
            if got is not None:
                candidate = _unflatten(got[0], json.loads(got[1]["journal"]))
                if state is None or candidate["gen"] > state["gen"]:
                    state = candidate
        if state is None and any((d / slot).is_file() for slot in SLOTS):
            # Never a fresh adapter in place of a state that exists but cannot be read.
            raise ValueError(f"no whole state file in {d}")
        gen = int(state["gen"]) if state else 0
        self._gen[model_id] = gen
        try:
            lost = int((d / "grads").read_text()) == gen
        except (OSError, ValueError):
            lost = False
        return RunRecord(meta, state, lost)

    def drop_run(self, model_id: str) -> None:
        d = self._run_dir(model_id)
        if d is not None:
            shutil.rmtree(d, ignore_errors=True)
        self._gen.pop(model_id, None)

    # ------------------------------------------------------------------ sampler sessions
    def save_sampler(self, sid: str, info: dict[str, Any], adapter: dict[str, torch.Tensor] | None) -> int:
        """Record a sampler session (and its snapshot's adapter). Returns the bytes written."""
        path = self._sampler_path(sid, ".json")
        if path is None:
            return 0
        t0 = time.perf_counter()
        size = 0
        if adapter is not None:
            tensors = {k: v.contiguous() for k, v in adapter.items()}
            size = self._write(path.with_suffix(".safetensors"), save_safetensors(tensors))
        size += self._write_json(path, {**info, "id": sid, "created": time.time()})
        if adapter is not None:
            self._count("snapshot", size, t0)
        return size

    def samplers(self) -> list[dict[str, Any]]:
        """Every recorded sampler session, oldest first."""
        out = []
        for p in self.samplers_dir.glob("*.json"):
            try:
                info = json.loads(p.read_text())
            except (OSError, ValueError):
                continue
            if isinstance(info, dict) and session_of(str(info.get("id"))) and p.stem == info["id"]:
                out.append(info)
        return sorted(out, key=lambda i: i.get("created", 0))

    def load_sampler_adapter(self, sid: str) -> dict[str, torch.Tensor] | None:
        path = self._sampler_path(sid, ".safetensors")
        if path is None or not path.is_file():
            return None
        return load_file(path)

    def drop_sampler(self, sid: str) -> None:
        for suffix in (".json", ".safetensors"):
            path = self._sampler_path(sid, suffix)
            if path is not None:
                path.unlink(missing_ok=True)

    # ------------------------------------------------------------------ startup
    def prune(self, stale_after_s: float = STALE_AFTER_S) -> None:
        """Drop half-written files, sessions without a heartbeat for `stale_after_s`, and the
        runs and samplers of sessions that are gone."""
        # `.<name>.tmp-<pid>` (atomic.temp_name) or, from older versions, `.<name>.tmp`
        for tmp in [*self.sessions_dir.glob(".*.tmp*"), *self.samplers_dir.glob(".*.tmp*"),
                    *self.runs_dir.glob("*/.*.tmp*")]:  # fmt: skip
            tmp.unlink(missing_ok=True)
        cutoff = time.time() - stale_after_s
        live: set[str] = set()
        for p in self.sessions_dir.glob("*.json"):
            if SESSION_ID.match(p.stem) and p.stat().st_mtime >= cutoff:
                live.add(p.stem)
            else:
                p.unlink(missing_ok=True)
        self._drop_entries_of(set(), keep=live)
        # A snapshot's tensors without its .json: written just before a kill.
        for f in self.samplers_dir.glob("*.safetensors"):
            if not f.with_suffix(".json").is_file():
                f.unlink(missing_ok=True)

    def usage_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())
