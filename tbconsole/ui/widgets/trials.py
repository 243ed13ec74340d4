"""The trials grid: one row per group of the current batch, one cell per trial (phase and time
in it; when done, outcome and reward). Groups whose trials all got the same reward are flagged:
they train nothing. Below them, while a held-out evaluation runs (and after it, until the next
batch starts), its own section: a ``held-out · step N`` heading, then one row per held-out task
(``h0 task``), cells like any trial's. Enter on a cell opens that trial's transcript. What a
cell or a label says is in ``trialcells``; this is the widget: layout, incremental redraw,
cursor, clicks."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import events, getters
from textual.binding import Binding
from textual.color import Color
from textual.content import Content
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tbconsole.record.enums import PanelName
from tbconsole.state import RunState, TrialState
from tbconsole.ui.present.filters import trial_matches
from tbconsole.ui.present.grid_view import no_match_text, scroll_to_cell
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.widgets.base import Palette, palette_of
from tbconsole.ui.widgets.host import WidgetHost
from tbconsole.ui.widgets.trialcells import (
    CELL_PADDING,
    cell_text,
    column_at,
    grid_widths,
    group_label,
    header_text,
    heldout_heading,
    heldout_label,
    row_text,
)

# One row to draw: its key, its label at a width, its trials (None: an empty cell).
_Entry = tuple[str, Callable[[int], Text], list[TrialState | None]]


class _Row:
    __slots__ = ("key", "label", "cells", "trials")

    def __init__(self, key: str, label: Text, cells: list[Text | None], trials: list[str | None]):
        self.key = key
        self.label = label
        self.cells = cells
        self.trials = trials


class TrialsGrid(ScrollView, can_focus=True):
    """A light, line-rendered grid (a DataTable redrew every cell on any change). Rows are
    drawn on demand by ``render_line`` and cached until their text or the cursor changes."""

    DEFAULT_CSS = """
    TrialsGrid {
        height: 1fr; min-height: 5; border: round $panel-lighten-2; border-title-color: $primary;
        background: $surface; color: $foreground;
    }
    TrialsGrid:focus { border: round $primary; background-tint: $foreground 5%; }
    TrialsGrid > .trialsgrid--header { text-style: bold; background: $panel; color: $foreground; }
    TrialsGrid:focus > .trialsgrid--header { background-tint: $foreground 5%; }
    TrialsGrid > .trialsgrid--cursor {
        background: $block-cursor-blurred-background; color: $block-cursor-blurred-foreground;
        text-style: $block-cursor-blurred-text-style;
    }
    TrialsGrid:focus > .trialsgrid--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    """
    COMPONENT_CLASSES = {"trialsgrid--header", "trialsgrid--cursor"}
    BINDINGS = [
        Binding("enter", "select_cursor", "Transcript"),
        Binding("up", "cursor(-1, 0)", "Cursor up", show=False),
        Binding("down", "cursor(1, 0)", "Cursor down", show=False),
        Binding("left", "cursor(0, -1)", "Cursor left", show=False),
        Binding("right", "cursor(0, 1)", "Cursor right", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(0)", "First row", show=False),
        Binding("end", "edge(1)", "Last row", show=False),
    ]

    app = getters.app(WidgetHost)

    class TrialSelected(Message):
        """Enter (or a click on the cursor's cell) on a trial."""

        def __init__(self, grid: TrialsGrid, trial: str):
            super().__init__()
            self.grid = grid
            self.trial = trial

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.filter = ""
        self.step: int | None = None
        self._layout: tuple = ()
        self._rows: list[_Row] = []
        self._where: dict[str, tuple[int, int]] = {}  # trial -> (row index, column 1..size)
        self._shown: dict[str, tuple] = {}
        self._columns = 0
        self._label_w = 14
        self._cell_w = 5
        self.cursor_row = 0
        self.cursor_column = 1
        self._lines: dict[int, Strip] = {}  # row index (-1: header) -> full-width strip
        self._header = Text("")
        self._title = ""

    # -- what the tests and screens ask ------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def selected_trial(self) -> str | None:
        if not self._rows:
            return None
        row = self._rows[min(self.cursor_row, len(self._rows) - 1)]
        column = self.cursor_column - 1
        return row.trials[column] if 0 <= column < len(row.trials) else None

    def on_mount(self) -> None:
        self.border_title = "trials"

    def on_resize(self) -> None:
        self._lines.clear()
        self.app.redraw(PanelName.TRIALS)

    def on_focus(self) -> None:
        self._lines.clear()  # the cursor's colour follows the focus
        self.refresh()

    def on_blur(self) -> None:
        self._lines.clear()
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._lines.clear()

    # -- feeding it ----------------------------------------------------------------------

    def show(self, state: RunState, now: float) -> None:
        p = palette_of(self.app)
        visible = self._entries(state, p)
        size = max([len(trials) for _, _, trials in visible] + [state.group_size, 1])
        label_w, cell_w = grid_widths(self.size.width, size)
        ev = state.heldout_shown()
        layout = (
            state.step,
            ev.after_updates if ev is not None else None,
            tuple((key, tuple(t.trial if t is not None else None for t in trials)) for key, _, trials in visible),
            size,
            label_w,
            cell_w,
            self.filter,
        )
        title = f"trials · step {state.step}" if state.step is not None else "trials"
        if ev is not None:
            title += f" · held-out step {ev.after_updates}" + (" running" if ev.running else "")
        if self.filter:
            title += f" · filter: {one_line(self.filter, 30)}"
        if title != self._title:  # setting a border title repaints the whole grid
            self._title = title
            self.border_title = Content(title)  # not markup: the filter is what was typed
        self.step = state.step
        if layout != self._layout:
            self._rebuild(now, visible, size, label_w, cell_w, p)
            self._layout = layout
            state.changed_trials.clear()
            return
        changed = set(state.changed_trials)
        state.changed_trials.clear()
        for index, (_, make_label, trials) in enumerate(visible):
            row = self._rows[index]
            label = make_label(label_w)
            label_key = (label.plain, len(label.spans), str(label.spans[-1].style) if label.spans else "")
            if self._shown.get(row.key) != label_key:
                self._shown[row.key] = label_key
                row.label = label
                self._changed(index)
            for t in trials:
                if t is None or not (t.trial in changed or not (t.done or t.cancelled)):
                    continue
                where = self._where.get(t.trial)
                if where is None:
                    continue
                cell = self._cell(t, now, cell_w, p)
                key = (cell.plain, str(cell.style), tuple(str(s.style) for s in cell.spans))
                if self._shown.get(t.trial) != key:  # unchanged cells cost nothing
                    self._shown[t.trial] = key
                    row.cells[where[1] - 1] = cell
                    self._changed(index)

    def _entries(self, state: RunState, p: Palette) -> list[_Entry]:
        """The rows to draw, as (key, label of a width, trials): the current batch's groups, then
        the held-out section (a heading, then its groups), each group kept when the filter
        matches one of its trials."""
        out: list[_Entry] = []

        def matches(trials: list[TrialState | None]) -> bool:
            return not self.filter or any(t is not None and trial_matches(t, self.filter) for t in trials)

        for g in state.batch_groups():
            trials = [state.trials.get(t) for t in g.trials]
            if matches(trials):
                out.append((f"g{g.group}", partial(group_label, g, state, p=p), trials))
        ev = state.heldout_shown()
        if ev is None:
            return out
        held: list[_Entry] = []
        for g in ev.ordered_groups():
            trials = [ev.trial_states.get(t) for t in g.trials]
            if matches(trials):
                held.append((f"h{g.group}", partial(heldout_label, g, p=p), trials))
        if held:
            out.append(("heldout", lambda width: heldout_heading(ev, width, p), []))
            out.extend(held)
        return out

    def _cell(self, t: TrialState, now: float, width: int, p: Palette) -> Text:
        text = cell_text(t, now, width, p)
        if self.filter and not trial_matches(t, self.filter):
            text = Text(text.plain, style=p.muted)
        return text

    def _rebuild(self, now: float, visible: list[_Entry], size: int, label_w: int, cell_w: int, p: Palette) -> None:
        self._rows = []
        self._where.clear()
        self._shown.clear()
        self._lines.clear()
        self._columns, self._label_w, self._cell_w = size, label_w, cell_w
        self._header = header_text(size, label_w, cell_w, p)
        for index, (key, make_label, trials) in enumerate(visible):
            cells: list[Text | None] = []
            ids: list[str | None] = []
            for i in range(size):
                t = trials[i] if i < len(trials) else None
                if t is not None:
                    self._where[t.trial] = (index, i + 1)
                    cells.append(self._cell(t, now, cell_w, p))
                    ids.append(t.trial)
                else:
                    cells.append(None)
                    ids.append(None)
            self._rows.append(_Row(key, make_label(label_w), cells, ids))
        line_width = (label_w + 2 * CELL_PADDING) + size * (cell_w + 2 * CELL_PADDING)
        self.virtual_size = Size(line_width, len(self._rows) + 1)
        self.cursor_row = min(self.cursor_row, max(0, len(self._rows) - 1))
        self.cursor_column = min(max(1, self.cursor_column), size)
        self.refresh()

    # -- drawing ---------------------------------------------------------------------------

    def _changed(self, row: int) -> None:
        self._lines.pop(row, None)
        y = row + 1 - round(self.scroll_offset.y)
        if 1 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    def _strip(self, row: int) -> Strip:
        strip = self._lines.get(row)
        if strip is None:
            console = self.app.console
            base = self.rich_style
            if row < 0:
                style = base + self.get_component_rich_style("trialsgrid--header")
                text = self._header
            else:
                style = base
                r = self._rows[row]
                cursor = self.cursor_column if row == self.cursor_row else None
                cursor_style = self.get_component_rich_style("trialsgrid--cursor") if cursor else None
                text = row_text(r.label, r.cells, self._label_w, self._cell_w, cursor, cursor_style)
            segments = list(text.render(console))
            strip = Strip(segments, text.cell_len).apply_style(style)
            self._lines[row] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        if y == 0:
            row = -1
        else:
            row = y - 1 + scroll_y
            if row >= len(self._rows):
                if row == 0 and self.filter:  # the filter hides every trial: say so
                    text = no_match_text(self.filter, CELL_PADDING, palette_of(self.app).muted)
                    strip = Strip(list(text.render(self.app.console)), text.cell_len).apply_style(self.rich_style)
                    return strip.crop_extend(0, width, self.rich_style)
                return Strip.blank(width, self.rich_style)
        strip = self._strip(row)
        fill = self.rich_style
        if row < 0:  # the heading's band runs the full width, faded a little, as DataTable's did
            header = fill + self.get_component_rich_style("trialsgrid--header")
            if header.bgcolor is not None:
                faded = Color.from_rich_color(header.bgcolor).blend(self.background_colors[1], 0.25)
                fill = Style.from_color(header.color, faded.rich_color)
        return strip.crop_extend(scroll_x, scroll_x + width, fill)

    # -- the cursor ------------------------------------------------------------------------

    def move_cursor(self, row: int | None = None, column: int | None = None) -> None:
        if not self._rows:
            return
        old = self.cursor_row
        self.cursor_row = max(0, min(len(self._rows) - 1, self.cursor_row if row is None else row))
        self.cursor_column = max(1, min(self._columns, self.cursor_column if column is None else column))
        self._changed(old)
        self._changed(self.cursor_row)
        self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        region = self.scrollable_content_region
        x, y = scroll_to_cell(
            self.cursor_row,
            self.cursor_column,
            label_w=self._label_w,
            cell_w=self._cell_w,
            pad=CELL_PADDING,
            at=(self.scroll_offset.x, self.scroll_offset.y),
            size=(region.width, max(1, region.height - 1)),  # the header stays put
        )
        if (x, y) != tuple(self.scroll_offset):
            self.scroll_to(x=x, y=y, animate=False)

    def action_cursor(self, rows: int, columns: int) -> None:
        """The arrows: a row up or down, a cell left or right."""
        if rows:
            self.move_cursor(row=self.cursor_row + rows)
        else:
            self.move_cursor(column=self.cursor_column + columns)

    def action_page(self, direction: int) -> None:
        self.move_cursor(row=self.cursor_row + direction * max(1, self.scrollable_content_region.height - 1))

    def action_edge(self, last: int) -> None:
        """Home, end: the first row, the last."""
        self.move_cursor(row=len(self._rows) - 1 if last else 0)

    def action_select_cursor(self) -> None:
        trial = self.selected_trial()
        if trial is not None:
            self.post_message(self.TrialSelected(self, trial))

    def on_click(self, event: events.Click) -> None:
        if event.y < 1:
            return
        row = event.y - 1 + self.scroll_offset.y
        column = column_at(event.x + self.scroll_offset.x, self._label_w, self._cell_w, self._columns)
        if row >= len(self._rows) or not column:
            return
        if (row, column) == (self.cursor_row, self.cursor_column):
            self.action_select_cursor()
        else:
            self.move_cursor(row=row, column=column)
