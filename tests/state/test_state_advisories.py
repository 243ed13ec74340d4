"""Advisories in the reducer: raise, replace (same key), clear (says what cleared it), counts by
severity, the bounded log, and a recorded run with advisories replayed from its events.jsonl.

The recorded run is tests_support.advisories' ``with_advisories``: the synthetic run of the
fixtures (tests/ui/fixtures/finished) with the advisories a run with rules would publish, each just
after the event that raised or cleared it (the console's tests of advisories read it too)."""

from tbconsole.record.enums import LogLevel
from tbconsole.record.events import (
    AdvisoryCleared,
    AdvisoryRaised,
)
from tbconsole.state import RunState, reduce, reduce_all
from tbconsole.state.model import ADVISORY_LOG_LEN
from tbconsole.synthetic.run import write_jsonl
from tbconsole.ui.data.source import Replay, read_all

from tests_support.advisories import KL, LOST_TRIAL, advisory, finished_with_advisories

# -- the reducer --------------------------------------------------------------------------------


def test_raise_replace_clear_and_counts():
    state = RunState()
    reduce(state, advisory("a", LogLevel.WARNING, ts=10, value=0.6, step=1))
    reduce(state, advisory("b", LogLevel.ERROR, ts=11, trial="t1"))
    reduce(state, advisory("c", LogLevel.INFO, ts=12, metric=KL))
    assert list(state.advisories) == ["a", "b", "c"]
    assert state.advisory_counts() == {"warning": 1, "error": 1, "info": 1}
    assert {"advisories", "header"} <= state.changed_panels

    # same key: replaced (new value, message, severity), still one, first-raised time kept
    reduce(state, advisory("a", LogLevel.ERROR, ts=20, value=0.9, message="worse", step=2))
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
    reduce(state, advisory("a", LogLevel.WARNING, ts=40))
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
        reduce(state, advisory(f"k{i % 7}", LogLevel.INFO, ts=i, message="m" * 5000))
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
