"""What the screens ask of the app they run in. The app (``tbconsole.ui.app``) is the layer above
and may not be imported here; ``ConsoleApp`` implements this class, and a screen types
``self.app`` with ``app = getters.app(ConsoleHost)`` (Textual's way to a typed ``app``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.screen import Screen

from tbconsole.record.lease import LeaseView
from tbconsole.state import RunState
from tbconsole.ui.data.source import EventSource, FileReplay, LeaseWatch, Replay
from tbconsole.ui.widgets.host import WidgetHost


class ConsoleHost(WidgetHost):
    """The console app as the screens see it: the run's state and where it comes from, its clock,
    and the drill-downs a screen opens. ``ConsoleApp`` sets every attribute and overrides every
    method."""

    state: RunState
    source: EventSource | None
    replay: Replay | FileReplay | None
    replay_path: Path | None
    mode: str
    runner: LeaseView | None  # the lease's latest read (None: no lease is watched)
    lease: LeaseWatch | None
    trial_dirs: dict[str, str]  # trial -> its folder, noted as its transcript opens

    def now(self) -> float:
        raise NotImplementedError

    @property
    def mode_label(self) -> str:
        raise NotImplementedError

    @property
    def run_going(self) -> bool:
        raise NotImplementedError

    @property
    def replaying(self) -> bool:
        raise NotImplementedError

    @property
    def controllable(self) -> bool:
        """Commands can reach a runner: there are controls, this is no replay, the runner lives."""
        raise NotImplementedError

    def send(self, command: str, argument: str | None = None) -> bool:
        """Send a run command (a ``ControlCommand``); a refusal is shown as a notification."""
        raise NotImplementedError

    def catch_up(self, screen: Screen[Any]) -> None:
        raise NotImplementedError

    def open_transcript(self, trial: str) -> None:
        raise NotImplementedError

    def open_group(self, trial: str) -> None:
        raise NotImplementedError

    def open_find(self) -> None:
        raise NotImplementedError

    def open_timeline(self) -> None:
        raise NotImplementedError

    def open_advisories(self) -> None:
        raise NotImplementedError

    def open_ledger(self) -> None:
        raise NotImplementedError

    def open_pipeline(self) -> None:
        raise NotImplementedError

    def can_lower_off_policy(self) -> bool:
        """An off-policy run this console can command, whose limit can still go lower."""
        raise NotImplementedError

    def lower_off_policy_limit(self) -> None:
        """Ask for a lower max_steps_off_policy and send it (``set_max_steps_off_policy``)."""
        raise NotImplementedError

    def can_cancel_trial(self, trial: str | None) -> bool | None:
        raise NotImplementedError

    def confirm_cancel_trial(self, trial: str) -> None:
        raise NotImplementedError
