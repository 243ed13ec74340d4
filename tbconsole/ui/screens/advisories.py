"""`v`: the run's advisories. Active ones first (most severe, then newest): severity, message,
where, the threshold that fired and the value measured, age; then cleared ones, newest first,
each with what cleared it. Under the list, the highlighted one in full.

Enter jumps to what it concerns: a trial opens its transcript, a group the group screen with its
first trial selected (Escape comes back here from either); a metric closes this and points at
the metrics panel. Every string from a rule is shown as plain text.
"""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tbconsole.common.formatting import format_duration, format_value
from tbconsole.record.enums import PanelName
from tbconsole.state import RunState
from tbconsole.state.model import Advisory
from tbconsole.ui.present.fit import GLUE, glue_numbers, hang
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.wording import (
    SEVERITY_ORDER,
    advisory_age,
    advisory_target,
    advisory_threshold,
    advisory_where,
    severity_count_label,
    severity_mark,
    sorted_active,
)
from tbconsole.ui.screens.host import ConsoleHost
from tbconsole.ui.screens.main import MainScreen
from tbconsole.ui.widgets.base import Palette, columns, palette_of
from tbconsole.ui.widgets.footer import KeyFooter
from tbconsole.ui.widgets.header import severity_colour

JUMPS = {
    "trial": "open the trial's transcript",
    "group": "the group side by side",
    "metric": "the metrics panel",
    None: "nothing to jump to: it concerns the whole run",
}


AGE_W = 18  # "cleared 12m05s ago"
SEVERITY_W = 9  # "⚠ warning"


def advisory_row(a: Advisory, now: float, width: int, p: Palette) -> Text:
    """One advisory as a list entry ``width`` cells wide: severity, message and age; under it
    where and the threshold that fired; a cleared one, in muted colours, also says what cleared it."""
    active = a.cleared is None
    colour = severity_colour(p, a.severity) if active else p.muted
    indent = " " * (SEVERITY_W + 1)
    row = columns(
        [
            Text(f"{severity_mark(a.severity)} {one_line(a.severity, 7)}", style=f"bold {colour}"),
            Text(one_line(a.message, 400), style="" if active else p.muted),
            Text(advisory_age(a, now), style=p.muted),
        ],
        [SEVERITY_W, max(10, width - SEVERITY_W - AGE_W - 2), AGE_W],
        right={2},
    )
    # Under it, wrapped under the message (never back to the first column), the value measured
    # kept with the threshold it is read against: "(0.5158)" alone on a line says nothing.
    place = advisory_where(a).replace(" · ", f"{GLUE}· ")
    where = glue_numbers(f"{place}{GLUE}{GLUE}·{GLUE} {one_line(advisory_threshold(a), 200)}")
    for line in hang(where, width, len(indent)):
        row.append("\n" + line, style=p.muted)
    if not active:
        cleared = hang(f"cleared:{GLUE}{one_line(a.cleared_by or '', 400)}", width, len(indent))
        row.append("\n" + indent)
        row.append("cleared: ", style=p.success)
        row.append(cleared[0][len(indent) + len("cleared: ") :], style=p.muted)
        for line in cleared[1:]:
            row.append("\n" + line, style=p.muted)
    return row


def advisory_detail(a: Advisory | None, now: float, p: Palette, width: int = 116) -> Text:
    """The highlighted advisory in full (message wrapped, never cut), ``width`` cells wide: the
    threshold, the value measured and where are wrapped here, each value kept with its word."""
    t = Text()
    if a is None:
        t.append("no advisory selected", style=p.muted)
        return t
    colour = severity_colour(p, a.severity) if a.cleared is None else p.muted
    t.append(f"{severity_mark(a.severity)} {one_line(a.severity, 20)}", style=f"bold {colour}")
    t.append(f"  rule {one_line(a.rule, 60)}  ·  key {one_line(a.key, 120)}\n", style=p.muted)
    t.append(one_line(a.message, 1000) + "\n")
    facts = (
        f"threshold{GLUE}{one_line(a.threshold or '–', 200)}{GLUE}· measured{GLUE}{format_value(a.value)}{GLUE}· "
        f"where{GLUE}{advisory_where(a).replace(' · ', f'{GLUE}· ')}"
    )
    lines = Text("\n".join(hang(glue_numbers(facts), width)))
    lines.highlight_words(["threshold ", "measured ", "where ", " · "], style=p.muted)
    t.append_text(lines)
    t.append("\nraised ", style=p.muted)
    t.append(f"{format_duration(max(0.0, now - a.raised))} ago")
    if a.raises > 1:
        t.append(f", raised again {a.raises - 1}× since (latest {format_duration(max(0.0, now - a.updated))} ago)")
    if a.cleared is not None:
        t.append("\ncleared ", style=p.success)
        t.append(f"{format_duration(max(0.0, now - a.cleared))} ago: ")
        t.append(one_line(a.cleared_by or "", 1000))
    t.append("\nenter: ", style=p.muted)
    t.append(JUMPS[advisory_target(a)], style=p.muted)
    return t


def title_text(state: RunState, p: Palette, replay: bool) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append("advisories", style=f"bold {p.primary}")
    counts = state.advisory_counts()
    if counts:
        for severity in [*SEVERITY_ORDER, *sorted(set(counts) - set(SEVERITY_ORDER))]:
            if counts.get(severity):
                label = severity_count_label(severity, counts[severity])
                t.append(f"  {severity_mark(severity)} {label}", style=f"bold {severity_colour(p, severity)}")
    else:
        t.append("  none active", style=p.success if state.advisory_log else p.muted)
    cleared = len(state.cleared_advisories())
    if cleared:
        t.append(f"  · {cleared} cleared", style=p.muted)
    if replay:
        t.append("  (as at the replay's position)", style=p.muted)
    return t


class AdvisoriesScreen(Screen[None]):
    """Built once and kept by the app: each time it opens it shows the advisories as they stand."""

    DEFAULT_CSS = """
    AdvisoriesScreen #atitle { height: 1; background: $panel; padding: 0 1; }
    AdvisoriesScreen #alist { height: 1fr; border: round $panel-lighten-2; }
    AdvisoriesScreen #alist:focus { border: round $primary; }
    AdvisoriesScreen #adetail { height: auto; max-height: 10; background: $panel; padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape,v,q", "back", "Back"),
        Binding("enter", "jump", "Jump to it", priority=True),  # before the list's own enter
        Binding("x", "cancel_trial", "Cancel its trial"),
    ]

    app = getters.app(ConsoleHost)

    def __init__(self) -> None:
        super().__init__()
        self._by_id: dict[str, Advisory] = {}
        self._drawn: tuple | None = None
        self._ready = False  # composed: the app may ask it to show before that

    def compose(self) -> ComposeResult:
        yield Static(id="atitle")
        yield OptionList(id="alist")
        yield Static(id="adetail")
        yield KeyFooter()

    @property
    def options(self) -> OptionList:
        return self.query_one("#alist", OptionList)

    def on_mount(self) -> None:
        self._ready = True
        self.options.focus()

    def on_screen_resume(self) -> None:
        self._drawn = None
        self.show(self.app.state, self.app.now(), set(), True)
        if self._ready:
            self.options.focus()

    def on_resize(self) -> None:
        self._drawn = None
        self.call_after_refresh(lambda: self.show(self.app.state, self.app.now(), set(), True))

    def on_second(self) -> None:
        """Called once a second by the app: the ages move on."""
        self.show(self.app.state, self.app.now(), {PanelName.ADVISORIES})

    # -- rendering ------------------------------------------------------------------------

    def show(self, state: RunState, now: float, changed: set[str], everything: bool = False) -> None:
        if not self._ready or not (everything or PanelName.ADVISORIES in changed or self._drawn is None):
            return
        p = palette_of(self.app)
        width = self.options.content_size.width or (self.size.width - 4 if self.size.width else 116)
        width = max(40, width - 1)  # the option list's own padding
        replay = getattr(self.app, "replay", None) is not None
        drawn = (state.advisory_seq, id(state), int(now), width, p, replay)
        if drawn == self._drawn:
            return
        self._drawn = drawn
        self.query_one("#atitle", Static).update(title_text(state, p, replay))
        options = self.options
        keep = options.highlighted_option.id if options.highlighted_option is not None else None
        self._by_id = {}
        items: list[Option | None] = []
        active = sorted_active(state)
        cleared = state.cleared_advisories()
        if not active and not cleared:
            items.append(Option(Text("no advisories: none raised so far", style=p.muted), disabled=True))
        if active:
            items.append(Option(Text(f"active ({len(active)})", style=f"bold {p.fg}"), disabled=True))
            for a in active:
                items.append(self._option(f"active:{a.key}", a, now, width, p))
        if cleared:
            if active:
                items.append(None)
            items.append(Option(Text(f"cleared ({len(cleared)})", style=f"bold {p.muted}"), disabled=True))
            for a in cleared:
                items.append(self._option(f"cleared:{a.key}", a, now, width, p))
        options.set_options(items)
        if keep is not None and keep in self._by_id:
            options.highlighted = options.get_option_index(keep)
        elif self._by_id:
            options.highlighted = options.get_option_index(next(iter(self._by_id)))
        self._show_detail(now)

    def _option(self, option_id: str, a: Advisory, now: float, width: int, p: Palette) -> Option:
        self._by_id[option_id] = a
        return Option(advisory_row(a, now, width, p), id=option_id)

    def _show_detail(self, now: float | None = None) -> None:
        now = self.app.now() if now is None else now
        detail = self.query_one("#adetail", Static)
        width = max(20, detail.content_size.width or self.size.width - 2 or 116)
        detail.update(Group(advisory_detail(self.selected(), now, palette_of(self.app), width)))

    def selected(self) -> Advisory | None:
        option = self.options.highlighted_option
        return self._by_id.get(option.id) if option is not None and option.id else None

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self._show_detail()
        self.refresh_bindings()  # x is there only for an advisory about a running trial

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()  # a click on an entry: Enter is the screen's own binding
        self.action_jump()

    # -- jumps ----------------------------------------------------------------------------

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_cancel_trial(self) -> None:
        a = self.selected()
        if a is not None and a.trial and self.check_action("cancel_trial", ()):
            self.app.confirm_cancel_trial(a.trial)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_trial":
            a = self.selected()
            return self.app.can_cancel_trial(a.trial if a is not None else None)
        return True

    def action_jump(self) -> None:
        a = self.selected()
        if a is None:
            return
        target = advisory_target(a)
        if target == "trial" and a.trial:
            self.app.open_transcript(a.trial)
        elif target == "group" and a.step is not None and a.group is not None:
            self._jump_to_group(a.step, a.group)
        elif target == "metric":
            main = self._main()
            self.app.pop_screen()
            if main is not None:
                main.point_at_metrics()
        else:
            self.app.notify(JUMPS[None], timeout=3)

    def _main(self) -> MainScreen | None:
        return next((s for s in self.app.screen_stack if isinstance(s, MainScreen)), None)

    def _jump_to_group(self, step: int, group: int) -> None:
        g = self.app.state.groups.get((step, group))
        if g is None or not g.trials:
            self.app.notify(f"step {step} group {group} is no longer in memory", timeout=4)
            return
        self.app.open_group(g.trials[0])  # the group side by side, its first trial's column selected
