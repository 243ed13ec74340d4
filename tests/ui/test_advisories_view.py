"""The console side of advisories, driven by Pilot over recorded events with advisories added
(tests_support.advisories' ``with_advisories``): the strip under the header, `v` and its
screen, Enter jumping to a trial / group / metric, one notification per new error advisory (none
on catch-up), snapshots in both themes; and groups with one reward worded by what they mean (all
solved is success, not a warning)."""

import re

import pytest

from tbconsole.record.enums import LogLevel
from tbconsole.record.events import AdvisoryCleared
from tbconsole.state import reduce_all
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import ListSource, Replay
from tbconsole.ui.present.fit import GLUE, glue_numbers, hang
from tbconsole.ui.screens.advisories import AdvisoriesScreen, advisory_detail, advisory_row
from tbconsole.ui.screens.group import GroupScreen
from tbconsole.ui.screens.main import MainScreen
from tbconsole.ui.screens.transcript import TranscriptScreen
from tbconsole.ui.widgets.base import Palette
from tbconsole.ui.widgets.header import AdvisoryStrip
from tbconsole.ui.widgets.metrics import MetricsPanel
from tbconsole.ui.widgets.rewards import RewardsPanel
from tbconsole.ui.widgets.trialcells import group_label

from tests_support.advisories import KL, LOST_TRIAL, advisory, with_advisories
from tests_support.ui import T_FIXED, rendered, settle, wait_for

pytestmark = pytest.mark.timeout(120)
P = Palette("primary", "accent", "success", "warning", "error", "fg", "muted", "line", "bar")


def replay_app(events, **kwargs):
    return ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: T_FIXED, **kwargs)


def strip_text(app) -> str:
    return rendered(app.screen.query_one(AdvisoryStrip)).strip()


def advisory_notes(app) -> list[str]:
    return [n.message for n in app._notifications if n.title.startswith("advisory")]


@pytest.mark.e2e
async def test_strip_counts_by_severity_and_hides_without_advisories(finished_events):
    app = replay_app(with_advisories(finished_events))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(AdvisoryStrip).display)
        text = strip_text(app)
        assert "✗ 1 error" in text and "⚠ 2 warnings" in text and "• 1 info" in text
        assert LOST_TRIAL in text and "v: all" in text  # the newest of the most severe, and the key
    plain = replay_app(finished_events)
    async with plain.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: plain.screen.grid.row_count == 4)
        assert not plain.screen.query_one(AdvisoryStrip).display


def test_strip_says_when_the_last_one_cleared_then_goes_quiet():
    state = reduce_all([advisory("a", LogLevel.WARNING, ts=100.0, message="share 0.7")])
    assert "1 warning" in AdvisoryStrip.line(state, 101.0, P).plain
    reduce_all([AdvisoryCleared(key="a", ts=200.0, message="share back to 0.2")], state)
    line = AdvisoryStrip.line(state, 230.0, P)
    assert line is not None and "none active · cleared 30s ago: share back to 0.2" in line.plain
    assert AdvisoryStrip.line(state, 200.0 + 1000, P) is None  # long after: hidden again
    assert AdvisoryStrip.line(reduce_all([]), 0.0, P) is None  # never any: hidden
    # what a rule says is plain text, control characters and all
    hostile = advisory("h", "\x1b[2Jodd", ts=300.0, message="\x1b[31mred\x1b[0m", trial="t\x07[b]1")
    line = AdvisoryStrip.line(reduce_all([hostile], state), 301.0, P)
    assert line is not None and "\x1b" not in line.plain and "\x07" not in line.plain


@pytest.mark.e2e
async def test_v_lists_active_then_cleared_and_enter_jumps(finished_events):
    app = replay_app(with_advisories(finished_events))
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.screen.grid.row_count == 4)
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, AdvisoriesScreen) and app.screen.selected() is not None)
        screen = app.screen
        ids = [o.id for o in screen.options.options if o.id]
        assert ids == [
            f"active:capture-lost:{LOST_TRIAL}",  # error first
            "active:kl-drift",  # then warnings, newest first
            "active:all-failed:recover-lost-commit",
            "active:all-solved:hello-file",  # info
            "cleared:no-signal",
        ]
        detail = rendered(screen.query_one("#adetail"))
        assert "captures_lost > 0" in detail and "open the trial's transcript" in detail
        listed = " ".join(o.prompt.plain for o in screen.options.options)
        assert "cleared: step 2: 1 of 4 groups got one reward (0.25 < 0.5)" in listed

        # a trial: its transcript; Escape comes back to the list
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        assert app.screen.trial == LOST_TRIAL
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, AdvisoriesScreen))

        # a metric: back to the main screen, the metrics panel pointed at
        await pilot.press("down")
        assert screen.selected().metric == KL
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))
        assert app.screen.query_one(MetricsPanel).has_class("-pointed")

        # a group: the group screen, on the group's first trial
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, AdvisoriesScreen))
        assert screen.selected().key == "kl-drift"  # where it was left
        await pilot.press("down", "down")
        assert screen.selected().key == "all-solved:hello-file"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, GroupScreen))
        assert (app.screen.step, app.screen.group) == (2, 0)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, AdvisoriesScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, MainScreen))


@pytest.mark.e2e
async def test_a_new_error_advisory_notifies_once_never_on_catch_up(finished_events):
    events = with_advisories(finished_events)  # its error advisory is minutes old at T_FIXED
    app = ConsoleApp(source=ListSource(events), clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.state.events == len(events))
        await pilot.pause(0.2)
        assert advisory_notes(app) == []  # catch-up: raised long before it arrived
        fresh = advisory("sampler-down", LogLevel.ERROR, ts=T_FIXED - 1, message="[b]sampler[/b] failing")
        app.inbox.put_many([fresh, advisory("sampler-down", LogLevel.ERROR, ts=T_FIXED, value=2.0)])
        app.inbox.put(advisory("slow", LogLevel.WARNING, ts=T_FIXED))
        await wait_for(pilot, lambda: "slow" in app.state.advisories)
        await pilot.pause(0.2)
        assert advisory_notes(app) == ["[b]sampler[/b] failing"]  # once, as plain text; warnings never
        app.inbox.put_many(
            [
                AdvisoryCleared(key="sampler-down", ts=T_FIXED, message="ok"),
                advisory("sampler-down", "error", ts=T_FIXED),
            ]
        )
        await wait_for(pilot, lambda: len(advisory_notes(app)) == 2)  # cleared, then raised again: news again

    replayed = replay_app(events + [fresh])
    async with replayed.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: "sampler-down" in replayed.state.advisories)
        await pilot.pause(0.3)
        assert advisory_notes(replayed) == []


@pytest.mark.e2e
async def test_groups_with_one_reward_say_what_they_mean(finished_events):
    state = reduce_all(finished_events)
    solved, failed = state.groups[(2, 0)], state.groups[(1, 1)]  # hello-file all 1; recover-lost-commit all 0
    solved_label, failed_label = group_label(solved, state, 24, P), group_label(failed, state, 24, P)
    assert solved_label.plain.endswith(" ✓all") and "success" in str(solved_label.spans[-1].style)
    assert failed_label.plain.endswith(" ✗all") and "warning" in str(failed_label.spans[-1].style)

    async def rewards_head(events) -> str:
        app = replay_app(events)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for(pilot, lambda: app.screen.grid.row_count == 4)
            # the end of step 1: one group all solved, two all failed
            app.replay_seek(app.replay.marks[2])
            await settle(pilot)
            return rendered(app.screen.query_one(RewardsPanel)).splitlines()[0]

    head = await rewards_head(finished_events)
    assert "step 1" in head and "✓ 1 all solved" in head and "⚠ 2 all failed" in head
    # a run that publishes advisories: they carry the warnings, the panel only states the fact
    head = await rewards_head(with_advisories(finished_events))
    assert "✓ 1 all solved" in head and "2 all failed" in head and "⚠" not in head


def test_the_console_leaves_the_no_signal_warning_to_a_run_that_advises():
    from tbconsole.state import RunState
    from tbconsole.ui.present.wording import advises_on, solved_reward, uniform_kind

    def run(config):
        state = RunState()
        state.config = config
        return state

    assert not advises_on(run({"config": {}}), "no-signal")  # an older run: the console warns itself
    assert advises_on(run({"advise": {"off": ""}}), "no-signal")
    assert not advises_on(run({"advise": {"off": "disk, no-signal"}}), "no-signal")
    seen = reduce_all([advisory("no-signal", LogLevel.WARNING, ts=1.0)])
    assert advises_on(seen, "no-signal") and not advises_on(seen, "kl")
    # the run's solved_reward decides what "all solved" is
    assert solved_reward(run({"advise": {"solved_reward": 0.8}})) == 0.8 and solved_reward(run({})) == 1.0
    assert uniform_kind(0.9, 0.8) == "solved" and uniform_kind(0.9) == "same" and uniform_kind(0.0) == "failed"


SHRINKING = advisory(  # as the shrinking-replies rule words it; at 150 columns its value wrapped alone
    "shrinking-replies",
    LogLevel.WARNING,
    ts=T_FIXED - 60,
    message="step 12: median reward rose 0.25→0.5 (steps 3–9 → the last 3) while tokens per reply fell 95→46 (52%) "
    "— a common sign of reward hacking; read recent transcripts",
    threshold="advise.hack_reward_rise=0.1, advise.hack_tokens_drop=0.5 over advise.hack_steps=3",
    value=0.5158,
    step=12,
    metric="env/all/ac_tokens_per_turn",
)
LONE_NUMBER = re.compile(r"^\s*[(\[]?[-−]?[\d.]+[)\]]?(\s|$)")  # a line that starts with a number


def test_hang_wraps_under_an_indent_and_keeps_numbers_with_their_words():
    text = glue_numbers("where step 2 · over advise.entropy_steps=3 (0.5158)")
    for width in range(35, 70):  # from where its widest glued words fit on one line
        lines = hang(text, width, indent=4)
        assert all(len(line) <= width and line.startswith("    ") for line in lines), (width, lines)
        assert not any(LONE_NUMBER.match(line) for line in lines), (width, lines)
        assert " ".join(line.strip() for line in lines) == text.replace(GLUE, " ")
    assert hang("x" * 10, 6, indent=2) == ["  xxxx", "  xxxx", "  xx"]  # only a word wider than a line is cut


def test_an_advisory_row_wraps_under_its_message_never_a_value_alone():
    state = reduce_all([SHRINKING])
    a = state.advisories["shrinking-replies"]
    for width in range(60, 151):
        row = advisory_row(a, T_FIXED, width, P).plain.split("\n")
        assert all(len(line) <= width for line in row), (width, row)
        assert all(line.startswith(" " * 10) for line in row[1:]), (width, row)  # under the message
        assert not any(LONE_NUMBER.match(line) for line in row), (width, row)
        assert "(0.5158)" in row[-1] and row[-1].strip() != "(0.5158)"
        detail = advisory_detail(a, T_FIXED, P, width).plain.split("\n")
        assert not any(LONE_NUMBER.match(line) for line in detail), (width, detail)
        assert "measured 0.5158" in "\n".join(detail)


@pytest.mark.e2e
@pytest.mark.parametrize("size", [(150, 45), (80, 24)], ids=["150x45", "80x24"])
async def test_the_advisories_list_keeps_its_values_with_their_words_on_screen(finished_events, size):
    app = replay_app([*finished_events, SHRINKING])
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.screen.grid.row_count == 4)
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, AdvisoriesScreen) and app.screen.selected() is not None)
        await pilot.pause()
        lines = [strip.text.strip("│╭╮╰╯─ ") for strip in app.screen._compositor.render_strips()]
        assert not any(LONE_NUMBER.match(line) for line in lines if line), lines
        shown = next(line for line in lines if "(0.5158)" in line)
        assert shown.strip() != "(0.5158)"
        assert any(line.startswith("measured 0.5158") or " measured 0.5158" in line for line in lines)


@pytest.mark.e2e
@pytest.mark.parametrize("theme", ["dark", "light"])
def test_advisories_screen(snap_compare, finished_events, theme):
    async def open_it(pilot):
        await settle(pilot)
        await pilot.press("v")
        await settle(pilot)

    app = replay_app(with_advisories(finished_events), theme=theme)
    assert snap_compare(app, terminal_size=(120, 36), run_before=open_it)
