"""disk: free space on the run folder's filesystem (sampled by the runner every few seconds) and
how fast the run fills it: "full in about N steps" while the run has more steps than that to go.

The growth per step is the run folder's own (``RunFolderSize``, measured by the runner at each
step's end: captures, trial folders, events, checkpoints): what the rest of the machine writes
or frees on the same filesystem does not move it. Without those measures (a recording, an older
runner) it is the free space's decline from one step's end to the next.

Noise control: the advisory is raised again only when its severity changes or a new step gives
a new estimate, and it clears only once free space is back above the warning level by a margin.
"""

from __future__ import annotations

from typing import Any

from tbconsole.advisories.base import Advice, Rule, step_done
from tbconsole.advisories.facts import DiskSample, RunFolderSize
from tbconsole.advisories.thresholds import Thresholds
from tbconsole.common.formatting import format_size
from tbconsole.record import events as ev
from tbconsole.record.enums import LogLevel

MiB = 1 << 20
CLEAR_MARGIN = 1.1  # clears at 110% of the warning level: no flapping around it
GROWTH_STEPS = 3  # step boundaries the growth per step is averaged over
FILLING = "growth per step × steps to go > free space"  # the threshold of a run that will not finish


class Disk(Rule):
    """H0: the filesystem has room for the rest of the run. Warning under ``advise.disk_warn_mib``
    or when the run's own growth per step fills it before the last step; error (a person is needed
    now, or captures and events stop being written) under ``advise.disk_error_mib`` or full within
    ``advise.disk_steps_left`` steps."""

    name = "disk"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.free: int | None = None
        self.boundaries: list[tuple[int, int]] = []  # (step done, free bytes then)
        self.sizes: list[tuple[int, int]] = []  # (step done, the run folder's bytes then)
        self.end_step: int | None = None  # the run's last step + 1 (run.started's total_steps)
        self.done: set[int] = set()

    def observe(self, item: Any) -> None:
        if isinstance(item, ev.RunStarted):
            self.end_step = item.total_steps
        elif isinstance(item, DiskSample):
            self.free = item.free_bytes
            self._judge()
        elif isinstance(item, RunFolderSize):
            self.sizes = [*self.sizes, (item.step, item.bytes)][-(GROWTH_STEPS + 1) :]
            if self.free is not None:
                self._judge(new_step=True)
        step = step_done(item)
        if step is not None and step not in self.done and self.free is not None:
            self.done.add(step)
            self.boundaries = [*self.boundaries, (step, self.free)][-(GROWTH_STEPS + 1) :]
            if not self.sizes:  # else the run folder's size at this step's end judges: it comes next
                self._judge(new_step=True)

    def growth(self) -> tuple[float, str] | None:
        """Bytes per step over the last few steps and how they were measured (None before two
        step ends): the run folder's own growth, else the free space's decline."""
        if len(self.sizes) >= 2:
            (s0, b0), (s1, b1) = self.sizes[0], self.sizes[-1]
            return ((b1 - b0) / (s1 - s0), "the run folder grows {} per step") if s1 > s0 else None
        if len(self.boundaries) >= 2:
            (s0, f0), (s1, f1) = self.boundaries[0], self.boundaries[-1]
            return ((f0 - f1) / (s1 - s0), "{} used per step") if s1 > s0 else None
        return None

    def _judge(self, new_step: bool = False) -> None:
        t, free = self.t, self.free
        assert free is not None
        growth = self.growth()
        ends = [s for marks in (self.sizes, self.boundaries) for s, _ in marks[-1:]]
        last = max(ends) if ends else None
        left = None if last is None or self.end_step is None else self.end_step - (last + 1)
        rate = ""
        steps_to_full = free / growth[0] if growth is not None and growth[0] > 0 else None
        # Filling: the disk is full before the run's last step (a run of unknown length: within
        # disk_steps_left steps); within disk_steps_left steps it is an error (act now).
        filling = steps_to_full is not None and (
            steps_to_full < left if left is not None else steps_to_full <= t.disk_steps_left
        )
        if filling and growth is not None and steps_to_full is not None:
            steps = f"{steps_to_full:.0f} step{'' if round(steps_to_full) == 1 else 's'}"
            rate = f", {growth[1].format(format_size(growth[0]))}: full in about {steps}"
            rate += f" ({left} to go)" if left is not None else ""
        soon = filling and steps_to_full is not None and steps_to_full <= t.disk_steps_left
        if free < t.disk_error_mib * MiB:
            severity, threshold = LogLevel.ERROR, f"advise.disk_error_mib={t.disk_error_mib:g}"
        elif soon:
            severity, threshold = LogLevel.ERROR, f"advise.disk_steps_left={t.disk_steps_left:g}"
        elif free < t.disk_warn_mib * MiB:
            severity, threshold = LogLevel.WARNING, f"advise.disk_warn_mib={t.disk_warn_mib:g}"
        elif filling:
            severity, threshold = LogLevel.WARNING, FILLING
        else:
            if free >= t.disk_warn_mib * MiB * CLEAR_MARGIN:
                self.release(self.name, f"{format_size(free)} free on the run folder's filesystem")
            return
        old = self.conditions.get(self.name)
        if old is not None and old.severity == severity and not new_step:
            return
        self.hold(
            Advice(
                key=self.name,
                severity=severity,
                message=(
                    f"{format_size(free)} free on the run folder's filesystem{rate} — free space or point "
                    "config.log_path elsewhere before captures and events cannot be written"
                ),
                threshold=threshold,
                value=float(free),
                step=last,
            )
        )
