"""Moving a replay through the run's steps: ``[`` ``]`` ``{`` ``}`` and the replay bar."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from textual.notifications import SeverityLevel

from tbconsole.state import RunState
from tbconsole.ui.data.source import FileReplay, Replay
from tbconsole.ui.screens.host import ConsoleHost


class SeekHost(Protocol):
    """What moving through a run's file asks of the app: the replay, the state on view, and
    Textual's workers, timers and notices."""

    replay: Replay | FileReplay | None

    def show_state(self, state: RunState) -> None: ...

    def run_worker(self, work: Callable[[], None], *, name: str, exit_on_error: bool, thread: bool) -> Any: ...

    def set_timer(self, delay: float, callback: Callable[[], None]) -> Any: ...

    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    def notify(self, message: str, *, severity: SeverityLevel = ..., timeout: float | None = ...) -> None: ...


class FileSeeker:
    """The moves asked of a run's file (``FileReplay``), made by a worker in the order asked;
    those asked before the file's steps are found wait for them (``opened``). The state on view
    is never folded into: the UI keeps drawing it until the state moved to is handed over."""

    def __init__(self, host: SeekHost) -> None:
        self._host = host
        self._moves: deque[str | int] = deque()  # asked, not yet made
        self._seeking = False  # a worker is making them
        self._notice = False  # the notice that one is under way is armed

    @property
    def settled(self) -> bool:
        """No move is asked or being made."""
        return not self._seeking and not self._moves

    def ask(self, move: str | int) -> None:
        self._moves.append(move)
        if self._host.replay is not None and not self._seeking:
            self._start()

    def opened(self) -> None:
        """The file's steps are found: the moves asked meanwhile are made now."""
        if self._moves:
            self._start()

    def _start(self) -> None:
        self._seeking = True
        self._host.run_worker(self._seek, thread=True, name="replay-seek", exit_on_error=False)
        if not self._notice:
            self._notice = True
            self._host.set_timer(0.3, self._still_seeking)

    def _still_seeking(self) -> None:
        """A notice for as long as a move takes (the first move back on a long run folds it from
        its start: seconds), renewed before it fades."""
        self._notice = self._seeking
        if self._seeking:
            self._host.notify("moving through the run: reading its events…", timeout=2.5)
            self._host.set_timer(2.0, self._still_seeking)

    def _seek(self) -> None:
        """The worker: the moves asked so far, each from where the one before goes; one fold to
        where they end."""
        host = self._host
        replay = host.replay
        assert isinstance(replay, FileReplay)
        try:
            while self._moves:
                at = replay.position
                while self._moves:
                    at = replay.target(self._moves.popleft(), at)
                state = replay.seek(at)
                host.call_from_thread(host.show_state, state)
        except OSError as exc:
            host.call_from_thread(host.notify, f"cannot read the run: {exc}", severity="error", timeout=10)
        finally:
            host.call_from_thread(self._done)

    def _done(self) -> None:
        self._seeking = False
        if self._moves:  # asked as the worker finished
            self._start()


class Replaying(ConsoleHost):
    """The replay's keys and moves, a base of ``ConsoleApp`` (Textual finds the actions on the
    app): a replay in memory moves at once; a run's file through ``seeker``."""

    seeker: FileSeeker
    show_state: Callable[[RunState], None]  # the app's: the state on view, drawn again
    tick: Callable[[], None]  # the app's

    def replay_seek(self, position: int) -> None:
        self.replay_move(position)

    def replay_move(self, move: str | int) -> None:
        """Move the replay: ``prev``, ``next``, ``first``, ``last`` or to a position. A replay in
        memory moves at once; a run's file (``FileReplay``) is folded by a worker, the moves
        asked meanwhile (or before its steps are found) made after, in order."""
        replay = self.replay
        if replay is not None and not replay.lazy:
            self.show_state(replay.seek(replay.target(move)))
            return
        if replay is None and self.replay_path is None:
            return
        self.seeker.ask(move)

    @property
    def replay_settled(self) -> bool:
        """No move of the replay is asked or being made."""
        return self.seeker.settled

    def replay_opened(self, replay: FileReplay) -> None:
        """A run's file is open for moves (its steps are found)."""
        self.replay = replay
        self.redraw()
        self.refresh_bindings()
        self.tick()
        self.seeker.opened()

    def action_replay_prev(self) -> None:
        self.replay_move("prev")

    def action_replay_next(self) -> None:
        self.replay_move("next")

    def action_replay_first(self) -> None:
        self.replay_move("first")

    def action_replay_last(self) -> None:
        self.replay_move("last")
