"""The run's advisories in its W&B run, when it logs to Weights & Biases (``config.wandb_project``;
offline too, with ``WANDB_MODE=offline``). The metrics need nothing from here: each metrics.jsonl
row reaches W&B through the cookbook's own ``WandbLogger``, per-task figures included.

Each ``advisory.raised`` and ``advisory.cleared`` adds a row to a W&B Table in the run's summary,
``advisories`` (time, step, key, rule, severity, state, message, threshold, value), written whole
at each change (advisories are few: one per condition, raised again only when it changes), and
``advisories/active`` counts those standing (0 from the start: a run without advisories says so).
The summary, not the history: the cookbook logs each step's metrics row with ``step=N``, and W&B
drops a row logged below its last step, so an advisory logged there would either take a step from
the metrics or be lost.

Never a danger to the run: the bus hands each event over on its publishing thread, where a summary
update only queues a record for W&B's own process; any exception (W&B's process gone, a full
disk) is logged once and the logger turns itself off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from tbconsole.events import AdvisoryCleared, AdvisoryRaised, Event, EventBus

COLUMNS: list[Any] = ["time", "step", "key", "rule", "severity", "state", "message", "threshold", "value"]
TABLE_KEY = "advisories"
ACTIVE_KEY = "advisories/active"

_log = logging.getLogger(__name__)


class WandbAdvisories:
    """A bus subscriber that keeps the W&B run's advisories table."""

    def __init__(self, run: Any):
        self.run = run  # a wandb Run (anything with a ``summary`` mapping)
        self.rows: list[list[Any]] = []
        self.active: dict[str, AdvisoryRaised] = {}
        self.failed = False

    def start(self) -> None:
        """``advisories/active`` 0: none yet."""
        self._guarded(lambda: self.run.summary.__setitem__(ACTIVE_KEY, 0))

    def __call__(self, event: Event) -> None:
        if isinstance(event, AdvisoryRaised | AdvisoryCleared):
            self._guarded(lambda: self._log(event))

    def _guarded(self, work: Callable[[], None]) -> None:
        if self.failed:
            return
        try:
            work()
        except Exception:  # noqa: BLE001 - W&B must never break the run
            self.failed = True
            _log.warning("advisories could not be logged to W&B; the run goes on without them", exc_info=True)

    def _log(self, event: AdvisoryRaised | AdvisoryCleared) -> None:
        import wandb

        when = datetime.fromtimestamp(event.ts, UTC).isoformat(timespec="seconds")
        if isinstance(event, AdvisoryRaised):
            self.active[event.key] = event
            row: list[Any] = [when, event.step, event.key, event.rule, event.severity, "raised", event.message]
            row += [event.threshold, event.value]
        else:
            was = self.active.pop(event.key, None)
            row = [when, was.step if was else None, event.key, was.rule if was else None]
            row += [was.severity if was else None, "cleared", event.message, was.threshold if was else None, None]
        self.rows.append(row)
        self.run.summary[TABLE_KEY] = wandb.Table(columns=COLUMNS, data=self.rows, allow_mixed_types=True)
        self.run.summary[ACTIVE_KEY] = len(self.active)


def wandb_run_of(ml_logger: Any) -> Any | None:
    """The W&B run the cookbook's loggers write to, or None when W&B is off."""
    from tinker_cookbook.utils import ml_log

    for logger in getattr(ml_logger, "loggers", ()):
        if isinstance(logger, ml_log.WandbLogger) and getattr(logger, "run", None) is not None:
            return logger.run
    return None


def advisories_to_wandb(ml_logger: Any, bus: EventBus) -> Callable[[], None]:
    """Subscribe the W&B advisories table to the bus when W&B is on; returns the unsubscriber."""
    run = wandb_run_of(ml_logger)
    if run is None:
        return lambda: None
    advisories = WandbAdvisories(run)
    advisories.start()
    return bus.subscribe(advisories)
