"""The group book (which update trained each group, which were dropped and what they cost), the
policy's weights (updates counted on the training client, samplers tagged, the update boundary a
clean off-policy stop waits for) and the live off-policy limit."""

import asyncio

import pytest
from tinker_cookbook.rl.train import AsyncConfig

from tbconsole.record.control import ControlError
from tbconsole.record.events import (
    GroupDropped,
    GroupEnded,
    GroupStarted,
    GroupTrained,
    OffPolicyLimit,
    TrainingStarted,
    TrialEnded,
    TrialPhaseChanged,
)
from tbconsole.runner.groupbook import GroupBook, abandoned_earlier
from tbconsole.runner.offpolicy import LiveLimit
from tbconsole.runner.weights import PolicyWeights, VersionedSampler, VersioningTrainingClient


class Updates:
    def __init__(self):
        self.now = 0

    def __call__(self) -> int:
        return self.now


def book(limit=None):
    events: list = []
    updates = Updates()
    return GroupBook(events.append, updates, limit), updates, events


def returned(b, key, weights=(0,), seconds=10.0, trainable=True):
    b.returned(key, weights=list(weights), trials=2, sandbox_seconds=seconds, datums=2, trainable=trainable)


def test_a_synchronous_group_is_trained_in_its_own_update_and_never_dropped():
    b, updates, events = book()
    updates.now = 3
    b.started(3, 0, 0, started_with=3)
    returned(b, (3, 0, 0), weights=[3])
    b.trained((3, 0, 0))
    b.trained((3, 0, 0))  # the cookbook asks for the tags again after the update: told once
    b.update_done()
    assert events == [GroupTrained(ts=events[0].ts, step=3, group=0, update=3, weights=[3])]


def test_an_off_policy_group_is_dropped_once_no_later_update_may_take_it():
    b, updates, events = book(limit=1)
    b.started(0, 0, 0, started_with=0)
    returned(b, (0, 0, 0))
    updates.now = 1
    b.update_done()  # update 1 may still take it (1 - 0 <= 1)
    assert events == []
    updates.now = 2
    b.update_done()  # update 2 may not: dropped, with what it cost
    (dropped,) = events
    assert isinstance(dropped, GroupDropped)
    assert (dropped.reason, dropped.weights, dropped.update, dropped.sandbox_seconds) == ("stale", [0], 2, 10.0)
    b.trained((0, 0, 0))  # and never told trained after
    assert len(events) == 1


def test_a_group_returning_past_its_limit_is_dropped_at_once_and_its_retry_is_a_new_attempt():
    b, updates, events = book(limit=0)
    b.started(1, 2, 0, started_with=0)
    updates.now = 1
    returned(b, (1, 2, 0), weights=[0, 1])  # a trial that ran across an update: its oldest counts
    assert [(e.reason, e.weights) for e in events] == [("stale", [0, 1])]
    b.started(1, 2, 1, started_with=1)  # the cookbook requeued its task: the next attempt
    returned(b, (1, 2, 1), weights=[1])
    b.trained((1, 2, 1))
    assert isinstance(events[-1], GroupTrained) and events[-1].weights == [1]


def test_groups_left_at_the_end_are_abandoned_or_unfinished_and_failed_or_constant_ones_are_not_followed():
    b, updates, events = book(limit=2)
    b.started(0, 0, 0, started_with=0)
    b.abandon((0, 0, 0), sandbox_seconds=42.5)  # cancelled in flight by a stop
    b.started(0, 1, 0, started_with=0)
    returned(b, (0, 1, 0))
    b.started(0, 2, 0, started_with=0)
    b.failed((0, 2, 0))  # its trials failed: the retry or the run's end tells the rest
    b.started(0, 3, 0, started_with=0)
    returned(b, (0, 3, 0), trainable=False)  # constant rewards: the cookbook never trains it
    b.close(reason="unfinished")
    assert [(e.group, e.reason, e.sandbox_seconds) for e in events] == [(0, "abandoned", 42.5), (1, "unfinished", 10.0)]


async def test_updates_are_counted_by_optimizer_steps_and_samplers_carry_theirs():
    events: list = []
    weights = PolicyWeights(start=5, num_substeps=2, publish=events.append)

    class Client:
        async def forward_backward_async(self, *a, **k):
            return "fb"

        async def optim_step_async(self, *a, **k):
            return "opt"

        async def save_weights_and_get_sampling_client_async(self):
            return object()

        def create_sampling_client(self, path):
            return object()

    client = VersioningTrainingClient(Client(), weights)
    first = client.create_sampling_client("path")
    assert isinstance(first, VersionedSampler) and first.weights_version == 5
    for _ in range(2):  # one update of two substeps
        await client.forward_backward_async([])
        await client.optim_step_async(None)
    second = await client.save_weights_and_get_sampling_client_async()
    assert second.weights_version == 6 and weights.current() is second
    assert [e.update for e in events if isinstance(e, TrainingStarted)] == [5]  # one per update


async def test_a_held_stop_waits_for_the_update_in_progress_and_no_other_begins():
    weights = PolicyWeights(start=0, num_substeps=1, publish=lambda e: None)
    await weights.begin_update()  # update 0 is in progress
    held = asyncio.create_task(weights.hold_updates())
    await asyncio.sleep(0)
    assert not held.done()
    weights.optimizer_steps += 1
    weights.end_update()
    assert await held == 1
    nxt = asyncio.create_task(weights.begin_update())  # update 1 never begins
    await asyncio.sleep(0)
    assert not nxt.done()
    nxt.cancel()


def test_the_limit_is_lowered_live_on_the_config_the_loop_reads_and_never_raised():
    events: list = []
    config = AsyncConfig(max_steps_off_policy=2, groups_per_batch=4)
    assert config.max_steps_off_policy == 2  # read once, as the loop does before the change
    b, updates, _ = book()
    weights = PolicyWeights(start=3, num_substeps=1, publish=events.append)
    limit = LiveLimit(config, b, weights, events.append)
    assert b.limit == 2
    limit.lower(1)
    assert config.max_steps_off_policy == 1 and b.limit == 1
    assert events == [OffPolicyLimit(ts=events[0].ts, max_steps_off_policy=1, from_update=3, by="console")]
    with pytest.raises(ControlError, match="0…2"):
        limit.lower(3)
    with pytest.raises(ControlError):
        limit.lower(-1)


def test_a_killed_runs_silent_groups_are_dropped_as_abandoned_when_it_resumes():
    def started(step, group, attempt=0, ts=0.0):
        suffix = f"-r{attempt}" if attempt else ""
        trials = [f"t.s{step}g{group}t{k}{suffix}" for k in range(2)]
        return GroupStarted(ts=ts, step=step, group=group, task="t", trials=trials, proxy_url="")

    def phase(trial, ts, name="environment"):
        return TrialPhaseChanged(ts=ts, step=0, group=0, trial=trial, phase=name)

    earlier = [
        started(0, 0),  # failed, then retried: the retry was in flight at the kill
        GroupEnded(ts=1.0, step=0, group=0, rewards=[None, None], ok=False),
        started(0, 0, attempt=1, ts=2.0),
        phase("t.s0g0t0-r1", 3.0),
        phase("t.s0g0t0-r1", 9.0, "agent"),
        phase("t.s0g0t1-r1", 4.0),
        TrialEnded(
            ts=6.0,
            step=0,
            group=0,
            trial="t.s0g0t1-r1",
            outcome="Submitted",
            scored=True,
            reward=1.0,
            turns=1,
            output_tokens=3,
            trial_dir=None,
            timings={},
        ),  # fmt: skip
        started(0, 1),  # trained before the kill: accounted for
        GroupTrained(ts=7.0, step=0, group=1, update=0, weights=[0]),
    ]
    (dropped,) = abandoned_earlier(earlier, update=1)
    assert (dropped.step, dropped.group, dropped.reason, dropped.update) == (0, 0, "abandoned", 1)
    assert dropped.trials == 2 and dropped.sandbox_seconds == 6.0 + 2.0  # 3→9 in flight, 4→6 ended
