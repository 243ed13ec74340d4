"""disk over a day: the advisory projects from the run folder's own growth per step (what the
runner measures at each step's end) over the steps the run has to go, on a synthetic run's events
with those measures where the runner feeds them."""

from tbconsole.advisories import replay
from tbconsole.advisories.disk import FILLING
from tbconsole.advisories.facts import DiskSample, RunFolderSize
from tbconsole.record import events as ev
from tbconsole.synthetic.run import synthetic_run

from tests_support.advisories import raised

GiB = 1 << 30
MiB = 1 << 20
STEPS = 12


def measured(free, grows: int, sizes: bool = True) -> list:
    """The run's events with the free space sampled during each step (``free(step)``) and, at each
    step's end, the run folder's size (``grows`` bytes a step)."""
    out: list = []
    for event in synthetic_run(steps=STEPS, groups=2, group_size=2, seed=3):
        if isinstance(event, ev.BatchEnded):
            out.append(DiskSample(ts=event.ts, free_bytes=int(free(event.step))))
        out.append(event)
        if isinstance(event, ev.BatchEnded) and sizes:
            out.append(RunFolderSize(ts=event.ts, step=event.step, bytes=(event.step + 1) * grows))
    return out


def test_a_healthy_run_with_room_for_its_day_raises_nothing():
    assert raised(replay(measured(lambda step: 500 * GiB - step * GiB, GiB)), "disk") == []


def test_a_run_that_will_not_fit_warns_at_its_second_step_then_errors_when_it_is_close():
    advice = raised(replay(measured(lambda step: max(0, 8 * GiB - step * GiB), GiB)), "disk")
    first = advice[0]
    assert (first.step, first.severity, first.threshold) == (1, "warning", FILLING)
    assert first.message.startswith(
        "7.0 GiB free on the run folder's filesystem, the run folder grows 1.0 GiB per step: full in about 7 steps "
        "(10 to go)"
    )
    # Sampled during step 3: within advise.disk_steps_left=5 steps of full.
    error = next(a for a in advice if a.severity == "error")
    assert (error.step, error.threshold) == (2, "advise.disk_steps_left=5")
    grows = "the run folder grows 1.0 GiB per step: full in about 5 steps"
    assert f"5.0 GiB free on the run folder's filesystem, {grows}" in error.message


def test_what_the_rest_of_the_machine_writes_does_not_move_the_projection():
    # Another writer takes 20 GiB during step 1; the run itself adds 100 MiB a step.
    def free(step):
        return (40 if step == 0 else 20) * GiB - step * 100 * MiB

    assert raised(replay(measured(free, 100 * MiB)), "disk") == []
    # Without the run folder's sizes (an older runner's stream) the free space's decline is all there is.
    fallback = raised(replay(measured(free, 100 * MiB, sizes=False)), "disk")
    assert fallback and "20 GiB used per step: full in about 1 step" in fallback[0].message
