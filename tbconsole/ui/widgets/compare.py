"""The compare screen's parts: which run is which, the overlaid trends, the solve rates and the
settings that differ. Each ``show``s a comparison (``tbconsole.runs.compare``) in the theme's colours;
what the text says comes from ``tbconsole.ui.present.compare_view``."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from tbconsole.runs.compare import Comparison
from tbconsole.ui.present.compare_view import (
    MARKS,
    Line,
    config_rows,
    latest_line,
    marks_legend,
    plot_lines,
    task_rows,
)
from tbconsole.ui.present.plotmath import OVERLAP
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.widgets.base import Palette, palette_of

PLOT_ROWS = 6  # rows of marks per trend
PLOT_MIN_W = 56  # a trend's width from which two sit side by side
GAP = 3


def run_colours(p: Palette) -> tuple[str, ...]:
    """Run 1..4's colour, in the order of ``MARKS``."""
    return (p.primary, p.warning, p.accent, p.success)


def styled(line: Line, p: Palette, width: int | None = None) -> Text:
    """A line of segments in its runs' colours (axes and labels muted), padded to ``width``."""
    colours = run_colours(p)
    out = Text(no_wrap=True, overflow="ellipsis", end="")
    for text, owner in line:
        style = p.muted if owner is None else p.fg if owner == OVERLAP else colours[owner]
        out.append(text, style=style)
    if width is not None:
        out.truncate(width, overflow="ellipsis", pad=True)
    return out


class ShowsComparison(Static):
    """A part that draws the latest comparison it was given, again when its width changes."""

    comparison: Comparison | None = None
    _drawn_width = 0

    def show(self, comparison: Comparison) -> None:
        self.comparison = comparison
        self._drawn_width = self.content_size.width
        self.update(self.draw(comparison, palette_of(self.app)))

    def on_resize(self) -> None:
        # Drawing changes the height, never the width: only a new width needs drawing again.
        if self.comparison is not None and self.content_size.width != self._drawn_width:
            self.show(self.comparison)

    def draw(self, comparison: Comparison, p: Palette) -> RenderableType:
        raise NotImplementedError


class RunsLegend(ShowsComparison):
    """One line per run: its mark, name, state, steps trained, model and folder."""

    def draw(self, comparison: Comparison, p: Palette) -> RenderableType:
        colours = run_colours(p)
        lines = []
        for i, run in enumerate(comparison.runs):
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(f"{MARKS[i]} ", style=f"bold {colours[i]}")
            line.append(one_line(run.label, 60), style=f"bold {colours[i]}")
            line.append(f"  {run.condition}", style=p.state(run.condition))
            line.append(f"  {run.trained}/{run.total_steps or '?'} trained", style=p.fg)
            line.append(f"  {one_line(run.model or '–', 60)}", style=p.muted)
            line.append(f"  {one_line(run.path, 200)}", style=p.muted)
            lines.append(line)
        return Group(*lines)


class TrendPlots(ShowsComparison):
    """Every trend (training reward, held-out reward, KL, entropy, step time), the runs overlaid
    on one step axis: two side by side where they fit."""

    def draw(self, comparison: Comparison, p: Palette) -> RenderableType:
        width = max(30, self.content_size.width or 80)
        per_row = 2 if width >= 2 * PLOT_MIN_W + GAP else 1
        plot_w = (width - GAP * (per_row - 1)) // per_row
        blocks = []
        for series in comparison.series:
            title = Text(no_wrap=True, overflow="ellipsis", end="")
            title.append(series.spec.label, style=f"bold {p.fg}")
            title.append("  ")
            title.append_text(styled(latest_line(series), p))
            title.truncate(plot_w, overflow="ellipsis", pad=True)
            blocks.append([title, *(styled(line, p, plot_w) for line in plot_lines(series, plot_w, PLOT_ROWS))])
        legend = styled(marks_legend([r.label for r in comparison.runs]), p)
        out: list[Text] = [Text.assemble(legend, no_wrap=True, overflow="ellipsis"), Text("")]
        for start in range(0, len(blocks), per_row):
            row = blocks[start : start + per_row]
            for i in range(max(len(b) for b in row)):
                line = Text(no_wrap=True, overflow="ellipsis")
                for j, block in enumerate(row):
                    if j:
                        line.append(" " * GAP)
                    line.append_text(block[i] if i < len(block) else Text(" " * plot_w))
                out.append(line)
            out.append(Text(""))
        return Group(*out[:-1])


def _table(comparison: Comparison, p: Palette, first: str) -> Table:
    colours = run_colours(p)
    table = Table(box=None, padding=(0, 2, 0, 0), show_edge=False, header_style=f"bold {p.muted}", expand=False)
    table.add_column(Text(first), style=p.fg, no_wrap=True, overflow="ellipsis", max_width=48)
    for i, run in enumerate(comparison.runs):
        header = Text(f"{MARKS[i]} {one_line(run.label, 40)}", style=f"bold {colours[i]}")
        table.add_column(header, overflow="fold")
    return table


class SolveRates(ShowsComparison):
    """Solved/scored and the rate, per task (per family of variants), for every run."""

    def draw(self, comparison: Comparison, p: Palette) -> RenderableType:
        header, rows = task_rows(comparison.tasks)
        table = _table(comparison, p, header[0])
        for n, row in enumerate(rows):
            table.add_row(*(Text(cell) for cell in row), style=f"bold {p.fg}" if n == 0 else None)
        title = Text(f"solved per {header[0]} (solved/scored, training trials)", style=f"bold {p.primary}")
        return Group(title, table)


class SettingsDiff(ShowsComparison):
    """The settings (run.started's config, as dotted keys) on which the runs differ."""

    def draw(self, comparison: Comparison, p: Palette) -> RenderableType:
        rows = config_rows(comparison)
        title = Text(f"settings that differ ({len(rows)})", style=f"bold {p.primary}")
        if not rows:
            return Group(title, Text("none: the runs' settings are the same", style=p.muted))
        table = _table(comparison, p, "setting")
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))
        return Group(title, table)
