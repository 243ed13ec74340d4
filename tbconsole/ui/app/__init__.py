"""The console app: one ``RunState`` fed by a source, rendered by the screens, steered by keys.

Flow: a source (in-process bus, tailed file, list) appends events to an ``Inbox`` from any
thread; a timer (``refresh_hz``, 10 by default) drains it for a bounded time slice, folds the
events into the state with the pure reducer, and redraws only the panels the events touched,
inside ``batch_update()``. A flood of events therefore costs at most one redraw per panel per
tick, and a long backlog is worked off over several ticks while keys stay responsive. A screen
that a full screen covers is not drawn; it catches up on what it missed (``catch_up``) in the
frame that uncovers it.

Commands (pause/resume/stop/abort/decide) go to ``controls``; their effect comes back as
events like everything else. ``check_action`` keeps the footer and the palette to the actions
valid in the current state.

Attached to another process's run, the app also watches the runner's lease (``lease``): the
latest read is ``runner``, and a runner that died or ended freezes the clock and takes the
controls away. ``q`` there only leaves the console: the run goes on.

The app is in parts, one concern each. ``ConsoleApp`` (here) keeps the keys, the lifecycle, the
tick and the clock; its bases hold what Textual and the screens call on the app: ``control``
(the run's commands, the error modal, quitting), ``navigation`` (the screens a key opens) and
``replay`` (moving a replay). It holds ``opening`` (the run so far, read off the UI thread, and
the first frame), ``replay.FileSeeker`` (moves through a run's file), ``drawing`` (which screens
a tick draws), ``notices`` (error advisories worth a notification) and ``themechoice``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from tbconsole.record.enums import ControlCommand, PanelName, RunnerState
from tbconsole.record.lease import LeaseView
from tbconsole.state import PANELS, RunState
from tbconsole.ui.app.control import RunControl
from tbconsole.ui.app.drawing import ScreenDrawing
from tbconsole.ui.app.navigation import Navigation
from tbconsole.ui.app.notices import AdvisoryNotices
from tbconsole.ui.app.opening import Opening
from tbconsole.ui.app.replay import FileSeeker, Replaying
from tbconsole.ui.app.themechoice import ThemeChoice
from tbconsole.ui.bell import BellInbox
from tbconsole.ui.data.source import Controls, EventSource, FileReplay, LeaseWatch, NoControls, Replay, allowed_commands
from tbconsole.ui.present.wording import runner_over
from tbconsole.ui.screens.main import MainScreen

RUN_COMMANDS = {
    ControlCommand.PAUSE,
    ControlCommand.RESUME,
    ControlCommand.STOP,
    ControlCommand.ABORT,
    ControlCommand.DECIDE,
}  # each also the name of the app's action that sends it
REPLAY_ACTIONS = {"replay_prev", "replay_next", "replay_first", "replay_last"}


class ConsoleApp(RunControl, Navigation, Replaying):  # an App[int]: what the screens ask of it is in ConsoleHost
    TITLE = "tbconsole"
    CSS = """
    Screen { background: $background; }
    """
    BINDINGS = [
        Binding("p", "pause", "Pause after batch"),
        Binding("p", "resume", "Resume"),
        Binding("s", "stop", "Stop"),
        Binding("a", "abort", "Abort"),
        Binding("d", "decide", "Decide"),
        Binding("question_mark", "help", "Help"),
        Binding("l", "log", "Log", show=False),
        Binding("t", "next_theme", "Theme", show=False),
        Binding("left_square_bracket", "replay_prev", "◀ step"),
        Binding("right_square_bracket", "replay_next", "step ▶"),
        Binding("left_curly_bracket", "replay_first", "First", show=False),
        Binding("right_curly_bracket", "replay_last", "Last", show=False),
        Binding("q", "leave", "Leave (run goes on)"),
        Binding("q", "quit_console", "Quit"),
    ]

    def __init__(
        self,
        *,
        source: EventSource | None = None,
        controls: Controls | None = None,
        replay: Replay | FileReplay | None = None,
        replay_path: Path | None = None,
        theme: str | None = None,
        clock: Callable[[], float] | None = None,
        mode: str = "live",
        work: Callable[[], Awaitable[Any]] | None = None,
        refresh_hz: float = 10.0,
        drain_budget_s: float = 0.02,
        on_first_frame: Callable[[], None] | None = None,
        lease: LeaseWatch | None = None,
        label: str | None = None,
        remember_theme: bool = False,
    ) -> None:
        super().__init__()
        self.state = RunState()
        self.inbox = BellInbox()  # notes the live events that ring the bell (decision, failure)
        self.source, self.lease, self.controls, self.work = source, lease, controls or NoControls(), work
        self.replay = replay
        self.replay_path = replay_path  # a finished run's events.jsonl, opened after the first frame
        self.mode = "replay" if replay is not None or replay_path is not None else mode
        self._label = label  # what the header calls the mode, when not the mode's own name
        self.clock, self.refresh_hz, self.drain_budget_s = clock, refresh_hz, drain_budget_s
        self.on_first_frame = on_first_frame  # called once the first frame with the run so far is drawn
        self.runner: LeaseView | None = None  # the lease's latest read (None: no lease is watched)
        self.trial_dirs: dict[str, str] = {}
        self.ticks = 0
        self._everything = True  # every panel to draw at the next tick
        self._last_status: tuple = ()  # what the valid keys depend on, as the last tick saw it
        self.opening = Opening(self, loading=replay_path is not None or hasattr(source, "catch_up"))
        self.seeker = FileSeeker(self)
        self.drawing = ScreenDrawing(self)
        self.advisory_notices = AdvisoryNotices()
        self.theme_choice = ThemeChoice(self, theme, remember=remember_theme)

    # -- time ----------------------------------------------------------------------------

    def now(self) -> float:
        if self.clock is not None:
            return self.clock()
        if self.replaying or not self.mode_live:
            return self.state.last_ts or 0.0
        if self.runner is not None and runner_over(self.runner):  # time stopped when the runner did
            return max((t for t in (self.state.last_ts, self.runner.ended or self.runner.beat) if t), default=0.0)
        return time.time()

    @property
    def mode_live(self) -> bool:
        return bool(self.source is not None and getattr(self.source, "live", False))

    @property
    def run_going(self) -> bool:
        """A live run that has not ended and whose runner (when watched) is alive."""
        return self.mode_live and not self.state.finished and not runner_over(self.runner)

    @property
    def controllable(self) -> bool:
        """Commands can reach a runner: there are controls, this is no replay, the runner lives."""
        return self.controls.available and not self.replaying and not runner_over(self.runner)

    @property
    def replaying(self) -> bool:
        """A replay: of events in memory, or of a run's file (opening or open)."""
        return self.replay is not None or self.replay_path is not None

    @property
    def mode_label(self) -> str:
        if self._label is not None:
            return self._label
        return {"live": "", "attach": "attached", "replay": "replay", "demo": "demo"}.get(self.mode, self.mode)

    # -- lifecycle -----------------------------------------------------------------------

    def on_mount(self) -> None:
        self.theme_changed_signal.subscribe(self, lambda _theme: self.redraw(*PANELS))
        self.theme_choice.watch()
        self.push_screen(MainScreen())
        for problem in self.theme_choice.problems:
            self.notify(problem, severity="warning")
        if self.replay is not None:
            self.state = self.replay.seek(self.replay.length)
            self._everything = True
        elif self.replay_path is not None:
            self.opening.read_file(self.replay_path)
        if self.source is not None and hasattr(self.source, "catch_up"):  # attached: the run so far, then what comes
            self.opening.catch_up(self.source)
        elif self.source is not None:
            self.source.start(self.inbox)
        if self.lease is not None:
            self.lease.start()
        if self.work is not None:
            self.work_worker = self.run_worker(self.work(), name="run", exit_on_error=False)
        self.set_interval(1.0 / self.refresh_hz, self.tick, name="refresh")
        self.set_interval(1.0, self._second, name="clock")
        self.call_after_refresh(self.tick)

    @property
    def loading(self) -> bool:
        """The run as it stood when the console opened is not in the state yet."""
        return self.opening.loading

    def on_ready(self) -> None:
        # Everything built so far (Textual, the screens, the themes) lives as long as the app:
        # keep it out of the collector's full passes, whose pauses grow with it and stall the loop.
        gc.freeze()
        self.opening.drawn()

    def on_unmount(self) -> None:
        if self.source is not None:
            self.source.stop()
        if self.lease is not None:
            self.lease.stop()

    def _second(self) -> None:
        """Once a second: elapsed times move on even without events."""
        if self.run_going:
            self.state.mark_changed(PanelName.HEADER, PanelName.GATEWAY, PanelName.TRIALS)
        elif self.runner is not None and self.runner.state is RunnerState.DEAD:
            self.state.mark_changed(PanelName.HEADER)  # "last seen N s ago" goes on counting
        # The drill-down screens are imported when first needed, off the first frame's path
        # (about 0.1 s of imports); this, a second after start, is usually that first time.
        from tbconsole.ui.screens.advisories import AdvisoriesScreen
        from tbconsole.ui.screens.transcript import TranscriptScreen

        screen = self.screen
        if isinstance(screen, (TranscriptScreen, AdvisoriesScreen)):
            screen.on_second()

    # -- drawing ---------------------------------------------------------------------------

    def redraw(self, *panels: str) -> None:
        self.state.mark_changed(*(panels or PANELS))
        if not panels:
            self._everything = True

    def show_state(self, state: RunState) -> None:
        """Put ``state`` on view (a replay moved, a run's file read) and draw all of it."""
        self.state = state
        self.redraw()
        self.tick()

    def tick(self) -> None:
        """Drain the inbox for a bounded slice, then redraw what changed (at most once per
        panel per tick)."""
        if not self.is_running:  # shutting down: the screens' widgets are being removed
            return
        self.ticks += 1
        if self.lease is not None and self.lease.view is not self.runner:
            self.runner = self.lease.view
            self.redraw(PanelName.HEADER, PanelName.GATEWAY, PanelName.TRIALS)
        self.inbox.drain(self.state, self.drain_budget_s)
        if self.inbox.take_ring() and self.mode_live and self.replay is None:
            self.bell()
        state = self.state
        if self.advisory_notices.behind(state):
            for message in self.advisory_notices.news(state, self.now(), catch_up=self.replaying):
                self.notify(message, title="advisory: error (v)", severity="error", timeout=10, markup=False)
        if not state.changed_panels and not self._everything:
            return
        if len(self.inbox) and self.ticks % 4:
            return  # a backlog: fold events first, draw every 4th tick (frames cost more than events)
        changed = set(state.changed_panels)
        state.changed_panels.clear()
        everything = self._everything
        self._everything = False
        self.drawing.draw(state, self.now(), changed, everything)
        runner = self.runner.state if self.runner is not None else None
        status = (state.status, state.pending_decision is not None, state.finished, runner)
        if status != self._last_status:
            self._last_status = status
            self.refresh_bindings()
        if PanelName.DECISION in changed or everything:
            self.sync_decision()

    def catch_up(self, screen: Screen[Any]) -> None:
        self.drawing.catch_up(screen)

    # -- keys and the command palette -------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in RUN_COMMANDS:
            return action in allowed_commands(self.state, self.controllable)
        if action in REPLAY_ACTIONS:
            return self.replaying
        if action in ("leave", "quit_console"):  # one q: leave while an attached run goes on, else quit
            return (action == "leave") == (self.mode == "attach" and self.run_going)
        return True

    def action_next_theme(self) -> None:
        self.theme = self.theme_choice.after(self.theme)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        entries = [
            ("pause", "Pause after the current batch", "Finish this batch, then wait", self.action_pause),
            ("resume", "Resume the run", "Continue with the next batch", self.action_resume),
            ("stop", "Stop the run cleanly", "Finish and train this batch, checkpoint, exit 0", self.action_stop),
            ("abort", "Abort the run", "Cancel trials now; keep what was captured", self.action_abort),
            ("decide", "Decide on the pending error", "Abort or retry the group", self.action_decide),
            ("leave", "Leave the console", "Close it; the run goes on", self.action_leave),
            ("help", "Help", "Keys and what the grid's cells mean", self.action_help),
            ("log", "Run log", "Recent control changes, errors, checkpoints", self.action_log),
            ("next_theme", "Next theme", "Cycle through the loaded themes", self.action_next_theme),
            ("replay_prev", "Replay: previous step", "Move the replay back one batch", self.action_replay_prev),
            ("replay_next", "Replay: next step", "Move the replay forward one batch", self.action_replay_next),
            ("replay_first", "Replay: first step", "Move the replay to the first batch", self.action_replay_first),
            ("replay_last", "Replay: end", "Move the replay to the end of the run", self.action_replay_last),
        ]
        for action, title, help_text, callback in entries:
            if self.check_action(action, ()):
                yield SystemCommand(title, help_text, callback)
        if isinstance(screen, MainScreen):
            yield SystemCommand(
                "Filter trials", "Show only trials matching words (task, outcome, …)", screen.action_filter
            )
            yield SystemCommand("Advisories", "Active and cleared advisories; enter jumps there", self.open_advisories)
            trial = screen.grid.selected_trial()
            if trial is not None:
                yield SystemCommand("Open transcript", f"Transcript of {trial}", lambda: self.open_transcript(trial))
                if screen.check_action("cancel_trial", ()):
                    yield SystemCommand(
                        "Cancel trial", f"Cancel {trial}: its group fails (asks first)", screen.action_cancel_trial
                    )
                yield SystemCommand(
                    "Group side by side", f"The trials of {trial}'s group, turn by turn", lambda: self.open_group(trial)
                )
            yield SystemCommand("Find across trials", "Search the transcripts for a word or a regex", self.open_find)
            yield SystemCommand(
                "Timeline", "Where the step's time went: trials' phases, sampling, training", self.open_timeline
            )
            yield SystemCommand(
                "Difficulty ledger", "Per task: solve rate by step, sandbox time that trained nothing", self.open_ledger
            )
            yield SystemCommand(
                "Pipeline",
                "Sampling and training over the run: groups in flight, queued, trained, dropped; staleness",
                self.open_pipeline,
            )
        if self.can_lower_off_policy():
            yield SystemCommand(
                "Lower max_steps_off_policy",
                f"Now {self.state.pipeline.limit}: drop groups whose weights lag more, from the next update",
                self.lower_off_policy_limit,
            )
