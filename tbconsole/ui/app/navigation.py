"""The screens a key opens over the main one."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

from tbconsole.ui.screens.help import HelpScreen
from tbconsole.ui.screens.host import ConsoleHost
from tbconsole.ui.screens.log import LogScreen


class Navigation(ConsoleHost):
    """A base of ``ConsoleApp`` (Textual finds the actions on the app, the screens call the
    ``open_*``): a trial's transcript, its group side by side, find, the ledger, the timeline,
    the pipeline, the advisories, help and the log. The drill-down screens are imported when first opened,
    off the first frame's path."""

    def action_help(self) -> None:
        self._push_kept("help", HelpScreen)

    def action_log(self) -> None:
        self._push_kept("log", LogScreen)

    def _push_kept(self, name: str, screen_type: type[Screen[Any]]) -> None:
        """Open the one ``screen_type`` screen, built on first use and kept: building a screen
        (composing, styling, laying out its content) costs more than the key may take."""
        if not isinstance(self.screen, screen_type):
            if not self.is_screen_installed(name):
                self.install_screen(screen_type(), name)
            self.push_screen(name)

    def open_advisories(self) -> None:
        from tbconsole.ui.screens.advisories import AdvisoriesScreen

        self._push_kept("advisories", AdvisoriesScreen)

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

    def open_pipeline(self) -> None:
        """``P``: sampling and training over the run (kept between opens)."""
        from tbconsole.ui.screens.pipeline import PipelineScreen

        self._push_kept("pipeline", PipelineScreen)

    def open_timeline(self) -> None:
        """``w``: the waterfall of the current step, or of the step being replayed."""
        from tbconsole.ui.screens.timeline import TimelineScreen

        screen = TimelineScreen.for_run(self)
        if screen is None:
            self.notify("no run yet: nothing to show on a timeline", severity="warning", timeout=3)
            return
        self.push_screen(screen)
