"""`g`: the selected trial's group side by side. One column per trial (outcome, reward, the
advantage it got, turns, tokens), then one row per turn with the action each trial took there;
the turns where all trials did the same are dimmed and the first where they differ is marked.
The cursor starts on that turn (else on the first turn): the actions are what the view is for,
the summary rows above them are read at a glance. Enter opens the cursor column's transcript.
Live: capture files are read as they grow."""

from __future__ import annotations

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.coordinate import Coordinate
from textual.screen import Screen
from textual.widgets import DataTable, Static

from tbconsole.common.formatting import format_count, format_reward
from tbconsole.record.enums import PanelName
from tbconsole.state import RunState
from tbconsole.ui.data.captures import GroupCaptures
from tbconsole.ui.data.tokenizer import load_decoder
from tbconsole.ui.present.group_compare import Action, Decode, GroupComparison, TrialColumn, compare_group
from tbconsole.ui.present.sanitize import one_line, text
from tbconsole.ui.present.token_text import TokenDecoder
from tbconsole.ui.present.wording import counted_span
from tbconsole.ui.screens.host import ConsoleHost
from tbconsole.ui.widgets.base import Palette, palette_of
from tbconsole.ui.widgets.footer import KeyFooter

SUMMARY_ROWS = ("outcome", "reward", "advantage", "turns", "tokens")
DETAIL_LIMIT = 1200


def _signed(value: float) -> str:
    return "0" if abs(value) < 1e-12 else f"{value:+.3g}".replace("-", "−")


def summary_cell(row: str, c: TrialColumn, p: Palette) -> Text:
    if row == "outcome":
        if c.cancelled:
            return Text("cancelled", style=p.muted)
        if c.running:
            return Text("running", style=p.primary)
        if c.not_scored:
            return Text(one_line(c.outcome, 40), style=f"bold {p.error}")
        return Text(one_line(c.outcome, 40))
    if row == "reward":
        if c.not_scored:
            return Text("not scored", style=p.error)
        if c.reward is None:
            return Text("–", style=p.muted)
        return Text(format_reward(c.reward), style=f"bold {p.success if c.reward >= 1 else p.warning}")
    if row == "advantage":
        if c.advantage is None:
            return Text("–", style=p.muted)
        colour = p.success if c.advantage > 0 else p.error if c.advantage < 0 else p.muted
        return Text(_signed(c.advantage), style=f"bold {colour}")
    if row == "turns":
        return Text(format_count(c.turns))
    return Text(format_count(c.tokens))


def action_cell(action: Action | None, width: int, p: Palette, *, same: bool, diverges: bool) -> Text:
    if action is None:
        return Text("")
    if action.kind == "empty":
        out = Text("(no action)", style=f"italic {p.muted}")
    else:
        prefix = {"tool": "→ ", "command": "$ ", "text": ""}.get(action.kind, "")
        style = {"tool": p.accent, "text": f"italic {p.muted}"}.get(action.kind, "")
        out = Text(prefix, style=p.muted)
        out.append(one_line(action.text, max(1, width - len(prefix))), style=style)
    out.truncate(width, overflow="ellipsis")
    if same:
        out.stylize(p.muted)
    if diverges:
        out.stylize(f"bold {p.warning}")
    return out


def group_head(cmp: GroupComparison, p: Palette) -> Text:
    """The lines above the table: the group, where its trials diverge, what the advantages are."""
    head = Text()
    head.append(f"group {cmp.group}", style=f"bold {p.primary}")
    head.append(f"  step {cmp.step}  ", style=p.muted)
    head.append(one_line(cmp.task, 60), style="bold")
    head.append(f"  {len(cmp.columns)} trials\n", style=p.muted)
    if len(cmp.columns) < 2:
        head.append("one trial: nothing to compare", style=p.muted)
    elif cmp.divergence is not None:
        head.append(f"◆ the trials diverge at turn {cmp.divergence + 1}", style=f"bold {p.warning}")
        if cmp.divergence:
            head.append(f" ({counted_span('turn', 1, cmp.divergence)} alike, dimmed)", style=p.muted)
    elif any(c.running for c in cmp.columns):
        head.append("the same actions so far", style=p.muted)
    elif cmp.depth:
        head.append("every trial took the same actions", style=p.muted)
    else:
        head.append("no captured turns", style=p.muted)
    head.append("\n" + cmp.advantage_note, style=p.muted)
    if cmp.decoded:
        head.append("\nsome captures hold only tokens: their actions are decoded from them", style=p.muted)
    return head


def first_row(cmp: GroupComparison) -> int:
    """The table row the cursor starts on: the turn where the trials diverge, else the first
    turn (the summary rows come before the turns)."""
    turn = cmp.divergence if cmp.divergence is not None and cmp.divergence < cmp.depth else 0
    return len(SUMMARY_ROWS) + turn


class GroupScreen(Screen[None]):
    DEFAULT_CSS = """
    GroupScreen #ghead { height: auto; max-height: 5; background: $panel; padding: 0 1; }
    GroupScreen #gtable { height: 1fr; }
    GroupScreen #gdetail {
        height: auto; max-height: 8; border-top: solid $panel-lighten-2; padding: 0 1; overflow-y: auto;
    }
    """
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("enter", "open", "Open trial"),
    ]

    app = getters.app(ConsoleHost)

    def __init__(self, step: int, group: int, trial: str | None = None):
        super().__init__()
        self.step = step
        self.group = group
        self.opened_from = trial  # the cursor starts on its column
        self.captures: GroupCaptures | None = None
        self.decoder: TokenDecoder | None = None
        self.comparison: GroupComparison | None = None
        self._shown: tuple = ()
        self._reading = False
        self._whole = False  # read once after every trial had ended
        self._width = 0
        self._placed = False  # the cursor was put on the first turn to look at (once, when turns came)

    def compose(self) -> ComposeResult:
        yield Static(id="ghead")
        table: DataTable = DataTable(id="gtable", cursor_type="cell", zebra_stripes=False)
        yield table
        yield Static(id="gdetail")
        yield KeyFooter()

    @property
    def table(self) -> DataTable:
        return self.query_one("#gtable", DataTable)

    def on_mount(self) -> None:
        g = self.app.state.groups.get((self.step, self.group))
        self.captures = GroupCaptures(self.app.state.log_path, self.step, self.group, g.trials if g else ())
        self.table.focus()
        self.captures.read_new(self._decoder)  # the first frame shows the whole group
        self.render_group()
        self._whole = self.comparison is not None and not any(c.running for c in self.comparison.columns)
        if self.opened_from is not None:
            self.select_column(self.opened_from)
        self.set_interval(1.0, self.on_second, name="group-captures")

    # -- feeding it ------------------------------------------------------------------------

    def _decoder(self) -> Decode:
        if self.decoder is None:
            self.decoder = load_decoder(self.app.state.model_name)
        return self.decoder.decode

    def show(self, state: RunState, now: float, changed: set[str], everything: bool = False) -> None:
        if everything or PanelName.TRIALS in changed:
            self.render_group()

    def on_second(self) -> None:
        """Pick up turns appended to the capture files (off the UI thread) while the group runs."""
        g = self.app.state.groups.get((self.step, self.group))
        if self.captures is None or g is None or self._reading:
            return
        if set(g.trials) != set(self.captures.tails):  # the group was retried: a new attempt's trials
            self.captures = GroupCaptures(self.app.state.log_path, self.step, self.group, g.trials)
            self._whole = False
        elif self.comparison is not None and not any(c.running for c in self.comparison.columns):
            if self._whole:
                return  # every trial had ended at the last reading: the files are whole
            self._whole = True  # one more reading: a last line may have come after the previous one
        self._reading = True
        self.run_worker(self._read, thread=True, exclusive=True, group="group-captures")

    def _read(self) -> None:
        captures = self.captures
        grew = captures.read_new(self._decoder) if captures is not None else False
        self.app.call_from_thread(self._read_done, grew)

    def _read_done(self, grew: bool) -> None:
        self._reading = False
        if grew:
            self.render_group()

    def on_resize(self) -> None:
        if self.size.width != self._width:
            self._shown = ()
            self.render_group()

    # -- drawing -------------------------------------------------------------------------

    def render_group(self) -> None:
        state = self.app.state
        g = state.groups.get((self.step, self.group))
        if g is None or self.captures is None:
            self.query_one("#ghead", Static).update(
                Text(f"group {self.group} of step {self.step} is no longer in memory", style="bold")
            )
            return
        cmp = compare_group(g, state.trials, self.captures.actions)
        self.comparison = cmp
        p = palette_of(self.app)
        self.query_one("#ghead", Static).update(group_head(cmp, p))
        width = self._cell_width(len(cmp.columns))
        key = (self._signature(cmp), width, self.app.theme)
        if key != self._shown:
            self._shown = key
            self._width = self.size.width
            self._fill(cmp, width, p)
        if not self._placed and cmp.depth:
            self._placed = True
            if self.table.cursor_coordinate.row == 0:  # not moved while the group had no turns yet
                self.table.move_cursor(row=first_row(cmp), animate=False)
        self._detail()

    def _cell_width(self, columns: int) -> int:
        free = max(40, (self.size.width or 120) - 14)
        return max(14, min(60, free // max(1, columns) - 2))

    @staticmethod
    def _signature(cmp: GroupComparison) -> tuple:
        return (
            cmp.divergence,
            tuple(
                (c.trial, c.outcome, c.reward, c.advantage, c.turns, c.tokens, c.running, len(c.actions))
                for c in cmp.columns
            ),
        )

    def _fill(self, cmp: GroupComparison, width: int, p: Palette) -> None:
        table = self.table
        cursor = table.cursor_coordinate
        table.clear(columns=True)
        for c in cmp.columns:
            label = Text(f"trial {c.index + 1}", style="bold")
            table.add_column(label, width=width, key=c.trial)
        for name in SUMMARY_ROWS:
            table.add_row(*(summary_cell(name, c, p) for c in cmp.columns), label=Text(name, style=p.muted), key=name)
        for i in range(cmp.depth):
            diverges = i == cmp.divergence
            same = cmp.divergence is not None and i < cmp.divergence
            label = Text(f"turn {i + 1}", style=f"bold {p.warning}" if diverges else p.muted)
            if diverges:
                label.append(" ◆")
            cells = [
                action_cell(c.actions[i] if i < len(c.actions) else None, width, p, same=same, diverges=diverges)
                for c in cmp.columns
            ]
            table.add_row(*cells, label=label, key=f"turn{i}")
        if table.row_count and table.columns:
            row = min(cursor.row, table.row_count - 1)
            column = min(cursor.column, len(table.columns) - 1)
            table.move_cursor(row=row, column=column, animate=False)

    # -- the cursor ------------------------------------------------------------------------

    def cursor_trial(self) -> TrialColumn | None:
        cmp = self.comparison
        if cmp is None or not cmp.columns:
            return None
        column = self.table.cursor_coordinate.column
        return cmp.columns[column] if 0 <= column < len(cmp.columns) else None

    def cursor_action(self) -> Action | None:
        c = self.cursor_trial()
        row = self.table.cursor_coordinate.row - len(SUMMARY_ROWS)
        if c is None or row < 0:
            return None
        return c.actions[row] if row < len(c.actions) else None

    def _detail(self) -> None:
        p = palette_of(self.app)
        c = self.cursor_trial()
        out = Text()
        if c is not None:
            out.append(one_line(c.trial, 80), style=f"bold {p.primary}")
            action = self.cursor_action()
            if action is not None:
                out.append(
                    f"  turn {self.table.cursor_coordinate.row - len(SUMMARY_ROWS) + 1} · {action.kind}", style=p.muted
                )
                if action.decoded:
                    out.append(" (decoded from tokens)", style=p.muted)
            out.append("  (enter: its transcript)", style=p.muted)
            if action is not None:
                out.append("\n")
                out.append_text(text(action.text or "(no action)", limit=DETAIL_LIMIT))
        self.query_one("#gdetail", Static).update(out)

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        event.stop()
        self._detail()

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        c = self.cursor_trial()
        if c is not None:
            self.app.open_transcript(c.trial)

    def action_back(self) -> None:
        self.app.pop_screen()

    def select_column(self, trial: str) -> None:
        """Put the cursor on ``trial``'s column (the trial the group was opened from)."""
        cmp = self.comparison
        if cmp is None:
            return
        for i, c in enumerate(cmp.columns):
            if c.trial == trial:
                self.table.cursor_coordinate = Coordinate(self.table.cursor_coordinate.row, i)
                return
