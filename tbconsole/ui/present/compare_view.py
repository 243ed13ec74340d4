"""Runs side by side as text: the overlaid trends, the solve rates, the settings that differ, and
the plain table ``tbconsole compare --text`` prints. A comparison (``tbconsole.runs.compare``) in,
lines out; the compare screen's widgets colour them (a segment says which run it belongs to).
"""

from __future__ import annotations

from collections.abc import Sequence

from tbconsole.common.formatting import format_count, format_duration, format_value
from tbconsole.runs.compare import Comparison, Series, TaskTable, shown_setting, solve_rate
from tbconsole.state import TaskStats
from tbconsole.ui.present.plotmath import OVERLAP, overlay
from tbconsole.ui.present.sanitize import one_line

MARKS = ("●", "▲", "■", "◆")  # run 1..4: told apart without colour too
OVERLAP_MARK = "✱"  # points of several runs in one cell
GUTTER = 9  # the y axis' labels
NO_VALUE = "–"

# A segment of a line: its text and whose it is (a run's index, OVERLAP, or None: axes, labels).
Segment = tuple[str, int | None]
Line = list[Segment]


def value_text(series: Series, value: float | None) -> str:
    if value is None:
        return NO_VALUE
    return format_duration(value) if series.spec.unit == "s" else format_value(value)


def y_range(series: Series) -> tuple[float | None, float | None]:
    """Rewards on 0..1 while they stay there (a curve's height reads as a rate), the others on
    their own min..max."""
    if series.spec.name in ("reward", "heldout"):
        values = [v for run in series.points for _, v in run]
        if values and min(values) >= 0 and max(values) <= 1:
            return 0.0, 1.0
    return None, None


def plot_lines(series: Series, width: int, height: int) -> list[Line]:
    """The trend of every run on one step axis: ``height`` rows of marks, the y axis' labels on
    the left, the step axis below; ``width`` characters in all."""
    grid_w = max(4, width - GUTTER - 2)
    lo, hi = y_range(series)
    grid = overlay(series.points, grid_w, height, lo, hi)
    if grid is None:
        return [[("no values yet".ljust(width), None)]]
    lines: list[Line] = []
    for row, cells in enumerate(grid.cells):
        label = ""
        if row == 0:
            label = value_text(series, grid.y_hi)
        elif row == height - 1:
            label = value_text(series, grid.y_lo)
        line: Line = [(f"{label:>{GUTTER}} {'┤' if label else '│'}", None)]
        for cell in cells:
            if cell is None:
                line.append((" ", None))
            else:
                line.append((OVERLAP_MARK if cell == OVERLAP else MARKS[cell], cell))
        lines.append(line)
    lines.append([(" " * GUTTER + " └" + "─" * grid_w, None)])
    first, last = f"{grid.x_lo:g}", f"{grid.x_hi:g}"
    if grid.x_hi == grid.x_lo:
        axis = f"step {first}"
    else:
        room = grid_w - len(first) - len(last)
        axis = first + "step".center(room) + last if room >= 6 else first + last.rjust(grid_w - len(first))
    lines.append([(" " * (GUTTER + 2) + axis, None)])
    return lines


def marks_legend(labels: Sequence[str]) -> Line:
    """Which mark is which run, and the mark of a point where several runs meet."""
    line: Line = []
    for run, label in enumerate(labels):
        line += [(f"{MARKS[run]} {one_line(label, 40)}", run), ("  ", None)]
    return [*line, (f"{OVERLAP_MARK} several runs at one point", OVERLAP)]


def latest_line(series: Series) -> Line:
    """Each run's newest value, marked as on the plot: ``● 0.875 @15``."""
    line: Line = []
    for run in range(len(series.points)):
        last = series.last(run)
        text = f"{value_text(series, last[1])} @{last[0]}" if last else NO_VALUE
        line.append((f"{MARKS[run]} {text}", run))
        line.append(("  ", None))
    return line[:-1]


def solved_cell(stats: TaskStats | None) -> str:
    """solved/scored and the rate: ``5/8 62%``; ``–`` for a task the run never scored."""
    rate = solve_rate(stats)
    if stats is None or rate is None:
        return NO_VALUE
    return f"{format_count(stats.solved)}/{format_count(stats.scored)} {rate:.0%}"


def task_rows(table: TaskTable) -> tuple[list[str], list[list[str]]]:
    """The solve-rate table's header and rows (the first row: all tasks)."""
    header = ["family" if table.by_family else "task"] + [NO_VALUE] * len(table.totals)
    rows = [["all", *(solved_cell(t) for t in table.totals)]]
    rows += [[one_line(row.name, 60), *(solved_cell(c) for c in row.cells)] for row in table.rows]
    return header, rows


def config_rows(comparison: Comparison) -> list[list[str]]:
    return [[row.key, *(one_line(shown_setting(v), 200) for v in row.values)] for row in comparison.config]


def series_rows(comparison: Comparison) -> list[list[str]]:
    """Per trend: each run's newest value (and its step) and its mean over the steps."""
    rows = []
    for series in comparison.series:
        lasts, means = [], []
        for run, points in enumerate(series.points):
            last = series.last(run)
            lasts.append(f"{value_text(series, last[1])} @{last[0]}" if last else NO_VALUE)
            mean = sum(v for _, v in points) / len(points) if points else None
            means.append(value_text(series, mean))
        rows.append([f"{series.spec.label} (last)", *lasts])
        rows.append([f"{series.spec.label} (mean)", *means])
    return rows


def run_rows(comparison: Comparison) -> list[list[str]]:
    runs = comparison.runs
    return [
        ["mark", *MARKS[: len(runs)]],
        ["state", *(r.condition for r in runs)],
        ["trained", *(f"{r.trained}/{r.total_steps or '?'}" for r in runs)],
        ["model", *(one_line(r.model or NO_VALUE, 60) for r in runs)],
    ]


def aligned(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as lines of columns, each as wide as its widest cell (trailing spaces dropped)."""
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def summary_text(comparison: Comparison) -> str:
    """The whole comparison as plain columns, for a script or a file (``--text``)."""
    labels = [one_line(r.label, 60) for r in comparison.runs]
    out = ["runs"]
    out += [
        f"  {MARKS[i]} {label}  {one_line(r.path, 200)}"
        for i, (label, r) in enumerate(zip(labels, comparison.runs, strict=True))
    ]
    out += ["", *aligned([["", *labels], *run_rows(comparison), *series_rows(comparison)])]
    header, rows = task_rows(comparison.tasks)
    out += ["", f"solved per {header[0]} (solved/scored)", *aligned([[header[0], *labels], *rows])]
    config = config_rows(comparison)
    out += ["", f"settings that differ ({len(config)})"]
    out += aligned([["setting", *labels], *config]) if config else ["  none: the runs' settings are the same"]
    return "\n".join(out)
