"""What a new user reads: one step number everywhere, the held-out phase, the gateway after the
run, and a meaning behind every metric and counter (tooltips)."""

import pytest

from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import Replay
from tbconsole.ui.present.wording import METRIC_ROWS

from tests_support.ui import T_FIXED, rendered, wait_for

pytestmark = pytest.mark.timeout(60)


@pytest.mark.e2e
async def test_one_step_number_everywhere(finished_events):
    """The header, the grid, the rewards, the replay bar and the log name a step by the same
    0-based number; counts of steps are written as counts. After the run, nobody probes the gateway."""
    app = ConsoleApp(replay=Replay(finished_events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: "trained" in rendered(app.screen.query_one("#header"), 200))
        last = app.state.step
        assert last == 2 and any(m.startswith(f"step {last}: batch") for _, _, m in app.state.logs)
        assert f"step {last} · 3/3 trained" in rendered(app.screen.query_one("#header"), 200)
        assert app.screen.grid.border_title == f"trials · step {last}"
        assert rendered(app.screen.query_one("#rewards")).startswith(f"step {last} ")
        assert f"step {last} of 0–{last} " in rendered(app.screen.query_one("#replaybar"))
        assert f"latest: step {last}" in rendered(app.screen.query_one("#metrics"))
        gateway = rendered(app.screen.query_one("#gateway"))
        assert "not probed (run ended)" in gateway and "healthy" not in gateway
        g = app.state.gateway
        assert g.failures == 1 and f"{g.probes} sent, 1 failed" in gateway


def test_a_range_of_one_step_is_one_step():
    from types import SimpleNamespace

    from tbconsole.state import RunState
    from tbconsole.ui.widgets.replaybar import where_text

    state = RunState()
    state.step = 0
    one = SimpleNamespace(state=state, marks=[0], position=0, events=[])
    assert where_text(one) == "step 0 of 0 "  # not "of 0–0"
    assert where_text(SimpleNamespace(state=state, marks=[0, 5, 9], position=0, events=[])) == "step 0 of 0–2 "


@pytest.mark.e2e
async def test_hovering_a_metric_or_counter_explains_it(finished_events):
    from tbconsole.ui.present.wording import GATEWAY_HELP
    from tbconsole.ui.widgets.captures import COLUMNS_HELP

    app = ConsoleApp(replay=Replay(finished_events), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one("#metrics").line_help)
        metrics = app.screen.query_one("#metrics")
        rows = [row for row in METRIC_ROWS if app.state.metric(row.keys)[0] is not None]
        for line, row in enumerate(rows):
            await pilot.hover("#metrics", offset=(3, 1 + line))  # 1: the border
            assert metrics.tooltip == f"{row.label}: {row.help}"
        await pilot.hover("#gateway", offset=(3, 2))
        assert app.screen.query_one("#gateway").tooltip == GATEWAY_HELP["probes"]
        await pilot.hover("#captures", offset=(3, 1))
        assert app.screen.query_one("#captures").tooltip == COLUMNS_HELP


@pytest.mark.e2e
async def test_the_held_out_evaluation_shows_as_its_own_phase():
    from tbconsole.record.events import ControlChanged, EvaluationStarted, RunStarted
    from tbconsole.ui.data.source import ListSource

    events = [
        RunStarted(
            ts=1000,
            run_id="r",
            log_path="/run",
            model_name="m",
            base_url=None,
            renderer_name=None,
            total_steps=20,
            groups_per_batch=1,
            group_size=2,
            tasks=["a"],
            config={"config": {"eval_every": 5}, "harbor": {"eval_tasks_dir": "/heldout"}},
        ),
        ControlChanged(ts=1000, state="running"),
        EvaluationStarted(ts=1000, after_updates=0, tasks=2, trials=8),
    ]
    app = ConsoleApp(source=ListSource(events), clock=lambda: 1042)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: "held-out" in rendered(app.screen.query_one("#header"), 200))
        header = rendered(app.screen.query_one("#header"), 200)
        assert "held-out evaluation 42s · 0/20 trained" in header and "ETA –" in header and "step –" not in header
