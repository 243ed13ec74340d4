"""The group side by side (`g`): the actions a turn took, where a group's trials diverge, the
advantages (the cookbook's own computation is the reference), over a real demo run folder (the
session's `demo_run`) and a recorded one (fixtures/group-run) for the snapshots, in both themes."""

import dataclasses
import json
import shutil
import subprocess
import sys

import orjson
import pytest
from tinker_cookbook.rl.data_processing import compute_advantages
from tinker_cookbook.rl.types import Trajectory, TrajectoryGroup

from tbconsole.record.capturefile import CaptureRecord, ReplyText, ToolCallText
from tbconsole.record.events import GroupStarted, TrialEnded, read_events
from tbconsole.record.runfolder import RunFolder
from tbconsole.state import GroupState, TrialState
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import Replay
from tbconsole.ui.data.tokenizer import load_decoder
from tbconsole.ui.present.group_compare import (
    Action,
    TrialColumn,
    action_of,
    advantages,
    compare_group,
    first_divergence,
)
from tbconsole.ui.present.wording import counted_span, number_ranges, span_text
from tbconsole.ui.screens.group import GroupScreen, first_row, group_head
from tbconsole.ui.screens.main import MainScreen
from tbconsole.ui.screens.transcript import TranscriptScreen
from tbconsole.ui.widgets.base import Palette

from tests_support.prereqs import missing
from tests_support.ui import GROUP_RUN, T_FIXED, run_events, settle, wait_for

pytestmark = pytest.mark.timeout(180)
P = Palette("primary", "accent", "success", "warning", "error", "fg", "muted", "line", "bar")


def record(turn=0, text="", tool_calls=(), output=()):
    reply = ReplyText(text=text, tool_calls=tuple(ToolCallText(n, a) for n, a in tool_calls))
    return CaptureRecord(turn=turn, prompt_len=1, output=tuple(output), logprobs=(), reply=reply)


def column(actions, *, running=False, outcome="Submitted", scored=True, reward=None, cancelled=False):
    return TrialColumn(
        trial="t",
        index=0,
        task="x",
        outcome=None if running else outcome,
        scored=scored,
        reward=reward,
        turns=len(actions),
        tokens=0,
        running=running,
        cancelled=cancelled,
        actions=[Action(i, "command", a) for i, a in enumerate(actions)],
    )


@pytest.mark.e2e
def test_the_comparison_and_the_search_are_plain_python():
    code = (
        "import sys, tbconsole.ui.present.group_compare, tbconsole.ui.present.transcript_search\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'torch', 'tinker')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr


# -- what a turn did ------------------------------------------------------------------------------


def test_a_turns_action_is_its_first_tool_call_else_its_shell_block_else_its_first_line():
    call = record(tool_calls=[("bash", '{"command": "ls -la /app"}'), ("bash", '{"command": "rm x"}')])
    assert (action_of(call).kind, action_of(call).text) == ("tool", "bash ls -la /app")
    two_args = record(tool_calls=[("write", '{"path": "a", "text": "b"}')])
    assert action_of(two_args).text == 'write {"path":"a","text":"b"}'
    fenced = record(text="I will look first.\n```mswea_bash_command\ncat run.sh | head\n```\nthen fix it")
    assert (action_of(fenced).kind, action_of(fenced).text) == ("command", "cat run.sh | head")
    python = record(text="Like this:\n```python\nprint(1)\n```\n```bash\npytest -q\n```")
    assert action_of(python).text == "pytest -q"  # a non-shell block is not the command
    prose = record(text="\n\n  The file is already correct.\nNothing to do.")
    assert (action_of(prose).kind, action_of(prose).text) == ("text", "The file is already correct.")
    assert action_of(record(text="")).kind == "empty"


def test_a_capture_without_text_is_read_back_from_its_tokens():
    decoder = load_decoder(None)  # the local engine's tokenizer
    assert decoder.available
    tokens = decoder._tok.encode("Let me look.\n```bash\nls /app\n```").ids
    old = CaptureRecord(turn=3, prompt_len=10, output=tuple(tokens), logprobs=())
    action = action_of(old, decoder.decode)
    assert (action.turn, action.kind, action.text, action.decoded) == (3, "command", "ls /app", True)


# -- divergence and advantages --------------------------------------------------------------------


def test_the_first_turn_where_actions_differ():
    assert first_divergence([column(["ls", "cat a", "x"]), column(["ls", "cat  a", "y"])]) == 2  # spaces alike
    assert first_divergence([column(["ls", "cat a"]), column(["ls", "cat a"])]) is None
    # One trial ended after two turns, the other went on: they differ at the third.
    assert first_divergence([column(["ls", "cat a"]), column(["ls", "cat a", "rm b"])]) == 2
    # Still running and not that far yet: not known to differ.
    assert first_divergence([column(["ls"], running=True), column(["ls", "cat a"])]) is None
    assert first_divergence([column(["ls"], running=True), column(["pwd", "cat a"])]) == 0
    assert first_divergence([column(["ls"])]) is None


@pytest.mark.parametrize("rewards", [[1.0, 0.0, 0.0, 1.0], [0.25, 0.5, 1.0], [0.0, 0.0]])
def test_advantages_are_the_cookbooks(rewards):
    columns = [column([], reward=r) for r in rewards]
    advantages(columns)
    group = TrajectoryGroup(
        [Trajectory(transitions=[], final_ob=None) for _ in rewards], list(rewards), [{} for _ in rewards]
    )
    expected = compute_advantages([group])[0].tolist()
    assert [c.advantage for c in columns] == pytest.approx(expected)


def test_a_group_with_a_trial_not_scored_gives_no_advantages_and_says_which():
    columns = [column([], reward=1.0), column([], outcome="AgentError", scored=False), column([], cancelled=True)]
    columns[1].index, columns[2].index = 1, 2
    note = advantages(columns)
    assert all(c.advantage is None for c in columns)
    assert "trial 2, trial 3 not scored" in note
    waiting = [column([], reward=1.0), column([], running=True)]
    assert "1 to go" in advantages(waiting) and waiting[0].advantage is None


# -- over a real demo run -------------------------------------------------------------------------


def raw_actions(path):
    """A trial's actions read from its capture lines' JSON directly (not through the viewer)."""
    out = []
    for line in path.read_bytes().splitlines():
        reply = orjson.loads(line).get("reply") or {}
        calls = reply.get("tool_calls") or []
        if calls:
            args = json.loads(calls[0]["arguments"])
            value = " ".join(str(v) for v in args.values()) if isinstance(args, dict) else str(args)
            out.append(" ".join(f"{calls[0]['name']} {value}".split()))
        else:
            out.append(" ".join((reply.get("text") or "").split()))
    return out


def diverging_group(state, folder):
    """(group, index of the first differing turn) of the current step, from the raw captures."""
    for g in state.batch_groups():
        actions = [raw_actions(folder.capture_file(g.step, g.group, t)) for t in g.trials]
        for i in range(max(map(len, actions))):
            if len({a[i] if i < len(a) else None for a in actions}) > 1:
                return g, i
    return None, None


@pytest.mark.e2e
@pytest.mark.root
async def test_group_view_of_a_real_run_shows_where_its_trials_diverge(demo_run):
    folder = RunFolder(demo_run)
    app = ConsoleApp(replay=Replay(list(read_events(folder.events))), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        g, expected = diverging_group(app.state, folder)
        if g is None:  # every group of the last step did the same: look at the one before
            await pilot.press("left_square_bracket")
            await settle(pilot)
            g, expected = diverging_group(app.state, folder)
        if g is None:
            missing("no group of this recorded run diverged", "Record the demo run again (tests/ui/make_fixtures.py).")
        main = app.screen
        assert isinstance(main, MainScreen)
        row = [x.group for x in app.state.batch_groups()].index(g.group)
        main.grid.move_cursor(row=row, column=2)
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, GroupScreen) and app.screen.comparison is not None)
        screen = app.screen
        cmp = screen.comparison
        assert (cmp.step, cmp.group) == (g.step, g.group)
        assert [c.trial for c in cmp.columns] == g.trials
        assert cmp.divergence == expected
        for c in cmp.columns:  # every turn as the capture file has it
            assert [a.text for a in c.actions] == raw_actions(folder.capture_file(g.step, g.group, c.trial))
        # The rewards the group reported, centered by their mean.
        rewards = g.rewards
        assert [c.advantage for c in cmp.columns] == pytest.approx([r - sum(rewards) / len(rewards) for r in rewards])
        # The table marks the row; the cursor starts on the trial the group was opened from.
        labels = [screen.table.rows[k].label.plain for k in screen.table.rows]
        assert labels[5 + expected] == f"turn {expected + 1} ◆"
        assert screen.cursor_trial().trial == g.trials[1]
        assert screen.table.cursor_coordinate.row == 5 + expected  # on the turn that differs, no key pressed
        await pilot.press("right", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        assert app.screen.trial == g.trials[2]
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, GroupScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))


@pytest.mark.e2e
@pytest.mark.root
async def test_group_view_takes_turns_as_they_are_captured(demo_run, tmp_path):
    """A group caught while its trials run: the view picks up capture lines as they are written."""
    source = RunFolder(demo_run)
    events = run_events(demo_run, tmp_path)
    start = next(i for i, e in enumerate(events) if isinstance(e, GroupStarted) and e.step == 0)
    g = events[start]
    position = next(i for i, e in enumerate(events) if isinstance(e, TrialEnded) and e.trial in g.trials)
    live = RunFolder(tmp_path)
    app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        app.replay_seek(position)  # before any of the group's trials ended: all still running
        await settle(pilot)
        app.open_group(g.trials[0])
        await wait_for(pilot, lambda: isinstance(app.screen, GroupScreen) and app.screen.comparison is not None)
        screen = app.screen
        assert screen.comparison.depth == 0
        assert all(c.running for c in screen.comparison.columns)
        for trial in g.trials:  # the proxy writes each trial's turns
            target = live.capture_file(g.step, g.group, trial)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source.capture_file(g.step, g.group, trial), target)
        await wait_for(pilot, lambda: all(c.actions for c in screen.comparison.columns), timeout=10)
        assert screen.table.row_count == 5 + screen.comparison.depth


def test_compare_group_takes_rewards_and_counts_from_the_state():
    g = GroupState(step=0, group=1, task="x", trials=["a", "b"])
    trials = {
        "a": TrialState("a", 0, 1, 0, "x", outcome="Submitted", scored=True, reward=1.0, turns=2, output_tokens=40),
        "b": TrialState("b", 0, 1, 1, "x", outcome="Submitted", scored=True, reward=0.0, turns=1, output_tokens=9),
    }
    acts = {"a": [Action(0, "command", "ls"), Action(1, "command", "cat a")], "b": [Action(0, "command", "pwd")]}
    cmp = compare_group(g, trials, acts)
    assert [(c.reward, c.turns, c.tokens, c.advantage) for c in cmp.columns] == [(1.0, 2, 40, 0.5), (0.0, 1, 9, -0.5)]
    assert (cmp.divergence, cmp.depth) == (0, 2)


def test_the_head_words_a_range_of_one_turn_as_one_turn():
    base = compare_group(GroupState(step=0, group=1, task="x", trials=[]), {}, {})

    def comparison(divergence):
        columns = [column(["ls", "cat a", "x"]), column(["ls", "cat a", "y"])]
        return dataclasses.replace(base, columns=columns, divergence=divergence)

    assert "(turn 1 alike, dimmed)" in group_head(comparison(1), P).plain
    assert "(turns 1–2 alike, dimmed)" in group_head(comparison(2), P).plain
    assert "alike" not in group_head(comparison(0), P).plain
    assert (span_text(3, 3), span_text(1, 4), counted_span("step", 2, 2)) == ("3", "1–4", "step 2")
    assert number_ranges([3, 0, 1, 2, 5, 7, 8, 8]) == "0–3, 5, 7–8"


def test_the_cursor_starts_on_the_turn_that_differs_else_the_first():
    same = [column(["ls", "cat a"]), column(["ls", "cat a"])]
    apart = [column(["ls", "cat a", "x"]), column(["ls", "cat a", "y"])]
    base = compare_group(GroupState(step=0, group=1, task="x", trials=[]), {}, {})
    assert first_row(dataclasses.replace(base, columns=same, divergence=None)) == 5  # turn 1
    assert first_row(dataclasses.replace(base, columns=apart, divergence=2)) == 5 + 2  # turn 3 ◆


@pytest.mark.e2e
async def test_group_view_opens_on_the_groups_actions():
    """g on a trial: the cursor is on a turn's action in that trial's column, without a key."""
    app = ConsoleApp(replay=Replay(run_events(GROUP_RUN)), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(150, 45)) as pilot:
        await settle(pilot)
        app.screen.grid.move_cursor(row=1, column=2)
        trial = app.screen.grid.selected_trial()
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, GroupScreen) and app.screen.comparison is not None)
        screen = app.screen
        cmp = screen.comparison
        assert cmp.depth and screen.table.cursor_coordinate.row == first_row(cmp) >= 5
        assert screen.cursor_trial().trial == trial
        action = screen.cursor_action()
        assert action is not None and action.text in screen.query_one("#gdetail").render().plain


# -- snapshots ------------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("theme", ["dark", "light"])
def test_group_screen(snap_compare, theme):
    """Step 1, group 1 of a recorded demo run: four trials, three commands, rewards 0 and 1."""

    async def open_group(pilot):
        await settle(pilot)
        pilot.app.screen.grid.move_cursor(row=1, column=2)
        await pilot.press("g")
        await settle(pilot)

    app = ConsoleApp(replay=Replay(run_events(GROUP_RUN)), mode="replay", theme=theme, clock=lambda: T_FIXED)
    assert snap_compare(app, terminal_size=(120, 30), run_before=open_group)
