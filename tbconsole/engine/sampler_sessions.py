"""Sampler sessions (one per sampling client) by id: what each samples from (the base model, a
saved checkpoint, or an in-memory snapshot of a training run) and the adapter weights for it.

They hold adapter weights in memory and an RL loop makes one per step, so old ones are dropped
(a later sample on one gets a 404 saying so). Each is journaled (`journal.py`); those of an
earlier engine process on the same data dir are known from startup and load their weights on
first use.

Each snapshot of a training run is a numbered publication of its sampler weights (`publish`).
A gateway that serves only the latest weights (the Miles contracts, `contract.py`) refuses
samples on an earlier one (`stale_reason`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import torch

from tbconsole.engine.checkpoints import CheckpointRef, CheckpointStore
from tbconsole.engine.errors import BadRequest, NotFound
from tbconsole.engine.journal import Journal
from tbconsole.engine.lora import LoraAdapter
from tbconsole.engine.registry import check_base_model
from tbconsole.engine.sampler import Sampler

log = logging.getLogger(__name__)

MAX_SNAPSHOTS_PER_RUN = 8
MAX_SAMPLER_SESSIONS = 256
MAX_CHECKPOINT_ADAPTERS = 16  # adapters of saved checkpoints kept loaded, shared by their sessions


@dataclass
class SamplerSession:
    id: str
    base_model: str
    model_path: str | None
    adapter: LoraAdapter | None
    key: Any  # the sampler's weights key: sessions with equal keys share merged weights
    snapshot_of: str | None = None  # training run, for in-memory snapshots
    # False: known from the journal of an earlier engine process (`restore` is its record there),
    # weights not loaded yet.
    loaded: bool = True
    restore: dict[str, Any] | None = None
    version: int | None = None  # publication number of a snapshot (`SamplerSessions.publish`)


class SamplerSessions:
    def __init__(self, journal: Journal, store: CheckpointStore, sampler: Sampler, model_name: str,
                 device: torch.device):  # fmt: skip
        self.journal = journal
        self.store = store
        self.sampler = sampler
        self.model_name = model_name
        self.device = device
        self._sessions: OrderedDict[str, SamplerSession] = OrderedDict()  # LRU order
        # Dropped sessions: what they were a snapshot of, and of which publication.
        self._evicted: dict[str, tuple[str | None, int | None]] = {}
        self._published: dict[str, int] = {}  # training run -> its latest publication
        self._checkpoint_adapters: OrderedDict[str, LoraAdapter] = OrderedDict()  # by tinker path
        self._lock = threading.Lock()  # the training thread adds snapshots
        self._wake_lock: asyncio.Lock | None = None  # restores run on the server's loop
        for info in journal.samplers():  # oldest first, so eviction order carries over
            self.add(self._dormant(info))

    def __len__(self) -> int:
        return len(self._sessions)

    def add(self, sess: SamplerSession) -> None:
        """Register a sampler session, evicting the oldest ones beyond the caps."""
        with self._lock:
            self._sessions.pop(sess.id, None)
            self._sessions[sess.id] = sess
            if sess.snapshot_of is not None and sess.version is not None:
                latest = self._published.get(sess.snapshot_of, 0)
                self._published[sess.snapshot_of] = max(latest, sess.version)
            evict: list[SamplerSession] = []
            if sess.snapshot_of is not None:
                mine = [s for s in self._sessions.values() if s.snapshot_of == sess.snapshot_of]
                evict += mine[: max(0, len(mine) - MAX_SNAPSHOTS_PER_RUN)]
            evicted = {s.id for s in evict}
            others = [s for s in self._sessions.values() if s.id not in evicted]
            evict += others[: max(0, len(others) - MAX_SAMPLER_SESSIONS)]
            for old in evict:
                del self._sessions[old.id]
                self._evicted[old.id] = (old.snapshot_of, old.version)
        for old in evict:
            self.journal.drop_sampler(old.id)
            if not any(s.key == old.key for s in self._sessions.values()):
                self.sampler.forget_weights(old.key)

    def publish(self, model_id: str) -> int:
        """Number a new publication of training run `model_id`'s sampler weights (1, 2, ...)."""
        with self._lock:
            version = self._published.get(model_id, 0) + 1
            self._published[model_id] = version
            return version

    def stale_reason(self, sid: str) -> str | None:
        """Why a gateway serving only the latest weights refuses to sample on session `sid`: it
        is a snapshot of a training run published again since. None otherwise (base-model and
        checkpoint sessions, the latest snapshot, unknown ids)."""
        with self._lock:
            sess = self._sessions.get(sid)
            model_id, version = (
                (sess.snapshot_of, sess.version) if sess is not None else self._evicted.get(sid, (None, None))
            )
            if model_id is None or version is None:
                return None
            latest = self._published.get(model_id, version)
        if latest == version:
            return None
        return (
            f"stale sampler: sampling session {sid!r} has version {version} of {model_id}'s weights, "
            f"and the model was published again as version {latest}; this gateway serves the latest "
            f"weights only, so create a new sampling client after each save_weights_for_sampler"
        )

    async def get(self, sid: str) -> SamplerSession:
        """The session a request names, its weights loaded; 404 if unknown or dropped."""
        with self._lock:
            sess = self._sessions.get(sid)
            if sess is not None:
                self._sessions.move_to_end(sid)
        if sess is not None:
            return sess if sess.loaded else await self._wake(sid)
        if sid in self._evicted:
            raise NotFound(
                f"sampling session {sid!r} was dropped to free memory (only the newest "
                f"{MAX_SNAPSHOTS_PER_RUN} snapshots per training run are kept); create a new one"
            )
        raise NotFound(f"unknown sampling session {sid!r}")

    async def for_source(self, sid: str, model_path: str | None, base_model: str | None) -> SamplerSession:
        """A session `sid` (not registered) sampling from checkpoint `model_path`, else the base."""
        if model_path:
            ref = CheckpointRef.parse(model_path)
            adapter = self._checkpoint_adapters.get(model_path)
            if adapter is None:
                sd, meta, _ = await asyncio.to_thread(self.store.load, ref, optimizer=False)
                check_base_model(meta.get("base_model"), self.model_name)
                lora = meta["lora"]
                adapter = LoraAdapter.from_state_dict(sd, rank=lora["rank"], alpha=lora["alpha"], device=self.device)
                self._checkpoint_adapters[model_path] = adapter
                while len(self._checkpoint_adapters) > MAX_CHECKPOINT_ADAPTERS:
                    self._checkpoint_adapters.popitem(last=False)
            return SamplerSession(sid, self.model_name, model_path, adapter, ("path", model_path))
        if base_model is None:
            raise BadRequest("pass model_path or base_model")
        check_base_model(base_model, self.model_name)
        return SamplerSession(sid, self.model_name, None, None, ("base",))

    def forget_checkpoint(self, tinker_path: str) -> None:
        """A checkpoint was deleted or overwritten: new sessions must not get its old weights."""
        self._checkpoint_adapters.pop(tinker_path, None)

    # ------------------------------------------------------------------ restore after a restart
    @staticmethod
    def _dormant(info: dict[str, Any]) -> SamplerSession:
        key: Any = {"snapshot": ("snapshot", info["id"]), "path": ("path", info.get("model_path")),
                    "base": ("base",)}.get(info.get("kind", "base"), ("base",))  # fmt: skip
        version = info.get("version")
        return SamplerSession(info["id"], info.get("base_model", ""), info.get("model_path"), None,
                              key, info.get("snapshot_of"), loaded=False, restore=info,
                              version=version if isinstance(version, int) else None)  # fmt: skip

    async def _wake(self, sid: str) -> SamplerSession:
        """Load the weights of a sampler session recorded by an earlier engine process."""
        if self._wake_lock is None:
            self._wake_lock = asyncio.Lock()
        async with self._wake_lock:
            with self._lock:
                dormant = self._sessions.get(sid)
            if dormant is None:
                raise NotFound(f"unknown sampling session {sid!r}")
            if dormant.loaded:
                return dormant
            check_base_model(dormant.base_model, self.model_name)
            kind = dormant.key[0]
            if kind == "path":
                sess = await self.for_source(sid, dormant.model_path, None)
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
                sess = SamplerSession(sid, self.model_name, None, adapter, dormant.key, dormant.snapshot_of,
                                      version=dormant.version)  # fmt: skip
            else:
                sess = SamplerSession(sid, self.model_name, None, None, ("base",))
            with self._lock:
                if sid in self._sessions:  # keeps its place in the LRU order
                    self._sessions[sid] = sess
            log.info("restored sampling session %s from the journal", sid)
            return sess
