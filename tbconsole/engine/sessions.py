"""Client sessions and training runs (one per training client), by id.

Both are journaled (`journal.py`): one an earlier engine process on the same data dir made comes
back on the first request that names it, a training run as of its last journaled state (after
its last optim_step or load).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
import time
from typing import Any

import torch

from tbconsole.engine.errors import NotFound
from tbconsole.engine.journal import Journal
from tbconsole.engine.lora import LoraAdapter
from tbconsole.engine.registry import check_base_model
from tbconsole.engine.trainer import LoraSettings, Trainer, TrainingRun

log = logging.getLogger(__name__)


class Sessions:
    """Ids of the live client sessions (their metadata lives in the journal only)."""

    def __init__(self, journal: Journal):
        self.journal = journal
        self._live: set[str] = set()

    def __len__(self) -> int:
        return len(self._live)

    def create(self, user_metadata: dict[str, Any]) -> str:
        sid = f"tbc-{secrets.token_hex(6)}"  # journal.SESSION_ID
        self.journal.add_session(sid, user_metadata)
        self._live.add(sid)
        return sid

    def is_live(self, session_id: Any) -> bool:
        """True for a live session; one of an earlier engine process on this data dir comes back."""
        if not isinstance(session_id, str):
            return False
        if session_id in self._live:
            return True
        if self.journal.load_session(session_id) is None:
            return False
        self._live.add(session_id)
        log.info("restored session %s from the journal", session_id)
        return True

    def check(self, session_id: str) -> None:
        if not self.is_live(session_id):
            raise NotFound(f"unknown session {session_id!r}")

    def heartbeat(self, session_id: Any) -> None:
        if not self.is_live(session_id):
            raise NotFound("unknown session")
        self.journal.touch_session(session_id)

    def finish(self, session_id: str) -> None:
        self._live.discard(session_id)
        self.journal.finish_session(session_id)


class TrainingRuns:
    """The training runs by model id (`<session>:train:<n>`). The dict is written from the loop
    (create_model) and from the training thread (create-via-load, restore, unload)."""

    def __init__(self, journal: Journal, trainer: Trainer, model_name: str, device: torch.device):
        self.journal = journal
        self.trainer = trainer
        self.model_name = model_name
        self.device = device
        self._runs: dict[str, TrainingRun] = {}
        self._restore_lock = threading.Lock()  # one restore from the journal at a time

    def __len__(self) -> int:
        return len(self._runs)

    def loaded(self, model_id: str) -> TrainingRun | None:
        """The run if this process has it in memory (no restore from the journal)."""
        return self._runs.get(model_id)

    def exists(self, model_id: str) -> bool:
        return model_id in self._runs or self.journal.has_run(model_id)

    def add(self, run: TrainingRun) -> None:
        self._runs[run.model_id] = run

    async def get(self, model_id: str) -> TrainingRun:
        """The run a request names, restored from the journal if need be; 404 if unknown."""
        run = self._runs.get(model_id)
        if run is None and self.journal.has_run(model_id):
            run = await asyncio.to_thread(self._restore, model_id)
        if run is None:
            raise NotFound(f"unknown model_id {model_id!r} (create it with create_model)")
        run.touch()
        return run

    def drop(self, model_id: str) -> None:
        """Forget a run, in memory and in the journal (training thread)."""
        with self._restore_lock:
            self.journal.drop_run(model_id)
            self._runs.pop(model_id, None)

    def journal_state(self, run: TrainingRun) -> None:
        """Record the run's state (training thread) before the request that changed it resolves:
        a client that saw the result finds it after a restart. If that fails, the journal's
        older state must not come back silently, so the run is dropped from it."""
        try:
            optimizer = run.optimizer.state_dict() if run.optimizer is not None else None
            self.journal.save_state(run.model_id, run.adapter.tensors(), optimizer, run.steps)
        except Exception:
            log.exception("could not journal %s; it will not survive an engine restart", run.model_id)
            self.journal.drop_run(run.model_id)

    def _restore(self, model_id: str) -> TrainingRun | None:
        """The training run as of its last journaled state (worker thread), or None."""
        with self._restore_lock:
            run = self._runs.get(model_id)
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
            check_base_model(meta.get("base_model"), self.model_name)
            lora = LoraSettings.from_dict(meta["lora"])
            run = TrainingRun(model_id, self.model_name, lora, self.trainer.new_adapter(lora),
                              dict(meta.get("user_metadata") or {}),
                              created=float(meta.get("created", time.time())))  # fmt: skip
            if rec.state is not None:
                run.adapter.copy_(LoraAdapter.from_state_dict(rec.state["adapter"], rank=lora.rank,
                                                              alpha=lora.alpha, device=self.device))  # fmt: skip
                self.trainer.load_optimizer_state(run, rec.state)
            run.lost_grads = rec.lost_grads
            self._runs[model_id] = run
            log.info(
                "restored training run %s at step %d from the journal%s",
                model_id,
                run.steps,
                " (gradients accumulated before the restart were lost)" if run.lost_grads else "",
            )
            return run
