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

import math

from rich.style import Style
from rich.text import Text
from textual import events, getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tbconsole.common.formatting import format_seconds
from tbconsole.record.capturefile import CaptureRecord
from tbconsole.state import RunState
from tbconsole.ui.data.captures import CaptureFollower, TrialPlace, locate, read_trainer_logprobs
from tbconsole.ui.data.tokenizer import shared_decoder
from tbconsole.ui.present.fit import GLUE, fit, glue_numbers, hang_text
from tbconsole.ui.present.logprob_scale import DiffScale, LogprobScale, TurnStats, escaped, logprob_text, prob_text
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.token_layout import TokenLayout, lay_out, word_start
from tbconsole.ui.present.token_text import TokenDecoder
from tbconsole.ui.present.trained import Training, trial_training
from tbconsole.ui.present.wording import format_value
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
        Binding("left", "move(-1)", "token", show=False),
        Binding("right", "move(1)", "token", show=False),
        Binding("ctrl+left,b", "word(-1)", "word", show=False),
        Binding("ctrl+right,w", "word(1)", "word", show=False),
        Binding("up", "row(-1)", "line", show=False),
        Binding("down", "row(1)", "line", show=False),
        Binding("pageup", "page(-1)", "page", show=False),
        Binding("pagedown", "page(1)", "page", show=False),
        Binding("home", "edge(0)", "first", show=False),
        Binding("end", "edge(1)", "last", show=False),
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

    def compose(self) -> ComposeResult:
        yield Static(id="khead")
        yield Static(id="klegend")
        with VerticalScroll(id="kbody", can_focus=False):
            yield TokenText(id="ktokens")
        yield Static(id="kdetail")
        yield KeyFooter()

    @property
    def body(self) -> VerticalScroll:
        return self.query_one("#kbody", VerticalScroll)

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
        record = self.current
        if record is None:
            return None
        row = self.trainer.get(record.turn)
        return row if row is not None and len(row) == len(record.output) else None

    def _open_turn(self) -> None:
        record = self.current
        decoder = self.decoder or TokenDecoder(None)
        self.pieces = [decoder.piece(tok) for tok in record.output] if record is not None else []
        self.stats = TurnStats.of(self._logprobs()) if record is not None else None
        self.ranks = self.stats.ranks() if self.stats is not None else {}
        self.cursor = self.stats.order[0] if self.stats is not None else 0  # start on the least likely token
        if self.diff_mode and self.trainer_logprobs is None:
            self.diff_mode = False
        self.redraw()
        self.call_after_refresh(self._scroll_to_cursor)

    def _logprobs(self) -> list[float]:
        record = self.current
        if record is None:
            return []
        lps = list(record.logprobs[: len(record.output)])
        return lps + [0.0] * (len(record.output) - len(lps))  # a short row: unknown reads as certain

    def _background(self) -> str:
        theme = self.app.current_theme
        return theme.background or ("#000000" if theme.dark else "#FFFFFF")

    def _scale(self) -> LogprobScale:
        p = palette_of(self.app)
        scale = LogprobScale.for_theme(
            background=self._background(),
            foreground=p.fg,
            warning=p.warning,
            error=p.error,
        )
        return scale.stretched(self.stats) if self.relative else scale

    def _diff_scale(self) -> DiffScale:
        p = palette_of(self.app)
        return DiffScale.for_theme(
            background=self._background(),
            foreground=p.fg,
            more=p.success,
            less=p.error,
            diffs=self._diffs(),
        )

    def _diffs(self) -> list[float]:
        trainer = self.trainer_logprobs or []
        return [tr - sa for tr, sa in zip(trainer, self._logprobs(), strict=False)]

    def redraw(self) -> None:
        """Lay the turn's tokens out again (turn, scale, theme or width changed)."""
        if not self.is_mounted:
            return
        muted = palette_of(self.app).muted
        logprobs = self._logprobs()
        if self.diff_mode:
            diff_scale = self._diff_scale()
            diffs = self._diffs()
            styles = [diff_scale.style(d) + Style(meta={"token": i}) for i, d in enumerate(diffs)]
            legend = diff_scale.legend(diffs, muted=muted)
        else:
            scale = self._scale()
            styles = [scale.style(lp) + Style(meta={"token": i}) for i, lp in enumerate(logprobs)]
            room = self.query_one("#klegend", Static).content_size.width or self.app.size.width - 2
            legend = scale.legend(self.stats, muted=muted, room=room)
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
        p = palette_of(self.app)
        state: RunState = self.app.state
        t = state.trials.get(self.trial)
        head = Text(no_wrap=True, overflow="ellipsis")
        head.append("tokens ", style=p.muted)
        head.append(one_line(self.trial, 100), style=f"bold {p.primary}")
        if t is not None:
            head.append(f"  step {t.step} · group {t.group} · trial {t.index + 1}", style=p.muted)
            if t.reward is not None:
                head.append(f"  reward {format_value(t.reward)}", style="bold")
        elif self.place.evaluation:
            head.append(f"  held-out evaluation · after {self.place.step} updates", style=p.muted)
        head.append("\n")
        record = self.current
        if record is None:
            head.append(
                "loading the capture file…" if not self.loaded else "no captured turn for this trial (yet)",
                style=p.muted,
            )
        else:
            head.append(f"turn {self.position + 1} of {len(self.records)}", style="bold")
            head.append(f" (capture turn {record.turn})  {len(record.output)} tokens", style=p.muted)
            if record.stop_reason:
                head.append(f"  stop: {one_line(record.stop_reason, 20)}", style=p.muted)
            if record.sample_ms is not None:
                head.append(f"  sampled in {format_seconds(record.sample_ms / 1000)}", style=p.muted)
            if self.decoder is not None and not self.decoder.available:
                head.append("  (no tokenizer found: token ids)", style=p.warning)
        head.append("\n")
        training = self.training
        colour = {True: p.success, False: p.warning, None: p.muted}[training.mask]
        # The numbers first, then why, wrapped under them: nothing is left alone at a line's start.
        mask = Text("loss mask ", style=p.muted)
        mask.append({True: "1", False: "0", None: "?"}[training.mask], style=f"bold {colour}")
        if training.advantage is not None and training.mask:
            mask.append(f"  advantage{GLUE}{training.advantage:+.4g}", style="bold")
        mask.append(f"  {glue_numbers(one_line(training.why, 160))}", style=colour)
        box = self.query_one("#khead", Static)
        width = box.content_size.width or self.app.size.width - 2
        head.append_text(hang_text(mask, width, indent=2, first=0))
        box.update(head)

    @property
    def training(self) -> Training:
        return trial_training(self.app.state, self.trial, evaluation=self.place.evaluation)

    def _show_cursor(self) -> None:
        if self.token_layout is None:
            return
        cursor = self.cursor if self.pieces else None
        p = palette_of(self.app)
        style = Style(color=self._background(), bgcolor=p.accent, bold=True, underline=True)
        self.query_one("#ktokens", TokenText).update(self.token_layout.with_cursor(cursor, style))
        self._detail()

    def _detail(self) -> None:
        p = palette_of(self.app)
        out = Text(no_wrap=True, overflow="ellipsis")
        record = self.current
        if record is None or not self.pieces:
            out.append("no tokens in this turn" if record is not None else "", style=p.muted)
            self.query_one("#kdetail", Static).update(out)
            return
        # Three lines of a fixed box: each is fitted to the width (what says least goes first),
        # so that no line wraps and pushes the next one out of sight.
        width = self.query_one("#kdetail", Static).content_size.width or self.app.size.width - 2
        i = self.cursor
        lp = self._logprobs()[i]
        line = Text(f"token {i + 1}/{len(self.pieces)}", style="bold")
        line.append(f"  id {record.output[i]}  ")
        line.append(escaped(self.pieces[i]), style=f"bold {p.accent}")
        line.append(f"  logprob {logprob_text(lp)}  p {prob_text(math.exp(lp))}", style="bold")
        rank = self.ranks.get(i)
        if rank is not None:
            ranked = fit(
                [f"  rank {rank}/{len(self.pieces)} (1: least likely)", f"  rank {rank}"], width - line.cell_len
            )
            line.append(ranked, style=p.muted)
        out.append_text(line)
        out.append("\n")
        training = self.training
        line = Text("loss mask ", style=p.muted)
        line.append({True: "1 trained on", False: "0 not trained on", None: "? not known yet"}[training.mask])
        if training.advantage is not None:
            line.append("  advantage ", style=p.muted)
            line.append(f"{training.advantage:+.4g}", style="bold")
            if not training.trained:
                line.append(
                    fit([" (step not trained yet)", " (not trained yet)"], width - line.cell_len), style=p.muted
                )
        if training.mask is not True:  # why, when it fits (the header above says it in full)
            why = f"  ({one_line(training.why, 120)})"
            line.append(why if line.cell_len + len(why) <= width else "", style=p.muted)
        out.append_text(line)
        out.append("\n")
        trainer = self.trainer_logprobs
        if trainer is not None:
            out.append("trainer logprob ", style=p.muted)
            out.append(logprob_text(trainer[i]), style="bold")
            out.append("  trainer − sampler ", style=p.muted)
            out.append(f"{trainer[i] - lp:+.4g}", style="bold")
        else:
            out.append("trainer logprobs: not recorded for this turn", style=p.muted)
        self.query_one("#kdetail", Static).update(out)

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
        row, body = self.token_layout.rows[self.cursor], self.body
        height = body.scrollable_content_region.height
        if row < body.scroll_y:
            body.scroll_to(y=max(0, row - 1), animate=False)
        elif row >= body.scroll_y + height:
            body.scroll_to(y=row - height + 2, animate=False)

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

    def action_move(self, step: int) -> None:
        self.select(self.cursor + step)

    def action_word(self, direction: int) -> None:
        self.select(word_start(self.pieces, self.cursor, direction))

    def action_row(self, rows: int) -> None:
        if self.token_layout is None or not self.pieces:
            return
        goal = self.goal_col
        self.select(self.token_layout.vertical(self.cursor, rows, goal))
        self.goal_col = goal

    def action_page(self, direction: int) -> None:
        self.action_row(direction * max(1, self.body.scrollable_content_region.height - 1))

    def action_edge(self, end: int) -> None:
        self.select(len(self.pieces) - 1 if end else 0)

    def action_rank(self, step: int) -> None:
        """Through the turn's tokens from the least likely on: ``n`` the next less likely."""
        if self.stats is None:
            return
        rank = self.ranks.get(self.cursor, 1) - 1
        self.select(self.stats.order[(rank + step) % len(self.stats.order)])

    def action_relative(self) -> None:
        self.relative = not self.relative
        self.diff_mode = False
        self.redraw()

    def action_mode(self) -> None:
        self.diff_mode = not self.diff_mode and self.trainer_logprobs is not None
        self.redraw()
