"""One trial stopped before its end: by the user (``cancel_trial``, the console's ``x``), or by
the runner because it can no longer be trained on (its capture was lost: running it on would
only spend sandbox time on a trial that cannot be scored). Whatever the trial awaits at that
moment (a free slot of its group, its Harbor trial) is cancelled, and the trial ends with the
stop's outcome instead. Harbor's own cancel path stops the sandbox, so nothing is left behind.
A cancel of the whole group (a sibling failed, the run aborts) is neither: it passes through
unchanged."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from tbconsole.runner.outcomes import Outcome, cancelled_by_user

T = TypeVar("T")


class TrialStopped(Exception):
    """This trial was stopped; ``outcome`` says why (never a scored one)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


class TrialCancel:
    """The handle that stops one trial; ``run`` awaits one stage of the trial."""

    def __init__(self) -> None:
        self.outcome: Outcome | None = None  # set by the first request
        self._stage: asyncio.Future | None = None

    @property
    def requested(self) -> bool:
        return self.outcome is not None

    def request(self, outcome: Outcome | None = None) -> None:
        """Stop the trial with ``outcome`` (default: cancelled by the user); the first request's
        reason stands. Called on the runner's loop (``RunControl.cancel_trial``, the proxy's
        lost-capture hook)."""
        if self.outcome is None:
            self.outcome = outcome if outcome is not None else cancelled_by_user()
        if self._stage is not None:
            self._stage.cancel()

    async def run(self, work: Awaitable[T]) -> T:
        """Await ``work``; a stop (before or during) raises TrialStopped, once ``work`` has
        finished cancelling (a Harbor trial: its sandbox is gone)."""
        stage = asyncio.ensure_future(work)
        if self.requested:
            stage.cancel()
        self._stage = stage
        try:
            return await stage
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self.outcome is not None and (current is None or not current.cancelling()):
                raise TrialStopped(self.outcome) from None
            raise
        finally:
            self._stage = None
