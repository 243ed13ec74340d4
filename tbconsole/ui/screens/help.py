"""`?`: the keys, what the grid's cells mean, what every metric and counter measures (the same
texts as the panels' tooltips), and where the data comes from."""

from __future__ import annotations

import textwrap
from functools import lru_cache
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

from tbconsole.ui.present.wording import HELP_TABLES

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
    ("g", "the selected trial's group side by side: its trials' rewards, turns and replies"),
    ("f", "find a word in the captured turns (this step; ctrl+t: all kept steps)"),
    ("w", "timeline of the step: each trial's phases and the training on one time axis"),
    (
        "P",
        "pipeline of the run: groups in flight, queued, trained and dropped over time, each update's "
        "training, idle shares, staleness; there m lowers max_steps_off_policy (off-policy runs)",
    ),
    (
        "D",
        "difficulty ledger: per task, solve rate by step and the sandbox time that trained nothing; "
        "there o sorts, f tasks/families, ←/→ older/newer steps, x drops the task (asks first), "
        "r re-admits it, w sets its weight (from the next batch)",
    ),
    ("k", "(transcript) the turn's tokens with their logprobs (the turn nearest the view)"),
    ("h", "(transcript) the command that opens the trial's Harbor folder in `harbor view`, copied to the clipboard"),
    ("esc", "back"),
    (
        "/",
        "filter trials: words match task, outcome, phase; also ok, fail (no submission), "
        "error (not scored), cancelled, reward=1, stale (off-policy), stale=2, fresh",
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
    (
        "+1 / drop / wait",
        "after a group's task: an update trained it on weights 1 update old (off-policy; +0 the "
        "update's own); no update will train it; it waits for one. +1 after a trial's reward: the same",
    ),
]


class HelpTable(Widget):
    """A titled two-column table, the meanings wrapped under themselves. Drawn by hand: Rich's
    ``Table`` measures every cell on each render, which made the first ``?`` of a session cost
    over 100 ms; this costs a few."""

    DEFAULT_CSS = "HelpTable { height: auto; }"

    def __init__(self, title: str, rows: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.title = title
        self.rows = tuple(rows)

    @property
    def content(self) -> Text:
        """The table at a usual width (what the tests read)."""
        return self.text(92)

    def text(self, width: int) -> Text:
        return _table_text(self.title, self.rows, width)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.text(width).plain.splitlines())

    def render(self) -> Text:
        return self.text(self.content_size.width or 92)


@lru_cache(maxsize=64)
def _table_text(title: str, rows: tuple[tuple[str, str], ...], width: int) -> Text:
    key_width = max(cell_len(name) for name, _ in rows)
    wrap_at = max(20, width - key_width - 2)
    out = Text(title, style="bold", justify="left")
    for name, meaning in rows:
        lines = textwrap.wrap(meaning, wrap_at) or [""]
        out.append("\n")
        out.append(name, style="bold")
        out.append(" " * (key_width - cell_len(name) + 2) + lines[0])
        for line in lines[1:]:
            out.append("\n" + " " * (key_width + 2) + line)
    return out


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 96; max-width: 96%; height: auto; max-height: 90%; border: thick $primary; background: $surface;
        padding: 0 1;
    }
    HelpScreen HelpTable { margin-bottom: 1; }
    """
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close")]

    def compose(self) -> ComposeResult:
        tables = [("keys", KEYS), ("trial cells", CELLS), *HELP_TABLES]
        with VerticalScroll():
            for title, rows in tables:
                yield HelpTable(title, rows, classes="help-table")
            yield Static(
                "The footer shows only the actions valid now. Hover a panel's line for what it shows. "
                "Data: the run's event stream (events.jsonl); transcripts also read the trial folder "
                "and capture files."
            )

    def action_close(self) -> None:
        self.dismiss(None)
