"""The pipeline's part of the state (``state.pipeline``): groups in flight, queued, trained and
dropped, staleness, each update's training interval and the off-policy limit's history, checked
against the events of the off-policy fixture themselves; a synchronous run; a run recorded before
``group.trained`` (inferred from its metrics rows); the ledger's waste with dropped groups; the
snapshot codec."""

import dataclasses
import json

import pytest

from tbconsole.record import events as ev
from tbconsole.record.enums import DropReason, TrainingMode
from tbconsole.record.events import read_events
from tbconsole.state import RunState, reduce, reduce_all
from tbconsole.state.snapshot import decode, encode
from tbconsole.synthetic.run import synthetic_run

from tests_support.paths import FIXTURES

OFFPOLICY = FIXTURES / "offpolicy" / "events.jsonl"


@pytest.fixture(scope="module")
def offpolicy():
    return list(read_events(OFFPOLICY))


def test_the_offpolicy_fixture_is_current(offpolicy):
    """Regenerate with tests/ui/make_fixtures.py."""
    assert [e.to_json() for e in offpolicy] == [
        e.to_json() for e in synthetic_run(steps=6, off_policy=2, lower_at=(5, 1), seed=0)
    ]


def test_counts_staleness_and_drops_add_up_to_the_events(offpolicy):
    state = reduce_all(offpolicy)
    p = state.pipeline
    trained = [e for e in offpolicy if isinstance(e, ev.GroupTrained)]
    dropped = [e for e in offpolicy if isinstance(e, ev.GroupDropped)]
    staleness: dict[int, int] = {}
    for e in trained:
        staleness[e.update - e.weights[0]] = staleness.get(e.update - e.weights[0], 0) + 1
    assert p.mode == TrainingMode.ASYNC and p.off_policy
    assert p.trained == len(trained) == 24 and p.staleness == staleness and set(staleness) == {0, 1, 2}
    assert p.dropped == len(dropped) == 3
    assert p.dropped_by_reason == {DropReason.STALE: 2, DropReason.UNFINISHED: 1}
    assert p.dropped_sandbox_s == pytest.approx(sum(e.sandbox_seconds for e in dropped))
    assert [(d.step, d.group, d.reason) for d in p.dropped_groups] == [(e.step, e.group, e.reason) for e in dropped]
    assert not p.in_flight and not p.queued  # the run ended
    assert p.series[-1][1:] == (0, 0, 24, 3)


def test_each_update_runs_from_training_started_to_its_metrics_row(offpolicy):
    p = reduce_all(offpolicy).pipeline
    started = {e.update: e.ts for e in offpolicy if isinstance(e, ev.TrainingStarted)}
    ended = {e.step: e.ts for e in offpolicy if isinstance(e, ev.StepMetrics)}
    assert sorted(p.updates) == sorted(started) == list(range(6))
    for u, span in p.updates.items():
        assert (span.started, span.ended) == (started[u], ended[u])
        assert span.groups == sum(1 for e in offpolicy if isinstance(e, ev.GroupTrained) and e.update == u)
    busy = sum(ended[u] - started[u] for u in started)
    assert p.training_busy(offpolicy[-1].ts) == pytest.approx(busy)


def test_the_limit_and_its_history(offpolicy):
    state = reduce_all(offpolicy)
    p = state.pipeline
    assert (p.configured_limit, p.limit) == (2, 1)
    assert [(c.limit, c.from_update, c.by) for c in p.limits] == [(2, 0, "config"), (1, 5, "console")]
    assert any("max_steps_off_policy 1 from update 5 (console)" in text for _, _, text in state.logs)


def test_in_flight_and_queued_mid_run_match_the_events(offpolicy):
    for cut in (len(offpolicy) // 4, len(offpolicy) // 2, 3 * len(offpolicy) // 4):
        events = offpolicy[:cut]
        p = reduce_all(events).pipeline
        started = {(e.step, e.group) for e in events if isinstance(e, ev.GroupStarted)}
        returned = {(e.step, e.group) for e in events if isinstance(e, ev.GroupEnded) and e.ok}
        taken = {(e.step, e.group) for e in events if isinstance(e, (ev.GroupTrained, ev.GroupDropped))}
        assert set(p.in_flight) == started - returned - taken
        assert set(p.queued) == returned - taken
        now = events[-1].ts
        assert 0 < p.sampling_busy(now) <= now - offpolicy[0].ts


def test_groups_and_trials_learn_which_update_trained_them(offpolicy):
    state = reduce_all(offpolicy)
    trained = {(e.step, e.group): e for e in offpolicy if isinstance(e, ev.GroupTrained)}
    kept = [g for g in state.groups.values() if (g.step, g.group) in trained]
    assert kept
    for g in kept:
        e = trained[(g.step, g.group)]
        assert (g.update, g.weights, g.staleness) == (e.update, e.weights, e.update - e.weights[0])
        for name in g.trials:
            t = state.trials[name]
            assert t.update == e.update and t.weights == e.weights and t.staleness == g.staleness
            assert {turn.weights for turn in t.transcript if turn.captured} == set(e.weights)
            captured = next(turn.turn for turn in t.transcript if turn.captured)
            assert t.turn_weights(captured) == e.weights[0]
    dropped = {(e.step, e.group): e.reason for e in offpolicy if isinstance(e, ev.GroupDropped)}
    assert [g.dropped for g in state.groups.values() if (g.step, g.group) in dropped] == [
        dropped[(g.step, g.group)] for g in state.groups.values() if (g.step, g.group) in dropped
    ]


def test_a_synchronous_run_trains_each_group_in_its_own_step():
    events = list(synthetic_run(steps=3, groups=2, group_size=2, seed=1, hostile=False))
    state = reduce_all(events)
    p = state.pipeline
    assert p.mode == TrainingMode.SYNC and p.limit is None and not p.off_policy
    assert p.trained == 6 and p.staleness == {0: 6} and p.dropped == 0
    assert all(g.update == g.step and g.staleness == 0 for g in state.groups.values())
    assert sorted(p.updates) == [0, 1, 2] and all(u.started is not None and u.ended for u in p.updates.values())


def test_a_run_recorded_before_group_trained_infers_it_from_its_metrics_rows():
    new = (ev.GroupTrained, ev.TrainingStarted, ev.OffPolicyLimit, ev.GroupDropped)
    events = [
        e for e in synthetic_run(steps=3, groups=2, group_size=2, seed=1, hostile=False) if not isinstance(e, new)
    ]
    events = [dataclasses.replace(e, weights=None) if isinstance(e, ev.ProxyRequest) else e for e in events]
    p = reduce_all(events).pipeline
    assert not p.reported and p.trained == 6 and p.staleness == {0: 6} and not p.queued
    last_return = {s: max(e.ts for e in events if isinstance(e, ev.GroupEnded) and e.step == s) for s in range(3)}
    metrics = {e.step: e.ts for e in events if isinstance(e, ev.StepMetrics)}
    for u, span in p.updates.items():  # training from the step's last group's return to its metrics row
        assert (span.started, span.ended) == (last_return[u], metrics[u])


def test_an_old_event_line_without_the_new_fields_loads_with_defaults():
    body = json.loads((FIXTURES / "finished" / "events.jsonl").read_text().splitlines()[0])
    del body["training_mode"], body["max_steps_off_policy"]
    state = RunState()
    reduce(state, ev.decode(json.dumps(body)))
    assert state.run_id and state.pipeline.mode == TrainingMode.SYNC and state.pipeline.limit is None


def test_bad_numbers_in_the_new_events_are_left_out():
    state = reduce_all(synthetic_run(steps=1, groups=1, group_size=2, hostile=False, end=False))
    reduce(state, ev.GroupTrained(ts=9e9, step=0, group=0, update=-3, weights=[1]))  # no such update
    reduce(state, ev.OffPolicyLimit(ts=9e9, max_steps_off_policy=-1, from_update=0, by="console"))
    reduce(state, ev.GroupDropped(ts=9e9, step=7, group=0, reason="stale", update=1, sandbox_seconds=float("nan")))
    p = state.pipeline
    assert p.trained == 1 and p.limit is None and p.dropped == 1 and p.dropped_sandbox_s == 0.0


def test_the_ledger_counts_dropped_groups_sandbox_time_as_waste(offpolicy):
    state = reduce_all(offpolicy)
    rows = state.ledger.rows(state.tasks)
    dropped = [e for e in offpolicy if isinstance(e, ev.GroupDropped)]
    assert sum(r.dropped_groups for r in rows) == len(dropped)
    assert sum(r.dropped_s for r in rows) == pytest.approx(sum(e.sandbox_seconds for e in dropped))
    for row in rows:
        assert row.wasted_s == pytest.approx(row.no_signal_s + row.dropped_s)
    families = state.ledger.family_rows(state.tasks)
    assert sum(r.dropped_s for r in families) == pytest.approx(sum(r.dropped_s for r in rows))


def test_the_snapshot_codec_keeps_the_pipeline(offpolicy):
    for events in (offpolicy, offpolicy[: len(offpolicy) // 2]):
        state = reduce_all(events)
        again = decode(encode(state))
        assert again.pipeline == state.pipeline
        assert again.pipeline.series.maxlen == state.pipeline.series.maxlen
        assert [t.weights for t in again.trials.values()] == [t.weights for t in state.trials.values()]
