"""The off-policy mode's own parts (``config.async_config``; the cookbook's ``do_async_training``):
its staleness limit lowered live, and where a resumed run takes up its groups.

The limit. The cookbook's loop reads ``config.async_config.max_steps_off_policy`` each time it
takes a group off its queue, so lowering the field on the running config is what makes the
loop apply it (from the next group it takes); the group book applies the same number, and an
``off_policy.limit`` event records who lowered it from which update. It may only be lowered:
raising it would let groups train that the run was started to keep out.

Resuming. An update takes whichever groups return first, so the groups trained before a stop
are not the first batches drawn; the groups the run's events say were trained before the
checkpoint are skipped (``HarborDataset.resume_untrained``), and the ones that were in flight or
waiting when the run stopped or died are drawn again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tbconsole.record.control import ControlError
from tbconsole.record.enums import DecisionBy
from tbconsole.record.events import Event, GroupTrained, OffPolicyLimit, read_events_of
from tbconsole.runner.groupbook import GroupBook
from tbconsole.runner.weights import PolicyWeights

CONFIGURED = "config"


class LiveLimit:
    """``max_steps_off_policy``, as configured and as lowered since."""

    def __init__(self, async_config: Any, book: GroupBook, weights: PolicyWeights, publish: Callable[[Event], None]):
        self._async_config = async_config
        self.configured = int(async_config.max_steps_off_policy)
        self._book = book
        self._weights = weights
        self._publish = publish
        book.limit = self.configured

    @property
    def value(self) -> int:
        return int(self._async_config.max_steps_off_policy)

    def announce(self) -> None:
        self._publish(OffPolicyLimit(max_steps_off_policy=self.value, from_update=self._weights.update, by=CONFIGURED))

    def lower(self, limit: int) -> None:
        if not 0 <= limit <= self.configured:
            raise ControlError(
                f"max_steps_off_policy can be lowered to 0…{self.configured} (the configured value), not {limit}"
            )
        # chz keeps a field's value in the instance (read back as the attribute): the loop reads it
        # from here at the next group it takes.
        object.__setattr__(self._async_config, "X_max_steps_off_policy", limit)
        object.__setattr__(self._async_config, "max_steps_off_policy", limit)
        self._book.limit = limit
        self._publish(
            OffPolicyLimit(max_steps_off_policy=limit, from_update=self._weights.update, by=DecisionBy.CONSOLE)
        )


def trained_before(events_path: Path, update: int, end: int | None = None) -> set[tuple[int, int]]:
    """The (step, group) of every group an update before ``update`` trained, from the run's events."""
    if not events_path.exists():
        return set()
    return {
        (event.step, event.group)
        for event in read_events_of(events_path, (GroupTrained.kind,), end=end)
        if isinstance(event, GroupTrained) and event.update < update
    }
