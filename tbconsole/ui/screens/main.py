"""The main screen: header (and the notice of a run nobody runs), gateway, captures, the trials
grid, rewards, PPO metrics."""

from __future__ import annotations

from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input

from tbconsole.record.enums import PanelName
from tbconsole.state import RunState
from tbconsole.ui.present.wording import runner_notice
from tbconsole.ui.screens.host import ConsoleHost
from tbconsole.ui.widgets.captures import CapturesPanel
from tbconsole.ui.widgets.footer import KeyFooter
from tbconsole.ui.widgets.gateway import GatewayPanel
from tbconsole.ui.widgets.header import AdvisoryStrip, RunHeader, RunnerNotice
from tbconsole.ui.widgets.metrics import MetricsPanel
from tbconsole.ui.widgets.replaybar import ReplayBar
from tbconsole.ui.widgets.rewards import RewardsPanel
from tbconsole.ui.widgets.trials import TrialsGrid

PANELS = {
    PanelName.GATEWAY: GatewayPanel,
    PanelName.CAPTURES: CapturesPanel,
    PanelName.REWARDS: RewardsPanel,
    PanelName.METRICS: MetricsPanel,
}


class MainScreen(Screen[None]):
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]
    DEFAULT_CSS = """
    MainScreen #body { height: 1fr; scrollbar-size-vertical: 1; }
    MainScreen #top { height: 9; }
    MainScreen #bottom { height: 14; }
    MainScreen.-short #top { height: 6; }
    MainScreen.-short #bottom { height: 10; }
    MainScreen.-short TrialsGrid { height: auto; min-height: 5; max-height: 14; }
    MainScreen GatewayPanel { width: 2fr; }
    MainScreen CapturesPanel { width: 3fr; }
    MainScreen RewardsPanel { width: 1fr; }
    MainScreen MetricsPanel { width: 1fr; }
    /* The filter box floats over the panels' bottom rows, above the footer, on a layer of its
       own: opening and closing it lays nothing else out again. */
    MainScreen { layers: default filter; }
    MainScreen #filter {
        layer: filter; dock: bottom; margin-bottom: 1; height: 3; display: none; border: round $accent;
    }
    MainScreen #filter.-active { display: block; }
    MainScreen MetricsPanel.-pointed { border: round $warning; }
    """
    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("g", "group", "Group"),
        Binding("f", "find", "Find"),
        Binding("v", "advisories", "Advisories"),
        Binding("w", "timeline", "Timeline"),
        Binding("x", "cancel_trial", "Cancel trial", show=False),
        Binding("D", "ledger", "Ledger", show=False),  # d decides; D for the difficulty ledger
        Binding("P", "pipeline", "Pipeline", show=False),  # p pauses; P for the pipeline
    ]

    app = getters.app(ConsoleHost)

    def compose(self) -> ComposeResult:
        yield RunHeader(id=PanelName.HEADER)
        yield RunnerNotice(id="notice")
        yield AdvisoryStrip(id="advisory-strip")
        with VerticalScroll(id="body", can_focus=False):
            with Horizontal(id="top"):
                yield GatewayPanel(id=PanelName.GATEWAY)
                yield CapturesPanel(id=PanelName.CAPTURES)
            yield TrialsGrid(id=PanelName.TRIALS)
            with Horizontal(id="bottom"):
                yield RewardsPanel(id=PanelName.REWARDS)
                yield MetricsPanel(id=PanelName.METRICS)
        yield Input(
            placeholder="filter trials: task, outcome, phase, ok, fail, reward=1  (enter: apply, esc: clear)",
            id="filter",
        )
        if self.app.mode == "replay":
            yield ReplayBar(id="replaybar")
        yield KeyFooter()

    def on_mount(self) -> None:
        self.query_one(TrialsGrid).focus()
        self.app.redraw()

    def on_screen_resume(self) -> None:
        self.app.catch_up(self)

    @property
    def grid(self) -> TrialsGrid:
        return self.query_one(TrialsGrid)

    def show(self, state: RunState, now: float, changed: set[str], everything: bool = False) -> None:
        runner = self.app.runner
        self.query_one(RunHeader).show(state, now, self.app.mode_label, runner)
        self.query_one(AdvisoryStrip).show(state, now)
        if runner is not None:
            lease = self.app.lease
            assert lease is not None  # the runner is the read of the lease the app watches
            self.query_one(RunnerNotice).show(runner_notice(state, runner, lease.log_path))
        if everything or PanelName.TRIALS in changed:
            self.grid.show(state, now)
        for name, cls in PANELS.items():
            if everything or name in changed:
                self.query_one(f"#{name}", cls).show(state, now)
        replay = self.app.replay
        if replay is not None:
            self.query_one(ReplayBar).show(replay)

    # -- drill-down and filter --------------------------------------------------------------

    def on_trials_grid_trial_selected(self, event: TrialsGrid.TrialSelected) -> None:
        event.stop()
        self.app.open_transcript(event.trial)

    def action_group(self) -> None:
        """The selected trial's group side by side."""
        trial = self.grid.selected_trial()
        if trial is None:
            self.app.notify("no trial selected", severity="warning", timeout=3)
            return
        self.app.open_group(trial)

    def action_find(self) -> None:
        self.app.open_find()

    def action_timeline(self) -> None:
        """Where the current (or replayed) step's time went."""
        self.app.open_timeline()

    def action_ledger(self) -> None:
        """The difficulty ledger: per task, what each step's groups taught and cost."""
        self.app.open_ledger()

    def action_pipeline(self) -> None:
        """Sampling and training over the run: in flight, queued, trained, dropped; staleness."""
        self.app.open_pipeline()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("-active")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.grid.filter = event.value.strip()
            self.app.redraw(PanelName.TRIALS)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            event.stop()
            event.input.remove_class("-active")  # the grid's title shows the filter applied
            self.grid.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if box.has_class("-active") or self.grid.filter:
            box.value = ""
            box.remove_class("-active")
            self.grid.filter = ""
            self.grid.focus()
            self.app.redraw(PanelName.TRIALS)

    # -- advisories (v) and where their Enter lands ---------------------------------------------

    def action_advisories(self) -> None:
        self.app.open_advisories()

    def point_at_metrics(self) -> None:
        """Bring the metrics panel into view and mark it for a few seconds."""
        panel = self.query_one(MetricsPanel)
        panel.scroll_visible(animate=False)
        panel.add_class("-pointed")
        self.set_timer(4.0, lambda: panel.remove_class("-pointed"))

    # -- cancel one trial (x) ------------------------------------------------------------------

    def action_cancel_trial(self) -> None:
        trial = self.grid.selected_trial()
        if trial is not None and self.check_action("cancel_trial", ()):
            self.app.confirm_cancel_trial(trial)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":
            return bool(self.grid.filter) or self.query_one("#filter", Input).has_class("-active")
        if action == "cancel_trial":
            return self.app.can_cancel_trial(self.grid.selected_trial())
        return True
