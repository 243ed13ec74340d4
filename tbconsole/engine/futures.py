"""Futures behind the SDK's `{request_id}` promises, long-polled by `retrieve_future`.

Lives on the server's event loop; work finishing on other threads reports back with
`loop.call_soon_threadsafe`. A finished result is kept for a while after it was first read,
since a client may re-poll after a dropped connection.

Futures live in memory only. A request id is `<process prefix>-<kind>-<n>`, so after a restart
`lost_kind` can tell a promise of an earlier engine process (and what it was for) from a bogus id.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

_RID = re.compile(r"^([0-9a-f]{8})-([a-z_]+)-[0-9]+$")


@dataclass
class Outcome:
    payload: bytes | dict[str, Any] | None = None  # bytes = protobuf
    error: str | None = None
    category: str = "server"  # RequestErrorCategory: "user" | "server" | "unknown"


@dataclass
class Entry:
    kind: str
    model_id: str | None
    created: float = field(default_factory=time.monotonic)
    event: asyncio.Event = field(default_factory=asyncio.Event)
    outcome: Outcome | None = None
    first_read: float | None = None


class FutureStore:
    def __init__(self, keep_after_read_s: float = 300.0, max_entries: int = 100_000):
        self._entries: dict[str, Entry] = {}
        self._counter = itertools.count(1)
        self._prefix = secrets.token_hex(4)
        self.keep_after_read_s = keep_after_read_s
        self.max_entries = max_entries

    def create(self, kind: str, model_id: str | None = None) -> str:
        n = next(self._counter)
        if n % 256 == 0:
            self._gc()
        rid = f"{self._prefix}-{kind}-{n}"
        self._entries[rid] = Entry(kind, model_id)
        return rid

    def lost_kind(self, rid: str) -> str | None:
        """The kind of request `rid` was, if an earlier engine process made it (so it was lost
        when that process ended); None for ids of this process or not of this engine's form."""
        m = _RID.match(rid or "")
        if m is None or m.group(1) == self._prefix:
            return None
        return m.group(2)

    def resolve(self, rid: str, outcome: Outcome) -> None:
        entry = self._entries.get(rid)
        if entry is None or entry.outcome is not None:
            return
        entry.outcome = outcome
        entry.event.set()

    def pending(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self._entries.values():
            if e.outcome is None:
                out[e.kind] = out.get(e.kind, 0) + 1
        return out

    async def wait(self, rid: str, timeout: float) -> Outcome | None:
        """The outcome, or None if still running after `timeout`. KeyError if unknown."""
        entry = self._entries[rid]
        if entry.outcome is None:
            try:
                await asyncio.wait_for(entry.event.wait(), timeout)
            except TimeoutError:
                return None
        if entry.first_read is None:
            entry.first_read = time.monotonic()
        return entry.outcome

    def _gc(self) -> None:
        now = time.monotonic()
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
            del self._entries[oldest]
