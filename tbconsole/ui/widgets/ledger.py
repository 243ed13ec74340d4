"""The difficulty ledger's table: a heading with the step axis, then one line per task (or
family): its heatmap over the newest steps that fit and its run-level columns. Line-rendered
(``render_line``): only the lines on view are built, each once until the ledger, the width, the
theme or the cursor changes, so drawing costs the screen's height, not the run's length."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events, getters
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tbconsole.state.ledger import TaskRow
from tbconsole.ui.present import ledger_view as lv
from tbconsole.ui.widgets.base import palette_of
from tbconsole.ui.widgets.host import WidgetHost
from tbconsole.ui.widgets.ledgercells import Shades, header_line, row_line


class LedgerTable(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    LedgerTable {
        height: 1fr; border: round $panel-lighten-2; border-title-color: $primary;
        background: $surface; color: $foreground; scrollbar-size-vertical: 1;
    }
    LedgerTable:focus { border: round $primary; }
    LedgerTable > .ledgertable--header { text-style: bold; background: $panel; color: $foreground; }
    LedgerTable > .ledgertable--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    """
    COMPONENT_CLASSES = {"ledgertable--header", "ledgertable--cursor"}
    BINDINGS = [
        Binding("up", "cursor(-1)", "Cursor up", show=False),
        Binding("down", "cursor(1)", "Cursor down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(0)", "First row", show=False),
        Binding("end", "edge(1)", "Last row", show=False),
    ]

    app = getters.app(WidgetHost)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: list[TaskRow] = []
        self.family = False
        self.members: dict[str, list[TaskRow]] = {}  # family -> its tasks' rows (families shown)
        self.spans: dict[str, list[tuple[int, int | None]]] = {}  # task -> steps it was out
        self.current: int | None = None  # the run's current step (what is pending, what applies)
        self.first: int | None = None
        self.last: int | None = None
        self.back = 0  # steps before the newest that the heatmap ends at
        self.heading = "tasks"  # the border title's start; the steps on view follow it
        self.cursor_row = 0
        self.layout_: lv.Layout = lv.layout(80, [], None, None)
        self._lines: dict[int, Strip] = {}  # row (-1: the heading) -> strip, for the lines on view
        self._shades: Shades | None = None  # the theme's colours, blended once per theme

    # -- feeding it ----------------------------------------------------------------------

    def show(
        self,
        rows: list[TaskRow],
        *,
        family: bool,
        members: dict[str, list[TaskRow]],
        spans: dict[str, list[tuple[int, int | None]]],
        current: int | None,
        span: tuple[int | None, int | None],
    ) -> None:
        """New rows (in order): the cursor stays on the row of the same name."""
        selected = self.selected()
        self.rows, self.family, self.members, self.spans, self.current = rows, family, members, spans, current
        self.first, self.last = span
        names = [r.name for r in rows]
        if selected is not None and selected.name in names:
            self.cursor_row = names.index(selected.name)
        self.cursor_row = max(0, min(self.cursor_row, len(rows) - 1))
        self._relayout()

    def _relayout(self) -> None:
        width = self.scrollable_content_region.width or self.size.width or 80
        names = [r.name + (f" ({r.tasks})" if self.family else "") for r in self.rows]
        self.layout_ = lv.layout(width, names, self.first, self.last, self.back)
        steps = self.layout_.steps
        self.back = (self.last or 0) - (steps[-1] if steps else 0)
        where = "no step yet"
        if steps:
            where = f"steps {steps[0]}–{steps[-1]}" if len(steps) > 1 else f"step {steps[0]}"
            if len(steps) < (self.last or 0) - (self.first or 0) + 1:
                where += f" of {self.first}–{self.last} (←/→)"
        self.border_title = f"{self.heading} · {where}"
        self._lines.clear()
        self.virtual_size = Size(width, len(self.rows) + 1)
        self.refresh()

    def selected(self) -> TaskRow | None:
        return self.rows[self.cursor_row] if 0 <= self.cursor_row < len(self.rows) else None

    def shift(self, steps: int) -> None:
        """Move the heatmap ``steps`` older (negative: newer)."""
        self.back = max(0, self.back + steps)
        self._relayout()

    def on_resize(self) -> None:
        self._relayout()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._lines.clear()
        self._shades = None

    # -- drawing ---------------------------------------------------------------------------

    def _text(self, row: int) -> Text:
        if self._shades is None:
            self._shades = Shades(palette_of(self.app))
        if row < 0:
            return header_line(self.layout_, self.family, self._shades.p)
        r = self.rows[row]
        members = self.members.get(r.name) if self.family else None
        return row_line(r, self.layout_, self._shades, self.current, self.spans.get(r.name), members)

    def _strip(self, row: int) -> Strip:
        strip = self._lines.get(row)
        if strip is None:
            text = self._text(row)
            style = self.rich_style
            if row < 0:
                style = style + self.get_component_rich_style("ledgertable--header")
            elif row == self.cursor_row and self.has_focus:
                style = style + self.get_component_rich_style("ledgertable--cursor")
            strip = Strip(list(text.render(self.app.console)), text.cell_len).apply_style(style)
            self._lines[row] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        row = -1 if y == 0 else y - 1 + self.scroll_offset.y
        if row >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        strip = self._strip(row)
        fill = self.rich_style
        if row < 0 or (row == self.cursor_row and self.has_focus):
            fill = fill + self.get_component_rich_style("ledgertable--header" if row < 0 else "ledgertable--cursor")
        return strip.crop_extend(0, width, fill)

    # -- the cursor ------------------------------------------------------------------------

    def on_focus(self) -> None:
        self._lines.pop(self.cursor_row, None)
        self.refresh()

    def on_blur(self) -> None:
        self._lines.pop(self.cursor_row, None)
        self.refresh()

    def _changed(self, row: int) -> None:
        self._lines.pop(row, None)
        y = row + 1 - round(self.scroll_offset.y)
        if 1 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    def move_cursor(self, row: int) -> None:
        if not self.rows:
            return
        old, self.cursor_row = self.cursor_row, max(0, min(len(self.rows) - 1, row))
        self._changed(old)
        self._changed(self.cursor_row)
        height = max(1, self.scrollable_content_region.height - 1)  # the heading stays put
        y = self.scroll_offset.y
        if self.cursor_row < y:
            y = self.cursor_row
        elif self.cursor_row >= y + height:
            y = self.cursor_row - height + 1
        if y != self.scroll_offset.y:
            self.scroll_to(y=y, animate=False)

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta)

    def action_page(self, delta: int) -> None:
        self.move_cursor(self.cursor_row + delta * max(1, self.scrollable_content_region.height - 1))

    def action_edge(self, last: int) -> None:
        self.move_cursor(len(self.rows) - 1 if last else 0)

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self.move_cursor(event.y - 1 + self.scroll_offset.y)
