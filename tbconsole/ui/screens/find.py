"""`f`: find a string or a regular expression across the run's transcripts (the current step's
trials, or those of every step the run kept: in memory, or in the run folder's captures), list the
matching trials and turns, and open one. The search reads capture files off the UI thread
(``tbconsole.ui.data.captures.search_run``)."""

from __future__ import annotations

from rich.text import Text
from textual import events, getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from tbconsole.ui.data.captures import captured_refs, captured_steps, search_run
from tbconsole.ui.present.sanitize import one_line, plain
from tbconsole.ui.present.transcript_search import Match, SearchResult, trials_to_search
from tbconsole.ui.present.wording import number_ranges
from tbconsole.ui.screens.host import ConsoleHost
from tbconsole.ui.widgets.base import Palette, palette_of
from tbconsole.ui.widgets.footer import KeyFooter


def match_line(m: Match, p: Palette, width: int) -> Text:
    """One result, on one line of ``width``: trial, step/group, turn, where, and the snippet with
    the match highlighted."""
    out = Text(no_wrap=True, overflow="ellipsis")
    out.append(one_line(m.trial.trial, 48), style="bold")
    out.append(f"  s{m.trial.step} g{m.trial.group}  turn {m.turn + 1}  ", style=p.muted)
    out.append(f"{m.where:<11} ", style=p.accent)
    out.append(f"{f'+{m.more}' if m.more else '':<4}", style=p.muted)  # more matches in the same text
    out.append(plain(m.snippet[: m.start]))  # each part made inert on its own: the span stays put
    out.append(plain(m.snippet[m.start : m.end]), style=f"bold reverse {p.warning}")
    out.append(plain(m.snippet[m.end :]))
    out.truncate(max(20, width), overflow="ellipsis")
    return out


class FindScreen(Screen[None]):
    DEFAULT_CSS = """
    FindScreen #fhead { height: 1; background: $panel; padding: 0 1; }
    FindScreen #fquery { margin: 0 0; border: round $accent; }
    FindScreen #fsummary { height: auto; padding: 0 1; }
    FindScreen #fresults { height: 1fr; border: round $panel-lighten-2; }
    FindScreen #fresults:focus { border: round $primary; }
    """
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("ctrl+r", "toggle_regex", "Regex on/off"),
        Binding("ctrl+t", "toggle_scope", "Step / all steps"),
    ]

    app = getters.app(ConsoleHost)

    def __init__(self, query: str = "", *, regex: bool = False, all_steps: bool = False):
        super().__init__()
        self.query_text = query
        self.regex = regex
        self.all_steps = all_steps
        self.result: SearchResult | None = None
        self.searching = False

    def compose(self) -> ComposeResult:
        yield Static(id="fhead")
        yield Input(
            value=self.query_text,
            placeholder="find in replies, tool calls and tool output (enter: search, ↓: results)",
            id="fquery",
        )
        yield Static(id="fsummary")
        yield OptionList(id="fresults")
        yield KeyFooter()

    @property
    def results(self) -> OptionList:
        return self.query_one("#fresults", OptionList)

    def on_mount(self) -> None:
        self.query_one("#fquery", Input).focus()
        self._head()
        self._summary()

    def _head(self) -> None:
        p = palette_of(self.app)
        state = self.app.state
        head = Text(no_wrap=True)
        head.append("find", style=f"bold {p.primary}")
        head.append("  in ", style=p.muted)
        if self.all_steps:
            steps = self.kept_steps()
            head.append(f"all kept steps ({number_ranges(steps) or '–'})", style="bold")
        else:
            head.append(f"step {state.step if state.step is not None else '–'}", style="bold")
        head.append("  ·  ", style=p.muted)
        head.append("regex" if self.regex else "text", style="bold")
        head.append(" (ignoring case)  ctrl+r: regex/text  ctrl+t: this step/all kept steps", style=p.muted)
        self.query_one("#fhead", Static).update(head)

    def _summary(self) -> None:
        p = palette_of(self.app)
        r = self.result
        if self.searching:
            line = Text("searching…", style=p.muted)
        elif r is None:
            line = Text("type a word or a regular expression, then enter", style=p.muted)
        elif r.error:
            line = Text(one_line(r.error, 300), style=f"bold {p.error}")
        else:
            line = Text(one_line(r.summary, 300), style=p.warning if r.truncated else p.muted)
        self.query_one("#fsummary", Static).update(line)

    # -- searching -------------------------------------------------------------------------

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_text = event.value
        self.search()

    def kept_steps(self) -> list[int]:
        """Every step whose trials can be searched: those in memory (the newest few) and those
        whose captures the run folder keeps, up to the step on view (a replay moved back does
        not search ahead)."""
        state = self.app.state
        in_memory = {t.step for t in state.trials.values()}
        last = state.step if state.step is not None else max(in_memory, default=-1)
        return sorted(in_memory | {s for s in captured_steps(state.log_path) if s <= last})

    def search(self) -> None:
        state = self.app.state
        refs = trials_to_search(state, self.all_steps)
        query, regex, log_path = self.query_text, self.regex, state.log_path
        older = sorted(set(self.kept_steps()) - {t.step for t in state.trials.values()}) if self.all_steps else []
        self.searching = True
        self._summary()

        def work() -> None:
            # The steps the memory no longer holds, from their capture files (off the UI thread).
            worker = get_current_worker()
            every = sorted([*captured_refs(log_path, older), *refs], key=lambda r: (r.step, r.group, r.index, r.trial))
            result = search_run(log_path, every, query, regex=regex, stop=lambda: worker.is_cancelled)
            if not worker.is_cancelled:  # a newer search replaced this one: its result is the one shown
                self.app.call_from_thread(self._found, result)

        self.run_worker(work, thread=True, exclusive=True, group="find")

    def _found(self, result: SearchResult) -> None:
        self.searching = False
        self.result = result
        p = palette_of(self.app)
        options = self.results
        options.clear_options()
        width = (options.scrollable_content_region.width or self.size.width) - 2
        options.add_options([Option(match_line(m, p, width), id=str(i)) for i, m in enumerate(result.matches)])
        self._summary()
        if result.matches:
            options.highlighted = 0
            options.focus()

    def action_toggle_regex(self) -> None:
        self.regex = not self.regex
        self._head()
        if self.query_text:
            self.search()

    def action_toggle_scope(self) -> None:
        self.all_steps = not self.all_steps
        self._head()
        if self.query_text:
            self.search()

    # -- opening a match ------------------------------------------------------------------------

    def selected_match(self) -> Match | None:
        index = self.results.highlighted
        if self.result is None or index is None or not 0 <= index < len(self.result.matches):
            return None
        return self.result.matches[index]

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        m = self.selected_match()
        if m is not None:
            self.app.open_transcript(m.trial.trial)

    def on_key(self, event: events.Key) -> None:
        # ↓ from the query goes to the results; ↑ from the first result back to the query.
        box = self.query_one("#fquery", Input)
        if event.key == "down" and box.has_focus and self.results.option_count:
            event.stop()
            self.results.focus()
        elif event.key == "up" and self.results.has_focus and self.results.highlighted in (0, None):
            event.stop()
            box.focus()

    def action_back(self) -> None:
        self.app.pop_screen()
