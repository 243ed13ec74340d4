"""The error modal: what failed (trial, exception, message, trial folder) and the choice the
run is waiting for: abort the run, or retry the group. Nothing proceeds until someone decides."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from tbconsole.record.events import ErrorRaised
from tbconsole.ui.present.sanitize import text


class DecisionScreen(ModalScreen[str | None]):
    """Dismisses with "abort", "retry_group", or None (decide later: the run keeps waiting)."""

    DEFAULT_CSS = """
    DecisionScreen { align: center middle; }
    DecisionScreen > Vertical {
        width: 90; max-width: 96%; height: auto; max-height: 90%; border: thick $error; background: $surface;
        padding: 0 1;
    }
    DecisionScreen #title { color: $error; text-style: bold; margin: 1 0; }
    DecisionScreen VerticalScroll { height: auto; max-height: 16; }
    DecisionScreen #hint { color: $text-muted; margin-top: 1; }
    DecisionScreen Horizontal { height: auto; align: right middle; margin: 1 0; }
    DecisionScreen Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("a", "choose('abort')", "Abort run"),
        Binding("r", "choose('retry_group')", "Retry group"),
        Binding("escape", "later", "Decide later"),
    ]

    AUTO_FOCUS = "#retry_group"

    def __init__(self, error: ErrorRaised, can_decide: bool = True):
        super().__init__()
        self.error = error
        self.can_decide = can_decide

    def compose(self) -> ComposeResult:
        e = self.error
        with Vertical():
            yield Static("The run stopped on an error and is waiting for a decision", id="title")
            grid = Table.grid(padding=(0, 1))
            grid.add_column(style="bold", no_wrap=True)
            grid.add_column()
            where = []
            if e.step is not None:
                where.append(f"step {e.step}")
            if e.group is not None:
                where.append(f"group {e.group}")
            grid.add_row("where", text(", ".join(where) or "–"))
            grid.add_row("trial", text(e.trial or "–"))
            grid.add_row("exception", text(e.exception_type))
            grid.add_row("message", text(e.message, limit=4000))
            grid.add_row("trial folder", text(e.trial_dir or "–"))
            with VerticalScroll():
                yield Static(grid, id="details")
            yield Static(
                "Abort ends the run (what was captured is kept). Retry group runs the group "
                "again from the start. Esc: decide later (the run keeps waiting; press d).",
                id="hint",
            )
            with Horizontal():
                yield Button("Abort run (a)", id="abort", variant="error", disabled=not self.can_decide)
                yield Button("Retry group (r)", id="retry_group", variant="primary", disabled=not self.can_decide)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id)

    def action_choose(self, decision: str) -> None:
        if self.can_decide:
            self.dismiss(decision)

    def action_later(self) -> None:
        self.dismiss(None)
