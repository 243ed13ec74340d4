"""One trial cancelled by the user (``cancel_trial``, the console's ``x``): whatever the trial
awaits at that moment (a free slot of its group, its Harbor trial) is cancelled, and the trial
ends as ``CancelledByUser`` instead. Harbor's own cancel path stops the sandbox, so nothing is
left behind. A cancel of the whole group (a sibling failed, the run aborts) is not the user's:
it passes through unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class CancelledByUser(Exception):
    """The user cancelled this trial."""


class TrialCancel:
    """The handle ``RunControl.trial_running`` calls; ``run`` awaits one stage of the trial."""

    def __init__(self) -> None:
        self.requested = False
        self._stage: asyncio.Future | None = None

    def request(self) -> None:
        """Called on the runner's loop by ``RunControl.cancel_trial``."""
        self.requested = True
        if self._stage is not None:
            self._stage.cancel()

    async def run(self, work: Awaitable[T]) -> T:
        """Await ``work``; the user's cancel (before or during) raises CancelledByUser, once
        ``work`` has finished cancelling (a Harbor trial: its sandbox is gone)."""
        stage = asyncio.ensure_future(work)
        if self.requested:
            stage.cancel()
        self._stage = stage
        try:
            return await stage
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self.requested and (current is None or not current.cancelling()):
                raise CancelledByUser() from None
            raise
        finally:
            self._stage = None
