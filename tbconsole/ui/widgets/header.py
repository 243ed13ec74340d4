"""The run header: model, step i/N, elapsed, ETA, and the run's state in a coloured badge."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tbconsole.state import RunState, format_duration
from tbconsole.ui.sanitize import one_line
from tbconsole.ui.widgets.base import palette_of


class RunHeader(Static):
    DEFAULT_CSS = """
    RunHeader { height: 1; background: $panel; color: $foreground; padding: 0 1; }
    """

    def on_resize(self) -> None:
        self.app.redraw("header")

    def show(self, state: RunState, now: float, mode: str = "") -> None:
        p = palette_of(self.app)
        width = self.size.width or 120
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("tbconsole ", style=f"bold {p.primary}")
        if mode:
            t.append(f"[{mode}] ", style=p.accent)
        model = one_line(state.model_name or "–", 60)
        if width < 100:
            model = model.rsplit("/", 1)[-1][:24]
        t.append(model, style="bold")
        if state.run_id and width >= 100:
            t.append(f" · {one_line(state.run_id, 30)}", style=p.muted)
        t.append("  step ", style=p.muted)
        t.append(state.step_display, style="bold")
        t.append("  elapsed ", style=p.muted)
        t.append(format_duration(state.elapsed(now)))
        eta = state.eta(now)
        t.append("  ETA ", style=p.muted)
        t.append(format_duration(eta) if eta is not None else "–")
        t.append("  ")
        badge = f" {state.status_label.upper()} "
        t.append(badge, style=f"bold reverse {p.state(state.status)}")
        if state.pending_decision is not None:
            t.append("  decision needed: press d", style=f"bold {p.error}")
        elif state.end_message and state.finished:
            t.append(f"  {one_line(state.end_message, 80)}", style=p.muted)
        self.update(t)
