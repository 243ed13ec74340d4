"""A small prompt for a task's weight in the batches (the ledger's ``w``): a number from 0 to 10
(0 drops it; 1 is the default; 2 gives it twice the groups)."""

from __future__ import annotations

import math

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from tbconsole.state.ledger import MAX_WEIGHT
from tbconsole.ui.present.sanitize import one_line


def parse_weight(value: str) -> float | None:
    """The weight typed, or None when it is not a number from 0 to ``MAX_WEIGHT``."""
    try:
        weight = float(value.strip())
    except ValueError:
        return None
    return weight if math.isfinite(weight) and 0 <= weight <= MAX_WEIGHT else None


class WeightScreen(ModalScreen[float | None]):
    DEFAULT_CSS = """
    WeightScreen { align: center middle; }
    WeightScreen > Vertical {
        width: 60; max-width: 95%; height: auto; border: thick $primary; background: $surface; padding: 1 2;
    }
    WeightScreen #wproblem { color: $error; height: auto; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = "#wvalue"

    def __init__(self, task: str, weight: float):
        super().__init__()
        self.task_name = task
        self.weight = weight

    def compose(self) -> ComposeResult:
        with Vertical():
            question = Text("Weight of ")
            question.append(one_line(self.task_name, 80), style="bold")
            question.append(
                f" in the batches from the next one on (now {self.weight:g}): 0 to {MAX_WEIGHT:g}; "
                "0 drops it, 1 is the default, 2 gives it twice the groups."
            )
            yield Static(question, id="wquestion")
            yield Input(value=f"{self.weight:g}", placeholder=f"0 – {MAX_WEIGHT:g}", id="wvalue")
            yield Static("", id="wproblem")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        weight = parse_weight(event.value)
        if weight is None:
            self.query_one("#wproblem", Static).update(Text(f"a number from 0 to {MAX_WEIGHT:g}, please"))
            return
        self.dismiss(weight)

    def action_cancel(self) -> None:
        self.dismiss(None)
