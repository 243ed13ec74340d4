"""A yes/no question before a destructive action (stop, abort, quit a live run)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static
from textual.widgets.button import ButtonVariant

from tbconsole.ui.present.sanitize import text


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 64; max-width: 95%; height: auto; border: thick $warning; background: $surface; padding: 1 2;
    }
    ConfirmScreen #question { margin-bottom: 1; }
    ConfirmScreen Horizontal { height: auto; align: right middle; }
    ConfirmScreen Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    AUTO_FOCUS = "#no"

    def __init__(self, question: str, yes: str = "Yes", no: str = "Cancel", variant: ButtonVariant = "warning"):
        super().__init__()
        self.question = question
        self.yes = yes
        self.no = no
        self.variant = variant

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(text(self.question), id="question")
            with Horizontal():
                yield Button(self.no, id="no")
                yield Button(self.yes, id="yes", variant=self.variant)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)
