"""The trials grid: one row per group of the current batch, one cell per trial (phase and time
in it; when done, outcome and reward). Groups whose trials all got the same reward are flagged:
they train nothing. Enter on a cell opens that trial's transcript."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from tbconsole.state import PHASE_LABELS, RunState, TrialState, format_count, trial_matches
from tbconsole.ui.sanitize import one_line
from tbconsole.ui.widgets.base import Palette, palette_of

SCORED_OUTCOMES = ("Submitted", "TimeLimitExceeded", "SequenceLengthLimitExceeded")


def short_time(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = int(seconds)
    if s < 100:
        return f"{s}s"
    if s < 6000:
        return f"{s // 60}m"
    return f"{s // 3600}h"


def cell_text(t: TrialState | None, now: float, width: int, p: Palette) -> Text:
    """What one trial's cell says, in at most ``width`` characters."""
    if t is None:
        return Text("·", style=p.muted)
    wide = width >= 12
    if t.done:
        elapsed = short_time(t.elapsed(now))
        if t.scored and t.reward is not None:
            good = t.reward >= 1.0
            mark = "✓" if good else ("◐" if t.reward > 0 else "✗")
            style = p.success if good else (p.warning if t.reward > 0 else p.error)
            text = Text(f"{mark}{t.reward:g}", style=f"bold {style}")
            if t.outcome and t.outcome != "Submitted":
                text.append("T" if t.outcome == "TimeLimitExceeded" else "L", style=p.warning)
            if width - len(text) > len(elapsed):
                text.append(" " + elapsed, style=p.muted)
            return text
        label = "cancel" if t.outcome == "Cancelled" else (t.exception_type or t.outcome or "error")
        return Text("! " + one_line(label, width - 2), style=f"bold {p.error}" if t.outcome != "Cancelled" else p.muted)
    phase = PHASE_LABELS.get(t.phase, t.phase)
    elapsed = short_time(t.phase_elapsed(now))
    if t.phase == "agent":
        turns = t.live_turns
        if wide:
            text = Text(f"agent {turns}t", style=f"bold {p.primary}")
            if width >= 16:
                text.append(f" {format_count(t.live_tokens)}", style=p.primary)
        else:
            text = Text(f"a{turns}", style=f"bold {p.primary}")
    elif t.phase == "queued":
        text = Text("queued" if wide else "q", style=p.muted)
    elif t.phase == "verifying":
        text = Text(phase if wide else "v", style=p.accent)
    else:
        text = Text(phase if wide else phase[0], style=p.fg)
    if t.lost:
        text.append("!", style=f"bold {p.error}")
    if elapsed and len(text) + 1 + len(elapsed) <= width:
        text.append(" " + elapsed, style=p.muted)
    return text


class TrialsGrid(DataTable):
    DEFAULT_CSS = """
    TrialsGrid { height: 1fr; min-height: 5; border: round $panel-lighten-2; border-title-color: $primary; }
    TrialsGrid:focus { border: round $primary; }
    """

    def __init__(self, **kwargs):
        super().__init__(cursor_type="cell", zebra_stripes=False, show_row_labels=False, **kwargs)
        self.filter = ""
        self._layout: tuple = ()
        self._cells: dict[str, tuple[str, str]] = {}  # trial -> (row key, column key)
        self._trial_at: dict[tuple[str, str], str] = {}
        self._shown: dict[str, tuple] = {}
        self.step: int | None = None

    def on_mount(self) -> None:
        self.border_title = "trials"

    def on_resize(self) -> None:
        self.app.redraw("trials")

    def selected_trial(self) -> str | None:
        if not self.row_count:
            return None
        try:
            cell = self.coordinate_to_cell_key(self.cursor_coordinate)
        except Exception:  # noqa: BLE001 - empty table or stale cursor
            return None
        return self._trial_at.get((cell.row_key.value, cell.column_key.value))

    def _widths(self, size: int) -> tuple[int, int]:
        total = max(40, (self.size.width or 120) - 4)
        label = 24 if total >= 100 else 14
        cell = max(5, min(16, (total - label - 2) // max(1, size) - 2))  # 2: the cell padding
        return label, cell

    def show(self, state: RunState, now: float) -> None:
        p = palette_of(self.app)
        groups = state.batch_groups()
        size = max([len(g.trials) for g in groups] + [state.group_size, 1])
        label_w, cell_w = self._widths(size)
        visible = []
        for g in groups:
            trials = [state.trials.get(t) for t in g.trials]
            if self.filter and not any(t is not None and trial_matches(t, self.filter) for t in trials):
                continue
            visible.append((g, trials))
        layout = (state.step, tuple((g.group, tuple(g.trials)) for g, _ in visible), size, label_w, cell_w,
                  self.filter)
        title = f"trials · step {state.step + 1}" if state.step is not None else "trials"
        if self.filter:
            title += f" · filter: {one_line(self.filter, 30)}"
        self.border_title = title
        if layout != self._layout:
            self._rebuild(state, now, visible, size, label_w, cell_w, p)
            self._layout = layout
            state.dirty_trials.clear()
            return
        dirty = set(state.dirty_trials)
        state.dirty_trials.clear()
        for g, trials in visible:
            label = self._label(g, state, label_w, p)
            if self._shown.get(f"g{g.group}") != label.plain:
                self._shown[f"g{g.group}"] = label.plain
                self.update_cell(f"g{g.group}", "label", label)
            for t in trials:
                if t is None:
                    continue
                if t.trial in dirty or not t.done:
                    where = self._cells.get(t.trial)
                    if where is not None:
                        cell = self._cell(t, now, cell_w, p)
                        key = (cell.plain, str(cell.style), len(cell.spans))
                        if self._shown.get(t.trial) != key:  # unchanged cells cost nothing
                            self._shown[t.trial] = key
                            self.update_cell(where[0], where[1], cell)

    def _cell(self, t: TrialState, now: float, width: int, p: Palette) -> Text:
        text = cell_text(t, now, width, p)
        if self.filter and not trial_matches(t, self.filter):
            text = Text(text.plain, style=p.muted)
        return text

    def _label(self, g, state: RunState, width: int, p: Palette) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"{g.group:>2} ", style=p.muted)
        flag = g.all_same(state.trials)
        failed = g.ok is False
        room = width - 3 - (5 if flag or failed else 0)
        text.append(one_line(g.task, max(4, room)), style="bold")
        if failed:
            text.append(" ✗err", style=f"bold {p.error}")
        elif flag:
            text.append(" =all", style=f"bold {p.warning}")
        return text

    def _rebuild(self, state, now, visible, size, label_w, cell_w, p) -> None:
        cursor = self.cursor_coordinate
        self.clear(columns=True)
        self._cells.clear()
        self._trial_at.clear()
        self._shown.clear()
        self.add_column(Text("group", style=f"bold {p.muted}"), key="label", width=label_w)
        for i in range(size):
            self.add_column(Text(str(i + 1), style=f"bold {p.muted}"), key=f"t{i}", width=cell_w)
        for g, trials in visible:
            cells = []
            for i in range(size):
                t = trials[i] if i < len(trials) else None
                if t is not None:
                    self._cells[t.trial] = (f"g{g.group}", f"t{i}")
                    self._trial_at[(f"g{g.group}", f"t{i}")] = t.trial
                    cells.append(self._cell(t, now, cell_w, p))
                else:
                    cells.append(Text(""))
            self.add_row(self._label(g, state, label_w, p), *cells, key=f"g{g.group}")
        if self.row_count:
            row = min(cursor.row, self.row_count - 1)
            column = min(max(1, cursor.column), size)
            self.move_cursor(row=row, column=column, animate=False, scroll=False)
