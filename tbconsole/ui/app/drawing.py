"""Which screens a tick draws: those on view at once, covered ones when they are uncovered."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from textual.screen import Screen

from tbconsole.state import RunState


class DrawingHost(Protocol):
    """What drawing the screens asks of the app."""

    state: RunState

    @property
    def screen_stack(self) -> list[Screen[Any]]: ...

    def now(self) -> float: ...

    def batch_update(self) -> AbstractContextManager[None]: ...


def screens_on_view(stack: list[Screen[Any]]) -> list[Screen[Any]]:
    """The top screen and those the modals above them let show through."""
    on_view: list[Screen[Any]] = []
    for screen in reversed(stack):
        on_view.append(screen)
        if not screen.is_modal:
            break
    return on_view


class ScreenDrawing:
    """Draws what changed on each screen that has a ``show``: the screens on view at once; a screen
    that a full screen covers is not drawn, but notes what it missed, and catches up on it in the
    frame that uncovers it (``catch_up``)."""

    def __init__(self, host: DrawingHost) -> None:
        self._host = host
        self._missed: dict[Screen[Any], tuple[set[str], bool]] = {}  # covered screens: (panels, everything)

    def draw(self, state: RunState, now: float, changed: set[str], everything: bool) -> None:
        host = self._host
        on_view = screens_on_view(host.screen_stack)
        with host.batch_update():
            for screen in host.screen_stack:
                show = getattr(screen, "show", None)
                if show is None or not screen.is_mounted:
                    continue
                if screen in on_view:
                    show(state, now, changed, everything)
                else:
                    missed, missed_all = self._missed.get(screen, (set(), False))
                    self._missed[screen] = (missed | changed, missed_all or everything)

    def catch_up(self, screen: Screen[Any]) -> None:
        """Draw what changed while ``screen`` was covered: called as it is uncovered, so the
        frame that shows it again is up to date."""
        missed = self._missed.pop(screen, None)
        show = getattr(screen, "show", None)
        if missed is not None and show is not None:
            with self._host.batch_update():
                show(self._host.state, self._host.now(), *missed)
