"""The timeline screen (`w`): a Pilot over a real demo run's folder, the live view reading on as
the run's file grows, and snapshots of the screen in the dark and light themes (a recorded demo
run's events with the cookbook's timing spans beside them).
Update the snapshots after an intended change: pytest tests/ui/test_timeline_view.py --snapshot-update"""

import json
import shutil

import pytest

from tbconsole.record.enums import SpanKind
from tbconsole.record.events import StepMetrics, TrialEnded, read_events
from tbconsole.record.runfolder import RunFolder
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import Replay, TailSource
from tbconsole.ui.screens.main import MainScreen
from tbconsole.ui.screens.timeline import TimelineScreen, rows_text
from tbconsole.ui.widgets.base import palette_of

from tests_support.paths import FIXTURES
from tests_support.ui import rendered, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def replay_app(folder, theme="dark"):
    path = RunFolder(folder).events
    return ConsoleApp(replay=Replay(list(read_events(path))), replay_path=path, theme=theme, clock=lambda: 0.0)


async def open_timeline(pilot):
    await pilot.pause(0.2)
    await pilot.press("w")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TimelineScreen))
    screen = pilot.app.screen
    await wait_for(pilot, lambda: screen.timeline is not None)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause(0.2)
    return screen


def texts(screen):
    return {name: rendered(screen.query_one(f"#{name}"), width=160) for name in ("whead", "waxis", "wrows", "wlegend")}


@pytest.mark.root
@pytest.mark.slow
async def test_timeline_of_a_real_run(demo_run):
    """`w` shows the replayed step: one labelled row per trial with its outcome, the legend, the
    summary of shares; [ and ] move between the run's steps, esc goes back."""
    events = list(read_events(RunFolder(demo_run).events))
    ended = [e for e in events if isinstance(e, TrialEnded)]
    steps = sorted({e.step for e in ended})
    app = replay_app(demo_run)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await open_timeline(pilot)
        assert screen.step == steps[-1] and screen.steps == steps
        shown = texts(screen)
        assert f"timeline step {steps[-1]}" in shown["whead"] and "trained" in shown["whead"]
        # The summary names every share of the step's wall time over 0.5% (sampling is about 1%
        # of a demo step, under it on a loaded machine: what is listed is the timeline's own).
        shares = screen.timeline.percentages()
        assert shares and all(f"{share} {pct:.0f}%" in shown["whead"] for share, pct in shares)
        for name in ("environment", "agent setup", "sampling", "verifier", "training"):
            assert name in shown["wlegend"]
        lines = shown["wrows"].splitlines()
        # A cell shows what took most of its time: a model call or a verifier run is sure to own one
        # only where it lasts two cells (a short one on a loaded machine sits inside agent time).
        _, axis, _ = rows_text(screen.timeline, screen.rows_width, palette_of(app))
        solid = (SpanKind.SAMPLING, SpanKind.VERIFYING)
        by_trial = {r.trial: r for r in screen.timeline.trials}
        for e in ended:
            if e.step != steps[-1]:
                continue
            index = next(g.trials.index(e.trial) for g in app.state.batch_groups(e.step) if e.trial in g.trials)
            label = f"g{e.group}·t{index + 1}"
            row = next(line for line in lines if line.startswith(label + " "))
            assert ("✓" if (e.reward or 0) >= 1 else "✗") in row  # its outcome
            model = by_trial[e.trial]
            assert model.calls or not e.scored, "a scored trial's model calls are on the timeline"
            long = [s for s in model.spans + model.calls if s.kind in solid and s.end - s.start >= 2 * axis.per_cell]
            assert "█" in row or not long, row
        spans = RunFolder(demo_run).timing_spans.exists()
        assert ("from the cookbook's timing spans" if spans else "training, from events") in shown["wrows"]
        assert any(line.startswith("train step" if spans else "training ") for line in lines)
        assert "0" in shown["waxis"] and "┬" in shown["waxis"]

        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: screen.timeline is not None and screen.timeline.step == steps[-2])
        assert f"timeline step {steps[-2]}" in texts(screen)["whead"]
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: screen.timeline is not None and screen.timeline.step == steps[-1])
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, MainScreen))


async def test_live_timeline_reads_on(tmp_path):
    """Attached to a run that goes on: the open step's rows grow as its file does, once a second,
    and the step shows trained when its metrics row arrives."""
    lines = (FIXTURES / "demo-run" / "events.jsonl").read_text().splitlines(keepends=True)
    first_end = next(i for i, line in enumerate(lines) if '"trial.ended"' in line)
    metrics = next(i for i, line in enumerate(lines) if '"step.metrics"' in line)
    events = RunFolder(tmp_path).events
    events.write_text("".join(lines[:first_end]))
    last_ts = json.loads(lines[metrics])["ts"]
    app = ConsoleApp(source=TailSource(tmp_path), mode="attach", clock=lambda: last_ts)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.state.step == 0)
        screen = await open_timeline(pilot)
        assert screen.live and screen.timeline.open and not screen.timeline.trained
        assert all(r.outcome is None for r in screen.timeline.trials)
        assert "live" in texts(screen)["whead"]
        with open(events, "a") as f:
            f.write("".join(lines[first_end : metrics + 1]))
        await wait_for(pilot, lambda: screen.timeline.trained, timeout=15)
        assert all(r.outcome is not None for r in screen.timeline.trials)
        assert "trained" in texts(screen)["whead"]


async def test_no_run_yet():
    """Before any run is known there is no folder to read: `w` says so and stays put."""
    app = ConsoleApp(clock=lambda: 0.0)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause(0.2)
        await pilot.press("w")
        await pilot.pause(0.2)
        assert isinstance(app.screen, MainScreen)


def recorded_with_spans(tmp_path):
    """The recorded demo run's events, and the cookbook's spans for its steps (the names and
    nesting the cookbook's synchronous loop writes), so the snapshot shows both sources."""
    shutil.copy(FIXTURES / "demo-run" / "events.jsonl", tmp_path / "events.jsonl")
    out = []
    for e in read_events(tmp_path / "events.jsonl"):
        if not isinstance(e, StepMetrics) or e.evaluation_only:
            continue
        sampling, train = e.metrics["time/sampling"], e.metrics["time/train_step"]
        t = sampling + 0.2
        spans = [
            ("sampling", 0.0, sampling),
            ("assemble_training_data", sampling, t),
            ("train_step", t, t + train),
            ("train/fwd_bwd_substep_0_mb_0_consume", t + 0.1, t + 0.7 * train),
            ("train/optim_substep_0_consume", t + 0.7 * train, t + train - 0.1),
            ("save_checkpoint_and_get_sampling_client", t + train, e.metrics["time/total"]),
            ("save_checkpoint", t + train + 0.01, e.metrics["time/total"] - 0.01),
        ]
        rows = [{"name": n, "duration": b - a, "wall_start": a, "wall_end": b} for n, a, b in spans]
        out.append(json.dumps({"step": e.step, "spans": rows}) + "\n")
    RunFolder(tmp_path).timing_spans.write_text("".join(out))
    return tmp_path


@pytest.mark.parametrize("theme", ["dark", "light"])
def test_timeline_snapshot(snap_compare, tmp_path, theme):
    app = replay_app(recorded_with_spans(tmp_path), theme=theme)
    assert snap_compare(app, terminal_size=(120, 36), run_before=open_timeline)
