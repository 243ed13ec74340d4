"""Queued work behind the SDK's `{request_id}` promises, and their retrieval.

Training work (create/forward/forward_backward/optim/save/load/unload) runs in arrival order on
one worker thread, so gradients accumulate exactly as the SDK expects; sampling finishes on the
sampler's decode thread (`sampler.py`). Either way the outcome resolves a future (`futures.py`)
on the server's event loop, where `retrieve_future` long-polls it. A failing job fails only its
own future.

Under the Miles contracts (`contract.py`) a future that is unknown or gone answers 410, and a
refusal on a request that spent a seq_id is a future that failed at once (`failed`).
`--expire-futures` (`contract.ExpiryFault`) drops a share of completed training results at
retrieval, in any contract.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from typing import Any

import torch

from tbconsole.engine.contract import ExpiryFault
from tbconsole.engine.errors import EngineError, Gone, NotFound
from tbconsole.engine.futures import FutureStore, Outcome

log = logging.getLogger(__name__)


class Jobs:
    def __init__(self, threads: int, long_poll_s: float, *, futures: FutureStore | None = None,
                 fault: ExpiryFault | None = None, unknown_is_gone: bool = False):  # fmt: skip
        # torch's thread count is not reliably per-thread and the sampler lowers it for decode
        # steps, so each training job sets it again.
        self.threads = threads
        self.long_poll_s = long_poll_s
        self.futures = futures if futures is not None else FutureStore()
        self.fault = fault
        self.unknown_is_gone = unknown_is_gone  # 410 rather than 404 for an unknown future
        self._train_pool = concurrent.futures.ThreadPoolExecutor(1, "tbconsole-train")

    def submit_training(self, kind: str, model_id: str | None, fn: Callable[[], Any]) -> dict[str, Any]:
        """Queue `fn` on the training thread (call this on the server's loop). Its return value
        is the future's payload (bytes: protobuf); an error fails the future. Returns the promise
        the SDK polls."""
        rid = self.futures.create(kind, model_id)
        loop = asyncio.get_running_loop()

        def run() -> None:
            try:
                torch.set_num_threads(self.threads)
                outcome = Outcome(payload=fn())
            except EngineError as e:
                outcome = Outcome(error=e.message, category="user")
            except Exception as e:
                log.exception("job %s failed", rid)
                outcome = Outcome(error=f"{type(e).__name__}: {e}", category="server")
            loop.call_soon_threadsafe(self.futures.resolve, rid, outcome)

        self._train_pool.submit(run)
        return {"request_id": rid, "model_id": model_id}

    def failed(self, kind: str, model_id: str | None, message: str) -> dict[str, Any]:
        """A promise whose future has already failed with `message` (a user error)."""
        rid = self.futures.create(kind, model_id)
        self.futures.resolve(rid, Outcome(error=message, category="user"))
        return {"request_id": rid, "model_id": model_id}

    def check_live(self, rid: str) -> None:
        """410 if future `rid` is gone or unknown (a promise handed back to an identical retry)."""
        if not self.futures.known(rid):
            why = self.futures.gone_reason(rid) or f"request {rid!r} is no longer held"
            raise Gone(why)

    def new_sample(self) -> tuple[str, Callable[[Outcome], None]]:
        """A future for a sample request (call this on the server's loop), and the function that
        resolves it from any thread."""
        rid = self.futures.create("sample")
        loop = asyncio.get_running_loop()

        def resolve(outcome: Outcome) -> None:
            loop.call_soon_threadsafe(self.futures.resolve, rid, outcome)

        return rid, resolve

    async def retrieve(self, rid: str) -> Outcome | None:
        """The future's outcome, or None while it is still running after the long-poll time."""
        kind = self.futures.kind(rid)
        try:
            outcome = await self.futures.wait(rid, self.long_poll_s)
        except KeyError:
            why = self.futures.gone_reason(rid)
            if why is not None:
                raise Gone(why) from None
            lost = self.futures.lost_kind(rid)
            if self.unknown_is_gone:
                where = "an earlier engine process" if lost is not None else "this engine"
                raise Gone(f"unknown request {rid!r} (expired, or from {where})") from None
            if lost == "sample":  # safe to run again: the SDK re-sends it on a 410
                raise Gone(f"request {rid!r} was lost when the engine restarted") from None
            if lost is not None:
                raise NotFound(
                    f"{lost} request {rid!r} was lost: the engine restarted before it "
                    f"finished or before its result was read. Training runs are as after their last "
                    f"completed optim_step; send the request again (for a training step, its "
                    f"forward_backward calls and then optim_step)"
                ) from None
            raise NotFound(f"unknown request_id {rid!r}") from None
        if kind is not None and self.fault is not None and self.fault.hits(kind, outcome):
            why = f"request {rid!r} ({kind}) completed but its result expired before it was retrieved"
            self.futures.expire(rid, why)
            raise Gone(why)
        return outcome

    def pending(self) -> dict[str, int]:
        return self.futures.pending()

    def close(self) -> None:
        self._train_pool.shutdown(wait=True, cancel_futures=True)
