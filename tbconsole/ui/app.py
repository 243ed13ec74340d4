"""The console app: one ``RunState`` fed by a source, rendered by the screens, steered by keys.
(Over 400 lines: one Textual App, whose keys, actions and palette entries belong together.)

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
"""

from __future__ import annotations

import gc
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from tbconsole.record.control import ControlError
from tbconsole.record.enums import AdvisorySeverity, ControlCommand, ControlState, PanelName, RunnerState, RunStatus
from tbconsole.record.lease import LeaseView
from tbconsole.state import PANELS, RunState
from tbconsole.ui.bell import BellInbox
from tbconsole.ui.data.settings import remember_theme, remembered_theme, settings_file
from tbconsole.ui.data.source import (
    Controls,
    EventSource,
    FileReplay,
    LeaseWatch,
    NoControls,
    Replay,
    TailSource,
    allowed_commands,
)
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.present.wording import ADVISORY_FRESH_S, runner_over
from tbconsole.ui.screens.confirm import ConfirmScreen
from tbconsole.ui.screens.decision import DecisionScreen
from tbconsole.ui.screens.help import HelpScreen
from tbconsole.ui.screens.host import ConsoleHost
from tbconsole.ui.screens.log import LogScreen
from tbconsole.ui.screens.main import MainScreen
from tbconsole.ui.themes import DEFAULT_DARK, DEFAULT_LIGHT, load_themes

RUN_COMMANDS = {
    ControlCommand.PAUSE,
    ControlCommand.RESUME,
    ControlCommand.STOP,
    ControlCommand.ABORT,
    ControlCommand.DECIDE,
}  # each also the name of the app's action that sends it
REPLAY_ACTIONS = {"replay_prev", "replay_next", "replay_first", "replay_last"}
THEME_ALIASES = {"dark": DEFAULT_DARK, "light": DEFAULT_LIGHT}


class ConsoleApp(ConsoleHost):  # an App[int]: what the screens and widgets ask of it is declared there
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
        self._label = label  # what the header calls the mode, when not the mode's own name
        self.state = RunState()
        self.inbox = BellInbox()  # notes the live events that ring the bell (decision, failure)
        self.source = source
        self.controls = controls or NoControls()
        self.replay = replay
        self.replay_path = replay_path  # a finished run's events.jsonl, opened after the first frame
        self._replay_moves: deque[str | int] = deque()  # asked of a FileReplay, made by a worker in order
        self._seeking = False  # a worker is making them
        self._seek_notice = False  # the notice that one is under way is armed
        self.mode = "replay" if replay is not None or replay_path is not None else mode
        self.clock = clock
        self.work = work
        self.refresh_hz = refresh_hz
        self.drain_budget_s = drain_budget_s
        self.on_first_frame = on_first_frame  # called once the first frame with the run so far is drawn
        self._drawn_once = False
        self._first_drawn = threading.Event()  # the first frame with the run so far is drawn
        self._loading = replay_path is not None or hasattr(source, "catch_up")
        self.lease = lease
        self.runner: LeaseView | None = None  # the lease's latest read (None: no lease is watched)
        self.trial_dirs: dict[str, str] = {}
        self.work_worker: Worker | None = None
        self.work_result: Any = None
        self.work_error: BaseException | None = None
        self.quit_after_run = False
        self._everything = True
        self._decision_shown: Any = None
        self._last_status: tuple = ()
        self._missed: dict[Screen, tuple[set[str], bool]] = {}  # covered screens: (panels, everything)
        self.ticks = 0
        self._advisory_seen = 0  # the state's advisory_seq last looked at (error notifications)
        self._advisory_notified: set[str] = set()  # active error advisories already notified
        self.themes, problems = load_themes()
        for t in self.themes.values():
            self.register_theme(t)
        self._theme_problems = problems
        # ``remember_theme`` (a user's console: attach, train, demo): without a theme asked for,
        # the one chosen last time; the one asked for, or chosen here (t, the palette), is kept
        # for next time (``ui.data.settings``). Tests and screenshots leave the user's file alone.
        self._remember_theme = remember_theme
        asked = theme
        if theme is None and remember_theme:
            theme = remembered_theme()
        wanted = THEME_ALIASES.get(theme or "", theme) or DEFAULT_DARK
        self._initial_theme = wanted if wanted in self.available_themes else DEFAULT_DARK
        if asked and wanted not in self.available_themes:
            self._theme_problems.append(f"unknown theme {asked!r}; using {DEFAULT_DARK}")
        self._theme_to_keep = self._initial_theme if asked and wanted in self.available_themes else None
        self._theme_seen = self._initial_theme
        self.theme = self._initial_theme

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
        if self._remember_theme:
            self.theme_changed_signal.subscribe(self, lambda theme: self._theme_chosen(theme.name))
            if self._theme_to_keep is not None:  # --theme: the next console starts with it too
                self._keep_theme(self._theme_to_keep)
        self.push_screen(MainScreen())
        for problem in self._theme_problems:
            self.notify(problem, severity="warning")
        if self.replay is not None:
            self.state = self.replay.seek(self.replay.length)
            self._everything = True
        elif self.replay_path is not None:
            self.run_worker(self._load_replay, thread=True, name="load-replay", exit_on_error=False)
            self.set_timer(0.5, self._still_loading)  # only a run read from its start takes this long
        if hasattr(self.source, "catch_up"):  # attached: the run so far first, then what comes
            self.run_worker(self._catch_up, thread=True, name="catch-up", exit_on_error=False)
            self.set_timer(0.5, self._still_loading)  # only a run read from its start takes this long
        elif self.source is not None:
            self.source.start(self.inbox)
        if self.lease is not None:
            self.lease.start()
        if self.work is not None:
            self.work_worker = self.run_worker(self.work(), name="run", exit_on_error=False)
        self.set_interval(1.0 / self.refresh_hz, self.tick, name="refresh")
        self.set_interval(1.0, self._second, name="clock")
        self.call_after_refresh(self.tick)

    def _load_replay(self) -> None:
        """A finished run's file, off the UI thread: its state at the end first (its reducer
        snapshot and the events after it: what attaching to a run does), handed over for the
        first frame; then where its steps start, for the moves (``FileReplay``). None of its
        events stays in memory."""
        from tbconsole.ui.data.source import index_steps, restore_file

        path = self.replay_path
        assert path is not None  # on_mount starts this worker only for a run's file
        try:
            state, end = restore_file(path)
            self.call_from_thread(self._replay_state, state)
            self._first_drawn.wait(timeout=5.0)  # the index waits: the first frame needs the CPU more
            replay = FileReplay(path, state, index_steps(path, end))
        except OSError as exc:
            self.call_from_thread(self.notify, f"cannot read the run: {exc}", severity="error", timeout=30)
            return
        self.call_from_thread(self._replay_ready, replay)

    def _replay_state(self, state: RunState) -> None:
        self.state = state
        self.redraw()
        self.tick()
        self._loaded()

    def _replay_ready(self, replay: Replay | FileReplay) -> None:
        self.replay = replay
        self.redraw()
        self.refresh_bindings()
        self.tick()
        if self._replay_moves:  # keys pressed while its steps were being found
            self._start_seeking()

    def _catch_up(self) -> None:
        """The attached run's state so far, built off the UI thread (a snapshot and the events
        after it: milliseconds; a long run read from its start: seconds) and handed over whole;
        then the source follows the file from where it stopped."""
        assert isinstance(self.source, TailSource)  # on_mount starts this only for a source that catches up
        try:
            state = self.source.catch_up()
        except OSError as exc:
            self.call_from_thread(self.notify, f"cannot read the run: {exc}", severity="error", timeout=30)
            return
        self.call_from_thread(self._caught_up, state)

    def _caught_up(self, state: RunState) -> None:
        self.state = state
        assert self.source is not None  # the one that caught up
        self.source.start(self.inbox)
        self.redraw()
        self.refresh_bindings()
        self.tick()
        self._loaded()

    def _still_loading(self) -> None:
        if self._loading:
            self.notify("reading the run from its start…", timeout=3)

    @property
    def loading(self) -> bool:
        """The run as it stood when the console opened is not in the state yet."""
        return self._loading

    def on_ready(self) -> None:
        # Everything built so far (Textual, the screens, the themes) lives as long as the app:
        # keep it out of the collector's full passes, whose pauses grow with it and stall the loop.
        gc.freeze()
        self._drawn_once = True
        if not self._loading:
            self._first_frame()

    def _loaded(self) -> None:
        self._loading = False
        if self._drawn_once:
            self.call_after_refresh(self._first_frame)  # once the frame showing it is drawn

    def _first_frame(self) -> None:
        """The first frame that shows the run as it stood when the console opened is drawn."""
        self._first_drawn.set()
        callback, self.on_first_frame = self.on_first_frame, None
        if callback is not None:
            callback()

    def on_unmount(self) -> None:
        if self.source is not None:
            self.source.stop()
        if self.lease is not None:
            self.lease.stop()

    def _second(self) -> None:
        """Once a second: elapsed times move on even without events."""
        if self.run_going:
            self.state.mark_changed(PanelName.HEADER, PanelName.GATEWAY, PanelName.TRIALS)
        elif self.runner is not None and self.runner.state is RunnerState.GONE:
            self.state.mark_changed(PanelName.HEADER)  # "last seen N s ago" goes on counting
        # The drill-down screens are imported when first needed, off the first frame's path
        # (about 0.1 s of imports); this, a second after start, is usually that first time.
        from tbconsole.ui.screens.advisories import AdvisoriesScreen
        from tbconsole.ui.screens.transcript import TranscriptScreen

        screen = self.screen
        if isinstance(screen, (TranscriptScreen, AdvisoriesScreen)):
            screen.on_second()

    def redraw(self, *panels: str) -> None:
        self.state.mark_changed(*(panels or PANELS))
        if not panels:
            self._everything = True

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
        if state.advisory_seq != self._advisory_seen:
            self._notify_advisories()
        if not state.changed_panels and not self._everything:
            return
        if len(self.inbox) and self.ticks % 4:
            return  # a backlog: fold events first, draw every 4th tick (frames cost more than events)
        changed = set(state.changed_panels)
        state.changed_panels.clear()
        everything = self._everything
        self._everything = False
        now = self.now()
        on_view = self._screens_on_view()
        with self.batch_update():
            for screen in self.screen_stack:
                show = getattr(screen, "show", None)
                if show is None or not screen.is_mounted:
                    continue
                if screen in on_view:
                    show(state, now, changed, everything)
                else:
                    missed, missed_all = self._missed.get(screen, (set(), False))
                    self._missed[screen] = (missed | changed, missed_all or everything)
        runner = self.runner.state if self.runner is not None else None
        status = (state.status, state.pending_decision is not None, state.finished, runner)
        if status != self._last_status:
            self._last_status = status
            self.refresh_bindings()
        if PanelName.DECISION in changed or everything:
            self._sync_decision()

    def _screens_on_view(self) -> list[Screen]:
        """The top screen and those the modals above them let show through."""
        on_view: list[Screen] = []
        for screen in reversed(self.screen_stack):
            on_view.append(screen)
            if not screen.is_modal:
                break
        return on_view

    def catch_up(self, screen: Screen) -> None:
        """Draw what changed while ``screen`` was covered: called as it is uncovered, so the
        frame that shows it again is up to date."""
        missed = self._missed.pop(screen, None)
        show = getattr(screen, "show", None)
        if missed is not None and show is not None:
            with self.batch_update():
                show(self.state, self.now(), *missed)

    # -- the error modal -------------------------------------------------------------------

    def _sync_decision(self) -> None:
        pending = self.state.pending_decision
        if pending is None:
            if isinstance(self.screen, DecisionScreen):
                self.screen.dismiss(None)
            self._decision_shown = None
            return
        if self._decision_shown is pending:
            return
        self._decision_shown = pending
        if not self.replaying and not runner_over(self.runner):
            self.open_decision()

    def open_decision(self) -> None:
        pending = self.state.pending_decision
        if pending is None or isinstance(self.screen, DecisionScreen):
            return
        can = self.controllable

        def decided(choice: str | None) -> None:
            if choice is not None:
                self.send(ControlCommand.DECIDE, choice)

        self.push_screen(DecisionScreen(pending, can_decide=can), decided)

    # -- commands --------------------------------------------------------------------------

    def send(self, command: str, argument: str | None = None) -> bool:
        if runner_over(self.runner):  # a command left in a dead run's inbox would hit the run that resumes it
            self.notify("the run's runner is gone: nothing to control", title=f"{command} not sent", severity="error")
            return False
        try:
            self.controls.send(command, argument)
        except (ControlError, TimeoutError, OSError) as exc:  # its text may quote a task's name: no markup
            self.notify(one_line(exc, 300), title=f"{command} not sent", severity="error", markup=False)
            return False
        said = f"{command}{' ' + one_line(argument, 100) if argument else ''} sent ({self.controls.where})"
        self.notify(said, timeout=2, markup=False)
        return True

    def _send_if_yes(self, command: str, argument: str | None = None) -> Callable[[bool | None], None]:
        """A ``ConfirmScreen``'s callback: send ``command`` when the answer is yes."""

        def answer(ok: bool | None) -> None:
            if ok:
                self.send(command, argument)

        return answer

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in RUN_COMMANDS:
            return action in allowed_commands(self.state, self.controllable)
        if action in REPLAY_ACTIONS:
            return self.replaying
        if action in ("leave", "quit_console"):  # one q: leave while an attached run goes on, else quit
            return (action == "leave") == (self.mode == "attach" and self.run_going)
        return True

    def action_pause(self) -> None:
        self.send(ControlCommand.PAUSE)

    def action_resume(self) -> None:
        self.send(ControlCommand.RESUME)

    def action_stop(self) -> None:
        self.push_screen(
            ConfirmScreen(
                "Stop the run cleanly? The current batch is finished and trained, "
                "a checkpoint is saved, and the run exits.",
                yes="Stop run",
            ),
            self._send_if_yes(ControlCommand.STOP),
        )

    def action_abort(self) -> None:
        self.push_screen(
            ConfirmScreen(
                "Abort the run now? Running trials are cancelled; what was captured "
                "is kept, this batch is not trained.",
                yes="Abort run",
                variant="error",
            ),
            self._send_if_yes(ControlCommand.ABORT),
        )

    def action_decide(self) -> None:
        self.open_decision()

    def can_cancel_trial(self, trial: str | None) -> bool | None:
        """For ``x`` (a screen's check_action): False, no run to command (a replay, the runner
        gone, the run over); None, that trial has ended (or there is none); True, it can go."""
        if not (self.controllable and self.run_going):
            return False
        t = self.state.trials.get(trial or "")
        return True if t is not None and not (t.done or t.cancelled) else None

    def confirm_cancel_trial(self, trial: str) -> None:
        """``x`` on a screen that shows one trial: cancel it, after asking."""
        self.push_screen(
            ConfirmScreen(
                f"Cancel trial {trial}? Its sandbox is stopped and it is not scored. Its group "
                "fails like on any infrastructure error: you then choose Abort or Retry group.",
                yes="Cancel trial",
                no="Keep it",
                variant="error",
            ),
            self._send_if_yes(ControlCommand.CANCEL_TRIAL, trial),
        )

    def action_help(self) -> None:
        self._push_kept("help", HelpScreen)

    def action_log(self) -> None:
        self._push_kept("log", LogScreen)

    def _push_kept(self, name: str, screen_type: type[Screen]) -> None:
        """Open the one ``screen_type`` screen, built on first use and kept: building a screen
        (composing, styling, laying out its content) costs more than the key may take."""
        if not isinstance(self.screen, screen_type):
            if not self.is_screen_installed(name):
                self.install_screen(screen_type(), name)
            self.push_screen(name)

    def _theme_chosen(self, name: str) -> None:
        if name != self._theme_seen:  # (the signal also tells of the theme the console started with)
            self._theme_seen = name
            self._keep_theme(name)

    def _keep_theme(self, name: str) -> None:
        if not remember_theme(name):
            self.notify(f"could not keep the theme for next time in {settings_file()}", severity="warning", timeout=4)

    def action_next_theme(self) -> None:
        names = sorted(self.themes)
        current = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(current + 1) % len(names)]

    def action_leave(self) -> None:
        """Close an attached console at once: the run is another process's and goes on."""
        self.exit(0)

    def action_quit_console(self) -> None:
        """Quit. Only a run in this process (``work``) is stopped first, after asking; anything
        else (an attached console, a replay) closes at once."""
        run_going = self.work_worker is not None and self.work_worker.state in (
            WorkerState.PENDING,
            WorkerState.RUNNING,
        )
        if not run_going:
            self.exit(0)
            return
        if self.state.finished or self.state.control in (ControlState.STOPPING, ControlState.ABORTING):
            self.quit_after_run = True
            self.notify("quitting when the run has ended")
            return

        def answer(ok: bool | None) -> None:
            if ok and self.send(ControlCommand.STOP):
                self.quit_after_run = True

        self.push_screen(
            ConfirmScreen(
                "The run is still going in this process. Stop it cleanly (finish and "
                "train this batch, checkpoint) and quit when it has stopped?",
                yes="Stop and quit",
            ),
            answer,
        )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is not self.work_worker:
            return
        if event.state == WorkerState.SUCCESS:
            self.work_result = event.worker.result
        elif event.state == WorkerState.ERROR:
            self.work_error = event.worker.error
            self.notify(f"the run failed: {event.worker.error!r}", severity="error", timeout=30)
        elif event.state == WorkerState.CANCELLED:
            self.work_error = self.work_error or RuntimeError("the run was cancelled")
        if event.state in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            self.tick()
            if self.quit_after_run or self.state.end_status in (RunStatus.STOPPED, RunStatus.ABORTED):
                self.exit(0 if self.work_error is None else 1)
            else:
                self.notify("the run has ended: q to quit", timeout=10)

    # -- advisories (v) ----------------------------------------------------------------------

    def open_advisories(self) -> None:
        from tbconsole.ui.screens.advisories import AdvisoriesScreen

        self._push_kept("advisories", AdvisoriesScreen)

    def _notify_advisories(self) -> None:
        """One notification for each new error advisory: raised, or a warning raised again as an
        error (a replacement that stays an error is not news). None for catch-up: a replay, or a
        raise already old when it arrives (attaching reads the run's file from its start)."""
        state = self.state
        if state.advisory_seq < self._advisory_seen:  # another state (a replay moved back)
            self._advisory_seen = 0
            self._advisory_notified.clear()
        changes = state.advisory_changes_since(self._advisory_seen)
        self._advisory_seen = state.advisory_seq
        catch_up = self.replaying
        now = self.now()
        for a in changes:
            if a.cleared is not None or a.severity != AdvisorySeverity.ERROR:
                self._advisory_notified.discard(a.key)
                continue
            if a.key in self._advisory_notified:
                continue
            self._advisory_notified.add(a.key)
            if not catch_up and now - a.updated <= ADVISORY_FRESH_S:
                self.notify(
                    one_line(a.message, 300), title="advisory: error (v)", severity="error", timeout=10, markup=False
                )

    # -- drill-down -------------------------------------------------------------------------

    def open_transcript(self, trial: str) -> None:
        t = self.state.trials.get(trial)
        if t is not None and t.trial_dir:
            self.trial_dirs[trial] = t.trial_dir
        from tbconsole.ui.screens.transcript import TranscriptScreen

        self.push_screen(TranscriptScreen(trial))

    def open_group(self, trial: str) -> None:
        """``trial``'s group side by side, the cursor on its column."""
        t = self.state.trials.get(trial)
        if t is None or (t.step, t.group) not in self.state.groups:
            self.notify("that trial's group is no longer in memory", severity="warning", timeout=3)
            return
        from tbconsole.ui.screens.group import GroupScreen

        self.push_screen(GroupScreen(t.step, t.group, trial))

    def open_find(self) -> None:
        from tbconsole.ui.screens.find import FindScreen

        self.push_screen(FindScreen())

    def open_ledger(self) -> None:
        """``D``: the difficulty ledger (kept between opens: its sort and view stay)."""
        from tbconsole.ui.screens.ledger import LedgerScreen

        self._push_kept("ledger", LedgerScreen)

    def open_timeline(self) -> None:
        """``w``: the waterfall of the current step, or of the step being replayed."""
        from tbconsole.ui.screens.timeline import TimelineScreen

        screen = TimelineScreen.for_run(self)
        if screen is None:
            self.notify("no run yet: nothing to show on a timeline", severity="warning", timeout=3)
            return
        self.push_screen(screen)

    # -- replay --------------------------------------------------------------------------------

    def replay_seek(self, position: int) -> None:
        self.replay_move(position)

    def replay_move(self, move: str | int) -> None:
        """Move the replay: ``prev``, ``next``, ``first``, ``last`` or to a position. A replay in
        memory moves at once; a run's file (``FileReplay``) is folded by a worker, the moves
        asked meanwhile (or before its steps are found) made after, in order."""
        replay = self.replay
        if replay is not None and not replay.lazy:
            self._show_replay(replay.seek(replay.target(move)))
            return
        if replay is None and self.replay_path is None:
            return
        self._replay_moves.append(move)
        if replay is not None and not self._seeking:
            self._start_seeking()

    def _start_seeking(self) -> None:
        self._seeking = True
        self.run_worker(self._seek_file, thread=True, name="replay-seek", exit_on_error=False)
        if not self._seek_notice:
            self._seek_notice = True
            self.set_timer(0.3, self._still_seeking)

    def _still_seeking(self) -> None:
        """A notice for as long as a move takes (the first move back on a long run folds it from
        its start: seconds), renewed before it fades."""
        self._seek_notice = self._seeking
        if self._seeking:
            self.notify("moving through the run: reading its events…", timeout=2.5)
            self.set_timer(2.0, self._still_seeking)

    def _seek_file(self) -> None:
        """The worker: the moves asked so far, each from where the one before goes; one fold to
        where they end (the state on view is never folded into: the UI keeps drawing it)."""
        replay = self.replay
        assert isinstance(replay, FileReplay)
        try:
            while self._replay_moves:
                at = replay.position
                while self._replay_moves:
                    at = replay.target(self._replay_moves.popleft(), at)
                state = replay.seek(at)
                self.call_from_thread(self._show_replay, state)
        except OSError as exc:
            self.call_from_thread(self.notify, f"cannot read the run: {exc}", severity="error", timeout=10)
        finally:
            self.call_from_thread(self._seek_done)

    def _seek_done(self) -> None:
        self._seeking = False
        if self._replay_moves:  # asked as the worker finished
            self._start_seeking()

    def _show_replay(self, state: RunState) -> None:
        self.state = state
        self.redraw()
        self.tick()

    @property
    def replay_settled(self) -> bool:
        """No move of the replay is asked or being made."""
        return not self._seeking and not self._replay_moves

    def action_replay_prev(self) -> None:
        self.replay_move("prev")

    def action_replay_next(self) -> None:
        self.replay_move("next")

    def action_replay_first(self) -> None:
        self.replay_move("first")

    def action_replay_last(self) -> None:
        self.replay_move("last")

    # -- the command palette ---------------------------------------------------------------------

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
