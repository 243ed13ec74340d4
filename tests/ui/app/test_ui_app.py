"""Pilot tests: the console driven by keys over a run in this process (a synthetic runner that
obeys a real RunControl) or over recorded events."""

import asyncio
from pathlib import Path

import pytest
from textual.geometry import Region

from tbconsole.record.control import RunControl
from tbconsole.record.events import BatchStarted, ControlChanged, EventBus, ProxyRequest, TrialPhaseChanged
from tbconsole.synthetic.captures import SyntheticCaptures
from tbconsole.synthetic.run import flood, play, synthetic_run
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import BusSource, ListSource, LocalControls, Replay
from tbconsole.ui.present.filters import did_not_submit
from tbconsole.ui.present.wording import METRIC_ROWS
from tbconsole.ui.screens.confirm import ConfirmScreen
from tbconsole.ui.screens.decision import DecisionScreen
from tbconsole.ui.screens.help import HelpScreen
from tbconsole.ui.screens.main import MainScreen
from tbconsole.ui.screens.transcript import TranscriptScreen

from tests_support.ui import T_FIXED, rendered, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


def live_app(events, *, speed=float("inf"), **kwargs):
    """An app running ``play`` (a synthetic runner obeying a real RunControl) as its worker; also
    the list of everything published, in order."""
    bus = EventBus()
    control = RunControl(bus.publish)
    published = []
    bus.subscribe(published.append)

    async def work():
        return await play(bus, control, events, speed=speed, retime=False)

    app = ConsoleApp(source=BusSource(bus), controls=LocalControls(control), work=work, clock=lambda: T_FIXED, **kwargs)
    return app, control, published


def laid_out(app, selector):
    """The widget is on screen with a size (a click can land on it)."""

    def check():
        try:
            return app.screen.query_one(selector).region.area > 0
        except Exception:  # noqa: BLE001 - not mounted yet
            return False

    return check


async def test_pause_waits_for_the_batch_then_resume_then_stop_exits_0():
    events = list(synthetic_run(steps=3, groups=2, group_size=2, seed=5, end=False))
    app, control, published = live_app(events, speed=20.0)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.state.step == 0)
        assert app.check_action("pause", ()) and not app.check_action("resume", ())
        await pilot.press("p")
        assert control.state == "pausing"  # the control received it at once
        await wait_for(pilot, lambda: app.state.status == "pausing", step=0.01)
        assert "PAUSING AFTER BATCH" in rendered(app.screen.query_one("#header"))
        await wait_for(pilot, lambda: app.state.control == "paused")
        assert app.state.step == 0 and not app.state.batch_active
        assert app.check_action("resume", ()) and not app.check_action("pause", ())
        await pilot.press("p")  # resume
        await wait_for(pilot, lambda: app.state.step == 1)
        assert app.state.status == "running"
        # stop asks first, then finishes the batch, checkpoints and exits 0
        await pilot.press("s")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        assert control.stop_requested
        await wait_for(pilot, lambda: app.return_code is not None, timeout=20)
    assert app.return_code == 0
    assert app.state.end_status == "stopped" and app.work_result == "stopped"
    assert app.state.checkpoints, "a checkpoint was saved on stop"
    assert app.state.step == 1  # step 2 never started
    # the runner really held the next batch while paused: no batch started between paused and running
    states = [(i, e.state) for i, e in enumerate(published) if isinstance(e, ControlChanged)]
    paused = next(i for i, state in states if state == "paused")
    resumed = next(i for i, state in states if state == "running" and i > paused)
    assert not any(isinstance(e, BatchStarted) for e in published[paused:resumed])
    assert any(isinstance(e, BatchStarted) and e.step == 1 for e in published[resumed:])


async def test_stop_and_abort_ask_first():
    events = list(synthetic_run(steps=2, groups=2, group_size=2, end=False))
    bus = EventBus()
    control = RunControl(bus.publish)
    app = ConsoleApp(source=BusSource(bus, history=events[:40]), controls=LocalControls(control), clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.state.events == 40 and app.check_action("stop", ()))
        await pilot.press("s")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert isinstance(app.screen, MainScreen) and control.state == "running"
        await pilot.press("a")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("escape")
        assert control.state == "running"
        await pilot.press("a")
        await pilot.click("#yes")
        assert control.state == "aborting" and control.abort_requested.is_set()
        await wait_for(pilot, lambda: app.state.status == "aborting")
        assert not app.check_action("abort", ()) and not app.check_action("pause", ())


@pytest.mark.parametrize("choice", ["retry_group", "abort"])
async def test_error_modal_decides(choice):
    events = list(synthetic_run(steps=2, groups=2, group_size=2, seed=2, error_at=(0, 1), end=False))
    app, control, _ = live_app(events)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen))
        await wait_for(pilot, laid_out(app, f"#{choice}"))
        assert control.state == "awaiting_decision"
        modal = app.screen
        assert modal.error.exception_type == "CaptureLost"
        details = rendered(modal.query_one("#details"))
        assert "CaptureLost" in details
        assert app.state.status == "awaiting_decision"
        await pilot.click(f"#{choice}")
        await wait_for(pilot, lambda: app.state.pending_decision is None)
        assert app.state.decisions[-1].decision == choice and app.state.decisions[-1].by == "console"
        if choice == "retry_group":
            # the group runs again and the run goes on to the end
            await wait_for(pilot, lambda: app.state.finished, timeout=20)
            assert app.state.end_status == "done"
            assert app.state.steps[0].groups == 2 and len(app.state.steps[0].rewards) == 4
        else:
            await wait_for(pilot, lambda: app.return_code is not None, timeout=20)
    if choice == "abort":
        assert app.state.end_status == "aborted"


async def test_error_modal_from_recorded_events(awaiting_events):
    """Attached (no way to decide in a replay), the modal still shows what failed."""
    app = ConsoleApp(source=ListSource(awaiting_events), clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen))
        await wait_for(pilot, laid_out(app, "#retry_group"))
        assert app.screen.query_one("#retry_group").disabled  # no controls here
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        assert not app.check_action("decide", ())


async def test_drill_down_and_back(finished_events):
    app = ConsoleApp(replay=Replay(finished_events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.screen.grid.row_count == 4)
        grid = app.screen.grid
        assert grid.has_focus
        trial = grid.selected_trial()
        assert trial is not None
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen) and app.screen.blocks)
        assert app.screen.trial == trial
        assert app.screen.blocks[0] == "instruction" and app.screen.blocks[-1] == "verifier"
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        await pilot.press("right", "down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen))
        assert app.screen.trial != trial


async def test_filter_and_help(finished_events):
    app = ConsoleApp(replay=Replay(finished_events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.screen.grid.row_count == 4)
        grid = app.screen.grid
        box = app.screen.query_one("#filter")
        regions = [w.region for w in app.screen.query("#body, TrialsGrid, KeyFooter")]
        await pilot.press("slash")
        await pilot.press(*"hello")
        # The box floats over the panels: opening it lays nothing out again.
        assert box.display and box.has_focus
        assert [w.region for w in app.screen.query("#body, TrialsGrid, KeyFooter")] == regions
        await pilot.press("enter")
        await wait_for(pilot, lambda: grid.row_count == 1)
        assert grid.filter == "hello" and grid.has_focus
        assert not box.display  # applied: the grid's title says so
        await pilot.press("escape")
        await wait_for(pilot, lambda: grid.row_count == 4)
        assert grid.filter == ""
        # the last batch's groups with a trial that did not submit (one, with a time limit): none while
        # typing "fai", so the count is only reached once the grid has drawn "fail"
        failing = [g for g in app.state.batch_groups() if any(did_not_submit(app.state.trials[t]) for t in g.trials)]
        assert len(failing) == 1
        await pilot.press("slash", *"fail")
        await wait_for(pilot, lambda: grid.filter == "fail" and grid.row_count == len(failing))
        await pilot.press("escape")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        shown = " ".join(rendered(table) for table in app.screen.query(".help-table"))
        for row in METRIC_ROWS:  # every metric's meaning is listed
            assert row.label in shown and row.keys[0] in shown
        assert "probes" in shown and "lost" in shown
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


def grid_lines(grid) -> list[str]:
    return [strip.text for strip in grid.render_lines(Region(0, 0, *grid.outer_size))]


async def test_a_filter_that_matches_nothing_says_so(finished_events):
    def says(words):
        return any(words in line for line in grid_lines(grid))

    app = ConsoleApp(replay=Replay(finished_events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.screen.grid.row_count == 4)
        grid = app.screen.grid
        assert not says("no trial matches")
        await pilot.press("slash", *"zzz[bold]", "enter")
        await wait_for(pilot, lambda: grid.filter == "zzz[bold]" and grid.row_count == 0)
        # the typed text as typed (no markup), in the row and in the title
        await wait_for(pilot, lambda: says("no trial matches “zzz[bold]” — esc clears the filter"))
        assert "filter: zzz[bold]" in grid_lines(grid)[0]
        box = app.screen.query_one("#filter")
        box.value = "q\x1b[2J"  # what a paste may hold: drawn inert
        await wait_for(pilot, lambda: says("no trial matches “q␛[2J”"))
        await pilot.press("escape")
        await wait_for(pilot, lambda: grid.row_count == 4)
        await wait_for(pilot, lambda: not says("no trial matches"))


async def test_footer_shows_only_valid_actions(finished_events):
    def shown(app):
        return {b.binding.action for b in app.screen.active_bindings.values() if b.binding.show and b.enabled}

    replay = ConsoleApp(replay=Replay(finished_events), mode="replay", clock=lambda: T_FIXED)
    async with replay.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: "replay_prev" in shown(replay))
        actions = shown(replay)
        assert {"replay_prev", "replay_next", "help"} <= actions
        assert not actions & {"pause", "resume", "stop", "abort", "decide"}
        await pilot.press("left_square_bracket")
        assert replay.replay.position < len(finished_events)
        await pilot.press("left_curly_bracket")
        assert replay.state.step is None and replay.state.run_id  # before the first batch
        await pilot.press("right_curly_bracket")
        assert replay.state.finished

    bus = EventBus()
    control = RunControl(bus.publish)
    live = ConsoleApp(
        source=BusSource(bus, history=finished_events[:30]), controls=LocalControls(control), clock=lambda: T_FIXED
    )
    async with live.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: live.state.events == 30 and "pause" in shown(live))
        actions = shown(live)
        assert {"pause", "stop", "abort"} <= actions
        assert not actions & {"resume", "decide", "replay_prev"}
        await pilot.press("p")
        await wait_for(pilot, lambda: "resume" in shown(live))
        assert "pause" not in shown(live)


async def test_transcript_live_tail_follows_unless_scrolled_up(tmp_path):
    captures = SyntheticCaptures(tmp_path)
    events = list(
        synthetic_run(
            steps=1, groups=1, group_size=1, turns=(30, 30), hostile=False, log_path=str(tmp_path), captures=captures
        )
    )
    agent_at = next(i for i, e in enumerate(events) if isinstance(e, TrialPhaseChanged) and e.phase == "agent")
    requests = [i for i, e in enumerate(events) if isinstance(e, ProxyRequest)]
    bus = EventBus()
    # As the proxy does: a turn's capture line is written before its event is published.
    bus.subscribe(lambda e: isinstance(e, ProxyRequest) and captures.write(e))
    for e in events[: requests[5]]:
        if isinstance(e, ProxyRequest):
            captures.write(e)
    app = ConsoleApp(source=BusSource(bus, history=events[: requests[5]]), clock=lambda: T_FIXED)

    def turns(screen):
        return sum(1 for b in screen.blocks if b.startswith("turn"))

    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.state.events == requests[5] and app.screen.grid.selected_trial())
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen) and turns(app.screen) == 5)
        screen = app.screen
        assert agent_at < requests[5]
        for e in events[requests[5] : requests[12]]:
            bus.publish(e)
        await wait_for(pilot, lambda: turns(screen) == 12)
        await wait_for(pilot, lambda: screen.body.max_scroll_y > 0 and screen.body.scroll_y == screen.body.max_scroll_y)
        assert screen.body.follow
        await pilot.press("home")
        await wait_for(pilot, lambda: screen.body.scroll_y == 0 and not screen.body.follow)
        for e in events[requests[12] : requests[15]]:
            bus.publish(e)
        await wait_for(pilot, lambda: screen.new_turns == 3 and "3 new turns" in rendered(screen.query_one("#tstatus")))
        assert screen.body.scroll_y == 0  # not following: the view stays where the user put it
        await pilot.press("end")
        await wait_for(pilot, lambda: screen.new_turns == 0)
        for e in events[requests[15] :]:
            bus.publish(e)
        await wait_for(pilot, lambda: screen.blocks[-1] == "verifier")
        await wait_for(pilot, lambda: screen.body.scroll_y == screen.body.max_scroll_y)


async def test_a_flood_of_events_stays_responsive():
    events = list(flood(20_000))
    app = ConsoleApp(source=ListSource(events), clock=lambda: T_FIXED)
    lags = []
    async with app.run_test(size=(120, 36)) as pilot:
        loop = asyncio.get_running_loop()

        async def probe():
            while True:
                t = loop.time()
                await asyncio.sleep(0.01)
                lags.append(loop.time() - t - 0.01)

        task = asyncio.create_task(probe())
        await wait_for(pilot, lambda: app.state.events > 0, step=0.005)
        assert len(app.inbox) > 0  # still working through the flood
        await pilot.press("question_mark")  # keys are handled meanwhile
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.inbox) == 0, timeout=30)
        task.cancel()
        assert app.state.events == len(events)
    assert max(lags) < 0.5, max(lags)  # generous: 2 shared cores under a test runner


async def test_theme_switch_redraws(finished_events):
    app = ConsoleApp(replay=Replay(finished_events), mode="replay", clock=lambda: T_FIXED, theme="dark")

    def title_style():  # the header's first word is drawn in the theme's primary colour
        spans = getattr(app.screen.query_one("#header").content, "spans", None)  # "" before the first draw
        return str(spans[0].style) if spans else None

    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: title_style() is not None)
        dark = title_style()
        assert app.theme == "tbconsole-dark"
        await pilot.press("t")
        assert app.theme != "tbconsole-dark"
        app.theme = "tbconsole-light"
        await wait_for(pilot, lambda: title_style() != dark and not app.state.changed_panels)
        assert app.current_theme.primary.lower() in title_style().lower()


async def test_replay_moves_through_steps(finished_events):
    app = ConsoleApp(replay=Replay(finished_events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.state.finished)
        await pilot.press("left_curly_bracket")
        first = app.replay.position
        assert isinstance(finished_events[first], BatchStarted) and app.state.step is None
        await pilot.press("right_square_bracket")
        assert app.state.step == 0
        await pilot.press("right_square_bracket")
        assert app.state.step == 1 and not app.state.finished
        await pilot.press("left_square_bracket")
        assert app.state.step == 0
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert app.state.finished and app.state.step == 2


async def test_sampler_and_kl_reference_rows(finished_events):
    """Without a named sampler the gateway panel says which weights the batch samples; the
    KL-to-reference and loss rows appear only in runs that report them."""
    import dataclasses

    from tbconsole.record.events import GatewayHealth, StepMetrics

    unnamed = [
        dataclasses.replace(e, sampler_path=None) if isinstance(e, GatewayHealth) else e for e in finished_events
    ]
    last = max(e.step for e in unnamed if isinstance(e, StepMetrics))
    with_kl = [
        dataclasses.replace(e, metrics={**e.metrics, "kl_policy_base": 0.0123}) if isinstance(e, StepMetrics) else e
        for e in unnamed
    ]
    no_loss = [
        dataclasses.replace(e, metrics={k: v for k, v in e.metrics.items() if not k.startswith("loss")})
        if isinstance(e, StepMetrics)
        else e
        for e in with_kl
    ]
    for events, kl_row in ((unnamed, False), (with_kl, True), (no_loss, True)):
        app = ConsoleApp(replay=Replay(events), mode="replay", clock=lambda: T_FIXED)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for(pilot, lambda app=app: "weights after" in rendered(app.screen.query_one("#gateway")))
            gateway = rendered(app.screen.query_one("#gateway"))
            metrics = rendered(app.screen.query_one("#metrics"))
            assert f"weights after {last} updates" in gateway and app.state.step == last  # the last batch
            assert ("KL ref" in metrics) is kl_row
            assert ("0.0123" in metrics) is kl_row
            assert ("loss" in metrics) is (events is not no_loss)  # the cookbook's RL loop logs none


async def test_a_resumed_live_console_shows_the_whole_run(tmp_path):
    """A run resumed into the same folder: the console reads the earlier run's events from
    events.jsonl first, then the bus's, each once, so the trends cover the whole run."""
    import dataclasses

    from tbconsole.record.events import RunStarted

    first = list(synthetic_run(steps=3, groups=2, group_size=2, seed=4, stop_after=1, hostile=False))
    full = list(synthetic_run(steps=3, groups=2, group_size=2, seed=4, hostile=False))
    started = dataclasses.replace(first[0], run_id="resumed", start_step=2, ts=first[-1].ts + 60)
    second = [started] + [
        dataclasses.replace(e, ts=e.ts + 60)
        for e in full
        if getattr(e, "step", None) == 2 and not isinstance(e, RunStarted)
    ]
    bus = EventBus(tmp_path)
    for e in first:
        bus.publish(e)
    bus.close()
    bus = EventBus(tmp_path)  # the resumed process
    bus.publish(second[0])  # before the console opened: only in the file
    source = BusSource(bus)
    app = ConsoleApp(source=source, controls=LocalControls(RunControl(bus.publish)), clock=lambda: second[-1].ts)
    total = len(first) + len(second)
    async with app.run_test(size=(120, 36)) as pilot:
        for e in second[1:]:
            bus.publish(e)
        # the file is read (the live events it held back are released) and everything is folded
        await wait_for(pilot, lambda: source._held is None and not len(app.inbox) and app.state.last_completed == 2)
        assert app.inbox.received == total and app.state.events == total  # each event once
        assert [step for step, _, _ in app.state.reward_trend()] == [0, 1, 2]
        assert len(app.state.metric(("optim/entropy",))[2]) == 3
        assert app.state.run_id == "resumed"
        await wait_for(pilot, lambda: "step 2 · 3/3 trained" in rendered(app.screen.query_one("#header"), 200))
    bus.close()


async def test_x_cancels_the_trial_a_transcript_shows_while_it_runs(finished_events):
    def shown(app):
        return {b.binding.action for b in app.screen.active_bindings.values() if b.binding.show and b.enabled}

    bus = EventBus()
    control = RunControl(bus.publish)
    cancelled: list[str] = []
    live = ConsoleApp(
        source=BusSource(bus, history=finished_events[:30]), controls=LocalControls(control), clock=lambda: T_FIXED
    )
    async with live.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: live.state.events == 30)
        running = next(t.trial for t in live.state.trials.values() if not (t.done or t.cancelled))
        with control.trial_running(running, lambda: cancelled.append(running)):
            live.open_transcript(running)
            await wait_for(pilot, lambda: isinstance(live.screen, TranscriptScreen) and "cancel_trial" in shown(live))
            await pilot.press("x")
            assert isinstance(live.screen, ConfirmScreen) and running in live.screen.question
            await pilot.press("n")  # kept
            assert isinstance(live.screen, TranscriptScreen) and not cancelled
            await pilot.press("x", "y")
            await wait_for(pilot, lambda: bool(cancelled))
        assert cancelled == [running]

    replay = ConsoleApp(replay=Replay(finished_events), mode="replay", clock=lambda: T_FIXED)
    async with replay.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: replay.state.finished)
        replay.open_transcript(next(iter(replay.state.trials)))
        await wait_for(pilot, lambda: isinstance(replay.screen, TranscriptScreen))
        assert "cancel_trial" not in shown(replay)


def footer_text(app) -> str:
    return app.screen._compositor.render_strips()[-1].text


@pytest.mark.parametrize("width", [80, 110, 140])
async def test_the_footer_shows_the_screens_keys_and_the_runs_at_every_width(width):
    events = list(synthetic_run(steps=3, end=False, error_at=None, hostile=False))
    app = ConsoleApp(
        source=ListSource(events), controls=LocalControls(RunControl(lambda e: None)), clock=lambda: events[-1].ts
    )
    async with app.run_test(size=(width, 30)) as pilot:
        await wait_for(pilot, lambda: app.state.events == len(events) and "p Pause" in footer_text(app))
        footer = footer_text(app)
        # The main screen's own keys and the run's, each with its label, none scrolled away.
        for key in ("⏎ ", "g Group", "f Find", "v Ad", "w Time", "p Pause", "s Stop", "? Help", "q Quit"):
            assert key in footer, (key, footer)
        assert ("w Timeline" in footer) == (width >= 130) and ("^p palette" in footer) == (width >= 100)
        assert ("a Abort" in footer) == (width >= 100)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        first = app.screen.query("HelpTable").first().content.plain
        for key in ("enter", "g ", "f ", "w ", "k ", "v ", "l ", "x "):
            assert f"\n{key}" in f"\n{first}" or f" {key}" in first, key


async def test_k_opens_the_tokens_of_the_turn_nearest_the_view_from_the_transcripts_bottom(tmp_path):
    from tbconsole.ui.screens.tokens import TokenScreen

    captures = SyntheticCaptures(tmp_path)
    trials = tmp_path / "trials"
    events = list(
        synthetic_run(
            steps=1,
            groups=1,
            group_size=1,
            turns=(6, 6),
            hostile=False,
            log_path=str(tmp_path),
            captures=captures,
            trials_dir=str(trials),
        )
    )
    for e in events:
        if isinstance(e, ProxyRequest):
            captures.write(e)
    # An agent log longer than a page: the transcript's last page holds no turn at all.
    (trial,) = {e.trial_dir for e in events if isinstance(e, TrialPhaseChanged) and e.trial_dir}
    (Path(trial) / "agent").mkdir(parents=True)
    (Path(trial) / "agent" / "agent.txt").write_text("".join(f"agent log line {i}\n" for i in range(200)))
    app = ConsoleApp(source=ListSource(events), clock=lambda: events[-1].ts)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.state.events == len(events) and app.screen.grid.selected_trial())
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen) and len(app.screen.records) == 6)
        transcript = app.screen
        # It opens at its bottom, in the agent's log below every turn: k takes the last turn.
        await wait_for(pilot, lambda: transcript.body.follow and transcript.body.max_scroll_y > 0)
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen))
        assert app.screen.turn == 5
        await pilot.press("escape")
        await pilot.press("home")  # at the top: the first turn
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen) and transcript.body.scroll_y == 0)
        await pilot.press("k")
        await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen))
        assert app.screen.turn == 0
