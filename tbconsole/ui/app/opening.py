"""The run as it stood when the console opened, and the first frame that shows it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from textual.notifications import SeverityLevel

from tbconsole.state import RunState
from tbconsole.ui.bell import BellInbox
from tbconsole.ui.data.source import EventSource, FileReplay, TailSource


class OpeningHost(Protocol):
    """What opening the run asks of the app: its state, and Textual's workers, timers and notices."""

    state: RunState
    inbox: BellInbox
    on_first_frame: Callable[[], None] | None

    def show_state(self, state: RunState) -> None: ...

    def redraw(self, *panels: str) -> None: ...

    def tick(self) -> None: ...

    def refresh_bindings(self) -> None: ...

    def replay_opened(self, replay: FileReplay) -> None: ...

    def run_worker(self, work: Callable[[], None], *, name: str, exit_on_error: bool, thread: bool) -> Any: ...

    def set_timer(self, delay: float, callback: Callable[[], None]) -> Any: ...

    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    def call_after_refresh(self, callback: Callable[[], None]) -> bool: ...

    def notify(self, message: str, *, severity: SeverityLevel = ..., timeout: float | None = ...) -> None: ...


class Opening:
    """The run so far, read off the UI thread where that takes a while (an attached run's state
    so far; a finished run's file) and handed over whole, with a notice when it takes long (only a
    run read from its start does); then the first frame that shows it, which ``on_first_frame``
    hears of (once)."""

    def __init__(self, host: OpeningHost, *, loading: bool) -> None:
        self._host = host
        self.loading = loading  # the run as it stood when the console opened is not in the state yet
        self._drawn_once = False
        self.first_drawn = threading.Event()  # the first frame with the run so far is drawn

    def read_file(self, path: Path) -> None:
        """A finished run's file (``replay_path``), for a replay."""
        self._read(partial(self._read_file, path), "load-replay")

    def catch_up(self, source: EventSource) -> None:
        """An attached run's file so far; ``source`` follows it from where that stopped."""
        self._read(partial(self._catch_up, source), "catch-up")

    def _read(self, work: Callable[[], None], name: str) -> None:
        self._host.run_worker(work, thread=True, name=name, exit_on_error=False)
        self._host.set_timer(0.5, self._still_loading)  # only a run read from its start takes this long

    def _read_file(self, path: Path) -> None:
        """The worker: the file's state at the end first (its reducer snapshot and the events
        after it: what attaching to a run does), handed over for the first frame; then where its
        steps start, for the moves (``FileReplay``). None of its events stays in memory."""
        from tbconsole.ui.data.source import index_steps, restore_file

        host = self._host
        try:
            state, end = restore_file(path)
            host.call_from_thread(self._file_read, state)
            self.first_drawn.wait(timeout=5.0)  # the index waits: the first frame needs the CPU more
            replay = FileReplay(path, state, index_steps(path, end))
        except OSError as exc:
            host.call_from_thread(host.notify, f"cannot read the run: {exc}", severity="error", timeout=30)
            return
        host.call_from_thread(host.replay_opened, replay)

    def _file_read(self, state: RunState) -> None:
        self._host.show_state(state)
        self._loaded()

    def _catch_up(self, source: EventSource) -> None:
        """The worker: the attached run's state so far (a snapshot and the events after it:
        milliseconds; a long run read from its start: seconds)."""
        assert isinstance(source, TailSource)  # on_mount starts this only for a source that catches up
        try:
            state = source.catch_up()
        except OSError as exc:
            self._host.call_from_thread(self._host.notify, f"cannot read the run: {exc}", severity="error", timeout=30)
            return
        self._host.call_from_thread(self._caught_up, source, state)

    def _caught_up(self, source: TailSource, state: RunState) -> None:
        host = self._host
        host.state = state
        source.start(host.inbox)
        host.redraw()
        host.refresh_bindings()
        host.tick()
        self._loaded()

    def _still_loading(self) -> None:
        if self.loading:
            self._host.notify("reading the run from its start…", timeout=3)

    def drawn(self) -> None:
        """The app's first frame is drawn (``on_ready``)."""
        self._drawn_once = True
        if not self.loading:
            self._first_frame()

    def _loaded(self) -> None:
        self.loading = False
        if self._drawn_once:
            self._host.call_after_refresh(self._first_frame)  # once the frame showing it is drawn

    def _first_frame(self) -> None:
        """The first frame that shows the run as it stood when the console opened is drawn."""
        self.first_drawn.set()
        callback, self._host.on_first_frame = self._host.on_first_frame, None
        if callback is not None:
            callback()
