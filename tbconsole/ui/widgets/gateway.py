"""Gateway health: status, probes sent and failed with their latency (a sparkline), base URL,
model, sampler in use, last error. Hovering a line says what it shows."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from tbconsole.common.formatting import format_count, format_duration
from tbconsole.state import GatewayState, RunState
from tbconsole.ui.present.plotmath import sparkline
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.wording import GATEWAY_HELP, probes_stopped
from tbconsole.ui.widgets.base import Palette, Panel


class GatewayPanel(Panel):
    TITLE = "gateway"
    HELP = "The Tinker-compatible gateway the run trains and samples through. Hover a line for its meaning."

    def render_state(self, state: RunState, now: float, p: Palette) -> Group:
        g = state.gateway
        width = max(20, self.content_size.width or 40)
        lines: list[Text] = []

        def add_row(label: str, value: Text, help_text: str) -> None:
            line = Text(f"{label:<8}", style=p.muted, no_wrap=True, overflow="ellipsis")
            line.append_text(value)
            lines.append(line)
            self.line_help.append(help_text)

        stopped = probes_stopped(state, getattr(self.app, "runner", None))
        if stopped is not None:
            status = Text(f"not probed ({stopped})", style=p.muted)
        elif g.ok is None:
            status = Text("no probe yet", style=p.muted)
        elif g.ok:
            status = Text("● healthy", style=f"bold {p.success}")
        else:
            status = _trouble(g, now, p)
        if g.checked is not None and stopped is None:
            status.append(f"  {format_duration(now - g.checked)} ago", style=p.muted)
        add_row("status", status, GATEWAY_HELP["status"])
        probes = Text(f"{format_count(g.probes)} sent, ")  # a day's probes: 17.3k
        probes.append(f"{format_count(g.failures)} failed", style=f"bold {p.error}" if g.failures else "")
        probes.append(f", {format_count(round(g.latency_ms))} ms " if g.latency_ms is not None else ", – ")
        probes.append(sparkline(list(g.latencies), max(4, width - 9 - probes.cell_len)), style=p.line)
        add_row("probes", probes, GATEWAY_HELP["probes"])
        add_row("url", Text(one_line(g.base_url or state.base_url or "–", 120)), GATEWAY_HELP["url"])
        add_row("model", Text(one_line(state.model_name or "–", 120)), GATEWAY_HELP["model"])
        sampler = one_line(g.sampler_path or _unnamed_sampler(state), 160)
        add_row("sampler", Text(keep_end(sampler, width - 8)), GATEWAY_HELP["sampler"])
        if g.last_error:
            err = Text(one_line(g.last_error, 200), style=p.error)
            if g.last_error_ts is not None:
                err.append(f" ({format_duration(now - g.last_error_ts)} ago)", style=p.muted)
            add_row("error", err, GATEWAY_HELP["error"])
        return Group(*lines)


def _trouble(g: GatewayState, now: float, p: Palette) -> Text:
    """A gateway that does not answer: starting (503: loading, waited for), or down — for how
    long, and whether the run is riding the outage out (its groups run again once it answers)."""
    since = f" for {format_duration(now - g.down_since)}" if g.down_since is not None else ""
    if g.starting and g.outage_limit_s is None:
        return Text(f"◐ starting{since}", style=f"bold {p.warning}")
    status = Text(f"● {'restarting' if g.starting else 'down'}{since}", style=f"bold {p.error}")
    if g.outage_limit_s:
        status.append(f", retrying (up to {format_duration(g.outage_limit_s)})", style=p.warning)
    return status


def keep_end(text: str, width: int) -> str:
    """``text`` in ``width`` cells, cut at its start: a checkpoint path's end names its step."""
    return text if len(text) <= width else "…" + text[len(text) - max(0, width - 1) :]


def _unnamed_sampler(state: RunState) -> str:
    # The recipe samples each batch from weights saved without a name; what they hold is
    # known from the step: batch N samples the weights after N updates.
    updates = state.step or 0
    return f"weights after {updates} update{'s' if updates != 1 else ''}" if updates else "initial weights"
