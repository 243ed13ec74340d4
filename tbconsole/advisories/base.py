"""What every rule shares: the advisory a rule holds up (``Advice``), the rule's shape (``Rule``)
and the few readings of the event stream several rules need (when a step ended, sizes, times).

A rule is a small object fed one item at a time (an ``Event``, or a ``facts`` record the runner
measured) and asked, at any moment, which conditions hold now (``active``). It never publishes:
the ``Advisor`` compares what is active with what it raised before and turns the difference
into ``AdvisoryRaised`` / ``AdvisoryCleared`` events, so every rule clears the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tbconsole.advisories.thresholds import Thresholds
from tbconsole.record import events as ev
from tbconsole.record.enums import LogLevel


@dataclass(frozen=True)
class Advice:
    """One condition that holds now. ``key`` is the rule's name, or ``<name>:<what>`` for a rule
    that holds several (one per trial); ``threshold`` says the limit that fired, in the user's
    option names."""

    key: str
    severity: LogLevel
    message: str
    threshold: str
    value: float | None = None
    step: int | None = None
    group: int | None = None
    trial: str | None = None
    metric: str | None = None


class Rule:
    """A rule over the stream. Subclasses set ``name`` and override ``observe`` (every item),
    ``tick`` (time-based checks, ``now`` in unix seconds) and keep ``self.conditions`` (key →
    Advice: what holds now). ``self.cleared_why[key]`` says, in one line, why a condition that
    is gone went away (the Advisor's default: it no longer holds)."""

    name: ClassVar[str] = ""

    def __init__(self, thresholds: Thresholds):
        self.t = thresholds
        self.conditions: dict[str, Advice] = {}
        self.cleared_why: dict[str, str] = {}

    def observe(self, item: Any) -> None:
        """An event, or a fact record (``tbconsole.advisories.facts``)."""

    def tick(self, now: float) -> None:
        """Time passed (no new item): checks that depend on how long something has lasted."""

    def hold(self, advice: Advice) -> None:
        assert advice.key == self.name or advice.key.startswith(f"{self.name}:"), "keys start with the rule's name"
        self.conditions[advice.key] = advice
        self.cleared_why.pop(advice.key, None)

    def warn(self, message: str, threshold: str, *, key: str | None = None, **where: Any) -> None:
        """Hold a warning under ``key`` (default: the rule's name); ``where``: value, step, group,
        trial, metric."""
        self.hold(
            Advice(key=key or self.name, severity=LogLevel.WARNING, message=message, threshold=threshold, **where)
        )

    def release(self, key: str, why: str) -> None:
        if self.conditions.pop(key, None) is not None:
            self.cleared_why[key] = why


def step_done(item: Any) -> int | None:
    """The training step an item closes: a trained step's metrics row or its batch.ended (an
    evaluation-only row trains nothing). Both arrive for every step; rules de-duplicate."""
    if isinstance(item, ev.BatchEnded):
        return item.step
    if isinstance(item, ev.StepMetrics) and not item.evaluation_only and item.step >= 0:
        return item.step
    return None


def share(part: int, whole: int) -> str:
    return f"{part} of {whole} ({100 * part / whole:.0f}%)" if whole else f"{part} of 0"
