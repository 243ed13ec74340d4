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

``defer_wandb``: wandb is imported when it is first used, not when the cookbook's ``ml_log`` is
(which does ``import wandb`` at its top). Its import costs time and leaves two temporary folders
for the process's life (``tmp…wandb-media``, ``tmp…wandb-artifacts``, removed only at a clean
exit); a run with W&B off never needs it.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import threading
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tbconsole.common.formatting import format_iso_time

if TYPE_CHECKING:
    from tbconsole.record.events import AdvisoryCleared, AdvisoryRaised, Event, EventBus

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
        from tbconsole.record.events import AdvisoryCleared, AdvisoryRaised

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

        from tbconsole.record.events import AdvisoryRaised

        when = format_iso_time(event.ts, timespec="seconds")
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


# -- wandb on first use ---------------------------------------------------------------------------

WANDB = "wandb"
_load_lock = threading.Lock()


class _DeferredModule(types.ModuleType):
    """Stands in for a module in ``sys.modules`` until one of its attributes is asked for: then
    the real module is imported (and takes its place there) and every attribute is read from it.
    ``__spec__`` and ``__file__`` are the real one's, so ``importlib.util.find_spec`` still finds
    the package and ``inspect.getmodule`` does not load it."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_load_real(self), name)


def _load_real(stand_in: types.ModuleType) -> types.ModuleType:
    with _load_lock:
        current = sys.modules.get(stand_in.__name__)
        if current is not None and current is not stand_in:
            return current
        del sys.modules[stand_in.__name__]
        try:
            return importlib.import_module(stand_in.__name__)
        except BaseException:
            sys.modules[stand_in.__name__] = stand_in  # as it was: the next use fails the same way
            raise


def defer_wandb() -> None:
    """Put a stand-in for wandb in ``sys.modules`` (once, before anything imports it), so that the
    cookbook's ``import wandb`` costs nothing until a W&B run is started. Nothing when wandb is
    already imported or not installed (the cookbook then says W&B is unavailable, as before)."""
    if WANDB in sys.modules:
        return
    spec = importlib.util.find_spec(WANDB)
    if spec is None:
        return
    stand_in = _DeferredModule(WANDB)
    stand_in.__spec__ = spec
    # Read of every module by inspect.getmodule (torch does it at import, for each op it
    # registers): answered without loading. No __path__: importing a submodule loads wandb first.
    stand_in.__file__ = spec.origin
    sys.modules[WANDB] = stand_in
