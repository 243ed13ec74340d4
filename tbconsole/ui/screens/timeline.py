"""`w`: where one step's time went, as a waterfall on one time axis: a row per trial (queued,
environment, agent setup, the agent with each model call's sampling, verifier), then the training
rows after them, and the share of the step's wall time each kind of work took.

It reads the run's ``events.jsonl`` (and the cookbook's ``timing_spans.jsonl``) one step at a time
(``tbconsole.ui.data.timeline``), off the UI thread; while the run goes on it reads on once a
second. Where the steps begin is kept between opens: opening it again reads only what the file
gained since. ``[`` / ``]`` move between steps.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import getters, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tbconsole.common.formatting import format_duration
from tbconsole.record.enums import Share, SpanKind
from tbconsole.state.timeline import Span, StepTimeline, TrialRow
from tbconsole.ui.data.timeline import StepTimelines, timeline_files
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.wording import PHASE_LABELS, TIMELINE_HELP
from tbconsole.ui.screens.host import ConsoleHost
from tbconsole.ui.widgets.base import Palette, palette_of
from tbconsole.ui.widgets.footer import KeyFooter

# Each kind of bar: its glyph (bars stay apart without colour too) and the palette colour it takes.
GLYPHS: dict[SpanKind, str] = {
    SpanKind.QUEUED: "·",
    SpanKind.ENVIRONMENT: "▓",
    SpanKind.AGENT_SETUP: "▒",
    SpanKind.AGENT: "░",
    SpanKind.SAMPLING: "█",
    SpanKind.VERIFYING: "█",
    SpanKind.TRAINING: "█",
    SpanKind.CHECKPOINT: "┃",
    SpanKind.EVALUATION: "▓",
}
LEGEND: tuple[tuple[SpanKind, str], ...] = (
    (SpanKind.QUEUED, "queued"),
    (SpanKind.ENVIRONMENT, "environment"),
    (SpanKind.AGENT_SETUP, "agent setup"),
    (SpanKind.AGENT, "agent"),
    (SpanKind.SAMPLING, "sampling"),
    (SpanKind.VERIFYING, "verifier"),
    (SpanKind.TRAINING, "training"),
    (SpanKind.CHECKPOINT, "checkpoint"),
    (SpanKind.EVALUATION, "evaluation"),
)
TICKS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400)


def colour(kind: SpanKind | Share, p: Palette) -> str:
    return {
        SpanKind.QUEUED: p.muted,
        SpanKind.ENVIRONMENT: p.warning,
        SpanKind.AGENT_SETUP: p.warning,
        SpanKind.AGENT: p.primary,
        SpanKind.SAMPLING: p.primary,
        SpanKind.VERIFYING: p.accent,
        SpanKind.TRAINING: p.success,
        SpanKind.CHECKPOINT: p.fg,
        SpanKind.EVALUATION: p.fg,
        Share.SAMPLING: p.primary,
        Share.AGENT: p.primary,
        Share.SANDBOXES: p.warning,
        Share.VERIFIER: p.accent,
        Share.TRAINING: p.success,
        Share.EVALUATION: p.fg,
        Share.IDLE: p.muted,
    }[kind]


# -- drawing (pure: a timeline and a width in, Rich text out) -------------------------------------


class Axis:
    """Seconds ↔ columns: ``width`` cells from ``start`` to ``end``."""

    def __init__(self, start: float, end: float, width: int):
        self.start, self.width = start, max(1, width)
        self.per_cell = max(1e-6, (end - start) / self.width)

    def cell(self, ts: float) -> int:
        return min(self.width - 1, max(0, int((ts - self.start) / self.per_cell)))

    def cover(self, spans: list[Span], cover: list[dict[SpanKind, float]], sign: float = 1.0) -> None:
        """Add each span's seconds to the cells it lies over (a point still marks its cell)."""
        for span in spans:
            if span.end <= span.start:
                c = cover[self.cell(span.start)]
                c[span.kind] = c.get(span.kind, 0.0) + sign * self.per_cell
                continue
            first, last = self.cell(span.start), self.cell(span.end)
            for i in range(first, last + 1):
                a = max(span.start, self.start + i * self.per_cell)
                b = min(span.end, self.start + (i + 1) * self.per_cell)
                if b > a:
                    cover[i][span.kind] = cover[i].get(span.kind, 0.0) + sign * (b - a)


def bar(spans: list[Span], axis: Axis, p: Palette, calls: list[Span] | None = None) -> Text:
    """One row's bar: each cell shows what took most of its time. A model call's sampling is cut
    out of the agent span it lies in."""
    cover: list[dict[SpanKind, float]] = [{} for _ in range(axis.width)]
    axis.cover(spans, cover)
    if calls:
        axis.cover(calls, cover)
        agent = [Span(SpanKind.AGENT, c.start, c.end) for c in calls]
        axis.cover(agent, cover, sign=-1.0)
    out = Text(no_wrap=True, end="")
    for c in cover:
        kind = max(c, key=lambda k: c[k]) if c else None
        if kind is None or c[kind] <= 0:
            out.append(" ")
        else:
            out.append(GLYPHS[kind], style=colour(kind, p))
    return out


def axis_lines(tl: StepTimeline, axis: Axis, label_w: int, p: Palette) -> Text:
    """Tick labels over a rule: seconds since the step began."""
    total = tl.duration
    tick = next((t for t in TICKS if total / t <= max(1, axis.width // 9)), TICKS[-1])
    labels = [" "] * axis.width
    rule = ["─"] * axis.width
    at = 0.0
    while at <= total + 1e-9:
        x = axis.cell(tl.start + at)
        name = "0" if at == 0 else format_duration(at)
        if x + len(name) <= axis.width and all(c == " " for c in labels[max(0, x - 1) : x + len(name)]):
            labels[x : x + len(name)] = name
            rule[x] = "┬"
        at += tick
    out = Text(no_wrap=True)
    out.append(" " * label_w + "".join(labels) + "\n", style=p.muted)
    out.append(" " * label_w + "".join(rule), style=p.muted)
    return out


def outcome_text(row: TrialRow, p: Palette) -> Text:
    if row.outcome is not None:
        if row.scored and row.reward is not None:
            good = row.reward >= 1.0
            mark = "✓" if good else ("◐" if row.reward > 0 else "✗")
            return Text(
                f"{mark}{row.reward:g}", style=f"bold {p.success if good else p.warning if row.reward > 0 else p.error}"
            )
        return Text(f"!{one_line(row.outcome, 20)}", style=f"bold {p.error}")
    if row.cancelled:
        return Text("cancel", style=p.muted)
    return Text(PHASE_LABELS.get(row.phase or "", one_line(row.phase or "", 10)), style=p.primary)


def row_label(row: TrialRow, width: int, p: Palette) -> Text:
    label = Text(no_wrap=True, overflow="ellipsis", end="")
    label.append(row.label, style="bold")
    label.append(" ")
    label.append_text(outcome_text(row, p))
    if width >= 20 and row.task:
        label.append(" " + one_line(row.task, 60), style=p.muted)
    label.truncate(width - 1, overflow="ellipsis", pad=True)
    label.append(" ")
    return label


def legend(p: Palette) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, (kind, name) in enumerate(LEGEND):
        if i:
            out.append("  ")
        out.append(GLYPHS[kind], style=colour(kind, p))
        out.append(" " + name, style=p.muted)
    return out


def summary(tl: StepTimeline, p: Palette) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    for i, (share, pct) in enumerate(tl.percentages()):
        if i:
            out.append(" · ", style=p.muted)
        out.append(f"{share} ", style=colour(share, p))
        out.append(f"{pct:.0f}%", style=f"bold {colour(share, p)}")
    return out


def heading(tl: StepTimeline | None, step: int | None, steps: list[int], live: bool, p: Palette) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("timeline ", style=p.muted)
    out.append(f"step {step}" if step is not None else "no step yet", style=f"bold {p.primary}")
    if steps and step is not None and step in steps:
        out.append(f"  ({steps.index(step) + 1} of {len(steps)} · [ ] to move)", style=p.muted)
    if tl is None:
        out.append("\n" + ("waiting for the step's events…" if live else "no events for this step"), style=p.muted)
        return out
    state = "trained" if tl.trained else ("going on" if live else "not trained")
    out.append(f"  {format_duration(tl.duration)} wall · {len(tl.trials)} trials · {state}", style=p.fg)
    if live and tl.open:
        out.append("  live", style=f"bold {p.success}")
    out.append("\n")
    out.append_text(summary(tl, p))
    return out


def rows_text(tl: StepTimeline, width: int, p: Palette) -> tuple[Text, Axis, int]:
    """Every row (trials, a rule, training) as one text; the axis and label width it used."""
    label_w = 28 if width >= 100 else 14
    axis = Axis(tl.start, tl.end, width - label_w)
    out = Text(no_wrap=True)
    group = None
    for row in tl.trials:
        if group is not None and row.group != group:
            out.append("\n")
        group = row.group
        out.append_text(row_label(row, label_w, p))
        out.append_text(bar(row.spans, axis, p, row.calls))
        out.append("\n")
    if tl.training:
        source = " training, from the cookbook's timing spans " if tl.from_spans else " training, from events "
        out.append(("──" + source).ljust(width - 1, "─") + "\n", style=p.muted)
        for training in tl.training:
            label = Text(training.label, style="bold", no_wrap=True, overflow="ellipsis", end="")
            label.truncate(label_w - 1, overflow="ellipsis", pad=True)
            label.append(" ")
            out.append_text(label)
            out.append_text(bar(training.spans, axis, p))
            out.append("\n")
    out.rstrip()
    return out, axis, label_w


# -- the screen ----------------------------------------------------------------------------------


class TimelineScreen(Screen[None]):
    DEFAULT_CSS = """
    TimelineScreen #whead { height: auto; max-height: 3; background: $panel; padding: 0 1; }
    TimelineScreen #waxis { height: 2; padding: 0 1; }
    TimelineScreen #wbody { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    TimelineScreen #wlegend { height: 1; background: $panel; padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("left_square_bracket", "step(-1)", "◀ step"),
        Binding("right_square_bracket", "step(1)", "step ▶"),
    ]

    app = getters.app(ConsoleHost)

    def __init__(self, step: int | None, events: Path, spans: Path | None = None):
        super().__init__()
        self.step = step
        self.timelines = StepTimelines(events, spans)  # the index kept from the last open, read on
        self.timeline: StepTimeline | None = None
        self.steps: list[int] = []
        self._reading = False
        self._again = False

    @classmethod
    def for_run(cls, app: ConsoleHost) -> TimelineScreen | None:
        """The screen for the step the app shows (the current one, or the one being replayed),
        reading the run's folder: that of the events file the app replays or follows, else the
        run's own ``log_path``. None before the app knows of any."""
        state = app.state
        followed = getattr(app, "replay_path", None) or getattr(app.source, "path", None)
        files = timeline_files(followed, state.log_path)
        if files is None:
            return None
        events, spans = files
        return cls(state.step, events, spans)

    def compose(self) -> ComposeResult:
        yield Static(id="whead")
        yield Static(id="waxis")
        with VerticalScroll(id="wbody"):
            yield Static(id="wrows")
        yield Static(id="wlegend")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#wbody", VerticalScroll).focus()
        self.query_one("#wrows", Static).tooltip = TIMELINE_HELP["rows"]
        self.draw()
        self.read()
        self.set_interval(1.0, self._second)

    @property
    def live(self) -> bool:
        return bool(getattr(self.app, "run_going", False))

    def _second(self) -> None:
        if self.live:
            self.read()

    # -- reading (a worker thread) ---------------------------------------------------------------

    def read(self) -> None:
        if self._reading:
            self._again = True
            return
        self._reading = True
        self._read(self.step, self.app.now() if self.live else None)

    @work(thread=True, group="timeline")
    def _read(self, step: int | None, now: float | None) -> None:
        step, timeline, steps = self.timelines.read(step, now)
        self.app.call_from_thread(self._done, step, timeline, steps)

    def _done(self, step: int | None, timeline: StepTimeline | None, steps: list[int]) -> None:
        self._reading = False
        if step == self.step or self.step is None:
            self.step, self.timeline, self.steps = step, timeline, steps
            self.draw()
        if self._again or step != self.step:
            self._again = False
            self.read()

    # -- drawing ---------------------------------------------------------------------------------

    @property
    def rows_width(self) -> int:
        """The columns the rows are drawn in: the screen less its padding and the scrollbar."""
        return max(40, self.size.width - 3)

    def on_resize(self) -> None:
        self.draw()

    def draw(self) -> None:
        if not self.is_mounted:
            return
        p = palette_of(self.app)
        tl = self.timeline
        self.query_one("#whead", Static).update(heading(tl, self.step, self.steps, self.live, p))
        self.query_one("#wlegend", Static).update(legend(p))
        width = self.rows_width
        if tl is None:
            self.query_one("#waxis", Static).update("")
            self.query_one("#wrows", Static).update("")
            return
        rows, axis, label_w = rows_text(tl, width, p)
        self.query_one("#waxis", Static).update(axis_lines(tl, axis, label_w, p))
        self.query_one("#wrows", Static).update(rows)

    # -- keys ------------------------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        steps = self.steps
        if not steps:
            return
        at = steps.index(self.step) if self.step in steps else len(steps) - 1
        target = steps[max(0, min(len(steps) - 1, at + delta))]
        if target != self.step:
            self.step, self.timeline = target, None
            self.draw()
            self.read()

    def action_back(self) -> None:
        self.app.pop_screen()
