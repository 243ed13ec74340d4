"""`?`: the keys, what the grid's cells mean, what every metric and counter measures (the same
texts as the panels' tooltips), and where the data comes from."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tbconsole.ui.present import HELP_TABLES

KEYS = [
    ("p", "pause after the current batch / resume"),
    ("s", "stop cleanly: finish and train this batch, checkpoint, exit 0 (asks first)"),
    ("a", "abort: cancel trials now, keep what was captured (asks first)"),
    ("d", "decide on a pending error: abort or retry the group"),
    (
        "x",
        "cancel the selected trial (in the grid, its transcript or an advisory about it): its sandbox "
        "stops, its group fails, then abort or retry (asks first)",
    ),
    ("enter", "open the selected trial's transcript"),
    ("esc", "back"),
    (
        "/",
        "filter trials: words match task, outcome, phase; also ok, fail (no submission), "
        "error (not scored), cancelled, reward=1",
    ),
    ("c", "(transcript) colour captured tokens by logprob"),
    ("end", "(transcript) follow the bottom again"),
    ("[ ]  { }", "(replay) previous / next step, first / last"),
    ("l", "the run's log"),
    ("v", "advisories: active ones first, then cleared ones; enter jumps to the trial, group or metric"),
    ("t", "next theme (all themes: ctrl+p → theme)"),
    ("ctrl+p", "command palette: every action"),
    (
        "q",
        "attached to a run: leave at once, the run goes on (s stops it); a run in this process "
        "is stopped first, after asking",
    ),
]
CELLS = [
    ("queued / env / setup", "waiting, starting the environment, setting up the agent; then time in phase"),
    ("agent 3t 1.2k 40s", "the agent is running: turns so far, output tokens, time in phase"),
    ("verify", "the verifier is running"),
    ("✓1 / ✗0 / ◐0.5", "done: reward (T: time limit, L: length limit), total time"),
    ("! Error", "not scored: the trial failed (its exception type)"),
    ("cancel", "not scored: cancelled by you (x), or when its group failed or the run ended"),
    (
        "✓all / ✗all / =all",
        "every trial of the group got one reward: all solved, all failed, one partial reward (none of them trains)",
    ),
    ("!", "after a phase: a capture was lost in this trial"),
]


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 96; max-width: 96%; height: auto; max-height: 90%; border: thick $primary; background: $surface;
        padding: 0 1;
    }
    """
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close")]

    def compose(self) -> ComposeResult:
        tables = [("keys", KEYS), ("trial cells", CELLS), *HELP_TABLES]
        with VerticalScroll():
            for title, rows in tables:
                table = Table(title=title, box=None, show_header=False, padding=(0, 2), title_style="bold")
                table.add_column(style="bold", no_wrap=True)
                table.add_column()
                for name, meaning in rows:
                    table.add_row(name, meaning)
                yield Static(table, classes="help-table")
            yield Static(
                "The footer shows only the actions valid now. Hover a panel's line for what it shows. "
                "Data: the run's event stream (events.jsonl); transcripts also read the trial folder "
                "and capture files."
            )

    def action_close(self) -> None:
        self.dismiss(None)
