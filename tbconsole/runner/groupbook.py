"""Every group whose trials ran, until an update trains it or it is dropped.

In every mode a group's trials are announced by their step (the batch it was drawn from); which
update trains it is told here (``group.trained``), with the weights its turns were sampled with.
In the off-policy mode (``config.async_config``) a group can also be dropped: the cookbook's loop
discards a group whose sampler is more than ``max_steps_off_policy`` updates behind the update it
would train in (and requeues its task while data remains), and a stop leaves groups untrained.
Each such group is a ``group.dropped`` event with the sandbox time it cost, so nothing is lost
silently and the ledger can count the waste.

The book follows the cookbook's rule exactly rather than watching its queue (which it cannot
see): the cookbook compares the update being filled with the update of the sampler the group
*started* with, when it takes the group off its queue. A group that returned and was not
trained by the time update ``u`` is done can only be taken while filling ``u + 1`` or later; if
``u + 1`` is already past its limit, no later update can take it, so it is dropped then. A group
that returns already past its limit is dropped at once.

Which groups an update takes is seen where the cookbook reads them: ``prepare_minibatch`` asks
every group of the update for its ``logging_tags`` (``HarborGroupBuilder.logging_tags`` calls
``trained``), once per group and update, before the forward-backward.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tbconsole.record.enums import DropReason
from tbconsole.record.events import (
    Event,
    GroupDropped,
    GroupEnded,
    GroupStarted,
    GroupTrained,
    TrialEnded,
    TrialPhaseChanged,
)
from tbconsole.record.runfolder import attempt_of

Key = tuple[int, int, int]  # step, group, attempt


@dataclass
class BookedGroup:
    step: int
    group: int
    attempt: int
    started_with: int  # the update of the sampler the group started with (the cookbook's rule)
    started: float = field(default_factory=time.monotonic)
    weights: list[int] = field(default_factory=list)  # the updates its turns were sampled with
    trials: int = 0
    sandbox_seconds: float = 0.0
    datums: int = 0
    returned: bool = False


class GroupBook:
    """Groups in flight and returned, by (step, group, attempt); ``limit``: the off-policy mode's
    max_steps_off_policy (None: groups are never dropped for staleness)."""

    def __init__(self, publish: Callable[[Event], None], update: Callable[[], int], limit: int | None = None):
        self._publish = publish
        self._update = update
        self.limit = limit
        self.groups: dict[Key, BookedGroup] = {}

    def started(self, step: int, group: int, attempt: int, started_with: int) -> BookedGroup:
        booked = BookedGroup(step, group, attempt, started_with)
        self.groups[(step, group, attempt)] = booked
        return booked

    def returned(self, key: Key, *, weights: list[int], trials: int, sandbox_seconds: float, datums: int,
                 trainable: bool = True) -> None:  # fmt: skip
        """The group's trials all ended scored. ``trainable`` False: the cookbook will not train
        it by its own rule (constant rewards, with remove_constant_reward_groups): no longer
        followed, as in every mode."""
        booked = self.groups.get(key)
        if booked is None:
            return
        booked.returned = True
        booked.weights = sorted(set(weights)) or [booked.started_with]
        booked.trials, booked.sandbox_seconds, booked.datums = trials, sandbox_seconds, datums
        if not trainable:
            del self.groups[key]
        elif self._too_stale(booked, self._update()):
            self._drop(booked, DropReason.STALE)

    def failed(self, key: Key) -> None:
        """The attempt failed (its trials were cancelled unscored): a retry or the run's end
        follows, told by their own events."""
        self.groups.pop(key, None)

    def trained(self, key: Key) -> None:
        booked = self.groups.pop(key, None)
        if booked is None:
            return
        self._publish(GroupTrained(step=booked.step, group=booked.group, update=self._update(), weights=booked.weights))

    def update_done(self) -> None:
        """An update was applied: returned groups that no later update may take are dropped."""
        after = self._update()
        for booked in [b for b in self.groups.values() if b.returned and self._too_stale(b, after)]:
            self._drop(booked, DropReason.STALE)

    def abandon(self, key: Key, sandbox_seconds: float | None = None) -> None:
        """The attempt was cancelled with the run (a stop, an abort) before an update took it."""
        booked = self.groups.get(key)
        if booked is None:
            return
        if sandbox_seconds is not None and not booked.returned:
            booked.sandbox_seconds = sandbox_seconds
        self._drop(booked, DropReason.ABANDONED)

    def close(self, reason: DropReason) -> None:
        """The run ended: the groups that returned but no update took never will be (UNFINISHED:
        the last update was done; ABANDONED: the run stopped before it)."""
        for booked in [b for b in self.groups.values() if b.returned]:
            self._drop(booked, reason)

    def _too_stale(self, booked: BookedGroup, update: int) -> bool:
        return self.limit is not None and update - booked.started_with > self.limit

    def _drop(self, booked: BookedGroup, reason: DropReason) -> None:
        self.groups.pop((booked.step, booked.group, booked.attempt), None)
        self._publish(
            GroupDropped(
                step=booked.step,
                group=booked.group,
                reason=reason,
                weights=booked.weights or [booked.started_with],
                update=self._update(),
                trials=booked.trials,
                sandbox_seconds=round(booked.sandbox_seconds, 3),
                datums=booked.datums,
            )
        )


# What ``abandoned_earlier`` reads of an earlier run's events.
EARLIER_KINDS = (
    GroupStarted.kind,
    GroupEnded.kind,
    GroupTrained.kind,
    GroupDropped.kind,
    TrialPhaseChanged.kind,
    TrialEnded.kind,
)


def abandoned_earlier(events: Iterable[Event], update: int) -> list[GroupDropped]:
    """The groups an earlier run of this folder left without a word (killed: kill -9, a lost
    machine): started, never failed, trained or dropped. Each is dropped as abandoned when the run
    resumes (at ``update``), with its trials' sandbox time as far as their events tell: from a
    trial's first phase past the queue to its end, or to its last event where it never ended."""
    started: dict[Key, GroupStarted] = {}
    settled: set[Key] = set()
    trained_or_dropped: set[tuple[int, int]] = set()
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for event in events:
        match event:
            case GroupStarted() if event.trials:
                started[(event.step, event.group, attempt_of(event.trials[0]))] = event
            case GroupEnded(ok=False):
                settled.update(k for k in started if k[:2] == (event.step, event.group))
            case GroupTrained() | GroupDropped():
                trained_or_dropped.add((event.step, event.group))
                settled.update(k for k in started if k[:2] == (event.step, event.group))
            case TrialPhaseChanged() if event.phase != "queued":
                first.setdefault(event.trial, event.ts)
                last[event.trial] = event.ts
            case TrialEnded():
                last[event.trial] = event.ts
    dropped = []
    for key, group in started.items():
        if key in settled:
            continue
        seconds = sum(last[t] - first[t] for t in group.trials if t in first and t in last)
        dropped.append(
            GroupDropped(
                step=key[0],
                group=key[1],
                reason=DropReason.ABANDONED,
                update=update,
                trials=len(group.trials),
                sandbox_seconds=round(seconds, 3),
            )  # fmt: skip
        )
    return dropped
