"""What the widgets ask of the app they are mounted in. The app (``tbconsole.ui.app``) is a layer
above and may not be imported here; it implements this class, and a widget that calls it types
``self.app`` with ``app = getters.app(WidgetHost)`` (Textual's way to a typed ``app``)."""

from __future__ import annotations

from textual.app import App


class WidgetHost(App[int]):
    """The console app as the widgets see it. ``ConsoleApp`` overrides every method."""

    def redraw(self, *panels: str) -> None:
        """Draw ``panels`` (none: every one) again at the next tick."""
        raise NotImplementedError

    def replay_seek(self, position: int) -> None:
        """Move the replay to ``position`` (a count of events)."""
        raise NotImplementedError
