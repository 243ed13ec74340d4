"""`tbconsole compare`: 2–4 runs side by side. Which run is which (its mark and colour on every
plot), then, scrolling: the training reward, held-out reward, KL, entropy and step time of every
run overlaid on one step axis, the solve rates per task (or family), and the settings that differ.

The app hands it a new comparison whenever a live run has moved (``show``); it reads nothing itself.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tbconsole.runs.compare import Comparison
from tbconsole.ui.widgets.base import palette_of
from tbconsole.ui.widgets.compare import RunsLegend, SettingsDiff, ShowsComparison, SolveRates, TrendPlots
from tbconsole.ui.widgets.footer import KeyFooter


class CompareScreen(Screen[None]):
    DEFAULT_CSS = """
    CompareScreen #compare-title { height: 1; padding: 0 1; background: $panel; }
    CompareScreen RunsLegend { height: auto; padding: 0 1; border-bottom: solid $panel-lighten-2; }
    CompareScreen #compare-body { height: 1fr; }
    CompareScreen TrendPlots, CompareScreen SolveRates, CompareScreen SettingsDiff {
        height: auto; padding: 0 1; margin-bottom: 1;
    }
    """
    BINDINGS = [
        Binding("q", "app.quit", "Quit"),
        Binding("t", "app.next_theme", "Theme", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Static(Text("reading the runs…"), id="compare-title")
        yield RunsLegend()
        with VerticalScroll(id="compare-body"):
            yield TrendPlots()
            yield SolveRates()
            yield SettingsDiff()
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#compare-body").focus()  # the arrow keys and page keys scroll

    def show(self, comparison: Comparison, status: str) -> None:
        """Draw ``comparison``; ``status`` says whether it is still being followed."""
        p = palette_of(self.app)
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append("tbconsole compare", style=f"bold {p.primary}")
        title.append(f" · {len(comparison.runs)} runs · ", style=p.muted)
        title.append(status, style=p.success if comparison.live else p.muted)
        self.query_one("#compare-title", Static).update(title)
        for part in self.query(ShowsComparison):
            part.show(comparison)
