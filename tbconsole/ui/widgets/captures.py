"""Capture counters: requests, samples captured, prompt/output tokens, rejected requests and
lost captures, per group of the current batch and in total."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from tbconsole.state import Counters, RunState, format_count
from tbconsole.ui.sanitize import one_line
from tbconsole.ui.widgets.base import Palette, Panel, columns

NUMS = ("req", "capt", "prompt", "out", "rej", "lost")


class CapturesPanel(Panel):
    TITLE = "captures"

    def render_state(self, state: RunState, now: float, p: Palette):
        width = self.content_size.width or 60
        num_w = [5, 5, 7, 7, 4, 4]
        label_w = max(5, width - sum(num_w) - len(num_w))
        widths = [label_w, *num_w]
        right = set(range(1, 7))
        lines = [columns([Text("group"), *NUMS], widths, right, style=f"bold {p.muted}")]

        def row(label: Text, c: Counters, style: str = "") -> Text:
            return columns([
                label, format_count(c.requests), format_count(c.captured), format_count(c.prompt_tokens),
                format_count(c.output_tokens),
                Text(format_count(c.rejected), style=p.warning if c.rejected else ""),
                Text(format_count(c.lost), style=f"bold {p.error}" if c.lost else "")], widths, right, style=style)

        groups = state.batch_groups()
        avail = (self.content_size.height or 8) - 1  # rows under the header
        shown = groups if len(groups) + 2 <= avail else groups[: max(0, avail - 3)]
        for g in shown:
            label = Text(f"{g.group}", style=p.muted)
            label.append(" " + one_line(g.task, 40), style=p.fg)
            lines.append(row(label, g.counters))
        if len(shown) < len(groups):
            lines.append(Text(f"+{len(groups) - len(shown)} more groups", style=p.muted))
        lines.append(row(Text("batch"), state.batch_counters(), style="bold"))
        lines.append(row(Text("run"), state.totals, style="bold"))
        return Group(*lines)
