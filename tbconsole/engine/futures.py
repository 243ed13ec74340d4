"""Futures behind the SDK's `{request_id}` promises, long-polled by `retrieve_future`.

Lives on the server's event loop; work finishing on other threads reports back with
`loop.call_soon_threadsafe`. A finished result is kept for a while after it was first read
(`keep_after_read_s`, the replay window), since a client may re-poll after a dropped connection.

Futures live in memory only. A request id is `<process prefix>-<kind>-<n>`, so after a restart
`lost_kind` can tell a promise of an earlier engine process (and what it was for) from a bogus id.

With `tombstones` (the Miles contracts, `contract.py`) a future the store lets go leaves a
tombstone saying why, which `retrieve_future` answers as 410: delivered and past its replay
window, or completed and not polled within `retention_s`, or expired by a fault (`expire`). The
window and the retention are checked whenever the future is asked for, so they hold to the
second.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_RID = re.compile(r"^([0-9a-f]{8})-([a-z_]+)-[0-9]+$")
MAX_TOMBSTONES = 65_536


@dataclass
class Outcome:
    payload: bytes | dict[str, Any] | None = None  # bytes = protobuf
    error: str | None = None
    category: str = "server"  # RequestErrorCategory: "user" | "server" | "unknown"


@dataclass
class Entry:
    kind: str
    model_id: str | None
    created: float
    event: asyncio.Event = field(default_factory=asyncio.Event)
    outcome: Outcome | None = None
    first_read: float | None = None
    last_poll: float | None = None


class FutureStore:
    def __init__(
        self,
        keep_after_read_s: float = 300.0,
        max_entries: int = 100_000,
        *,
        retention_s: float | None = None,
        tombstones: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._entries: dict[str, Entry] = {}
        self._gone: OrderedDict[str, str] = OrderedDict()  # request id -> why it is gone
        self._counter = itertools.count(1)
        self._prefix = secrets.token_hex(4)
        self.keep_after_read_s = keep_after_read_s
        self.max_entries = max_entries
        self.retention_s = retention_s
        self.tombstones = tombstones
        self._clock = clock

    def create(self, kind: str, model_id: str | None = None) -> str:
        n = next(self._counter)
        if n % 256 == 0:
            self._gc()
        rid = f"{self._prefix}-{kind}-{n}"
        self._entries[rid] = Entry(kind, model_id, created=self._clock())
        return rid

    def lost_kind(self, rid: str) -> str | None:
        """The kind of request `rid` was, if an earlier engine process made it (so it was lost
        when that process ended); None for ids of this process or not of this engine's form."""
        m = _RID.match(rid or "")
        if m is None or m.group(1) == self._prefix:
            return None
        return m.group(2)

    def kind(self, rid: str) -> str | None:
        entry = self._entries.get(rid)
        return entry.kind if entry is not None else None

    def gone_reason(self, rid: str) -> str | None:
        """Why future `rid` is gone, if the store let it go with a tombstone."""
        self._live(rid)
        return self._gone.get(rid)

    def known(self, rid: str) -> bool:
        return self._live(rid) is not None

    def resolve(self, rid: str, outcome: Outcome) -> None:
        entry = self._entries.get(rid)
        if entry is None or entry.outcome is not None:
            return
        entry.outcome = outcome
        entry.event.set()

    def expire(self, rid: str, why: str) -> None:
        """Let future `rid` go, leaving a tombstone that says `why`."""
        self._entries.pop(rid, None)
        self._gone[rid] = why
        self._gone.move_to_end(rid)
        while len(self._gone) > MAX_TOMBSTONES:
            self._gone.popitem(last=False)

    def pending(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self._entries.values():
            if e.outcome is None:
                out[e.kind] = out.get(e.kind, 0) + 1
        return out

    async def wait(self, rid: str, timeout: float) -> Outcome | None:
        """The outcome, or None if still running after `timeout`. KeyError if unknown or gone."""
        entry = self._live(rid)
        if entry is None:
            raise KeyError(rid)
        entry.last_poll = self._clock()
        if entry.outcome is None:
            try:
                await asyncio.wait_for(entry.event.wait(), timeout)
            except TimeoutError:
                return None
        if entry.first_read is None:
            entry.first_read = self._clock()
        return entry.outcome

    def _live(self, rid: str) -> Entry | None:
        """The entry, after letting it go if its replay window or retention has passed."""
        entry = self._entries.get(rid)
        if entry is None or not self.tombstones:
            return entry
        why = self._expiry(rid, entry, self._clock())
        if why is None:
            return entry
        self.expire(rid, why)
        return None

    def _expiry(self, rid: str, entry: Entry, now: float) -> str | None:
        if entry.first_read is not None and now - entry.first_read > self.keep_after_read_s:
            return (
                f"request {rid!r} was already delivered and its replay window "
                f"({self.keep_after_read_s:g} s) expired; its result cannot be reproduced"
            )
        if entry.outcome is not None and entry.first_read is None and self.retention_s is not None:
            idle = now - max(entry.created, entry.last_poll or entry.created)
            if idle > self.retention_s:
                return (
                    f"request {rid!r} completed but was never retrieved within its retention "
                    f"({self.retention_s:g} s) and was reaped; its result cannot be reproduced"
                )
        return None

    def _gc(self) -> None:
        now = self._clock()
        if self.tombstones:
            for rid, entry in list(self._entries.items()):
                why = self._expiry(rid, entry, now)
                if why is not None:
                    self.expire(rid, why)
        else:
            stale = [
                rid
                for rid, e in self._entries.items()
                if e.first_read is not None and now - e.first_read > self.keep_after_read_s
            ]
            for rid in stale:
                del self._entries[rid]
        # Unread results are kept unless the store is huge (clients that never poll).
        while len(self._entries) > self.max_entries:
            oldest = next(iter(self._entries))
            if self.tombstones:
                self.expire(oldest, f"request {oldest!r} was dropped unread: too many results were waiting")
            else:
                del self._entries[oldest]
