"""What every panel shares: the theme's colours for Rich styles, and the ``show`` contract."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import RenderableType
from rich.text import Text
from textual.color import Color
from textual.widgets import Static

from tbconsole.state import RunState


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
        return {
            "running": self.success, "done": self.success, "stopped": self.primary,
            "pausing": self.warning, "paused": self.warning, "stopping": self.warning,
            "awaiting_decision": self.error, "aborting": self.error, "aborted": self.error,
            "failed": self.error,
        }.get(status, self.muted)


def palette_of(app) -> Palette:
    theme = app.current_theme
    fg = Color.parse(theme.foreground or ("#E0E0E0" if theme.dark else "#202020"))
    bg = Color.parse(theme.background or ("#000000" if theme.dark else "#FFFFFF"))
    muted = fg.blend(bg, 0.45).hex
    variables = theme.variables or {}
    return Palette(
        primary=theme.primary, accent=theme.accent or theme.primary, success=theme.success or "green",
        warning=theme.warning or "yellow", error=theme.error or "red", fg=fg.hex, muted=muted,
        line=variables.get("plot-line", theme.primary), bar=variables.get("plot-bar", theme.success or theme.primary),
    )


class Panel(Static):
    """A bordered panel that renders the state on demand."""

    DEFAULT_CSS = """
    Panel {
        border: round $panel-lighten-2;
        border-title-color: $primary;
        padding: 0 1;
        height: 1fr;
    }
    """
    TITLE = ""

    def on_mount(self) -> None:
        self.border_title = self.TITLE

    def on_resize(self) -> None:
        if self.id:
            self.app.redraw(self.id)  # sizes feed the layout of the text (bars, sparklines, rows)

    def show(self, state: RunState, now: float) -> None:
        self.update(self.render_state(state, now, palette_of(self.app)))

    def render_state(self, state: RunState, now: float, palette: Palette) -> RenderableType:
        raise NotImplementedError


def columns(cells: list, widths: list[int], right: set[int] = frozenset(), style: str = "") -> Text:
    """One table row as a Text: fixed widths, cut with … (much cheaper to lay out than a Rich
    Table, which matters when panels redraw under a flood of events)."""
    from rich.text import Text as _Text

    out = _Text(no_wrap=True, overflow="ellipsis", style=style)
    for i, (cell, width) in enumerate(zip(cells, widths, strict=False)):
        cell = cell if isinstance(cell, _Text) else _Text(str(cell))
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
