"""disk: free space on the run folder's filesystem (sampled by the runner every few seconds) and
how fast it shrinks per step ("full in about N steps"), before a capture or event write fails.

Noise control: the advisory is raised again only when its severity changes or a new step gives
a new estimate, and it clears only once free space is back above the warning level by a margin.
"""

from __future__ import annotations

from typing import Any

from tbconsole import events as ev
from tbconsole.advisories.base import Advice, Rule, size, step_done
from tbconsole.advisories.facts import DiskSample
from tbconsole.advisories.thresholds import Thresholds
from tbconsole.enums import AdvisorySeverity

MiB = 1 << 20
CLEAR_MARGIN = 1.1  # clears at 110% of the warning level: no flapping around it
GROWTH_STEPS = 3  # step boundaries the growth per step is averaged over


class Disk(Rule):
    name = "disk"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.free: int | None = None
        self.boundaries: list[tuple[int, int]] = []  # (step done, free bytes then)
        self.end_step: int | None = None  # the run's last step + 1 (run.started's total_steps)
        self.done: set[int] = set()

    def observe(self, item: Any) -> None:
        if isinstance(item, ev.RunStarted):
            self.end_step = item.total_steps
        elif isinstance(item, DiskSample):
            self.free = item.free_bytes
            self._judge()
        step = step_done(item)
        if step is not None and step not in self.done and self.free is not None:
            self.done.add(step)
            self.boundaries = [*self.boundaries, (step, self.free)][-(GROWTH_STEPS + 1) :]
            self._judge(new_step=True)

    def growth(self) -> float | None:
        """Bytes used per step over the last few steps (None before two step boundaries)."""
        if len(self.boundaries) < 2:
            return None
        (s0, f0), (s1, f1) = self.boundaries[0], self.boundaries[-1]
        return (f0 - f1) / (s1 - s0) if s1 > s0 else None

    def _judge(self, new_step: bool = False) -> None:
        t, free = self.t, self.free
        assert free is not None
        growth = self.growth()
        last = self.boundaries[-1][0] if self.boundaries else None
        left = None if last is None or self.end_step is None else self.end_step - (last + 1)
        rate = ""
        filling = False
        if growth is not None and growth > 0:
            steps_to_full = free / growth
            # Only while the run has more steps to go than the disk has room for.
            filling = steps_to_full <= t.disk_steps_left and (left is None or steps_to_full < left)
            if filling:
                steps = f"{steps_to_full:.0f} step{'' if round(steps_to_full) == 1 else 's'}"
                rate = f", {size(growth)} used per step: full in about {steps}"
                rate += f" ({left} to go)" if left is not None else ""
        if free < t.disk_error_mib * MiB:
            severity, threshold = AdvisorySeverity.ERROR, f"advise.disk_error_mib={t.disk_error_mib:g}"
        elif free < t.disk_warn_mib * MiB:
            severity, threshold = AdvisorySeverity.WARNING, f"advise.disk_warn_mib={t.disk_warn_mib:g}"
        elif filling:
            severity, threshold = AdvisorySeverity.WARNING, f"advise.disk_steps_left={t.disk_steps_left:g}"
        else:
            if free >= t.disk_warn_mib * MiB * CLEAR_MARGIN:
                self.release(self.name, f"{size(free)} free on the run folder's filesystem")
            return
        old = self.conditions.get(self.name)
        if old is not None and old.severity == severity and not new_step:
            return
        self.hold(
            Advice(
                key=self.name,
                severity=severity,
                message=(
                    f"{size(free)} free on the run folder's filesystem{rate} — free space or point config.log_path "
                    "elsewhere before captures and events cannot be written"
                ),
                threshold=threshold,
                value=float(free),
                step=last,
            )
        )
