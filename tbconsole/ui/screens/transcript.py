"""One trial's transcript: instruction, each turn (messages, tool calls, tool output), the
verifier's output, reward or exception, trial folder.

Sources: the proxy's events (a turn per model call, with its text when the proxy sends it),
the trial folder (Harbor's ATIF ``agent/trajectory.json``, verifier output, ``result.json``) and
the capture file (tokens with logprobs, for ``c``). While the trial runs it live-tails: new
turns are appended; the view follows the bottom unless you scrolled up, then it counts the new
turns until you come back (End). Every string from a model or a tool is shown as plain text.
"""

from __future__ import annotations

import math
from functools import partial

from rich.console import Group
from rich.rule import Rule
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from tbconsole.state import RunState, TrialState, Turn
from tbconsole.ui.present import format_count, format_duration
from tbconsole.ui.sanitize import one_line, text
from tbconsole.ui.trialfiles import (
    TokenDecoder,
    TrialFiles,
    capture_path,
    files_signature,
    load_trial_files,
    read_capture_outputs,
)
from tbconsole.ui.widgets.base import Palette, palette_of
from tbconsole.ui.widgets.footer import KeyFooter

TEXT_LIMIT = 20000


class TranscriptScreen(Screen):
    DEFAULT_CSS = """
    TranscriptScreen #thead { height: auto; max-height: 6; background: $panel; padding: 0 1; }
    TranscriptScreen #tbody { height: 1fr; padding: 0 1; }
    TranscriptScreen #tstatus { height: 1; background: $panel; padding: 0 1; }
    TranscriptScreen .block { margin-bottom: 1; }
    """
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("end", "follow", "Follow"),
        Binding("c", "logprobs", "Logprobs"),
        Binding("home", "top", "Top", show=False),
    ]

    def __init__(self, trial: str):
        super().__init__()
        self.trial = trial
        self.blocks: list[str] = []  # keys of the blocks mounted, in order
        self.new_turns = 0
        self.files: TrialFiles | None = None
        self.files_sig: tuple = ()
        self.logprobs = False
        self.capture: dict[int, tuple[list[int], list[float]]] = {}
        self.decoder: TokenDecoder | None = None
        self.turns_seen = 0
        self.done_seen = False

    def compose(self) -> ComposeResult:
        yield Static(id="thead")
        yield VerticalScroll(id="tbody")
        yield Static(id="tstatus")
        yield KeyFooter()

    @property
    def body(self) -> VerticalScroll:
        return self.query_one("#tbody", VerticalScroll)

    def on_mount(self) -> None:
        self.body.anchor()  # follow the bottom until the user scrolls up; back at the bottom: follow again
        self.body.focus()
        self.reload_files()
        # Drawn now, not at the app's next tick: the first frame shows the whole transcript.
        self.show(self.app.state, self.app.now(), set())

    def reload_files(self) -> None:
        t = self.app.state.trials.get(self.trial)
        trial_dir = t.trial_dir if t is not None else self.app.trial_dirs.get(self.trial)
        sig = files_signature(trial_dir)
        if self.files is None or sig != self.files_sig:
            self.files = load_trial_files(trial_dir)
            self.files_sig = sig
            self.rebuild()

    # -- rendering ------------------------------------------------------------------------

    def show(self, state: RunState, now: float, changed: set[str], everything: bool = False) -> None:
        t = state.trials.get(self.trial)
        p = palette_of(self.app)
        self.query_one("#thead", Static).update(self._head(t, now, p))
        done = t is not None and t.done
        if everything:
            self.rebuild()
        elif done != self.done_seen:
            self.rebuild()
        elif t is not None and len(t.transcript) != self.turns_seen and not (self.files and self.files.steps):
            self._append_blocks()
        self._status(p)

    def on_second(self) -> None:
        """Called once a second by the app: pick up trial files as they appear."""
        self.reload_files()

    def _head(self, t: TrialState | None, now: float, p: Palette) -> Text:
        head = Text()
        head.append("trial ", style=p.muted)
        head.append(one_line(self.trial, 120), style=f"bold {p.primary}")
        if t is None:
            head.append("  (no longer in memory: showing its folder)", style=p.muted)
            return head
        head.append(f"  {one_line(t.task, 60)}", style="bold")
        head.append(f"  step {t.step} · group {t.group} · trial {t.index + 1}", style=p.muted)
        head.append("\n")
        if t.done:
            if t.scored and t.reward is not None:
                head.append(f"reward {t.reward:g}", style=f"bold {p.success if t.reward >= 1 else p.warning}")
                head.append(f"  {t.outcome}", style=p.muted)
            else:
                head.append(f"{one_line(t.outcome, 40)}", style=f"bold {p.error}")
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
            f"  {t.live_turns} turns  {format_count(t.live_tokens)} output tokens"
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
        if self.new_turns and not self._at_bottom():
            s.append(
                f" ↓ {self.new_turns} new turn{'s' if self.new_turns > 1 else ''} (End to follow) ",
                style=f"bold reverse {p.accent}",
            )
        else:
            self.new_turns = 0
            s.append("following", style=p.muted)
        s.append("  logprobs ", style=p.muted)
        s.append("on" if self.logprobs else "off", style="bold" if self.logprobs else p.muted)
        if self.logprobs and self.decoder is not None and not self.decoder.available:
            s.append(" (no tokenizer found: token ids)", style=p.muted)
        if self.files and self.files.problems:
            s.append("  " + one_line("; ".join(self.files.problems), 80), style=p.warning)
        self.query_one("#tstatus", Static).update(s)

    def _at_bottom(self) -> bool:
        """Following: anchored and not released by the user scrolling up."""
        body = self.body
        return not body._anchor_released or body.scroll_y >= body.max_scroll_y - 1

    def _blocks(self) -> list[tuple[str, object]]:
        """(key, renderable) for everything the transcript shows, in order."""
        p = palette_of(self.app)
        t = self.app.state.trials.get(self.trial)
        files = self.files or TrialFiles(trial_dir=None)
        out: list[tuple[str, object]] = []
        instruction = files.instruction
        if instruction is None and t is not None:
            for turn in t.transcript:
                if turn.messages:
                    instruction = turn.messages[0].get("content")
                    break
        out.append(
            (
                "instruction",
                Group(
                    Rule(Text("instruction", style=f"bold {p.primary}"), style=p.muted),
                    text(instruction if instruction else "(not known yet)", limit=TEXT_LIMIT),
                ),
            )
        )
        if files.steps:
            for step in files.steps:
                out.append((f"atif{step.step_id}", self._atif_block(step, p)))
        elif t is not None:
            for turn in t.transcript:
                out.append((f"turn{turn.index}", self._turn_block(turn, p)))
        if t is None or t.done or files.verifier_stdout or files.rewards or files.exception:
            out.append(("verifier", self._verifier_block(t, files, p)))
        return out

    def _atif_block(self, step, p: Palette):
        parts = []
        colour = {"agent": p.primary, "user": p.accent, "system": p.muted}.get(step.source, p.fg)
        title = Text(f"{step.step_id} · {step.source}", style=f"bold {colour}")
        if step.completion_tokens is not None:
            title.append(f"  {step.prompt_tokens or 0}→{step.completion_tokens} tokens", style=p.muted)
        parts.append(Rule(title, style=p.muted, align="left"))
        if step.reasoning:
            parts.append(text(step.reasoning, style=f"italic {p.muted}", limit=TEXT_LIMIT))
        captured = self._captured_text(step.step_id - 1, p) if step.source == "agent" else None
        parts.append(captured if captured is not None else text(step.message, limit=TEXT_LIMIT))
        for name, args in step.tool_calls:
            call = Text("→ ", style=p.accent)
            call.append(one_line(name, 80), style=f"bold {p.accent}")
            call.append(" ")
            call.append_text(text(args, limit=4000))
            parts.append(call)
        for obs in step.observations:
            parts.append(Text("tool output", style=f"bold {p.muted}"))
            parts.append(text(obs, limit=TEXT_LIMIT))
        return Group(*parts)

    def _turn_block(self, turn: Turn, p: Palette):
        parts = []
        title = Text(f"turn {turn.index + 1}", style=f"bold {p.primary}")
        if turn.captured:
            title.append(f"  captured #{turn.turn}  {turn.prompt_tokens}→{turn.output_tokens} tokens", style=p.muted)
            if turn.stop_reason:
                title.append(f"  stop: {one_line(turn.stop_reason, 20)}", style=p.muted)
            if turn.sample_ms is not None:
                title.append(f"  {turn.sample_ms / 1000:.1f}s", style=p.muted)
        else:
            title.append(f"  rejected ({turn.status})", style=f"bold {p.warning}")
        parts.append(Rule(title, style=p.muted, align="left"))
        for m in turn.messages or []:
            label = Text(f"{one_line(m.get('role', '?'), 20)} ›", style=f"bold {p.accent}")
            parts.append(label)
            parts.append(text(m.get("content", ""), limit=TEXT_LIMIT))
        if turn.error:
            parts.append(text(turn.error, style=p.error, limit=4000))
        captured = self._captured_text(turn.turn, p) if turn.captured else None
        if captured is not None:
            parts.append(Text("assistant ›", style=f"bold {p.primary}"))
            parts.append(captured)
        elif turn.output_text is not None:
            parts.append(Text("assistant ›", style=f"bold {p.primary}"))
            parts.append(text(turn.output_text, limit=TEXT_LIMIT))
        elif turn.captured:
            parts.append(Text("(reply text not in the event stream; see the trial folder)", style=p.muted))
        return Group(*parts)

    def _captured_text(self, turn: int | None, p: Palette) -> Text | None:
        """The turn's output tokens coloured by logprob, when the toggle is on."""
        if not self.logprobs or turn is None or turn not in self.capture or self.decoder is None:
            return None
        tokens, logprobs = self.capture[turn]
        out = Text()
        for i, tok in enumerate(tokens):
            lp = logprobs[i] if i < len(logprobs) else None
            prob = math.exp(lp) if lp is not None else 1.0
            style = "" if prob >= 0.9 else (p.warning if prob >= 0.5 else f"bold {p.error}")
            out.append(text(self.decoder.piece(tok)).plain, style=style)
        return out

    def _verifier_block(self, t: TrialState | None, files: TrialFiles, p: Palette):
        parts = [Rule(Text("verifier", style=f"bold {p.primary}"), style=p.muted, align="left")]
        if files.rewards:
            parts.append(
                Text(
                    "rewards " + one_line(", ".join(f"{k}={v}" for k, v in files.rewards.items()), 300),
                    style=f"bold {p.success}",
                )
            )
        elif t is not None and t.reward is not None:
            parts.append(Text(f"reward {t.reward:g}", style=f"bold {p.success}"))
        if files.exception:
            parts.append(Text("exception", style=f"bold {p.error}"))
            parts.append(text(files.exception, limit=TEXT_LIMIT))
        elif t is not None and t.exception_type:
            parts.append(text(f"{t.exception_type}: {t.exception_message or ''}", style=p.error, limit=TEXT_LIMIT))
        if files.verifier_stdout:
            parts.append(Text("test-stdout.txt", style=f"bold {p.muted}"))
            parts.append(text(files.verifier_stdout, limit=TEXT_LIMIT))
        if files.verifier_stderr:
            parts.append(Text("test-stderr.txt", style=f"bold {p.muted}"))
            parts.append(text(files.verifier_stderr, limit=TEXT_LIMIT))
        if len(parts) == 1:
            parts.append(Text("(no verifier output)", style=p.muted))
        return Group(*parts)

    def rebuild(self) -> None:
        blocks = self._blocks()
        first = not self.blocks  # mounted at once: the frame that opens the screen shows them
        self.blocks = [key for key, _ in blocks]
        t = self.app.state.trials.get(self.trial)
        self.turns_seen = len(t.transcript) if t is not None else 0
        self.done_seen = t is not None and t.done
        if first:
            self.body.mount_all([Static(r, classes="block") for _, r in blocks])
            return
        # A function, not a coroutine: a render the next one replaces before it started is never awaited.
        self.run_worker(partial(self._replace, blocks), exclusive=True, group="render")

    async def _replace(self, blocks) -> None:
        body = self.body
        keep = body.scroll_y
        async with self.batch():
            await body.remove_children()
            await body.mount_all([Static(r, classes="block") for _, r in blocks])
        if body._anchor_released:
            body.scroll_to(y=keep, animate=False)

    def _append_blocks(self) -> None:
        at_bottom = self._at_bottom()
        blocks = self._blocks()
        keys = [key for key, _ in blocks]
        if keys[: len(self.blocks)] != self.blocks or "verifier" in self.blocks:
            self.rebuild()
            return
        new = blocks[len(self.blocks) :]
        t = self.app.state.trials.get(self.trial)
        self.turns_seen = len(t.transcript) if t is not None else 0
        self.blocks = keys
        if not new:
            return
        self.body.mount_all([Static(r, classes="block") for _, r in new])
        if not at_bottom:
            self.new_turns += sum(1 for key, _ in new if key.startswith(("turn", "atif")))

    # -- actions ---------------------------------------------------------------------------

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_follow(self) -> None:
        self.new_turns = 0
        self.body.anchor()
        self.body.scroll_end(animate=False)
        self._status(palette_of(self.app))

    def action_top(self) -> None:
        self.body.scroll_home(animate=False)

    def action_logprobs(self) -> None:
        self.logprobs = not self.logprobs
        if self.logprobs and self.decoder is None:
            self.run_worker(self._load_capture, thread=True, exclusive=True, group="capture")
        else:
            self.rebuild()
        self._status(palette_of(self.app))

    def _load_capture(self) -> None:
        state = self.app.state
        t = state.trials.get(self.trial)
        if t is not None:
            path = capture_path(state.log_path, t.step, t.group, self.trial)
            self.capture = {c.turn: (c.output, c.logprobs) for c in read_capture_outputs(path)}
        self.decoder = TokenDecoder.for_model(state.model_name) if self.capture else TokenDecoder(None)
        self.app.call_from_thread(self.rebuild)
        self.app.call_from_thread(self._status, palette_of(self.app))
        if not self.capture:
            self.app.call_from_thread(self.app.notify, "no capture file for this trial (yet)", severity="warning")
