"""The difficulty ledger's lines in the theme's colours: the heading with the step axis, a task's
(or family's) row, the one-line summary and the legend. What they say and where is
``tbconsole.ui.present.ledger_view``; this only colours it. Task names are ``Text`` of plain
characters, never markup."""

from __future__ import annotations

from rich.text import Text
from textual.color import Color

from tbconsole.common.formatting import NONE, format_duration
from tbconsole.state.ledger import TaskRow
from tbconsole.ui.present import ledger_view as lv
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.widgets.base import Palette


class Shades:
    """The colours of solve rates 0..1 (failed → partly → solved), blended once per palette."""

    def __init__(self, p: Palette, levels: int = len(lv.BARS)):
        low, mid, high = Color.parse(p.error), Color.parse(p.warning), Color.parse(p.success)
        self.p = p
        self.colours = []
        for i in range(levels):
            x = i / (levels - 1)
            c = low.blend(mid, x * 2) if x <= 0.5 else mid.blend(high, (x - 0.5) * 2)
            self.colours.append(c.hex)

    def rate(self, rate: float) -> str:
        return self.colours[max(0, min(len(self.colours) - 1, round(rate * (len(self.colours) - 1))))]

    def tone(self, tone: str | float) -> str:
        """A present-layer tone (a palette field's name, or a solve rate) as a colour."""
        if isinstance(tone, float):
            return self.rate(tone)
        return str(getattr(self.p, tone, self.p.fg))

    def style(self, tone: str | float) -> str:
        """A heatmap cell's style: a mark of no signal in bold, a bar or a dot as it is."""
        colour = self.tone(tone)
        return colour if isinstance(tone, float) or tone == "muted" else f"bold {colour}"


def _fit(cell: Text, width: int, right: bool = False) -> Text:
    if cell.cell_len > width:
        cell = cell.copy()
        cell.truncate(width, overflow="ellipsis")
    pad = " " * (width - cell.cell_len)
    out = Text(no_wrap=True, end="")
    if right:
        out.append(pad)
    out.append_text(cell)
    if not right:
        out.append(pad)
    return out


def header_line(lay: lv.Layout, family: bool, p: Palette) -> Text:
    """Column headings, the step axis over the heatmap."""
    out = Text(no_wrap=True, end="", style="bold")
    out.append_text(_fit(Text("family" if family else "task"), lay.name_w))
    out.append(" ")
    out.append(lv.axis_labels(lay), style=p.muted)
    for name, width, right in lay.columns.fields:
        out.append(" ")
        out.append_text(_fit(Text(name), width, right))
    return out


def row_line(
    row: TaskRow,
    lay: lv.Layout,
    shades: Shades,
    current: int | None,
    out: list[tuple[int, int | None]] | None = None,
    members: list[TaskRow] | None = None,
) -> Text:
    """One task's line (``members`` given: one family's): name, a cell per visible step, the
    run-level columns."""
    p = shades.p
    line = Text(no_wrap=True, end="")
    name = one_line(row.name, 80) + (f" ({row.tasks})" if members is not None else "")
    gone = members is None and lv.out_now(row.admission, current)
    line.append_text(_fit(Text(name, style=p.muted if gone else ""), lay.name_w))
    line.append(" ")
    pad = " " * (lay.cell_w - 1)
    heat = Text(no_wrap=True, end="")
    run: list[str] = []  # cells of one style in a row are one span: a long run's row is mostly "·"
    run_style = ""
    for step in lay.steps:
        glyph, tone = lv.cell_mark(row.cells.get(step), bool(out) and lv.is_out(out or [], step))
        style = shades.style(tone)
        if style != run_style and run:
            heat.append("".join(run), style=run_style)
            run = []
        run_style = style
        run.append(glyph + pad)
    if run:
        heat.append("".join(run), style=run_style)
    line.append_text(_fit(heat, lay.heat_w))
    wide = lay.wide
    no_signal_share = row.no_signal_groups / row.groups if row.groups else None
    waste_tone = "error" if (row.waste_share or 0) >= 0.5 else "warning" if row.wasted_s > 0 else "muted"
    place = (
        lv.family_words(members, current, wide) if members is not None else lv.state_words(row.admission, current, wide)
    )
    streak = lv.streak_words(row, wide)
    cells = [
        Text(lv.percent(row.solve_rate)),
        Text(str(row.groups)),
        Text(lv.percent(no_signal_share)),
        Text(format_duration(row.sandbox_s) if row.sandbox_s else NONE),
        Text(format_duration(row.wasted_s) if row.wasted_s else NONE, style=shades.tone(waste_tone)),
        Text(streak[0], style=shades.tone(streak[1])),
        Text(place[0], style=shades.tone(place[1])),
    ]
    for cell, (_, width, right) in zip(cells, lay.columns.fields, strict=True):
        line.append(" ")
        line.append_text(_fit(cell, width, right))
    return line


def summary_line(s: lv.Summary, p: Palette) -> Text:
    """The share of the run's sandbox time that trained nothing; the tasks out now; pending."""
    out = Text(no_wrap=True, overflow="ellipsis")
    share = s.waste_share
    if share is not None:
        out.append("trained nothing: ", style=p.muted)
        out.append(f"{share:.0%}", style=f"bold {p.error if share >= 0.5 else p.warning if share else p.success}")
        out.append(f" of the sandbox time ({format_duration(s.wasted_s)} of {format_duration(s.sandbox_s)})")
        if s.dropped_groups:
            out.append(" · ", style=p.muted)
            out.append(
                f"{s.dropped_groups} group{'s' if s.dropped_groups != 1 else ''} dropped untrained "
                f"({format_duration(s.dropped_s)})",
                style=p.warning,
            )
    else:
        out.append("no group has ended yet", style=p.muted)
    out.append(" · out now: ", style=p.muted)
    if s.dropped or s.skipped:
        parts = [f"{s.dropped} dropped"] if s.dropped else []
        parts += [f"{s.skipped} skipped by policy"] if s.skipped else []
        out.append(", ".join(parts), style=f"bold {p.warning}")
    else:
        out.append("none")
    if s.pending:
        out.append(f" · {s.pending} change{'s' if s.pending > 1 else ''} pending (next batch)", style=p.accent)
    return out


def legend(p: Palette) -> Text:
    shades = Shades(p)
    out = Text(no_wrap=True, overflow="ellipsis")
    for glyph, tone, words in (
        (lv.ALL_SOLVED, p.success, "all solved"),
        (lv.ALL_FAILED, p.error, "all failed"),
        (lv.ONE_REWARD, p.warning, "one reward"),
    ):
        out.append(glyph, style=f"bold {tone}")
        out.append(f" {words}  ", style=p.muted)
    for rate in (0.0, 0.5, 1.0):
        out.append(lv.cell_mark_bar(rate), style=shades.rate(rate))
    out.append(" solve rate  ", style=p.muted)
    out.append(lv.NO_GROUP, style=p.muted)
    out.append(" no group  ", style=p.muted)
    out.append(lv.OUT, style=f"bold {p.error}")
    out.append(" out", style=p.muted)
    return out
