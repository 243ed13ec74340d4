"""The console's state: a pure function of the event stream.

``model`` holds what is known about a run (``RunState`` and its parts); ``reducer`` folds events
into it (``reduce``, ``reduce_all``), with ``batches`` for batches, groups and trials. Live,
attach and replay all build their view this way; widgets only render what is here, and how it
is worded lives in ``tbconsole.ui.present.wording``.
"""

from tbconsole.state.batches import clip
from tbconsole.state.model import (
    KEEP_STEPS,
    LATENCY_LEN,
    LOG_LEN,
    MAX_TEXT,
    MAX_TURNS,
    PANELS,
    TREND_LEN,
    Counters,
    GatewayState,
    GroupState,
    RunState,
    StepSummary,
    TaskStats,
    TrialState,
    Turn,
    family_stats,
    task_family,
)
from tbconsole.state.reducer import reduce, reduce_all

__all__ = [
    "KEEP_STEPS",
    "LATENCY_LEN",
    "LOG_LEN",
    "MAX_TEXT",
    "MAX_TURNS",
    "PANELS",
    "TREND_LEN",
    "Counters",
    "GatewayState",
    "GroupState",
    "RunState",
    "StepSummary",
    "TaskStats",
    "TrialState",
    "Turn",
    "family_stats",
    "task_family",
    "clip",
    "reduce",
    "reduce_all",
]
