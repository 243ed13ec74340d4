"""PPO metrics: KL (v1, v2), entropy, loss, grad norm, lr, tokens, step time — the latest value
and a trend over steps for each (the cookbook's metrics.jsonl keys). Hovering a row says what
it measures."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from tbconsole.state import RunState
from tbconsole.ui.present.plotmath import sparkline
from tbconsole.ui.present.wording import METRIC_ROWS
from tbconsole.ui.widgets.base import Palette, Panel, columns


class MetricsPanel(Panel):
    TITLE = "PPO metrics"
    HELP = "The training metrics of each step (metrics.jsonl): latest value and trend. Hover a row for its meaning."

    def render_state(self, state: RunState, now: float, p: Palette) -> Group:
        width = max(20, self.content_size.width or 50)
        spark_w = max(4, width - 22)
        lines = []
        for row in METRIC_ROWS:
            key, value, trend = state.metric(row.keys)
            if key is None and row.optional:
                continue
            lines.append(
                columns(
                    [
                        Text(row.label, style=p.muted),
                        row.shown(value),
                        Text(sparkline(trend, spark_w), style=p.line),
                    ],
                    [10, 9, spark_w],
                    {1},
                )
            )
            self.line_help.append(f"{row.label}: {row.help}")
        if state.last_completed is not None:
            lines.append(Text(f"latest: step {state.last_completed}", style=p.muted))
            self.line_help.append("The step whose metrics are shown (steps count from 0).")
        return Group(*lines)
