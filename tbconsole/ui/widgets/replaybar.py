"""Replay of a finished run: where in time the view is, moved with [ ] { } or a click."""

from __future__ import annotations

from collections.abc import Sized
from typing import Protocol

from rich.text import Text
from textual import events, getters
from textual.widgets import Static

from tbconsole.common.formatting import format_count
from tbconsole.state import RunState
from tbconsole.ui.present.wording import span_text
from tbconsole.ui.widgets.base import palette_of
from tbconsole.ui.widgets.host import WidgetHost


class ReplayView(Protocol):
    """What the bar reads of a replay (``Replay`` or ``FileReplay``: data access, which widgets
    may not import)."""

    @property
    def state(self) -> RunState: ...
    @property
    def marks(self) -> list[int]: ...
    @property
    def position(self) -> int: ...
    @property
    def events(self) -> Sized: ...


def where_text(replay: ReplayView) -> str:
    """The step the view is at, among the steps the run sampled, both counted from 0 as everywhere
    (`step 4 of 0–4`: a count of batches, `5/5`, read beside `4/20 trained` as a contradiction)."""
    step = replay.state.step
    last = span_text(0, len(replay.marks) - 1) if replay.marks else "–"  # one step: "of 0", not "of 0–0"
    return f"step {'–' if step is None else step} of {last} "


class ReplayBar(Static):
    DEFAULT_CSS = """
    ReplayBar { height: 1; background: $panel; padding: 0 1; }
    """

    app = getters.app(WidgetHost)

    def show(self, replay: ReplayView) -> None:
        p = palette_of(self.app)
        width = self._bar_width()
        frac = replay.position / max(1, len(replay.events))
        filled = int(round(frac * width))
        t = Text(no_wrap=True)
        t.append("replay ", style=f"bold {p.accent}")
        t.append(where_text(replay), style="bold")
        t.append("━" * filled, style=p.primary)
        t.append("━" * (width - filled), style=p.muted)
        t.append(f" {format_count(replay.position)}/{format_count(len(replay.events))} events", style=p.muted)
        self.update(t, layout=False)  # one line whatever it says

    def _bar_width(self) -> int:
        return max(10, (self.size.width or 80) - 50)

    def on_click(self, event: events.Click) -> None:
        replay = getattr(self.app, "replay", None)
        if replay is None:
            return
        start = len("replay ") + len(where_text(replay)) + 1
        frac = min(1.0, max(0.0, (event.x - start) / self._bar_width()))
        self.app.replay_seek(int(frac * len(replay.events)))
