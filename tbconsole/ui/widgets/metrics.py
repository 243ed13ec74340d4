"""PPO metrics: KL (v1, v2), entropy, loss, grad norm, lr, tokens, step time — the latest value
and a trend over steps for each (the cookbook's metrics.jsonl keys)."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from tbconsole.state import METRIC_ROWS, OPTIONAL_METRIC_ROWS, RunState, format_value
from tbconsole.ui.plotmath import sparkline
from tbconsole.ui.widgets.base import Palette, Panel, columns


class MetricsPanel(Panel):
    TITLE = "PPO metrics"

    def render_state(self, state: RunState, now: float, p: Palette):
        width = max(20, self.content_size.width or 50)
        spark_w = max(4, width - 22)
        lines = []
        for label, keys in METRIC_ROWS:
            key, value, trend = state.metric(keys)
            if key is None and label in OPTIONAL_METRIC_ROWS:
                continue
            lines.append(columns([Text(label, style=p.muted), format_value(value),
                                  Text(sparkline(trend, spark_w), style=p.line)], [10, 9, spark_w], {1}))
        if state.last_completed is not None:
            lines.append(Text(f"after step {state.last_completed + 1}", style=p.muted))
        return Group(*lines)
