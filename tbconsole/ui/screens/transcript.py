"""One trial's transcript, live: instruction, each turn (what was new in its request: tool
output, user text; then the reply: reasoning, text, tool calls), rejected requests, the
verifier's output, reward or exception, the agent's log.

The turns come from the trial's capture file, read as it grows (``CaptureFollower``): once a second
and whenever a ``proxy.request`` event of this trial arrives, so a reply shows within a second
of its capture, live, attached or replayed. Lines without text (older runs) are decoded from
their tokens; Harbor's files fill in the rest when they exist (``transcript_doc`` says which
wins). Only this screen holds the text, only while it is open; the reducer keeps counts.

The view draws only what is on screen (``TranscriptView``). It follows the bottom unless you
scrolled up; then it counts the new turns until you come back (End). ``c`` colours the replies'
tokens by probability; ``k`` opens the token view of the turn at the top of the view; ``h`` shows
the command that opens the trial's Harbor folder in ``harbor view`` and copies it (the console
starts no server).
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from tbconsole.common.formatting import format_count, format_duration
from tbconsole.harbor.harborview import harbor_view
from tbconsole.record.capturefile import CaptureRecord
from tbconsole.record.enums import TrainingMode
from tbconsole.state import RunState, TrialState
from tbconsole.ui.data.captures import CaptureFollower, locate, trial_capture_file
from tbconsole.ui.data.tokenizer import load_decoder
from tbconsole.ui.data.trialfiles import files_signature, load_trial_files
from tbconsole.ui.present.sanitize import one_line, plain
from tbconsole.ui.present.token_text import TokenDecoder
from tbconsole.ui.present.transcript_doc import Options, TranscriptBuilder, turn_weights
from tbconsole.ui.present.trial_outputs import TrialFiles
from tbconsole.ui.screens.host import ConsoleHost
from tbconsole.ui.widgets.base import Palette, palette_of
from tbconsole.ui.widgets.footer import KeyFooter
from tbconsole.ui.widgets.transcript_view import TranscriptView


class TranscriptScreen(Screen[None]):
    DEFAULT_CSS = """
    TranscriptScreen #thead { height: auto; max-height: 6; background: $panel; padding: 0 1; }
    TranscriptScreen #tstatus { height: 1; background: $panel; padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("end", "follow", "Follow"),
        Binding("c", "logprobs", "Logprobs"),
        Binding("k", "tokens", "Tokens"),
        Binding("x", "cancel_trial", "Cancel trial"),
        Binding("h", "harbor_view", "Harbor view"),
        Binding("home", "top", "Top", show=False),
    ]

    app = getters.app(ConsoleHost)

    def __init__(self, trial: str):
        super().__init__()
        self.trial = trial
        self.new_turns = 0
        self.files: TrialFiles | None = None
        self.files_sig: tuple = ()
        self.tail = CaptureFollower()
        self.records: list[CaptureRecord] = []
        self.logprobs = False
        self.decoder: TokenDecoder | None = None
        self._decoder_wanted = False
        self._builder = TranscriptBuilder()
        self._seen: tuple = ()  # what the transcript was last built from (requests, done, trained by)
        self._header = Static(id="thead")
        self.body = TranscriptView(id="tbody")
        self._footline = Static(id="tstatus")

    def compose(self) -> ComposeResult:
        yield self._header
        yield self.body
        yield self._footline
        yield KeyFooter()

    @property
    def blocks(self) -> list[str]:
        """The keys of the sections shown, in order ("instruction", "turn0", …, "verifier")."""
        return [s.key for s in self.body.sections]

    def on_mount(self) -> None:
        self.body.focus()
        self._reload_files()
        self._read_captures()
        # Built now, not at the app's next tick: the frame that opens the screen shows the transcript.
        self.show(self.app.state, self.app.now(), set(), rebuild=True)

    # -- sources -------------------------------------------------------------------------

    def _trial(self) -> TrialState | None:
        return self.app.state.find_trial(self.trial)  # a held-out trial too

    def _capture_file(self) -> Path | None:
        """The trial's capture file: under the run's log_path, or, for a run folder read from
        another place (moved, copied), under the folder this console reads."""
        t = self._trial()
        if t is None:  # a step the memory no longer holds (found by `f`): its id says where
            return self.tail.path or locate(self.app.state, self.trial).capture
        folders = [self.app.state.log_path]
        for where in (getattr(self.app, "replay_path", None), getattr(self.app.source, "path", None)):
            if where is not None:
                where = Path(where)
                folders.append(str(where.parent if where.suffix == ".jsonl" else where))
        return trial_capture_file(t, folders)

    def _read_captures(self) -> bool:
        """Read what the capture file gained; True when there are new turns."""
        new = self.tail.read_new(self._capture_file)
        if not new:
            return False
        self.records.extend(new)
        if not self._decoder_wanted and any(not r.has_text for r in new):
            self._load_decoder()
        return True

    def _reload_files(self) -> bool:
        t = self._trial()
        trial_dir = t.trial_dir if t is not None else self.app.trial_dirs.get(self.trial)
        sig = files_signature(trial_dir)
        if self.files is not None and sig == self.files_sig:
            return False
        self.files = load_trial_files(trial_dir)
        self.files_sig = sig
        return True

    def _load_decoder(self) -> None:
        """The tokenizer, in a thread (it takes a moment to load): for lines without text and ``c``."""
        self._decoder_wanted = True
        self.run_worker(self._decoder_thread, thread=True, exclusive=True, group="decoder")

    def _decoder_thread(self) -> None:
        decoder = load_decoder(self.app.state.model_name)
        self.app.call_from_thread(self._decoder_ready, decoder)

    def _decoder_ready(self, decoder: TokenDecoder) -> None:
        self.decoder = decoder
        self.rebuild()
        self._status(palette_of(self.app))

    def _shown_records(self, t: TrialState | None) -> list[CaptureRecord]:
        """A replay moved back to before the trial ended shows the turns reported so far."""
        if self.app.replay is None or t is None or t.done:
            return self.records
        reported = max((turn.turn for turn in t.transcript if turn.turn is not None), default=-1)
        return [r for r in self.records if r.turn <= reported]

    # -- drawing -----------------------------------------------------------------------------

    def show(
        self, state: RunState, now: float, changed: set[str], everything: bool = False, *, rebuild: bool = False
    ) -> None:
        t = state.find_trial(self.trial)
        p = palette_of(self.app)
        self._header.update(self._head(t, now, p))
        if everything:
            self.body.restyle()
        seen = (len(t.transcript), t.counters.requests, t.done, t.update) if t is not None else ()
        if seen != self._seen:  # a proxy.request of this trial, or its end: its line is in the file by now
            self._read_captures()
            rebuild = True
            self.refresh_bindings()  # x goes from the footer once the trial has ended
        if rebuild or everything:
            self.rebuild()
        self._status(p)

    def on_second(self) -> None:
        """Called once a second by the app: turns captured since, trial files as they appear."""
        grew = self._read_captures()
        reloaded = self._reload_files()
        if reloaded:  # the header says how the agent exited, from its files
            self._header.update(self._head(self._trial(), self.app.now(), palette_of(self.app)))
        if reloaded or grew:
            self.rebuild()
        self._status(palette_of(self.app))

    def rebuild(self) -> None:
        t = self._trial()
        self._seen = (len(t.transcript), t.counters.requests, t.done, t.update) if t is not None else ()
        files = self.files or TrialFiles(trial_dir=None)
        sync = self.app.state.pipeline.mode == TrainingMode.SYNC
        sections = self._builder.build(
            t,
            self._shown_records(t),
            files,
            Options(logprobs=self.logprobs, decoder=self.decoder),
            turn_weights(t, sync),
        )
        body = self.body
        if not body.follow and body.sections:
            before = {s.key for s in body.sections}
            self.new_turns += sum(1 for s in sections if s.is_turn and s.key not in before)
        body.set_sections(sections)

    def _head(self, t: TrialState | None, now: float, p: Palette) -> Text:
        head = Text()
        head.append("trial ", style=p.muted)
        head.append(one_line(self.trial, 120), style=f"bold {p.primary}")
        if t is None:
            head.append("  (no longer in memory: showing its folder)", style=p.muted)
            return head
        head.append(f"  {one_line(t.task, 60)}", style="bold")
        if t.evaluation:
            head.append(f"  held-out · step {t.step} · task {t.group} · trial {t.index + 1}", style=p.accent)
        else:
            head.append(f"  step {t.step} · group {t.group} · trial {t.index + 1}", style=p.muted)
        head.append("\n")
        if t.done:
            # The agent's own word on how it exited, when it differs from the outcome the runner
            # gave: a trial cut at its step limit is "Submitted" to Harbor (the agent exited 0).
            exited = self.files.agent_exit if self.files is not None else None
            if exited is not None and exited == t.outcome:
                exited = None
            if t.scored and t.reward is not None:
                head.append(f"reward {t.reward:g}", style=f"bold {p.success if t.reward >= 1 else p.warning}")
                if exited is not None:
                    head.append(f"  agent exit {one_line(exited, 40)}", style=f"bold {p.warning}")
                    head.append(f" (scored as {t.outcome})", style=p.muted)
                else:
                    head.append(f"  {t.outcome}", style=p.muted)
            else:
                head.append(f"{one_line(t.outcome, 40)}", style=f"bold {p.error}")
                if exited is not None:
                    head.append(f"  agent exit {one_line(exited, 40)}", style=p.warning)
                if t.exception_type:
                    head.append(
                        f"  {one_line(t.exception_type, 60)}: {one_line(t.exception_message, 200)}", style=p.error
                    )
        elif t.cancelled:
            head.append("cancelled", style=f"bold {p.muted}")
            head.append(f" in {t.phase} (its group failed or the run ended; not scored)", style=p.muted)
        else:
            head.append(f"{t.phase}", style=f"bold {p.primary}")
            head.append(f" for {format_duration(t.phase_elapsed(now))}", style=p.muted)
        head.append(
            f"  {format_count(t.live_turns)} turns  {format_count(t.live_tokens)} output tokens"
            f"  elapsed {format_duration(t.elapsed(now))}",
            style=p.muted,
        )
        c = t.counters
        if c.rejected or c.lost:
            head.append(f"  rejected {c.rejected}  lost {c.lost}", style=p.error if c.lost else p.warning)
        head.append("\nfolder ", style=p.muted)
        head.append(one_line(t.trial_dir or "– (not yet created)", 200))
        return head

    def _status(self, p: Palette) -> None:
        s = Text(no_wrap=True)
        if self.new_turns and not self.body.follow:
            s.append(
                f" ↓ {self.new_turns} new turn{'s' if self.new_turns > 1 else ''} (End to follow) ",
                style=f"bold reverse {p.accent}",
            )
        else:
            self.new_turns = 0
            s.append("following" if self.body.follow else "scrolled", style=p.muted)
        s.append(f"  {len(self.records)} captured turns", style=p.muted)
        s.append("  logprobs ", style=p.muted)
        s.append("on" if self.logprobs else "off", style="bold" if self.logprobs else p.muted)
        if self.decoder is not None and not self.decoder.available:
            s.append(" (no tokenizer found: token ids)", style=p.muted)
        problems = list(self.files.problems) if self.files else []
        if self.tail.damaged:
            problems.append(f"{self.tail.damaged} damaged capture lines skipped")
        if problems:
            s.append("  " + one_line("; ".join(problems), 80), style=p.warning)
        self._footline.update(s)

    # -- actions ---------------------------------------------------------------------------

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_cancel_trial(self) -> None:
        if self.check_action("cancel_trial", ()):
            self.app.confirm_cancel_trial(self.trial)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_trial":
            return self.app.can_cancel_trial(self.trial)
        return True

    def action_follow(self) -> None:
        self.new_turns = 0
        self.body.follow_bottom()
        self._status(palette_of(self.app))

    def action_top(self) -> None:
        self.body.to_top()
        self._status(palette_of(self.app))

    def action_logprobs(self) -> None:
        self.logprobs = not self.logprobs
        if self.logprobs and self.decoder is None:
            if not self._decoder_wanted:
                self._load_decoder()
        else:
            self.rebuild()
        if self.logprobs and not self.records:
            self.app.notify("no capture file for this trial (yet)", severity="warning")
        self._status(palette_of(self.app))

    def action_harbor_view(self) -> None:
        """The command that opens this trial's Harbor trial folder in Harbor's viewer: shown, and
        copied to the clipboard (the terminal's, through OSC 52, as Textual copies a selection)."""
        t = self._trial()
        trial_dir = t.trial_dir if t is not None else self.app.trial_dirs.get(self.trial)
        if not trial_dir:
            self.app.notify("h: Harbor has not made this trial's folder (yet)", severity="warning")
            return
        view = harbor_view(trial_dir)
        self.app.copy_to_clipboard(view.command)
        self.app.notify(plain(view.describe()), title="harbor view · copied to the clipboard", markup=False, timeout=30)

    def action_tokens(self) -> None:
        """The token view of the captured turn nearest the top of the view (at or below it, else
        the last above), from anywhere in the transcript; else a notice that says why not."""
        body = self.body
        turn = body.nearest_turn(round(body.scroll_y))
        if turn is None:
            self.app.notify(
                "k: this trial has no captured turn: its agent has not called the model (yet), "
                "or its capture file is gone",
                severity="warning",
            )
            return
        try:
            from tbconsole.ui.screens.tokens import TokenScreen
        except ImportError:
            self.app.notify("the token view is not part of this version of the console", severity="warning")
            return
        self.app.push_screen(TokenScreen(self.trial, turn))
