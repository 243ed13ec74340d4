"""A small prompt for max_steps_off_policy (the pipeline's ``m``, the palette's "Lower
max_steps_off_policy"): a whole number from 0 up to the limit now; it applies from the next update."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


def parse_limit(value: str, current: int) -> int | None:
    """The limit typed, or None when it is not a whole number from 0 to ``current``."""
    try:
        limit = int(value.strip())
    except ValueError:
        return None
    return limit if 0 <= limit <= current else None


class OffPolicyLimitScreen(ModalScreen[int | None]):
    DEFAULT_CSS = """
    OffPolicyLimitScreen { align: center middle; }
    OffPolicyLimitScreen > Vertical {
        width: 64; max-width: 95%; height: auto; border: thick $primary; background: $surface; padding: 1 2;
    }
    OffPolicyLimitScreen #oproblem { color: $error; height: auto; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    AUTO_FOCUS = "#ovalue"

    def __init__(self, current: int):
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            question = Text("Lower ")
            question.append("max_steps_off_policy", style="bold")
            question.append(
                f" (now {self.current}) to: 0 to {self.current}. From the next update on, a group whose "
                "weights lag the update by more is dropped (its sandbox time is lost); 0 trains only groups "
                "sampled with the latest weights. It cannot be raised again."
            )
            yield Static(question, id="oquestion")
            yield Input(value=str(max(0, self.current - 1)), placeholder=f"0 – {self.current}", id="ovalue")
            yield Static("", id="oproblem")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        limit = parse_limit(event.value, self.current)
        if limit is None:
            self.query_one("#oproblem", Static).update(Text(f"a whole number from 0 to {self.current}, please"))
            return
        self.dismiss(limit)

    def action_cancel(self) -> None:
        self.dismiss(None)
