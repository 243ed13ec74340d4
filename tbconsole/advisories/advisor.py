"""The Advisor: feeds every rule, turns what each holds into advisory events, and keeps a rule
that crashes from taking the run (or the other rules) with it.

A condition becomes ``AdvisoryRaised`` when it first holds and again when its severity, message
or subject (step, group, trial) changes (the same key: it replaces the earlier one), and
``AdvisoryCleared`` when the rule lets it go, with the rule's one line on why.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable
from typing import Any

from tbconsole.advisories.amplification import Amplification
from tbconsole.advisories.base import Advice, Rule
from tbconsole.advisories.disk import Disk
from tbconsole.advisories.gateway import GatewayLatency, GatewayProbes, SdkRetries
from tbconsole.advisories.hacking import OneReplyManyTasks, VerifierTouched
from tbconsole.advisories.integrity import Captures, Tokens
from tbconsole.advisories.limits import Limits
from tbconsole.advisories.signal import NoSignal
from tbconsole.advisories.stalls import PastTimeout, Stalled
from tbconsole.advisories.thresholds import RULES, Thresholds
from tbconsole.advisories.training import Entropy, Kl, OffPolicy, ShrinkingReplies
from tbconsole.record import events as ev
from tbconsole.record.enums import LogLevel

RULE_CLASSES: tuple[type[Rule], ...] = (
    NoSignal,
    Stalled,
    PastTimeout,
    Limits,
    Kl,
    OffPolicy,
    Entropy,
    ShrinkingReplies,
    VerifierTouched,
    OneReplyManyTasks,
    Captures,
    Tokens,
    Amplification,
    GatewayLatency,
    GatewayProbes,
    SdkRetries,
    Disk,
)
assert tuple(r.name for r in RULE_CLASSES) == RULES, "thresholds.RULES names every rule, in order"

_log = logging.getLogger(__name__)


class Advisor:
    def __init__(self, thresholds: Thresholds | None = None, rules: Iterable[Rule] | None = None):
        self.thresholds = thresholds or Thresholds()
        if rules is None:
            rules = [cls(self.thresholds) for cls in RULE_CLASSES if not self.thresholds.is_off(cls.name)]
        self.rules = list(rules)
        self.raised: dict[str, ev.AdvisoryRaised] = {}  # full key → the last raise, while it holds

    def feed(self, item: Any, now: float | None = None) -> list[ev.Event]:
        """One event or fact; the advisory events (and any rule's crash notice) it leads to.
        Advisories the Advisor published itself are ignored (they are its output)."""
        if isinstance(item, ev.AdvisoryRaised | ev.AdvisoryCleared):
            return []
        when = now if now is not None else getattr(item, "ts", None)
        return self._each(lambda rule: rule.observe(item), when)

    def tick(self, now: float) -> list[ev.Event]:
        """Time-based checks (stalls, timeouts, retry windows) at ``now`` (unix seconds)."""
        return self._each(lambda rule: rule.tick(now), now)

    def _each(self, call, when: float | None) -> list[ev.Event]:
        out: list[ev.Event] = []
        for rule in list(self.rules):
            try:
                call(rule)
                out.extend(self._diff(rule, when))
            except Exception as exc:  # noqa: BLE001 - a rule's bug must never reach the run
                out.extend(self._disable(rule, exc, when))
        return out

    def _diff(self, rule: Rule, when: float | None) -> list[ev.Event]:
        out: list[ev.Event] = []
        prefix = f"{rule.name}:"
        stamp = {} if when is None else {"ts": when}
        current = rule.conditions
        for key in [k for k in self.raised if (k == rule.name or k.startswith(prefix)) and k not in current]:
            del self.raised[key]
            why = rule.cleared_why.pop(key, "no longer holds")
            out.append(ev.AdvisoryCleared(key=key, message=why, **stamp))
        for key, advice in current.items():
            old = self.raised.get(key)
            if old is not None and _same(old, advice):
                continue
            raised = ev.AdvisoryRaised(
                key=key,
                rule=rule.name,
                severity=advice.severity,
                message=advice.message,
                threshold=advice.threshold,
                value=advice.value,
                step=advice.step,
                group=advice.group,
                trial=advice.trial,
                metric=advice.metric,
                **stamp,
            )
            self.raised[key] = raised
            out.append(raised)
        return out

    def _disable(self, rule: Rule, exc: Exception, when: float | None) -> list[ev.Event]:
        """Log the crash once, turn the rule off, clear what it had raised (it can no longer
        say when those conditions end)."""
        self.rules.remove(rule)
        _log.warning("advisory rule %s failed and is off for this run:\n%s", rule.name, traceback.format_exc())
        stamp = {} if when is None else {"ts": when}
        out: list[ev.Event] = [
            ev.LogLine(
                level=LogLevel.WARNING,
                message=f"advisory rule {rule.name} failed ({type(exc).__name__}: {exc}); it is off for this run",
                **stamp,
            )
        ]
        for key in [k for k in self.raised if k == rule.name or k.startswith(f"{rule.name}:")]:
            del self.raised[key]
            out.append(ev.AdvisoryCleared(key=key, message=f"rule {rule.name} is off after an error", **stamp))
        return out


def _same(old: ev.AdvisoryRaised, new: Advice) -> bool:
    return (old.severity, old.message, old.step, old.group, old.trial) == (
        new.severity,
        new.message,
        new.step,
        new.group,
        new.trial,
    )


def replay(items: Iterable[Any], thresholds: Thresholds | None = None, tick_every: float = 5.0) -> list[ev.Event]:
    """Run the rules over a recorded stream, with time-based checks every ``tick_every`` seconds
    of the stream's own clock (as the runner's timer would have run them). Advisories already in
    the stream are skipped; the result is what the rules publish."""
    advisor = Advisor(thresholds)
    out: list[ev.Event] = []
    clock: float | None = None
    for item in items:
        ts = getattr(item, "ts", None)
        if ts is not None:
            if clock is None:
                clock = ts
            while clock + tick_every <= ts:
                clock += tick_every
                out.extend(advisor.tick(clock))
        out.extend(advisor.feed(item))
    return out
