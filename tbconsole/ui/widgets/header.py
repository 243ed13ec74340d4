"""The run header: model, the step in flight and the steps trained (or the held-out evaluation),
elapsed, ETA, and the run's state in a coloured badge; under it, for an attached run that nobody
runs any more, the notice that says how to resume it; and the advisories' strip (counts by
severity and the newest one), shown only while there is something to say."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import getters
from textual.widgets import Static

from tbconsole.common.formatting import format_duration
from tbconsole.record.enums import PanelName, RunnerState
from tbconsole.record.lease import LeaseView
from tbconsole.state import RunState
from tbconsole.ui.present.fit import hang
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.wording import (
    ADVISORY_CLEARED_SHOWN_S,
    ADVISORY_HELP,
    HEADER_HELP,
    SEVERITY_ORDER,
    advisory_where,
    progress_text,
    runner_over,
    severity_count_label,
    severity_mark,
    shown_status,
    sorted_active,
    status_label,
)
from tbconsole.ui.widgets.base import Palette, palette_of
from tbconsole.ui.widgets.host import WidgetHost


class RunHeader(Static):
    """One line; two (or three) only while what it has to say (how the run ended, a dead runner, a
    decision to take) does not fit beside the run's place and state. Lines are laid out here
    (``nowrap``): Textual would wrap them at any space, out of a one-line header's sight."""

    DEFAULT_CSS = """
    RunHeader {
        height: 1; background: $panel; color: $foreground; padding: 0 1;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    RunHeader.-tall { height: auto; max-height: 3; }
    """

    app = getters.app(WidgetHost)

    def on_mount(self) -> None:
        self.tooltip = "\n".join(f"{name}: {text}" for name, text in HEADER_HELP.items())

    def on_resize(self) -> None:
        self.app.redraw(PanelName.HEADER)

    def show(self, state: RunState, now: float, mode: str = "", runner: LeaseView | None = None) -> None:
        p = palette_of(self.app)
        width = self.content_size.width or 118
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append("tbconsole ", style=f"bold {p.primary}")
        if mode:
            t.append(f"[{mode}] ", style=p.accent)
        status = Text(progress_text(state, now), style="bold")
        status.append("  elapsed ", style=p.muted)
        status.append(format_duration(state.elapsed(now)))
        status.append("  ETA ", style=p.muted)
        status.append(format_duration(None if runner_over(runner) else state.eta(now)))
        status.append("  ")
        shown = shown_status(state, runner)
        status.append(f" {status_label(state, runner).upper()} ", style=f"bold reverse {p.state(shown)}")
        said, style = self.news(state, runner, p)
        # The model and run id take what is left: the state, the step and the news must stay in
        # view (the gateway panel names the model too). News that does not fit beside the state
        # goes under it, whole.
        beside = len(said) + 2 if said else 0
        under = bool(said) and t.cell_len + status.cell_len + beside > width
        room = width - t.cell_len - status.cell_len - 2 - (0 if under else beside)
        if room >= 12:
            model = Text(one_line(state.model_name or "–", 60), style="bold")
            if state.first_run_id:  # one identity across resumes
                resumed = f" (resumed ×{state.starts - 1})" if state.starts > 1 else ""
                model.append(f" · {one_line(state.first_run_id, 30)}{resumed}", style=p.muted)
            model.truncate(room, overflow="ellipsis")
            t.append_text(model)
            t.append("  ")
        t.append_text(status)
        if said and not under:
            t.append(f"  {said}", style=style)
        elif said:
            lines = hang(said, width, indent=2)
            if len(lines) > 2:  # the whole of it is in the log (l)
                lines = [lines[0], lines[1][: max(0, width - 1)].rstrip() + "…"]
            for line in lines:
                t.append("\n" + line, style=style)
        self.set_class(under, "-tall")
        self.update(t, layout=False)  # its height changes with the class, not with the text

    @staticmethod
    def news(state: RunState, runner: LeaseView | None, p: Palette) -> tuple[str, str]:
        """What the header says after the state badge (and its style): a runner gone, a decision
        to take, or how the run ended; "" for nothing."""
        if runner is not None and runner.state is RunnerState.DEAD and not state.finished:
            return one_line(runner.describe(), 200), f"bold {p.error}"
        if state.pending_decision is not None and not runner_over(runner):
            return "decision needed: press d", f"bold {p.error}"
        if state.end_message and state.finished and state.pending_decision is None:
            return one_line(state.end_message, 200), p.muted
        return "", ""


class RunnerNotice(Static):
    """One line, shown only while there is something to say (``show(None)`` hides it)."""

    DEFAULT_CSS = """
    RunnerNotice { height: 1; background: $warning 20%; color: $foreground; padding: 0 1; display: none; }
    RunnerNotice.-shown { display: block; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._notice: str | None = None

    def show(self, notice: str | None) -> None:
        if notice == self._notice:
            return
        self._notice = notice
        self.set_class(notice is not None, "-shown")
        self.update(Text(one_line(notice or "", 400), no_wrap=True, overflow="ellipsis"), layout=False)


def severity_colour(p: Palette, severity: str) -> str:
    return {"error": p.error, "warning": p.warning, "info": p.primary}.get(severity, p.warning)


class AdvisoryStrip(Static):
    """One line under the header: while advisories are active, how many per severity (each in its
    theme colour) and the newest of the most severe; for ``ADVISORY_CLEARED_SHOWN_S`` after the
    last one cleared, a quiet line that says so; else hidden. A click opens the advisories (v)."""

    DEFAULT_CSS = """
    AdvisoryStrip { height: 1; background: $panel; color: $foreground; padding: 0 1; display: none; }
    AdvisoryStrip.-shown { display: block; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._shown: tuple | None = None

    def on_mount(self) -> None:
        self.tooltip = ADVISORY_HELP["strip"]

    def show(self, state: RunState, now: float) -> None:
        p = palette_of(self.app)
        line = self.line(state, now, p)
        key = (line.plain, tuple(str(s.style) for s in line.spans)) if line is not None else None
        if key == self._shown:
            return
        self._shown = key
        self.set_class(line is not None, "-shown")
        self.update(line or "", layout=False)

    @staticmethod
    def line(state: RunState, now: float, p: Palette) -> Text | None:
        """What the strip says now (None: nothing, hidden)."""
        t = Text(no_wrap=True, overflow="ellipsis")
        if state.advisories:
            t.append("advisories ", style=f"bold {p.muted}")
            counts = state.advisory_counts()
            for severity in [*SEVERITY_ORDER, *sorted(set(counts) - set(SEVERITY_ORDER))]:
                if counts.get(severity):
                    label = f"{severity_mark(severity)} {severity_count_label(severity, counts[severity])}"
                    t.append(f" {label} ", style=f"bold {severity_colour(p, severity)}")
            top = sorted_active(state)[0]
            t.append("  ")
            t.append(one_line(top.message, 300))
            t.append(f"  ({advisory_where(top)})", style=p.muted)
            t.append("  v: all", style=p.muted)
            return t
        last = state.advisory_log[-1] if state.advisory_log else None
        if last is None or last.cleared is None or now - last.cleared > ADVISORY_CLEARED_SHOWN_S:
            return None
        t.append("advisories ", style=f"bold {p.muted}")
        t.append(f"✓ none active · cleared {format_duration(max(0.0, now - last.cleared))} ago: ", style=p.success)
        t.append(one_line(last.cleared_by or last.message, 300), style=p.muted)
        t.append("  v: all", style=p.muted)
        return t

    def on_click(self) -> None:
        opener = getattr(self.app, "open_advisories", None)
        if opener is not None:
            opener()
