"""The pipeline view (``P``) and the off-policy parts of the console: snapshots of the pipeline at
120 and 80 columns (an off-policy run and a synchronous one) and of the trials grid with its
staleness badges; lowering max_steps_off_policy from the pipeline (sent through the run's
controls, a bad number refused in the prompt), offered only for a live off-policy run; the grid's
badges as text."""

import pytest

from tbconsole.record.control import RunControl
from tbconsole.record.enums import ControlCommand
from tbconsole.record.events import RunEnded, read_events
from tbconsole.state import reduce_all
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import ListSource, LocalControls, Replay
from tbconsole.ui.screens.offpolicy_limit import OffPolicyLimitScreen, parse_limit
from tbconsole.ui.screens.pipeline import PipelineScreen
from tbconsole.ui.widgets.trialcells import staleness_badge

from tests_support.paths import FIXTURES
from tests_support.ui import T_FIXED, settle, wait_for

pytestmark = pytest.mark.timeout(120)


def offpolicy_events():
    return list(read_events(FIXTURES / "offpolicy" / "events.jsonl"))


class _Control:
    """Records the commands the console sends (the run's RunControl.apply)."""

    def __init__(self):
        self.sent = []

    def apply(self, command, argument=None):
        self.sent.append((command, argument))


async def open_pipeline(pilot):
    await pilot.press("P")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, PipelineScreen))
    await settle(pilot)


@pytest.mark.e2e
@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
def test_pipeline_of_an_offpolicy_run(snap_compare, size):
    events = offpolicy_events()
    app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: events[-1].ts)
    assert snap_compare(app, terminal_size=size, run_before=open_pipeline)


@pytest.mark.e2e
def test_pipeline_of_a_synchronous_run(snap_compare, finished_events):
    app = ConsoleApp(replay=Replay(finished_events), mode="replay", clock=lambda: T_FIXED)
    assert snap_compare(app, terminal_size=(120, 36), run_before=open_pipeline)


@pytest.mark.e2e
@pytest.mark.parametrize("size", [(120, 36), (80, 24)], ids=["120x36", "80x24"])
def test_grid_with_staleness(snap_compare, size):
    events = offpolicy_events()
    app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: events[-1].ts)
    assert snap_compare(app, terminal_size=size, run_before=settle)


def live_prefix():
    """The off-policy run before its limit is lowered (max_steps_off_policy 2), going on."""
    events = offpolicy_events()
    lowered = next(i for i, e in enumerate(events) if e.kind == "off_policy.limit" and e.by == "console")
    return events[:lowered]


@pytest.mark.e2e
async def test_lowering_the_limit_sends_the_command():
    events = live_prefix()
    got = []
    control = RunControl(lambda event: None)
    control.off_policy_limit = got.append  # the runner's LiveLimit.lower
    app = ConsoleApp(source=ListSource(events), controls=LocalControls(control), clock=lambda: events[-1].ts + 1)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.state.events == len(events))
        assert app.can_lower_off_policy()
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Lower max_steps_off_policy" in titles and "Pipeline" in titles
        await open_pipeline(pilot)
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, OffPolicyLimitScreen))
        box = app.screen.query_one("#ovalue")
        box.value = "5"  # above the limit now: refused in the prompt
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert isinstance(app.screen, OffPolicyLimitScreen) and not got
        box.value = "0"
        await pilot.press("enter")
        await wait_for(pilot, lambda: got)
        assert got == [0]  # set_max_steps_off_policy 0 reached the run's control
        assert isinstance(app.screen, PipelineScreen)
        assert any(ControlCommand.SET_MAX_STEPS_OFF_POLICY in n.message for n in app._notifications)


@pytest.mark.e2e
async def test_no_limit_to_lower_in_a_synchronous_run_a_replay_or_an_ended_run(finished_events):
    sync = [e for e in finished_events if not isinstance(e, RunEnded)][:200]
    control = _Control()
    app = ConsoleApp(source=ListSource(sync), controls=LocalControls(control), clock=lambda: sync[-1].ts + 1)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.state.events == len(sync))
        assert not app.can_lower_off_policy()
        assert "Lower max_steps_off_policy" not in [c.title for c in app.get_system_commands(app.screen)]
        await open_pipeline(pilot)
        await pilot.press("m")  # not offered: nothing happens
        await pilot.pause(0.1)
        assert isinstance(app.screen, PipelineScreen) and not control.sent
    events = offpolicy_events()
    replay = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: events[-1].ts)
    async with replay.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        assert not replay.can_lower_off_policy()


def test_the_limit_typed():
    assert parse_limit(" 1 ", 2) == 1 and parse_limit("0", 2) == 0
    assert parse_limit("3", 2) is None and parse_limit("-1", 2) is None and parse_limit("x", 2) is None


def test_badges_say_staleness_drop_and_wait():
    events = offpolicy_events()
    state = reduce_all(events)
    badges = {(g.step, g.group): staleness_badge(g, state) for g in state.groups.values()}
    for g in state.groups.values():
        if g.dropped:
            assert badges[(g.step, g.group)] == ("drop", "error")
        elif g.update is not None:
            assert badges[(g.step, g.group)][0] == f"+{g.staleness}"
    mid = reduce_all(events[: len(events) // 2])
    waiting = [g for g in mid.groups.values() if g.ok and g.update is None and not g.dropped]
    assert waiting and all(staleness_badge(g, mid) == ("wait", "muted") for g in waiting)
    sync = reduce_all(read_events(FIXTURES / "finished" / "events.jsonl"))
    assert all(staleness_badge(g, sync) is None for g in sync.groups.values())


def test_the_sampler_and_trainer_compared_by_staleness():
    from tbconsole.record.events import StepMetrics
    from tbconsole.ui.screens.pipeline import mismatch_text
    from tbconsole.ui.widgets.base import Palette

    palette = Palette(*(["white"] * 9))

    events = offpolicy_events()
    assert mismatch_text(reduce_all(events), 100, palette).plain == ""  # no figures yet
    ts = events[-1].ts
    o = "offpolicy/"
    first = {f"{o}stale_token_share": 1.0, f"{o}kl_sample_train/s1": 0.04, f"{o}clipped_share/s1": 0.04}
    first |= {f"{o}kl_sample_train/stale": 0.04, f"{o}clipped_share/stale": 0.04}
    second = {f"{o}stale_token_share": 0.5, f"{o}kl_sample_train/fresh": 1e-7, f"{o}clipped_share/fresh": 0.0}
    second |= {f"{o}kl_sample_train/s0": 1e-7, f"{o}clipped_share/s0": 0.0, f"{o}kl_sample_train/s2": 0.151}
    second |= {f"{o}clipped_share/s2": 0.45, f"{o}kl_sample_train/stale": 0.151, f"{o}clipped_share/stale": 0.45}
    rows = [first, second]
    more = [StepMetrics(ts=ts + k, step=100 + k, metrics=row) for k, row in enumerate(rows)]
    text = mismatch_text(reduce_all(events + more), 100, palette).plain
    assert "sampler vs trainer by staleness, update 101" in text
    assert "stale tokens 50%" in text
    assert "fresh KL 1e-07 · clipped 0%" in text and "s2 KL 0.151 · clipped 45%" in text
    assert text.index("fresh") < text.index("s0") < text.index("s2") < text.index("stale KL")
    assert text.endswith("newest last: 4% 45%")
