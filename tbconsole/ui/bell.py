"""The terminal bell for what needs someone now: a decision to make, a run that ended failed, an
advisory of severity error (the events ``tbconsole.record.notify`` tells a command about). Live events
only: an event older than the console (a resumed run's earlier events, an attached run's file
read from its start, a replay) never rings."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

from tbconsole.record.enums import RunStatus
from tbconsole.record.events import AdvisoryCleared, AdvisoryRaised, Event, RunEnded
from tbconsole.record.notify import ADVISORY, RUN_ENDED, attention
from tbconsole.ui.data.source import Inbox


def rings(event: Event) -> bool:
    """Whether ``event`` calls for the bell (a run that ended well does not)."""
    kind = attention(event)
    if kind == RUN_ENDED:
        return isinstance(event, RunEnded) and event.status == RunStatus.FAILED
    return kind is not None


class BellInbox(Inbox):
    """The console's inbox, noting the events that ring (from any thread). An advisory rings
    once until it clears, however often it is raised again."""

    def __init__(self, since: float | None = None) -> None:
        super().__init__()
        self.since = time.time() if since is None else since
        self._lock = threading.Lock()
        self._pending = False
        self._rung_advisories: set[str] = set()

    def put(self, event: Event) -> None:
        super().put(event)
        self._note(event)

    def put_many(self, events: Iterable[Event]) -> None:
        for event in events:
            self.put(event)

    def _note(self, event: Event) -> None:
        if isinstance(event, AdvisoryCleared):
            with self._lock:
                self._rung_advisories.discard(event.key)
            return
        if event.ts < self.since or not rings(event):
            return
        with self._lock:
            if attention(event) == ADVISORY and isinstance(event, AdvisoryRaised):
                if event.key in self._rung_advisories:
                    return
                self._rung_advisories.add(event.key)
            self._pending = True

    def take_ring(self) -> bool:
        """Whether something rang since the last call (the app rings once per tick at most)."""
        with self._lock:
            pending, self._pending = self._pending, False
        return pending
