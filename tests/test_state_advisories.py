"""Advisories in the reducer: raise, replace (same key), clear (says what cleared it), counts by
severity, the bounded log, and a recorded run with advisories replayed from its events.jsonl.

``with_advisories`` is the recorded synthetic run (tests/ui/fixtures/finished) with the advisories
a run with rules would publish, each just after the event that raised or cleared it; the console
tests (tests/ui/test_advisories_view.py) use it too."""

from pathlib import Path

from tbconsole.record.enums import AdvisorySeverity
from tbconsole.record.events import (
    AdvisoryCleared,
    AdvisoryRaised,
    BatchEnded,
    CaptureLost,
    Event,
    GroupEnded,
    StepMetrics,
    read_events,
)
from tbconsole.state import RunState, reduce, reduce_all
from tbconsole.state.model import ADVISORY_LOG_LEN
from tbconsole.synthetic.run import write_jsonl
from tbconsole.ui.data.source import Replay, read_all

FINISHED = Path(__file__).parent / "ui" / "fixtures" / "finished" / "events.jsonl"
KL = "optim/kl_sample_train_v1"
LOST_TRIAL = "json-active-users__00026"  # the fixture's trial whose capture was lost (step 1)


def _raise(key, severity, *, ts=0.0, **fields) -> AdvisoryRaised:
    defaults = {"rule": key.split(":")[0], "message": f"{key} fired", "threshold": "x >= 1"}
    return AdvisoryRaised(key=key, severity=severity, ts=ts, **{**defaults, **fields})


def _after(event: Event) -> list[Event]:
    """The advisories a run with rules publishes right after ``event`` (finished fixture)."""
    ts = event.ts + 0.001
    if isinstance(event, CaptureLost):
        return [
            _raise(
                f"capture-lost:{event.trial}",
                AdvisorySeverity.ERROR,
                ts=ts,
                message=f"a sampled turn of {event.trial} could not be written: the trial fails",
                threshold="captures_lost > 0",
                value=1.0,
                step=event.step,
                group=event.group,
                trial=event.trial,
            )
        ]
    if isinstance(event, GroupEnded) and (event.step, event.group) == (1, 1):
        return [
            _raise(
                "all-failed:recover-lost-commit",
                AdvisorySeverity.WARNING,
                ts=ts,
                message="recover-lost-commit: no trial solved it in step 1 (out of reach: it trains nothing)",
                threshold="solved == 0",
                value=0.0,
                step=1,
                group=1,
            )
        ]
    if isinstance(event, BatchEnded) and event.step == 1:
        return [
            _raise(
                "no-signal",
                AdvisorySeverity.WARNING,
                ts=ts,
                message="3 of 4 groups in step 1 got one reward: little to learn from",
                threshold="no_signal_share >= 0.5",
                value=0.75,
                step=1,
            )
        ]
    if isinstance(event, StepMetrics) and KL in event.metrics:
        return [
            _raise(
                "kl-drift",
                AdvisorySeverity.WARNING,
                ts=ts,
                message=f"sampler and trainer disagree: KL {event.metrics[KL]:.4f} at step {event.step}",
                threshold=f"{KL} > 0.005",
                value=float(event.metrics[KL]),
                step=event.step,
                metric=KL,
            )
        ]
    if isinstance(event, BatchEnded) and event.step == 2:
        return [
            AdvisoryCleared(key="no-signal", ts=ts, message="step 2: 1 of 4 groups got one reward (0.25 < 0.5)"),
            _raise(
                "all-solved:hello-file",
                AdvisorySeverity.INFO,
                ts=ts + 0.001,
                message="hello-file: every trial solved it in step 2 (learnt: it trains nothing)",
                threshold="solved == group_size",
                value=1.0,
                step=2,
                group=0,
            ),
        ]
    return []


def with_advisories(events: list[Event]) -> list[Event]:
    out: list[Event] = []
    for event in events:
        out.append(event)
        out.extend(_after(event))
    return out


def finished_with_advisories() -> list[Event]:
    return with_advisories(list(read_events(FINISHED)))


# -- the reducer --------------------------------------------------------------------------------


def test_raise_replace_clear_and_counts():
    state = RunState()
    reduce(state, _raise("a", AdvisorySeverity.WARNING, ts=10, value=0.6, step=1))
    reduce(state, _raise("b", AdvisorySeverity.ERROR, ts=11, trial="t1"))
    reduce(state, _raise("c", AdvisorySeverity.INFO, ts=12, metric=KL))
    assert list(state.advisories) == ["a", "b", "c"]
    assert state.advisory_counts() == {"warning": 1, "error": 1, "info": 1}
    assert {"advisories", "header"} <= state.changed_panels

    # same key: replaced (new value, message, severity), still one, first-raised time kept
    reduce(state, _raise("a", AdvisorySeverity.ERROR, ts=20, value=0.9, message="worse", step=2))
    a = state.advisories["a"]
    assert (a.value, a.message, a.severity, a.step) == (0.9, "worse", "error", 2)
    assert (a.raised, a.updated, a.raises) == (10, 20, 2)
    assert len(state.advisories) == 3 and state.advisory_counts() == {"error": 2, "info": 1}

    # cleared: gone from the active ones, kept with what cleared it
    reduce(state, AdvisoryCleared(key="a", ts=30, message="share back to 0.2"))
    assert "a" not in state.advisories and state.advisory_counts() == {"error": 1, "info": 1}
    (cleared,) = state.cleared_advisories()
    assert (cleared.key, cleared.cleared, cleared.cleared_by, cleared.message) == (
        "a",
        30,
        "share back to 0.2",
        "worse",
    )
    assert not cleared.active and state.advisories["b"].active

    # a clear of a key never raised (or already cleared) changes nothing
    seq = state.advisory_seq
    reduce(state, AdvisoryCleared(key="nope", ts=31, message="?"))
    reduce(state, AdvisoryCleared(key="a", ts=32, message="again"))
    assert state.advisory_seq == seq and state.cleared_advisories()[0].cleared_by == "share back to 0.2"

    # raised again after clearing: active anew (first-raised time restarts), no longer among the cleared
    reduce(state, _raise("a", AdvisorySeverity.WARNING, ts=40))
    assert state.advisories["a"].raised == 40 and state.advisories["a"].raises == 1
    assert state.cleared_advisories() == []

    # the log: every change as it stood then, in order; "since" gives only what is new
    log = [(x.key, x.raises, x.cleared is not None) for x in state.advisory_log]
    assert log == [("a", 1, False), ("b", 1, False), ("c", 1, False), ("a", 2, False), ("a", 2, True), ("a", 1, False)]
    assert [x.key for x in state.advisory_changes_since(seq)] == ["a"]
    # news goes to the run's log (new raises and clears), replacements do not
    texts = [m for _, _, m in state.logs]
    assert sum(m.startswith("advisory: ") for m in texts) == 4  # a, b, c, a raised again
    assert [m for m in texts if m.startswith("advisory cleared")] == ["advisory cleared: worse (share back to 0.2)"]


def test_the_log_is_bounded_and_long_texts_are_clipped():
    state = RunState()
    for i in range(ADVISORY_LOG_LEN + 50):
        reduce(state, _raise(f"k{i % 7}", AdvisorySeverity.INFO, ts=i, message="m" * 5000))
    assert len(state.advisory_log) == ADVISORY_LOG_LEN
    assert len(state.advisories) == 7 and state.advisory_seq == ADVISORY_LOG_LEN + 50
    assert all(len(a.message) < 1100 for a in state.advisories.values())


def test_a_recorded_run_with_advisories_replays_through_the_same_reducer(tmp_path):
    events = finished_with_advisories()
    assert sum(isinstance(e, (AdvisoryRaised, AdvisoryCleared)) for e in events) == 8
    write_jsonl(events, tmp_path / "events.jsonl")
    recorded = read_all(tmp_path)
    assert len(recorded) == len(events)

    state = reduce_all(recorded)
    assert state.finished
    assert state.advisory_counts() == {"error": 1, "warning": 2, "info": 1}
    kl = state.advisories["kl-drift"]
    assert kl.raises == 3 and kl.step == 2 and kl.metric == KL  # raised each step: one advisory, replaced
    lost = state.advisories[f"capture-lost:{LOST_TRIAL}"]
    assert (lost.trial, lost.step, lost.group) == (LOST_TRIAL, 1, 2)
    (cleared,) = state.cleared_advisories()
    assert cleared.key == "no-signal" and "0.25 < 0.5" in (cleared.cleared_by or "")

    # replay: stepping back rebuilds the state; at the end of step 1 no-signal is active, not cleared
    replay = Replay(recorded)
    end_of_step_1 = next(i for i, e in enumerate(recorded) if isinstance(e, AdvisoryRaised) and e.key == "no-signal")
    at = replay.seek(end_of_step_1 + 1)
    assert "no-signal" in at.advisories and at.cleared_advisories() == []
    assert "all-solved:hello-file" not in at.advisories
    at = replay.seek(len(recorded))
    assert at.advisory_counts() == state.advisory_counts() and at.advisory_seq == state.advisory_seq
    at = replay.seek(0)
    assert at.advisories == {} and at.advisory_seq == 0
