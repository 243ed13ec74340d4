"""What every panel shares: the theme's colours for Rich styles, and the ``show`` contract."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual import events, getters
from textual.app import App
from textual.color import Color
from textual.widgets import Static

from tbconsole.record.enums import ControlState, RunnerState, RunStatus
from tbconsole.state import RunState
from tbconsole.ui.widgets.host import WidgetHost


@dataclass(frozen=True)
class Palette:
    primary: str
    accent: str
    success: str
    warning: str
    error: str
    fg: str
    muted: str
    line: str
    bar: str

    def state(self, status: str) -> str:
        colours: dict[str, str] = {  # keyed by str: a status from any of these enums, or another word
            ControlState.RUNNING: self.success,
            RunStatus.DONE: self.success,
            RunStatus.STOPPED: self.primary,
            ControlState.PAUSING: self.warning,
            ControlState.PAUSED: self.warning,
            ControlState.STOPPING: self.warning,
            ControlState.AWAITING_DECISION: self.error,
            ControlState.ABORTING: self.error,
            RunStatus.ABORTED: self.error,
            RunStatus.FAILED: self.error,
            RunnerState.DEAD: self.error,
        }
        return colours.get(status, self.muted)


def palette_of(app: App[Any]) -> Palette:
    theme = app.current_theme
    fg = Color.parse(theme.foreground or ("#E0E0E0" if theme.dark else "#202020"))
    bg = Color.parse(theme.background or ("#000000" if theme.dark else "#FFFFFF"))
    muted = fg.blend(bg, 0.45).hex
    variables = theme.variables or {}
    return Palette(
        primary=theme.primary,
        accent=theme.accent or theme.primary,
        success=theme.success or "green",
        warning=theme.warning or "yellow",
        error=theme.error or "red",
        fg=fg.hex,
        muted=muted,
        line=variables.get("plot-line", theme.primary),
        bar=variables.get("plot-bar", theme.success or theme.primary),
    )


class Panel(Static):
    """A bordered panel that renders the state on demand. Hovering a line shows what it means:
    ``render_state`` puts one help text per line it draws in ``line_help`` (None: the panel's
    ``HELP``)."""

    DEFAULT_CSS = """
    Panel {
        border: round $panel-lighten-2;
        border-title-color: $primary;
        padding: 0 1;
        height: 1fr;
    }
    """
    TITLE = ""
    HELP = ""

    app = getters.app(WidgetHost)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.line_help: list[str | None] = []
        self._hovered: int | None = None

    def on_mount(self) -> None:
        self.border_title = self.TITLE
        self.tooltip = self.HELP or None

    def on_resize(self) -> None:
        if self.id:
            self.app.redraw(self.id)  # sizes feed the layout of the text (bars, sparklines, rows)

    def show(self, state: RunState, now: float) -> None:
        self.line_help = []
        # The panel's size comes from the layout, never from its text: a repaint is enough (a
        # layout pass redoes the whole screen's).
        self.update(self.render_state(state, now, palette_of(self.app)), layout=False)
        self._show_help()

    def render_state(self, state: RunState, now: float, palette: Palette) -> RenderableType:
        raise NotImplementedError

    def on_mouse_move(self, event: events.MouseMove) -> None:
        offset = event.get_content_offset(self)
        self._hovered = offset.y if offset is not None else None
        self._show_help()

    def on_leave(self) -> None:
        self._hovered = None

    def help_at(self, line: int | None) -> str | None:
        """The help text for content line ``line``: its own, else the panel's."""
        text = self.line_help[line] if line is not None and 0 <= line < len(self.line_help) else None
        return text or self.HELP or None

    def _show_help(self) -> None:
        text = self.help_at(self._hovered)
        if self.tooltip != text:
            self.tooltip = text


def columns(cells: list, widths: list[int], right: Collection[int] = (), style: str = "") -> Text:
    """One table row as a Text: fixed widths, cut with … (much cheaper to lay out than a Rich
    Table, which matters when panels redraw under a flood of events)."""
    out = Text(no_wrap=True, overflow="ellipsis", style=style)
    for i, (cell, width) in enumerate(zip(cells, widths, strict=False)):
        cell = cell if isinstance(cell, Text) else Text(str(cell))
        if cell.cell_len > width:
            cell = cell.copy()
            cell.truncate(max(1, width), overflow="ellipsis")
        pad = " " * max(0, width - cell.cell_len)
        if i:
            out.append(" ")
        if i in right:
            out.append(pad)
            out.append_text(cell)
        else:
            out.append_text(cell)
            out.append(pad)
    return out
