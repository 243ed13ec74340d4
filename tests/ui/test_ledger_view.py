"""The difficulty ledger's screen (``D``), driven by Pilot over a replay of recorded real demo runs
(the advisory corpus) and over hand-made runs for what a recording does not hold (a drop, a policy
skip, a pending change, hostile task names): the waste order checked against the events
themselves, the other orders, families, the task commands (captured from the control inbox an
attached console writes to, or refused by the run), the replay's refusal, snapshots at 80 and 160
columns, and what one redraw of a 100-step × 89-task ledger costs."""

import json
import time
from collections import defaultdict

import pytest

from tbconsole.record import events as ev
from tbconsole.record.control import RunControl
from tbconsole.record.enums import AdmissionBy, PanelName
from tbconsole.record.runfolder import RunFolder
from tbconsole.state import RunState, reduce_all
from tbconsole.state.ledger import Admission, TaskRow
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import FileControls, ListSource, LocalControls, Replay
from tbconsole.ui.present import ledger_view as lv
from tbconsole.ui.screens.confirm import ConfirmScreen
from tbconsole.ui.screens.ledger import LedgerScreen
from tbconsole.ui.screens.weight import WeightScreen, parse_weight

from tests_support.ledger import group_events, run_started
from tests_support.recorded import corpus_events
from tests_support.ui import T_FIXED, settle, wait_for

pytestmark = pytest.mark.timeout(120)
MULTI_STEP = "healthy-multi-turn-1"  # the corpus's longest runs have 20 steps; this one the most trials


def screen_text(app) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def open_ledger(pilot):
    await pilot.press("D")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, LedgerScreen) and pilot.app.screen.table.rows)
    return pilot.app.screen


def waste_by_task(events) -> dict[str, float]:
    """Each task's sandbox seconds in groups that trained nothing, from the events alone: a
    group's trials' own totals (failed attempts' too), when the group's last end was scored with
    one reward for every trial."""
    task = {(e.step, e.group): e.task for e in events if isinstance(e, ev.GroupStarted)}
    seconds: dict[tuple[int, int], float] = defaultdict(float)
    for e in events:
        if isinstance(e, ev.TrialEnded) and (e.step, e.group) in task:
            seconds[(e.step, e.group)] += e.timings.get("total") or 0.0
    ended = {(e.step, e.group): e for e in events if isinstance(e, ev.GroupEnded)}
    out: dict[str, float] = defaultdict(float)
    for key, e in ended.items():
        if e.ok and len(set(e.rewards)) == 1:
            out[task[key]] += seconds[key]
    return out


@pytest.mark.e2e
async def test_sorted_by_waste_then_the_other_orders_and_families():
    events = corpus_events(MULTI_STEP)
    app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await open_ledger(pilot)
        waste = waste_by_task(events)
        most = max(waste, key=lambda t: waste[t])
        rows = screen.table.rows
        assert rows[0].name == most and waste[most] > 0 and rows[0].no_signal_s == pytest.approx(waste[most])
        assert [r.no_signal_s for r in rows] == sorted((r.no_signal_s for r in rows), reverse=True)
        text = screen_text(app)
        first = next(line for line in text.splitlines() if most in line)
        assert text.index(first) < min(text.index(r.name) for r in rows[1:5])  # drawn first, too
        assert "trained nothing: 41% of the sandbox time" in text  # 1h32m of 3h47m, as the test_ledger sums
        await pilot.press("o")
        rates = [r.solve_rate for r in screen.table.rows if r.solve_rate is not None]
        assert screen.sort == "solve rate" and rates == sorted(rates, reverse=True) and rates[0] > rates[-1]
        await pilot.press("o")
        assert [r.name for r in screen.table.rows] == sorted(r.name for r in rows)
        await pilot.press("o")
        streaks = [r.streak for r in screen.table.rows]
        assert screen.sort == "streak" and streaks == sorted(streaks, reverse=True)
        await pilot.press("o", "f")
        families = screen.table.rows
        assert {r.name for r in families} == {"pointer-count-lines", "pointer-sort-unique"}
        assert sum(r.tasks for r in families) == len(rows) and families[0].no_signal_s >= families[1].no_signal_s
        assert "family" in screen_text(app) and "pointer-count-lines (20)" in screen_text(app)
        # a replay steers nothing: the keys say so, and no confirmation is asked
        await pilot.press("f", "x")
        assert not isinstance(app.screen, ConfirmScreen)
        assert any("the run is not live" in n.message for n in app._notifications)


def _live_events():
    """The recorded run up to its last batch: a run still going, to be steered."""
    events = corpus_events("healthy-demo-1")
    last = max(i for i, e in enumerate(events) if isinstance(e, ev.BatchStarted))
    return events[:last]


@pytest.mark.e2e
async def test_drop_readmit_and_weight_go_to_the_runs_control_inbox(tmp_path):
    inbox = RunFolder(tmp_path).control_inbox
    inbox.mkdir(parents=True)
    events = _live_events()
    app = ConsoleApp(source=ListSource(events), controls=FileControls(tmp_path), mode="attach", clock=lambda: T_FIXED)

    def sent():
        return [json.loads(p.read_text()) for p in sorted(inbox.glob("*.json"))]

    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(pilot, lambda: app.state.step is not None and len(app.inbox) == 0)
        screen = await open_ledger(pilot)
        await pilot.press("down")
        chosen = screen.table.selected()
        assert chosen is not None and chosen.name == screen.table.rows[1].name
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert chosen.name in app.screen.question
        await pilot.press("y")
        await wait_for(pilot, lambda: len(sent()) == 1)
        assert sent() == [{"command": "drop_task", "argument": chosen.name}]
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, WeightScreen))
        await pilot.press("ctrl+a", "ctrl+k", "1", "1", "enter")  # 11: refused in the prompt
        assert isinstance(app.screen, WeightScreen) and len(sent()) == 1
        await pilot.press("backspace", "enter")
        await wait_for(pilot, lambda: len(sent()) == 2)
        assert sent()[1] == {"command": "weight_task", "argument": f"{chosen.name}=1"}
        await pilot.press("r")  # weight 1 in the state: nothing to re-admit
        assert len(sent()) == 2 and any("in the batches already" in n.message for n in app._notifications)


@pytest.mark.e2e
async def test_in_process_the_runs_control_gets_them_or_refuses_with_a_notification():
    got = []
    control = RunControl(lambda event: None)
    control.task_commands = lambda command, argument: got.append((command, argument))
    app = ConsoleApp(source=ListSource(_live_events()), controls=LocalControls(control), clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.state.step is not None)
        screen = await open_ledger(pilot)
        first = screen.table.rows[0].name
        await pilot.press("x", "y")
        await wait_for(pilot, lambda: got)
        assert got == [("drop_task", first)]
        control.task_commands = None  # a run that takes no task changes: RunControl says so
        await pilot.press("w", "ctrl+a", "ctrl+k", "2", "enter")
        await wait_for(pilot, lambda: any(n.title == "weight_task not sent" for n in app._notifications))
        note = next(n for n in app._notifications if n.title == "weight_task not sent")
        assert note.severity == "error" and "no task changes" in note.message and len(got) == 1
        assert isinstance(app.screen, LedgerScreen)


# -- hand-made runs: drops, skips, pending changes, hostile names --------------------------------

HOSTILE = "[red]x[/red]\x1b[2J"


def hand_made(
    current: int = 6,
    names: tuple[str, ...] = ("fix-git", "count-lines-001", "count-lines-002", "regex-log", "build-ext"),
):
    """Seven steps of five tasks: fix-git dropped by a user from step 3 and now pending a weight
    of 2 from step 7; count-lines-002 skipped by the policy from step 4 until step 8; build-ext
    (one partial reward for every trial) dropped by a user from step 5; regex-log mostly failed."""
    git, one, two, rx, ext = names
    rewards = {git: [1.0, 1.0], one: [0.0, 1.0], two: [1.0, 1.0], rx: [0.0, 0.0], ext: [0.5, 0.5]}
    out = [run_started(list(names))]
    for step in range(current + 1):
        out.append(ev.BatchStarted(step=step, groups=[]))
        for g, task in enumerate(names):
            if (task == git and step >= 3) or (task == two and 4 <= step < 8) or (task == ext and step >= 5):
                continue
            r = rewards[task] if step % 3 or task != rx else [1.0, 0.0]
            out.extend(group_events(step, g, task, r, seconds=60.0 * (g + 1)))
        if step == 2:
            out.append(ev.TaskAdmission(task=git, weight=0.0, step=3, by=AdmissionBy.USER))
        if step == 3:
            out.append(
                ev.TaskAdmission(task=two, weight=0.0, step=4, by=AdmissionBy.POLICY, reason="3× solved", until=8)
            )
        if step == 4:
            out.append(ev.TaskAdmission(task=ext, weight=0.0, step=5, by=AdmissionBy.USER))
    out.append(ev.TaskAdmission(task=git, weight=2.0, step=current + 1, by=AdmissionBy.USER))
    return out


def test_states_and_marks_of_a_hand_made_run():
    state = reduce_all(hand_made())
    rows = {r.name: r for r in state.ledger.rows(state.tasks)}
    git, two = rows["fix-git"], rows["count-lines-002"]
    assert lv.state_words(git.admission, 6, True) == ("weight 2 from step 7 (pending)", "accent")
    assert lv.state_words(two.admission, 6, True) == ("skipped by policy until step 8", "warning")
    assert lv.state_words(two.admission, 8, True) == ("in", "muted")  # the skip is over
    ext = rows["build-ext"]
    assert lv.state_words(ext.admission, 6, True) == ("dropped by user", "error")
    assert lv.state_words(ext.admission, 4, False) == ("→out @5", "accent")  # before its batch
    assert lv.cell_mark(ext.cells[0], False) == (lv.ONE_REWARD, "warning")
    changes = [c for c in state.ledger.changes if c[1] == "fix-git"]
    spans = lv.out_spans(changes, git.admission)
    assert spans == [(3, 7)] and lv.is_out(spans, 3) and lv.is_out(spans, 6) and not lv.is_out(spans, 7)
    assert lv.cell_mark(git.cells.get(4), lv.is_out(spans, 4)) == (lv.OUT, "error")
    assert lv.cell_mark(git.cells[0], False) == (lv.ALL_SOLVED, "success")
    assert lv.cell_mark(rows["regex-log"].cells[1], False) == (lv.ALL_FAILED, "error")
    assert lv.cell_mark(rows["count-lines-001"].cells[1], False) == (lv.BARS[3], 0.5)
    assert lv.streak_words(two, True) == ("4× solved", "success") and lv.streak_words(two, False)[0] == "4×✓"
    s = lv.summary(list(rows.values()), 6)
    assert (s.dropped, s.skipped, s.pending) == (1, 1, 1)  # fix-git's drop is now a pending weight
    assert lv.summary(list(rows.values()), 6).waste_share == pytest.approx(
        sum(r.no_signal_s for r in rows.values()) / sum(r.sandbox_s for r in rows.values())
    )


def test_the_newest_steps_that_fit_and_the_axis():
    names = ["a-task"]
    lay = lv.layout(160, names, 0, 99)
    assert lay.steps[-1] == 99 and lay.cell_w == 1 and 40 <= len(lay.steps) < 100
    assert lay.heat_w == len(lay.steps) and lay.hidden_before == lay.steps[0]
    older = lv.layout(160, names, 0, 99, back=10)
    assert older.steps[-1] == 89 and len(older.steps) == len(lay.steps)
    assert lv.layout(160, names, 0, 99, back=1000).steps[0] == 0  # no further back than the start
    short = lv.layout(160, names, 0, 5)
    assert short.steps == tuple(range(6)) and short.cell_w == lv.MAX_CELL_W
    axis = lv.axis_labels(lay)
    assert axis.split()[-1] == str(max(s for s in lay.steps if s % 10 == 0))
    narrow = lv.layout(78, names, 0, 99)
    assert not narrow.wide and len(narrow.steps) >= 8


def test_weight_prompt_reads_0_to_10():
    assert parse_weight("2") == 2.0 and parse_weight(" 0 ") == 0.0 and parse_weight("10") == 10.0
    assert parse_weight("11") is None and parse_weight("-1") is None and parse_weight("nan") is None
    assert parse_weight("two") is None


@pytest.mark.e2e
async def test_pending_then_applied_when_its_batch_starts():
    events = hand_made()
    app = ConsoleApp(
        source=ListSource(events), controls=LocalControls(RunControl(lambda e: None)), clock=lambda: T_FIXED
    )
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: app.state.step == 6)
        await open_ledger(pilot)
        assert "weight 2 from step 7 (pending)" in screen_text(app)
        assert "1 change pending (next batch)" in screen_text(app)
        app.inbox.put_many([ev.BatchStarted(step=7, groups=[])])
        await wait_for(pilot, lambda: "weight 2 " in screen_text(app) and "(pending)" not in screen_text(app))


@pytest.mark.e2e
async def test_hostile_task_names_are_shown_inertly():
    names = (HOSTILE, "[bold]b", "tab\there", "bell\x07", "[link=file:///etc]e[/link]")
    app = ConsoleApp(replay=Replay(hand_made(names=names)), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(160, 30)) as pilot:
        screen = await open_ledger(pilot)
        text = screen_text(app)
        assert "[red]x[/red]␛[2J" in text and "[bold]b" in text and "bell␇" in text
        assert "\x1b" not in text and "\x07" not in text
        assert {r.name for r in screen.table.rows} >= {"[bold]b"}
        await pilot.press("o", "o")  # by name: still drawn as typed
        assert "[red]x[/red]" in screen_text(app)


# -- cost --------------------------------------------------------------------------------------


def synthetic(steps: int = 100, tasks: int = 89, groups: int = 32) -> RunState:
    """A long run's ledger straight into the state: ``groups`` groups a step over ``tasks``
    tasks, eight trials of a minute each, every third group constant."""
    state = RunState()
    state.tasks = [f"{i:03d}-task-family{i % 7}-{i:03d}" for i in range(tasks)]
    ledger = state.ledger
    for step in range(steps):
        for g in range(groups):
            task = state.tasks[(step * groups + g) % tasks]
            ledger.group_started(step, g, task)
            for _ in range(8):
                ledger.trial_ended(step, g, 60.0)
            rewards = [1.0] * 8 if g % 3 == 0 else [float(i % 2) for i in range(8)]
            ledger.group_ended(step, g, rewards, True)
    state.step = steps - 1
    ledger.admission(state.tasks[5], 0.0, 40, AdmissionBy.USER, None, None)
    return state


@pytest.mark.e2e
async def test_one_redraw_of_a_long_run_costs_only_what_is_on_view():
    state = synthetic()
    app = ConsoleApp(replay=Replay([]), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(160, 50)) as pilot:
        app.state = state
        screen = await open_ledger(pilot)
        table = screen.table
        await pilot.pause(0.1)
        times = []
        for _ in range(5):
            start = time.perf_counter()
            screen.show(state, T_FIXED, {PanelName.LEDGER})
            for y in range(table.size.height):  # the lines a frame draws
                table.render_line(y)
            times.append(time.perf_counter() - start)
        best = min(times)
        print(f"ledger redraw, 100 steps × 89 tasks × 32 groups/step: {best * 1000:.1f} ms")
        # only the lines on view were built, each with the steps that fit
        assert len(table._lines) <= table.size.height and len(table.rows) == 89
        assert table.layout_.steps[-1] == 99 and len(table.layout_.steps) < 100
        # A group ending rebuilds its task's row only: the redraw's model work does not grow
        # with the run (the time is printed, not asserted: it is the benchmark's to judge).
        built = state.ledger.rows_built
        state.ledger.group_started(100, 0, state.tasks[7])
        state.ledger.group_ended(100, 0, [1.0, 0.0], True)
        screen.show(state, T_FIXED, {PanelName.LEDGER})
        assert state.ledger.rows_built == built + 1


def test_the_waste_order_breaks_ties_by_sandbox_time():
    rows = [
        TaskRow("a", "a", {}, 0, 0, 0, 0, 10.0, 1.0, 0, None, Admission()),
        TaskRow("b", "b", {}, 0, 0, 0, 0, 10.0, 5.0, 0, None, Admission()),
        TaskRow("c", "c", {}, 0, 0, 0, 0, 20.0, 5.0, 0, None, Admission()),
    ]
    assert [r.name for r in lv.sort_rows(rows, "waste")] == ["c", "b", "a"]  # ties: more sandbox time first


# -- snapshots ---------------------------------------------------------------------------------


def _open(app_keys=("D",)):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press(*app_keys)
        await settle(pilot)

    return run_before


@pytest.mark.e2e
@pytest.mark.parametrize("size", [(80, 24), (160, 40)], ids=["80x24", "160x40"])
def test_snapshot_recorded_run(snap_compare, size):
    app = ConsoleApp(replay=Replay(corpus_events(MULTI_STEP)), mode="replay", clock=lambda: T_FIXED)
    assert snap_compare(app, terminal_size=size, run_before=_open())


@pytest.mark.e2e
@pytest.mark.parametrize("size", [(80, 24), (160, 40)], ids=["80x24", "160x40"])
def test_snapshot_drop_and_policy_skip(snap_compare, size):
    app = ConsoleApp(replay=Replay(hand_made()), mode="replay", clock=lambda: T_FIXED)
    assert snap_compare(app, terminal_size=size, run_before=_open())
