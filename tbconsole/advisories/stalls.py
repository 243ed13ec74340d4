"""stalled and past-timeout: trials that sit in one phase. Both are time-based (``tick``).

stalled compares a trial's time in its phase with the run's own finished phases of that kind
(median × advise.stall_factor, never under advise.stall_floor_s), so a slow task set is not a
stall and one sandbox that hangs is. past-timeout: a trial still in its agent phase past the
agent timeout Harbor resolved for it (plus a grace), which Harbor should have ended.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from tbconsole.advisories.base import Rule
from tbconsole.advisories.facts import AgentTimeout
from tbconsole.advisories.thresholds import Thresholds
from tbconsole.common.formatting import format_duration
from tbconsole.record import events as ev
from tbconsole.record.enums import TrialPhase

# Phases a trial waits in for something outside it: queued waits for a free slot, by design.
WATCHED = (TrialPhase.ENVIRONMENT, TrialPhase.AGENT_SETUP, TrialPhase.AGENT, TrialPhase.VERIFYING)


@dataclass
class Place:
    step: int
    group: int
    phase: str
    since: float


class TrialPlaces:
    """Where each running trial is and since when; the durations of the phases finished."""

    def __init__(self) -> None:
        self.running: dict[str, Place] = {}
        self.finished: dict[str, list[float]] = {}  # phase → durations (s)

    def observe(self, item: Any) -> str | None:
        """The trial that left its phase (moved on or ended), if any."""
        if isinstance(item, ev.TrialPhaseChanged):
            left = self._leave(item.trial, item.ts)
            self.running[item.trial] = Place(item.step, item.group, item.phase, item.ts)
            return left
        if isinstance(item, ev.TrialEnded):
            left = self._leave(item.trial, item.ts)
            self.running.pop(item.trial, None)
            return left
        if isinstance(item, ev.GroupEnded):  # trials cancelled with their group send no trial.ended
            gone = [t for t, p in self.running.items() if (p.step, p.group) == (item.step, item.group)]
            for trial in gone:
                del self.running[trial]
        elif isinstance(item, ev.RunEnded | ev.RunStarted):
            self.running.clear()
        return None

    def _leave(self, trial: str, ts: float) -> str | None:
        place = self.running.get(trial)
        if place is None:
            return None
        self.finished.setdefault(place.phase, []).append(max(0.0, ts - place.since))
        return trial


class PhaseRule(Rule):
    """A rule about running trials: it follows where each is, and a condition about a trial
    clears when the trial leaves the phase it was raised in (or ends, or its group does)."""

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.places = TrialPlaces()

    def observe(self, item: Any) -> None:
        trial = self.places.observe(item)
        key = f"{self.name}:{trial}"
        if trial is not None and key in self.conditions:
            where = self.places.running.get(trial)
            self.release(key, f"{trial} moved on to {where.phase}" if where else f"{trial} ended")
        if isinstance(item, ev.GroupEnded | ev.RunEnded):
            for key in [k for k in self.conditions if k.split(":", 1)[1] not in self.places.running]:
                self.release(key, f"{key.split(':', 1)[1]} was stopped with its group")

    def tick(self, now: float) -> None:
        for trial, place in self.places.running.items():
            key = f"{self.name}:{trial}"
            if key in self.conditions:
                continue
            spent = now - place.since
            said = self.judge(trial, place, spent)
            if said is not None:
                message, threshold = said
                self.warn(
                    key=key,
                    message=message,
                    threshold=threshold,
                    value=round(spent, 1),
                    step=place.step,
                    group=place.group,
                    trial=trial,
                )

    def judge(self, trial: str, place: Place, spent: float) -> tuple[str, str] | None:
        """(message, threshold) when a trial ``spent`` seconds in its phase is worth a warning."""
        raise NotImplementedError


class Stalled(PhaseRule):
    """H0: a trial's phase lasts as long as the run's own finished phases of that kind; a phase
    lasting over ``advise.stall_factor`` × their median (and over ``advise.stall_floor_s``, after
    ``advise.stall_min_peers`` of them) is beyond the run's own spread: warning."""

    name = "stalled"

    def judge(self, trial: str, place: Place, spent: float) -> tuple[str, str] | None:
        t = self.t
        peers = self.places.finished.get(place.phase, [])
        if place.phase not in WATCHED or len(peers) < t.stall_min_peers:
            return None
        typical = statistics.median(peers)
        if spent <= max(t.stall_floor_s, t.stall_factor * typical):
            return None
        return (
            f"{trial} has been in {place.phase} for {format_duration(spent)}, over {t.stall_factor:g}× the "
            f"run's median {place.phase} ({format_duration(typical)}) — look at its trial folder and log",
            f"advise.stall_factor={t.stall_factor:g}, advise.stall_floor_s={t.stall_floor_s:g}",
        )


class PastTimeout(PhaseRule):
    """H0: Harbor ends an agent at its timeout. One still in its agent phase
    ``advise.timeout_grace_s`` past it is not ended by anything: warning."""

    name = "past-timeout"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.timeouts: dict[str, float] = {}

    def observe(self, item: Any) -> None:
        if isinstance(item, AgentTimeout):
            self.timeouts[item.trial] = item.seconds
        else:
            super().observe(item)

    def judge(self, trial: str, place: Place, spent: float) -> tuple[str, str] | None:
        timeout = self.timeouts.get(trial)
        if place.phase != TrialPhase.AGENT or timeout is None or spent <= timeout + self.t.timeout_grace_s:
            return None
        return (
            f"{trial} is past its agent timeout ({format_duration(timeout)}) and Harbor has not ended it "
            f"— its agent has run {format_duration(spent)}; look at its trial folder, cancel it if it hangs",
            f"agent timeout {timeout:g} s + advise.timeout_grace_s={self.t.timeout_grace_s:g}",
        )
