"""``P``: sampling and training as a pipeline, over the whole run. On one time axis: when groups
were sampling (how many in flight), waiting for an update (queued), and when the trainer trained
(a bar per update, as on the timeline). Above it, the mode, max_steps_off_policy and its history,
the counts now, the trainer's and the samplers' idle shares and how stale the trained groups'
weights were; below it, each update's groups by staleness and the groups dropped with what they
cost. ``m`` lowers max_steps_off_policy (an off-policy run that this console can command).

All of it comes from the reducer's ``RunState.pipeline`` (``tbconsole.state.pipeline``): nothing
is read from the run's folder, so it opens at once and follows a live run as the main screen does.
"""

from __future__ import annotations

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tbconsole.common.formatting import format_duration
from tbconsole.record.enums import SpanKind
from tbconsole.state import RunState
from tbconsole.state.timeline import Span
from tbconsole.ui.present import pipeline_view as pv
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.wording import PIPELINE_HELP
from tbconsole.ui.screens.host import ConsoleHost
from tbconsole.ui.screens.timeline import Axis, bar
from tbconsole.ui.widgets.base import Palette, palette_of
from tbconsole.ui.widgets.footer import KeyFooter

UPDATE_ROWS = 12  # the newest updates listed
DROPPED_ROWS = 8  # the newest dropped groups listed


def percent(share: float | None) -> str:
    return "–" if share is None else f"{share:.0%}"


def heading(f: pv.Flow, live: bool, p: Palette) -> Text:
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append("pipeline ", style=p.muted)
    out.append(one_line(f.mode, 20), style=f"bold {p.primary}")
    words = pv.MODE_WORDS.get(f.mode)
    if words:
        out.append(f"  {words}", style=p.muted)
    if live:
        out.append("  live", style=f"bold {p.success}")
    limit = pv.limit_words(f)
    if limit:
        out.append("\n")
        out.append(limit, style=f"bold {p.warning if f.limits and f.limits[-1].by != 'config' else p.fg}")
    out.append("\nnow ", style=p.muted)
    out.append(f"{f.in_flight} in flight", style=f"bold {p.primary}")
    out.append(" · ", style=p.muted)
    out.append(f"{f.queued} queued", style=f"bold {p.accent}")
    out.append(" · ", style=p.muted)
    out.append(f"{f.trained} trained", style=f"bold {p.success}")
    out.append(" · ", style=p.muted)
    out.append(f"{f.dropped} dropped", style=f"bold {p.error if f.dropped else p.muted}")
    if f.dropped:
        reasons = ", ".join(f"{n} {one_line(r, 20)}" for r, n in sorted(f.dropped_by_reason.items()))
        out.append(f" ({reasons}; {format_duration(f.dropped_sandbox_s)} of sandbox time)", style=p.warning)
    if f.skipped:
        out.append(f" · {f.skipped} not trained (one reward for all)", style=p.muted)
    out.append("\nidle ", style=p.muted)
    out.append(f"trainer {percent(f.trainer_idle)}", style="bold")
    out.append(" · ", style=p.muted)
    out.append(f"samplers {percent(f.samplers_idle)}", style="bold")
    out.append(f"  of {format_duration(f.elapsed)}", style=p.muted)
    if f.staleness:
        out.append("   staleness of trained groups ", style=p.muted)
        out.append(pv.staleness_words(f.staleness), style="bold")
    return out


def axis_line(axis: Axis, start: float, end: float, label_w: int, p: Palette) -> Text:
    """Minutes (or seconds) since the axis began, over a rule."""
    total = max(0.0, end - start)
    ticks = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400)
    tick = next((t for t in ticks if total / t <= max(1, axis.width // 9)), ticks[-1])
    labels = [" "] * axis.width
    rule = ["─"] * axis.width
    at = 0.0
    while at <= total + 1e-9:
        x = axis.cell(start + at)
        name = "0" if at == 0 else format_duration(at)
        if x + len(name) <= axis.width and all(c == " " for c in labels[max(0, x - 1) : x + len(name)]):
            labels[x : x + len(name)] = name
            rule[x] = "┬"
        at += tick
    out = Text(no_wrap=True)
    out.append(" " * label_w + "".join(labels) + "\n", style=p.muted)
    out.append(" " * label_w + "".join(rule), style=p.muted)
    return out


def label(text: str, width: int) -> Text:
    out = Text(text, style="bold", no_wrap=True, overflow="ellipsis", end="")
    out.truncate(width - 1, overflow="ellipsis", pad=True)
    out.append(" ")
    return out


def lanes(state: RunState, f: pv.Flow, width: int, p: Palette) -> tuple[Text, Text]:
    """(the axis, the lanes: groups in flight, queued, and training) over the run so far."""
    label_w = 14
    if f.start is None:
        return Text(""), Text("no group has started yet", style=p.muted)
    axis = Axis(f.start, f.end, width - label_w)
    series = list(state.pipeline.series)
    out = Text(no_wrap=True)
    for name, column, colour in (("in flight", 1, p.primary), ("queued", 2, p.accent)):
        counts = pv.counts_at(series, column, f.start, axis.per_cell, axis.width)
        top = max(counts, default=0)
        out.append_text(label(f"{name} {top}" if top else name, label_w))
        out.append(pv.sparkline(counts, top), style=colour)
        out.append("\n")
    spans = []
    for span in state.pipeline.updates.values():
        interval = span.interval(f.end)
        if interval is not None:
            spans.append(Span(SpanKind.TRAINING, *interval, open=span.ended is None))
    out.append_text(label("training", label_w))
    out.append_text(bar(spans, axis, p))
    return axis_line(axis, f.start, f.end, label_w, p), out


def updates_text(state: RunState, f: pv.Flow, width: int, p: Palette) -> Text:
    """The newest updates: each one's training on the same axis, its groups by staleness, its length."""
    spans = pv.newest_updates(state, UPDATE_ROWS)
    out = Text(no_wrap=True)
    out.append(("── updates " + ("(newest last) " if spans else "")).ljust(width - 1, "─") + "\n", style=p.muted)
    if not spans:
        out.append("no update has begun yet", style=p.muted)
        return out
    label_w = 36 if width >= 100 else 22
    axis = Axis(f.start if f.start is not None else f.end, f.end, width - label_w)
    for span in spans:
        interval = span.interval(f.end)
        length = format_duration(interval[1] - interval[0]) if interval is not None else "–"
        stale = any(s > 0 for s in span.staleness)
        row = Text(no_wrap=True, overflow="ellipsis", end="")
        row.append(f"u{span.update} ", style="bold")
        row.append(f"{length} ", style=p.muted)
        row.append(pv.update_words(span), style=p.warning if stale else p.fg)
        row.truncate(label_w - 1, overflow="ellipsis", pad=True)
        row.append(" ")
        out.append_text(row)
        if interval is not None and f.start is not None:
            out.append_text(bar([Span(SpanKind.TRAINING, *interval, open=span.ended is None)], axis, p))
        out.append("\n")
    out.rstrip()
    return out


def dropped_text(state: RunState, f: pv.Flow, width: int, p: Palette) -> Text:
    out = Text(no_wrap=True)
    title = f"── dropped: {f.dropped} group{'s' if f.dropped != 1 else ''}"
    if f.dropped:
        title += f", {format_duration(f.dropped_sandbox_s)} of sandbox time trained nothing "
    out.append((title + " ").ljust(width - 1, "─") + "\n", style=p.muted)
    groups = pv.newest_dropped(state, DROPPED_ROWS)
    if not groups:
        out.append("none", style=p.muted)
        return out
    for d in groups:
        row = Text(no_wrap=True, overflow="ellipsis", end="")
        row.append(f"step {d.step} g{d.group} ", style="bold")
        row.append(one_line(d.reason, 20), style=f"bold {p.error}")
        weights = f"weights {d.weights[0]}" if d.weights else "weights ?"
        row.append(f"  {weights} · at update {d.update} · {d.trials} trials · ", style=p.muted)
        row.append(format_duration(d.sandbox_seconds), style=p.warning)
        row.append(f"  {one_line(d.task, 60)}", style=p.muted)
        row.truncate(width - 1, overflow="ellipsis")
        out.append_text(row)
        out.append("\n")
    if f.dropped > len(groups):
        out.append(f"… and {f.dropped - len(groups)} earlier", style=p.muted)
    out.rstrip()
    return out


def mismatch_text(state: RunState, width: int, p: Palette) -> Text:
    """The trainer's and the sampler's log-probs compared by the tokens' staleness, as the newest
    update's metrics row has them (``offpolicy/*``); empty where no update trained stale tokens."""
    figures = pv.mismatch(state)
    out = Text(no_wrap=True)
    if figures is None:
        return out
    out.append(
        f"── sampler vs trainer by staleness, update {figures.update} ".ljust(width - 1, "─") + "\n", style=p.muted
    )
    out.append(f"stale tokens {percent(figures.stale_share)}", style="bold")
    for name, kl, clipped in figures.rows:
        out.append("   ")
        out.append(name, style=f"bold {p.warning if name not in ('fresh', 's0') else p.fg}")
        out.append(f" KL {kl:.3g}" if kl is not None else " KL –", style=p.fg)
        out.append(f" · clipped {percent(clipped)}", style=p.muted)
    if figures.clipped_trend:
        out.append("\nstale tokens outside PPO's clip, newest last: ", style=p.muted)
        out.append(" ".join(percent(v) for v in figures.clipped_trend), style="bold")
    return out


class PipelineScreen(Screen[None]):
    DEFAULT_CSS = """
    PipelineScreen #phead { height: auto; max-height: 5; background: $panel; padding: 0 1; }
    PipelineScreen #paxis { height: 2; padding: 0 1; }
    PipelineScreen #planes { height: 3; padding: 0 1; }
    PipelineScreen #pbody { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    """
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("m", "lower_limit", "Lower max_steps_off_policy"),
    ]

    app = getters.app(ConsoleHost)

    def compose(self) -> ComposeResult:
        yield Static(id="phead")
        yield Static(id="paxis")
        yield Static(id="planes")
        with VerticalScroll(id="pbody"):
            yield Static(id="pupdates")
            yield Static(id="pmismatch")
            yield Static(id="pdropped")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one("#pbody", VerticalScroll).focus()
        self.query_one("#planes", Static).tooltip = PIPELINE_HELP["lanes"]
        self.query_one("#phead", Static).tooltip = PIPELINE_HELP["heading"]
        self.draw()

    def on_screen_resume(self) -> None:
        self.app.catch_up(self)
        self.draw()

    def on_resize(self) -> None:
        self.draw()

    def show(self, state: RunState, now: float, changed: set[str], everything: bool = False) -> None:
        self.draw()  # every event marks the header: the counts and the clock move with the run
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "lower_limit":
            return self.app.can_lower_off_policy()
        return True

    def draw(self) -> None:
        if not self.is_mounted:
            return
        app = self.app
        state, now = app.state, app.now()
        p = palette_of(app)
        f = pv.flow(state, now)
        width = max(40, self.size.width - 3)
        self.query_one("#phead", Static).update(heading(f, app.run_going, p))
        axis, lanes_ = lanes(state, f, width, p)
        self.query_one("#paxis", Static).update(axis)
        self.query_one("#planes", Static).update(lanes_)
        self.query_one("#pupdates", Static).update(updates_text(state, f, width, p))
        mismatch = mismatch_text(state, width, p)
        shown = self.query_one("#pmismatch", Static)
        shown.display = bool(mismatch.plain)  # only once an update trained stale tokens
        shown.update(mismatch)
        self.query_one("#pdropped", Static).update(dropped_text(state, f, width, p))

    def action_lower_limit(self) -> None:
        self.app.lower_off_policy_limit()

    def action_back(self) -> None:
        self.app.pop_screen()
