"""The held-out evaluation in the console: its trials' events come wrapped (``heldout.event``),
the reducer keeps them apart from training (no reward, per-task stat, total or no-signal group
of training changes), the trials grid shows them as a ``held-out · step N`` section with a row
per held-out task, and Enter on one of its cells opens that trial's transcript, read from the
held-out capture files under ``<log_path>/heldout/``."""

import pytest

from tbconsole.advisories.advisor import Advisor
from tbconsole.record.events import (
    EvaluationStarted,
    GroupStarted,
    HeldOutEvent,
    RunEnded,
    TrialEnded,
    decode,
    read_events,
)
from tbconsole.record.runfolder import RunFolder

# Imported here, not in the test: importing the runner loads torch, whose CUDA discovery starts a
# process (a unit test may not).
from tbconsole.runner.heldout import _as_heldout
from tbconsole.state import reduce_all
from tbconsole.state.snapshot import decode as decode_snapshot
from tbconsole.state.snapshot import encode as encode_snapshot
from tbconsole.synthetic.run import HELDOUT_TASKS, record_run, synthetic_run
from tbconsole.ui.app import ConsoleApp
from tbconsole.ui.data.source import Replay
from tbconsole.ui.present.trained import trial_training
from tbconsole.ui.screens.main import MainScreen
from tbconsole.ui.screens.transcript import TranscriptScreen

from tests_support.ui import T_FIXED, wait_for

pytestmark = pytest.mark.timeout(120)


def _training_facts(state):
    """Everything training counts: rewards by step, per-task stats, totals, groups and trials."""
    return (
        state.reward_trend(),
        {k: (s.trials, s.scored, s.reward_sum, s.solved, s.last_mean) for k, s in state.task_stats.items()},
        state.totals,
        sorted(state.groups),
        sorted(state.trials),
        {step: dict(s.trial_rewards) for step, s in state.steps.items()},
        state.completed_steps,
    )


def test_wrapped_event_round_trips_and_unknown_inner_is_skipped():
    inner = TrialEnded(
        step=2, group=1, trial="t.s2g1t0", outcome="submitted", scored=True, reward=1.0, turns=1,
        output_tokens=5, trial_dir=None, timings={},
    )  # fmt: skip
    line = HeldOutEvent.wrap(inner, after_updates=2).to_json()
    back = decode(line)
    assert isinstance(back, HeldOutEvent) and back.after_updates == 2 and back.ts == inner.ts
    assert back.unwrap() == inner
    # A newer writer's kind inside, or a wrapper in a wrapper: nothing, not an error.
    assert HeldOutEvent(after_updates=0, event={"kind": "no.such.kind"}).unwrap() is None
    assert HeldOutEvent(after_updates=0, event={"kind": "heldout.event", "after_updates": 0}).unwrap() is None


def test_heldout_trials_never_count_in_training():
    plain = reduce_all(synthetic_run(steps=3, seed=4))
    events = list(synthetic_run(steps=3, seed=4, heldout_at=(0, 2, 3)))
    state = reduce_all(events)
    assert _training_facts(state) == _training_facts(plain)
    ev = state.heldout
    assert ev is not None and ev.after_updates == 3 and not ev.running
    assert state.last_evaluation is ev and state.evaluation is None
    assert sorted(g.task for g in ev.groups.values()) == sorted(HELDOUT_TASKS)
    assert len(ev.trial_states) == len(HELDOUT_TASKS) * 2
    assert all(t.evaluation and t.done and t.step == 3 for t in ev.trial_states.values())
    assert ev.counters.requests == sum(t.counters.requests for t in ev.trial_states.values()) > 0
    rewards = [t.reward for t in ev.trial_states.values()]
    assert ev.reward == pytest.approx(sum(rewards) / len(rewards))
    # Found by id, and never trained on.
    trial = next(iter(ev.trial_states))
    assert state.find_trial(trial) is ev.trial_states[trial] and trial not in state.trials
    training = trial_training(state, trial)
    assert training.mask is False and "held-out" in training.why
    # The advisories never see a held-out trial: a wrapped event is no training event to them.
    advisor = Advisor()
    assert [a for e in events if isinstance(e, HeldOutEvent) for a in advisor.feed(e)] == []
    # The snapshot keeps them (attach reads the events after it).
    again = decode_snapshot(encode_snapshot(state))
    assert again.heldout is not None and again.heldout.trial_states == ev.trial_states


def test_grid_shows_the_evaluation_running_then_until_the_next_batch():
    events = list(synthetic_run(steps=2, seed=1, heldout_at=(1,)))
    started = next(i for i, e in enumerate(events) if isinstance(e, EvaluationStarted))
    first_group = next(
        i for i, e in enumerate(events) if isinstance(e, HeldOutEvent) and isinstance(e.unwrap(), GroupStarted)
    )
    state = reduce_all(events[: started + 1])
    assert state.heldout_shown() is None  # no group yet: the header says it runs
    state = reduce_all(events[: first_group + 1])
    shown = state.heldout_shown()
    assert shown is not None and shown.running and shown.after_updates == 1
    ended = next(i for i, e in enumerate(events) if i > started and e.kind == "evaluation.ended")
    state = reduce_all(events[: ended + 1])
    assert state.heldout_shown() is state.heldout and not state.heldout.running
    batch = next(i for i, e in enumerate(events) if i > ended and e.kind == "batch.started")
    state = reduce_all(events[: batch + 1])
    assert state.heldout_shown() is None  # step 1's batch took the grid
    assert state.find_trial(next(iter(state.heldout.trial_states))) is not None  # still found


def test_an_unfinished_evaluation_stops_its_clocks_when_the_run_ends():
    events = list(synthetic_run(steps=1, seed=2, heldout_at=(1,)))
    cut = next(i for i, e in enumerate(events) if e.kind == "evaluation.ended")
    last = next(i for i in range(cut - 1, 0, -1) if isinstance(events[i], HeldOutEvent))
    state = reduce_all([*events[: last - 3], RunEnded(ts=events[last].ts + 1, status="failed", step=0)])
    ev = state.heldout
    assert ev is not None and any(t.cancelled for t in ev.trial_states.values())
    assert all(t.done or t.cancelled for t in ev.trial_states.values())
    assert not ev.running and ev.reward is None and state.last_evaluation is not ev


@pytest.mark.e2e
async def test_grid_row_and_enter_opens_a_heldout_transcript(tmp_path):
    run = tmp_path / "run"
    record_run(run, steps=2, groups=2, group_size=2, heldout_at=(2,))
    held = RunFolder(run).heldout
    assert sorted(held.root.glob("capture/step_000002/group_*/*.jsonl"))  # where the held-out proxy writes
    app = ConsoleApp(replay=Replay(list(read_events(RunFolder(run).events))), mode="replay", clock=lambda: T_FIXED)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: app.state.finished and app.screen.grid.row_count == 2 + 1 + len(HELDOUT_TASKS))
        grid = app.screen.grid
        keys = [row.key for row in grid._rows]
        assert keys == ["g0", "g1", "heldout", "h0", "h1"]
        assert "held-out · step 2" in grid._rows[2].label.plain
        assert "held-out step 2" in grid.border_title
        grid.focus()
        grid.move_cursor(row=3, column=1)
        trial = grid.selected_trial()
        assert trial is not None and app.state.find_trial(trial).evaluation
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TranscriptScreen) and app.screen.blocks)
        screen = app.screen
        assert screen.trial == trial
        assert screen.records, "the held-out capture file was not found"
        assert screen.tail.path is not None and held.root in screen.tail.path.parents
        assert any(block.startswith("turn") for block in screen.blocks)
        assert "held-out" in screen._header.render().plain
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


def test_runner_wraps_the_heldout_groups_trial_events_and_passes_log_lines():
    from tbconsole.record.events import ErrorRaised, LogLine, ProxyRequest

    out = []
    publish = _as_heldout(out.append, after_updates=4)
    request = ProxyRequest(step=4, group=0, trial="t.s4g0t0", api="openai", stream=False, status=200, captured=True)
    line = LogLine(level="info", message="x")
    publish(request)
    publish(line)
    publish(ErrorRaised(step=4, group=0, trial=None, exception_type="E", message="m"))  # no batch: dropped
    assert [type(e) for e in out] == [HeldOutEvent, LogLine]
    assert out[0].after_updates == 4 and out[0].unwrap() == request and out[1] is line
