"""The console driving the real recipe (Pilot): the demo runs as the app's worker — pause waits
for the batch to be trained and holds the next one, resume continues, stop checkpoints and ends
the run with exit 0."""

import time

import pytest

from tbconsole.control import RunControl
from tbconsole.engine.registry import register_with_cookbook
from tbconsole.events import BatchStarted, ControlChanged, EventBus, GroupStarted
from tbconsole.runner import demo, train
from tbconsole.runner.options import parse
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.screens.confirm import ConfirmScreen
from tbconsole.ui.source import BusSource, LocalControls

pytestmark = [pytest.mark.root, pytest.mark.slow, pytest.mark.timeout(900)]


async def wait_for(pilot, predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.2)
    raise AssertionError("condition not reached in time")


async def test_pause_resume_stop_on_the_real_runner(tmp_path):
    register_with_cookbook()
    parsed = demo.materialize(
        parse(
            [
                f"config.log_path={tmp_path / 'run'}",
                "config.max_steps=3",
                "config.max_tokens=64",
                "config.dataset_builder.groups_per_batch=1",
                "config.dataset_builder.group_size=2",
                "config.eval_every=0",
            ],
            demo.demo_defaults(),
        )
    )
    bus = EventBus(tmp_path / "run")
    control = RunControl(bus.publish)
    published = []
    bus.subscribe(published.append)

    async def work():
        async with demo.embedded_engine(parsed) as ready:
            return await train.main(ready, bus, control, decision_timeout=None)

    app = ConsoleApp(source=BusSource(bus), controls=LocalControls(control), work=work)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_for(pilot, lambda: app.state.step == 0 and app.state.batch_active, 120)
            await pilot.press("p")
            assert control.state == "pausing"
            await wait_for(pilot, lambda: app.state.control == "paused", 300)
            assert app.state.step == 0 and not app.state.batch_active  # batch 0 was trained; batch 1 is held
            await pilot.press("p")  # resume
            await wait_for(pilot, lambda: app.state.step == 1, 120)
            await pilot.press("s")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            assert control.stop_requested
            await wait_for(pilot, lambda: app.work_result is not None or app.work_error is not None, 400)
    finally:
        bus.close()
    assert app.work_error is None, app.work_error
    assert app.work_result.status == "stopped" and app.work_result.exit_code == 0
    assert app.work_result.step == 2  # batches 0 and 1 trained, 2 never started
    # batch 1 was held while paused: it started only after the resume
    changes = [(i, e.state) for i, e in enumerate(published) if isinstance(e, ControlChanged)]
    paused = next(i for i, state in changes if state == "paused")
    resumed = next(i for i, state in changes if state == "running" and i > paused)
    step1 = [i for i, e in enumerate(published) if isinstance(e, (BatchStarted, GroupStarted)) and e.step == 1]
    assert step1 and min(step1) > resumed
    assert (tmp_path / "run" / "checkpoints.jsonl").read_text().strip().splitlines()[-1].find('"batch": 2') > 0
