"""The error advisories worth a notification as the run's state moves on (``v`` lists them all)."""

from __future__ import annotations

from tbconsole.record.enums import LogLevel
from tbconsole.state import RunState
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.wording import ADVISORY_FRESH_S


class AdvisoryNotices:
    """One notification for each new error advisory: raised, or a warning raised again as an
    error (a replacement that stays an error is not news). None for catch-up: a replay, or a
    raise already old when it arrives (attaching reads the run's file from its start)."""

    def __init__(self) -> None:
        self.seen = 0  # the state's advisory_seq last looked at
        self._notified: set[str] = set()  # active error advisories already notified

    def behind(self, state: RunState) -> bool:
        """Advisories changed since the last look."""
        return state.advisory_seq != self.seen

    def news(self, state: RunState, now: float, *, catch_up: bool) -> list[str]:
        """The messages to notify for what changed since the last look (each on one line)."""
        if state.advisory_seq < self.seen:  # another state (a replay moved back)
            self.seen = 0
            self._notified.clear()
        changes = state.advisory_changes_since(self.seen)
        self.seen = state.advisory_seq
        out: list[str] = []
        for a in changes:
            if a.cleared is not None or a.severity != LogLevel.ERROR:
                self._notified.discard(a.key)
                continue
            if a.key in self._notified:
                continue
            self._notified.add(a.key)
            if not catch_up and now - a.updated <= ADVISORY_FRESH_S:
                out.append(one_line(a.message, 300))
        return out
