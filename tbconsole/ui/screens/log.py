"""`l`: the run's recent log lines (control changes, errors, checkpoints, runner messages)."""

from __future__ import annotations

import time

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Log

from tbconsole.state import RunState
from tbconsole.ui.sanitize import one_line


class LogScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    LogScreen { align: center middle; }
    LogScreen Log { width: 96%; height: 90%; border: thick $primary; background: $surface; }
    """
    BINDINGS = [Binding("escape,l,q", "close", "Close")]

    def __init__(self, state: RunState):
        super().__init__()
        self.state = state

    def compose(self) -> ComposeResult:
        yield Log(max_lines=2000, auto_scroll=True)

    def on_mount(self) -> None:
        log = self.query_one(Log)
        log.border_title = "log"
        for ts, level, message in list(self.state.logs):
            stamp = time.strftime("%H:%M:%S", time.gmtime(ts)) if ts else "--:--:--"
            log.write_line(f"{stamp} {level:<5} {one_line(message, 500)}")

    def action_close(self) -> None:
        self.dismiss(None)
