"""Capture counters: requests, samples captured, prompt/output tokens, rejected requests and
lost captures, per group of the current batch and in total. Hovering a line says what it counts."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from tbconsole.advisories import Thresholds
from tbconsole.common.formatting import format_count
from tbconsole.state import Counters, RunState
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.wording import CAPTURE_HELP
from tbconsole.ui.widgets.base import Palette, Panel, columns

NUMS = ("req", "capt", "prompt", "out", "rej", "lost")
COLUMNS_HELP = "\n".join(f"{name}: {CAPTURE_HELP[name]}" for name in NUMS)


class CapturesPanel(Panel):
    TITLE = "captures"
    HELP = COLUMNS_HELP

    def render_state(self, state: RunState, now: float, p: Palette) -> Group:
        width = self.content_size.width or 60
        num_w = [5, 5, 6, 6, 5, 5]  # format_count's widest (COMPACT_WIDTH): no count is ever cut
        label_w = max(5, width - sum(num_w) - len(num_w))
        widths = [label_w, *num_w]
        right = set(range(1, 7))
        lines = [columns([Text("group"), *NUMS], widths, right, style=f"bold {p.muted}")]
        self.line_help.append(COLUMNS_HELP)

        def row(label: Text, c: Counters, help_text: str, style: str = "") -> None:
            lines.append(
                columns(
                    [
                        label,
                        format_count(c.requests),
                        format_count(c.captured),
                        format_count(c.prompt_tokens),
                        format_count(c.output_tokens),
                        Text(format_count(c.rejected), style=p.warning if c.rejected else ""),
                        Text(format_count(c.lost), style=f"bold {p.error}" if c.lost else ""),
                    ],
                    widths,
                    right,
                    style=style,
                )
            )
            self.line_help.append(f"{help_text}\n{COLUMNS_HELP}")

        groups = state.batch_groups()
        avail = (self.content_size.height or 8) - 1  # rows under the header
        shown = groups if len(groups) + 2 <= avail else groups[: max(0, avail - 3)]
        for g in shown:
            label = Text(f"{g.group}", style=p.muted)
            label.append(" " + one_line(g.task, 40), style=p.fg)
            row(
                label,
                g.counters,
                f"Group {g.group} of step {g.step} ({one_line(g.task, 60)}): its trials' model calls.",
            )
        if len(shown) < len(groups):
            lines.append(Text(f"+{len(groups) - len(shown)} more groups", style=p.muted))
            self.line_help.append(None)
        row(Text("batch"), state.batch_counters(), "The current batch's groups together.", style="bold")
        row(Text("run"), state.totals, "The whole run so far.", style="bold")
        trained = trained_line(state, p)
        if trained is not None:
            lines.append(trained)
            self.line_help.append(CAPTURE_HELP["trained"])
        return Group(*lines)


def trained_line(state: RunState, p: Palette) -> Text | None:
    """``trained s3  1.00 datum/trial  1.02× tokens`` for the newest step with scored trials."""
    newest = max((step for step, summary in state.steps.items() if summary.trial_data), default=None)
    if newest is None:
        return None
    summary = state.steps[newest]
    per_trial, amplification = summary.datums_per_trial, summary.amplification
    line = Text(f"trained s{summary.step}", style=p.muted)
    line.append(f"  {format_count(per_trial)} datum/trial")
    if amplification is not None:
        warn = amplification > AMPLIFICATION_NOTE
        line.append(f"  {format_count(amplification)}× tokens", style=p.warning if warn else "")
    return line


AMPLIFICATION_NOTE = Thresholds().amplification_max  # above it the figure reads as a warning, as the advisory
