"""One turn's reply as its tokens (``k`` in a transcript): each token coloured by the sampler's
log-prob on a continuous scale with a legend, a cursor that shows one token's id, text and
numbers, whether the trial's tokens were trained on and with which advantage, and, where the run
recorded them, the trainer's log-probs and the sampler↔trainer difference per token.

Sources, read through ``tbconsole.ui.data.captures``: the trial's capture file (tokens and
sampler log-probs per turn; a running trial's new turns are picked up once a second) and the
trainer's per-token log-probs beside the captures (``RunFolder.trainer_logprobs_file``), when
present; and the run's state (the loss mask and advantage: ``tbconsole.ui.present.trained``). A
trial that is not in the run's events (a held-out evaluation trial) is found by its id under the
run folder.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from textual import events, getters
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tbconsole.record.capturefile import CaptureRecord
from tbconsole.state import RunState
from tbconsole.ui.data.captures import CaptureFollower, TrialPlace, locate, read_trainer_logprobs
from tbconsole.ui.data.tokenizer import shared_decoder
from tbconsole.ui.present.logprob_scale import DiffScale, LogprobScale, TurnStats
from tbconsole.ui.present.token_layout import TokenLayout, lay_out
from tbconsole.ui.present.token_lines import detail_text, head_text
from tbconsole.ui.present.token_text import TokenDecoder
from tbconsole.ui.present.token_turn import (
    by_rank,
    cursor_target,
    differences,
    sampler_logprobs,
    scrolled_to,
    trainer_logprobs,
)
from tbconsole.ui.present.trained import trial_training
from tbconsole.ui.screens.host import ConsoleHost
from tbconsole.ui.widgets.base import palette_of
from tbconsole.ui.widgets.footer import KeyFooter


class TokenText(Static):
    """The laid-out tokens; a click selects the token under the pointer."""

    def on_click(self, event: events.Click) -> None:
        index = event.style.meta.get("token") if event.style else None
        if isinstance(index, int):
            screen = self.screen
            assert isinstance(screen, TokenScreen)  # the only screen that composes a TokenText
            screen.select(index)


def background_of(app: App[Any]) -> str:
    """The theme's background colour (the cursor's text, the scales' ground)."""
    theme = app.current_theme
    return theme.background or ("#000000" if theme.dark else "#FFFFFF")


class TokenScreen(Screen[None]):
    DEFAULT_CSS = """
    TokenScreen #khead {
        height: auto; max-height: 4; background: $panel; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis;
    }
    TokenScreen #klegend { height: 3; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    TokenScreen #kbody { height: 1fr; padding: 0 1; scrollbar-gutter: stable; }
    TokenScreen #kdetail {
        height: 3; background: $panel; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis;
    }
    /* Their lines are laid out here (nowrap): wrapped by Textual, a fixed box's last lines were
       pushed out of sight. */
    """
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("left_square_bracket", "turn(-1)", "◀ turn"),
        Binding("right_square_bracket", "turn(1)", "turn ▶"),
        Binding("left", "cursor('move', -1)", "token", show=False),
        Binding("right", "cursor('move', 1)", "token", show=False),
        Binding("ctrl+left,b", "cursor('word', -1)", "word", show=False),
        Binding("ctrl+right,w", "cursor('word', 1)", "word", show=False),
        Binding("up", "cursor('row', -1)", "line", show=False),
        Binding("down", "cursor('row', 1)", "line", show=False),
        Binding("pageup", "cursor('page', -1)", "page", show=False),
        Binding("pagedown", "cursor('page', 1)", "page", show=False),
        Binding("home", "cursor('edge', 0)", "first", show=False),
        Binding("end", "cursor('edge', 1)", "last", show=False),
        Binding("n", "rank(1)", "Next least likely"),
        Binding("N", "rank(-1)", "previous least likely", show=False),
        Binding("r", "relative", "Scale"),
        Binding("m", "mode", "Trainer Δ"),
    ]

    app = getters.app(ConsoleHost)

    def __init__(self, trial: str, turn: int):
        super().__init__()
        self.trial = trial
        self.turn = turn  # the capture's turn index asked for
        self.records: list[CaptureRecord] = []
        self.position = 0  # index into records
        self.tail: CaptureFollower | None = None
        self.place = TrialPlace(None, None)
        self.decoder: TokenDecoder | None = None
        self.trainer: dict[int, list[float]] = {}
        self.relative = False
        self.diff_mode = False
        self.cursor = 0
        self.goal_col = 0
        self.token_layout: TokenLayout | None = None
        self.pieces: list[str] = []
        self.stats: TurnStats | None = None
        self.ranks: dict[int, int] = {}
        self.loaded = False
        self.body = VerticalScroll(id="kbody", can_focus=False)

    def compose(self) -> ComposeResult:
        yield Static(id="khead")
        yield Static(id="klegend")
        with self.body:
            yield TokenText(id="ktokens")
        yield Static(id="kdetail")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.redraw())
        self.place = locate(self.app.state, self.trial)
        self.tail = CaptureFollower(self.place.capture)
        self.run_worker(self._load, thread=True, exclusive=True, group="tokens")
        self.set_interval(1.0, self._poll)
        self._head()

    def _load(self) -> None:
        records = self.tail.read_new() if self.tail is not None else []
        decoder = shared_decoder(self.app.state.model_name)
        trainer = read_trainer_logprobs(self.place.trainer)
        self.app.call_from_thread(self._loaded, records, decoder, trainer)

    def _loaded(self, records: list[CaptureRecord], decoder: TokenDecoder, trainer: dict[int, list[float]]) -> None:
        self.records, self.decoder, self.trainer = records, decoder, trainer
        self.loaded = True
        at = next((i for i, r in enumerate(records) if r.turn == self.turn), None)
        self.position = at if at is not None else max(0, min(self.turn, len(records) - 1))
        self._open_turn()
        self.refresh_bindings()  # m: only where the trainer's log-probs are recorded

    def _poll(self) -> None:
        """A running trial's new turns; the trainer's log-probs once its step has trained."""
        if not self.loaded or self.tail is None:
            return
        t = self.app.state.trials.get(self.trial)
        if t is not None and not t.done and not t.cancelled:
            new = self.tail.read_new()
            if new:
                self.records.extend(new)
                self._head()
        if self.place.trainer is not None and self.current is not None and self.current.turn not in self.trainer:
            trainer = read_trainer_logprobs(self.place.trainer)
            if trainer:
                self.trainer = trainer
                self.redraw()
                self.refresh_bindings()

    # -- the turn --------------------------------------------------------------------------

    @property
    def current(self) -> CaptureRecord | None:
        return self.records[self.position] if 0 <= self.position < len(self.records) else None

    @property
    def trainer_logprobs(self) -> list[float] | None:
        return trainer_logprobs(self.trainer, self.current)

    def _open_turn(self) -> None:
        record = self.current
        decoder = self.decoder or TokenDecoder(None)
        self.pieces = [decoder.piece(tok) for tok in record.output] if record is not None else []
        self.stats = TurnStats.of(sampler_logprobs(record)) if record is not None else None
        self.ranks = self.stats.ranks() if self.stats is not None else {}
        self.cursor = self.stats.order[0] if self.stats is not None else 0  # start on the least likely token
        if self.diff_mode and self.trainer_logprobs is None:
            self.diff_mode = False
        self.redraw()
        self.call_after_refresh(self._scroll_to_cursor)

    def _scale(self) -> LogprobScale:
        p = palette_of(self.app)
        scale = LogprobScale.for_theme(
            background=background_of(self.app),
            foreground=p.fg,
            warning=p.warning,
            error=p.error,
        )
        return scale.stretched(self.stats) if self.relative else scale

    def redraw(self) -> None:
        """Lay the turn's tokens out again (turn, scale, theme or width changed)."""
        if not self.is_mounted:
            return
        p = palette_of(self.app)
        logprobs = sampler_logprobs(self.current)
        if self.diff_mode:
            diffs = differences(self.trainer_logprobs, logprobs)
            diff_scale = DiffScale.for_theme(
                background=background_of(self.app), foreground=p.fg, more=p.success, less=p.error, diffs=diffs
            )
            styles = [diff_scale.style(d) + Style(meta={"token": i}) for i, d in enumerate(diffs)]
            legend = diff_scale.legend(diffs, muted=p.muted)
        else:
            scale = self._scale()
            styles = [scale.style(lp) + Style(meta={"token": i}) for i, lp in enumerate(logprobs)]
            room = self.query_one("#klegend", Static).content_size.width or self.app.size.width - 2
            legend = scale.legend(self.stats, muted=p.muted, room=room)
        self.query_one("#klegend", Static).update(legend)
        width = self.body.scrollable_content_region.width or self.app.size.width - 4
        self.token_layout = lay_out(self.pieces, styles, width)
        self._head()
        self._show_cursor()

    def on_resize(self, event: events.Resize) -> None:
        if self.loaded:
            self.call_after_refresh(self.redraw)

    # -- header, cursor, detail -------------------------------------------------------------

    def _head(self) -> None:
        if not self.is_mounted:
            return
        box = self.query_one("#khead", Static)
        text = head_text(
            palette_of(self.app),
            box.content_size.width or self.app.size.width - 2,
            trial=self.trial,
            t=self.app.state.trials.get(self.trial),
            evaluation=self.place.evaluation,
            after=self.place.step,
            record=self.current,
            position=self.position,
            turns=len(self.records),
            loaded=self.loaded,
            ids_only=self.decoder is not None and not self.decoder.available,
            training=trial_training(self.app.state, self.trial, evaluation=self.place.evaluation),
        )
        box.update(text)

    def _show_cursor(self) -> None:
        if self.token_layout is None:
            return
        cursor = self.cursor if self.pieces else None
        p = palette_of(self.app)
        style = Style(color=background_of(self.app), bgcolor=p.accent, bold=True, underline=True)
        self.query_one("#ktokens", TokenText).update(self.token_layout.with_cursor(cursor, style))
        self._detail()

    def _detail(self) -> None:
        box = self.query_one("#kdetail", Static)
        text = detail_text(
            palette_of(self.app),
            box.content_size.width or self.app.size.width - 2,
            record=self.current,
            pieces=self.pieces,
            cursor=self.cursor,
            logprobs=sampler_logprobs(self.current),
            rank=self.ranks.get(self.cursor),
            training=trial_training(self.app.state, self.trial, evaluation=self.place.evaluation),
            trainer=self.trainer_logprobs,
        )
        box.update(text)

    def select(self, index: int) -> None:
        if not self.pieces:
            return
        self.cursor = max(0, min(len(self.pieces) - 1, index))
        if self.token_layout is not None:
            self.goal_col = self.token_layout.cols[self.cursor]
        self._show_cursor()
        self._scroll_to_cursor()

    def _scroll_to_cursor(self) -> None:
        if self.token_layout is None or not self.pieces:
            return
        body = self.body
        y = scrolled_to(self.token_layout.rows[self.cursor], body.scroll_y, body.scrollable_content_region.height)
        if y is not None:
            body.scroll_to(y=y, animate=False)

    def show(self, state: RunState, now: float, changed: set[str], everything: bool = False) -> None:
        """Called by the app when the run's state changed: the trial's reward and its step's
        training (loss mask, advantage) may have moved on."""
        if self.loaded:
            self._head()
            self._detail()

    # -- actions ---------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "mode":
            return self.trainer_logprobs is not None or self.diff_mode
        return True

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_turn(self, step: int) -> None:
        if not self.records:
            return
        position = max(0, min(len(self.records) - 1, self.position + step))
        if position != self.position:
            self.position = position
            self._open_turn()
            self.refresh_bindings()

    def action_cursor(self, how: str, n: int) -> None:
        """A cursor key: ``move`` n tokens, ``word`` to a word's start, ``edge`` to the first or
        last token (``cursor_target``); ``row`` n rows, ``page`` n pages of them, at the column
        the cursor was on before it went up or down (through shorter rows)."""
        if how not in ("row", "page"):
            self.select(cursor_target(how, n, self.cursor, self.pieces))
            return
        if how == "page":
            n *= max(1, self.body.scrollable_content_region.height - 1)
        if self.token_layout is None or not self.pieces:
            return
        goal = self.goal_col
        self.select(self.token_layout.vertical(self.cursor, n, goal))
        self.goal_col = goal

    def action_rank(self, step: int) -> None:
        """Through the turn's tokens from the least likely on: ``n`` the next less likely."""
        if self.stats is None:
            return
        self.select(by_rank(self.cursor, step, self.stats, self.ranks))

    def action_relative(self) -> None:
        self.relative = not self.relative
        self.diff_mode = False
        self.redraw()

    def action_mode(self) -> None:
        self.diff_mode = not self.diff_mode and self.trainer_logprobs is not None
        self.redraw()
