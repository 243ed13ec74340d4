"""``D``: the difficulty ledger. A row per task (``f``: per family) with a cell per step, the
newest steps that fit (``←``/``→`` move back and forth in time), then what the task taught and
cost over the run; sorted by waste (``o`` cycles: waste, solve rate, name, streak), the tasks whose
groups trained nothing for the most sandbox time first. Above it, the share of the run's sandbox
time that trained nothing and the tasks out of the batches now.

On the selected task: ``x`` drops it from the batches (asks first), ``r`` re-admits it, ``w`` sets
its weight. They go to the run like its other commands (``ConsoleHost.send``) and take effect at
the next batch boundary; the runner's ``task.admission`` event then shows the change as pending
until that batch starts. In a replay, or once the run is over, they only say why not."""

from __future__ import annotations

from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Static

from tbconsole.record.enums import ControlCommand, PanelName
from tbconsole.state import RunState
from tbconsole.state.ledger import TaskRow
from tbconsole.ui.present import ledger_view as lv
from tbconsole.ui.present.sanitize import one_line
from tbconsole.ui.screens.confirm import ConfirmScreen
from tbconsole.ui.screens.host import ConsoleHost
from tbconsole.ui.screens.weight import WeightScreen
from tbconsole.ui.widgets.base import palette_of
from tbconsole.ui.widgets.footer import KeyFooter
from tbconsole.ui.widgets.ledger import LedgerTable
from tbconsole.ui.widgets.ledgercells import legend, summary_line

_NOT_DRAWN = object()


class LedgerScreen(Screen[None]):
    DEFAULT_CSS = """
    LedgerScreen #lsummary { height: 1; background: $panel; padding: 0 1; }
    LedgerScreen #llegend { height: 1; background: $panel; padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("o", "sort", "Sort"),
        Binding("f", "families", "Families"),
        Binding("x", "drop", "Drop"),
        Binding("r", "readmit", "Re-admit"),
        Binding("w", "weight", "Weight"),
        Binding("left", "shift(1)", "Older steps", show=False),
        Binding("right", "shift(-1)", "Newer steps", show=False),
    ]

    app = getters.app(ConsoleHost)

    def __init__(self) -> None:
        super().__init__()
        self.sort = lv.SORTS[0]
        self.family = False
        self._step: object = _NOT_DRAWN  # the step the pending changes were judged at

    def compose(self) -> ComposeResult:
        yield Static(id="lsummary")
        yield LedgerTable(id="ledger")
        yield Static(id="llegend")
        yield KeyFooter()

    @property
    def table(self) -> LedgerTable:
        return self.query_one(LedgerTable)

    def on_mount(self) -> None:
        self.table.focus()
        self.draw(self.app.state)

    def on_screen_resume(self) -> None:
        # Kept between opens (``sort`` and the view stay): while out of the stack it saw no change.
        self.draw(self.app.state)

    def show(self, state: RunState, now: float, changed: set[str], everything: bool = False) -> None:
        # A new batch turns pending changes into applied ones without a ledger change of its own.
        if everything or PanelName.LEDGER in changed or state.step != self._step:
            self.draw(state)

    # -- drawing ---------------------------------------------------------------------------

    def draw(self, state: RunState) -> None:
        if not self.is_mounted:
            return
        ledger, current = state.ledger, state.step
        self._step = current
        tasks = ledger.rows(state.tasks)
        members: dict[str, list[TaskRow]] = {}
        if self.family:
            for row in tasks:
                members.setdefault(row.family, []).append(row)
            rows = ledger.family_rows(state.tasks)
        else:
            rows = tasks
        by_task: dict[str, list[tuple[int, str, float, str]]] = {}
        for change in ledger.changes:
            by_task.setdefault(change[1], []).append(change)
        spans = {row.name: lv.out_spans(by_task[row.name], row.admission) for row in tasks if row.name in by_task}
        span = lv.step_span((step for step, _group in ledger.groups), current)
        table = self.table
        table.heading = f"{'families' if self.family else 'tasks'} · by {self.sort} (o)"
        table.show(
            lv.sort_rows(rows, self.sort), family=self.family, members=members, spans=spans, current=current, span=span
        )
        p = palette_of(self.app)
        self.query_one("#lsummary", Static).update(summary_line(lv.summary(tasks, current), p))
        self.query_one("#llegend", Static).update(legend(p))

    # -- keys ------------------------------------------------------------------------------

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_sort(self) -> None:
        self.sort = lv.SORTS[(lv.SORTS.index(self.sort) + 1) % len(lv.SORTS)]
        self.draw(self.app.state)

    def action_families(self) -> None:
        self.family = not self.family
        self.draw(self.app.state)

    def action_shift(self, steps: int) -> None:
        self.table.shift(steps * max(1, len(self.table.layout_.steps) // 2))

    def _steerable(self) -> TaskRow | None:
        """The selected task, when a command can reach the run; else None, after saying why."""
        app = self.app
        why = None
        if app.replaying:
            why = "a replay: the run is not live, nothing to change"
        elif not app.controllable:
            why = "the run is not live (its runner is gone): nothing to change"
        elif app.state.finished:
            why = "the run has ended: nothing to change"
        elif self.family:
            why = "families shown: f shows the tasks, then pick one"
        if why is not None:
            app.notify(why, severity="warning", timeout=4)
            return None
        row = self.table.selected()
        if row is None:
            app.notify("no task selected", severity="warning", timeout=3)
        return row

    def action_drop(self) -> None:
        row = self._steerable()
        if row is None:
            return
        current = self.app.state.step
        if row.admission.weight == 0 and (lv.out_now(row.admission, current) or lv.pending(row.admission, current)):
            self.app.notify(f"{one_line(row.name, 80)} is already out of the batches", timeout=3, markup=False)
            return
        name = row.name

        def answer(ok: bool | None) -> None:
            if ok:
                self.app.send(ControlCommand.DROP_TASK, name)

        self.app.push_screen(
            ConfirmScreen(
                f"Drop task {one_line(name, 80)} from the batches? From the next batch on it gets no groups "
                "(what it already taught stays); r re-admits it.",
                yes="Drop task",
                no="Keep it",
            ),
            answer,
        )

    def action_readmit(self) -> None:
        row = self._steerable()
        if row is None:
            return
        if row.admission.weight == 1:
            self.app.notify(f"{one_line(row.name, 80)} is in the batches already", timeout=3, markup=False)
            return
        self.app.send(ControlCommand.READMIT_TASK, row.name)

    def action_weight(self) -> None:
        row = self._steerable()
        if row is None:
            return
        name = row.name

        def chosen(weight: float | None) -> None:
            if weight is not None:
                self.app.send(ControlCommand.WEIGHT_TASK, f"{name}={weight:g}")

        self.app.push_screen(WeightScreen(name, row.admission.weight), chosen)
