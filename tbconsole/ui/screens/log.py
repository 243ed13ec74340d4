"""`l`: the run's recent log lines (control changes, errors, checkpoints, runner messages)."""

from __future__ import annotations

from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Log

from tbconsole.common.formatting import format_clock
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.screens.host import ConsoleHost


class LogScreen(ModalScreen[None]):
    """Built once and kept by the app: each time it opens it shows the log as it stands."""

    DEFAULT_CSS = """
    LogScreen { align: center middle; }
    LogScreen Log { width: 96%; height: 90%; border: thick $primary; background: $surface; }
    """
    BINDINGS = [Binding("escape,l,q", "close", "Close")]

    app = getters.app(ConsoleHost)

    def __init__(self) -> None:
        super().__init__()
        self._shown: list | None = None  # the log lines written, as the state held them

    def compose(self) -> ComposeResult:
        yield Log(max_lines=2000, auto_scroll=True)

    def on_mount(self) -> None:
        self.query_one(Log).border_title = "log"

    def on_screen_resume(self) -> None:
        log = self.query_one(Log)
        lines = list(self.app.state.logs)
        if lines != self._shown:
            self._shown = lines
            log.clear()
            for ts, level, message in lines:
                stamp = format_clock(ts) if ts else "--:--:--"
                log.write_line(f"{stamp} {level:<5} {one_line(message, 500)}")
        log.scroll_end(animate=False)

    def action_close(self) -> None:
        self.dismiss(None)
