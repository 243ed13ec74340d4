"""Replay of a finished run: where in time the view is, moved with [ ] { } or a click."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widgets import Static

from tbconsole.ui.widgets.base import palette_of


class ReplayBar(Static):
    DEFAULT_CSS = """
    ReplayBar { height: 1; background: $panel; padding: 0 1; }
    """

    def show(self, replay) -> None:
        p = palette_of(self.app)
        total_steps = len(replay.marks)
        width = max(10, (self.size.width or 80) - 40)
        frac = replay.position / max(1, len(replay.events))
        filled = int(round(frac * width))
        t = Text(no_wrap=True)
        t.append("replay ", style=f"bold {p.accent}")
        t.append(f"step {replay.step_index()}/{total_steps} ", style="bold")
        t.append("━" * filled, style=p.primary)
        t.append("━" * (width - filled), style=p.muted)
        t.append(f" {replay.position}/{len(replay.events)} events", style=p.muted)
        self.update(t)

    def on_click(self, event: events.Click) -> None:
        replay = getattr(self.app, "replay", None)
        if replay is None:
            return
        width = max(10, (self.size.width or 80) - 40)
        start = len("replay ") + len(f"step {replay.step_index()}/{len(replay.marks)} ") + 1
        frac = min(1.0, max(0.0, (event.x - start) / width))
        self.app.replay_seek(int(frac * len(replay.events)))
