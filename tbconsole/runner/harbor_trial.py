"""Run one Harbor trial to its end: the one place tbconsole drives Harbor's ``Trial``, for the
training groups (``rollout``) and for ``tbconsole trial`` alike. What the result means is
``outcomes.judge``'s business, not this module's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tbconsole.record.enums import TrialPhase

PhaseCallback = Callable[[TrialPhase], Awaitable[None]]

HARBOR_PHASES = {  # Harbor's trial events → the console's phases
    "environment-start": TrialPhase.ENVIRONMENT,
    "agent-start": TrialPhase.AGENT,
    "verification-start": TrialPhase.VERIFYING,
}
SANDBOX_STOP_TIMEOUT_SEC = 60


class TrialNotCreated(RuntimeError):
    """Harbor refused the trial before it started (its task or environment definition). The
    message is Harbor's; ``exception_type`` names what Harbor raised."""

    def __init__(self, exc: Exception):
        super().__init__(str(exc))
        self.exception_type = type(exc).__name__


async def run_harbor_trial(
    config: Any, on_phase: PhaseCallback | None = None, on_created: Callable[[Any], None] | None = None
) -> Any:
    """Run a Harbor ``TrialConfig`` and return its ``TrialResult``. Returns only once the trial's
    sandbox is gone, also when cancelled (errors: TrialNotCreated). ``on_created(trial)``: once
    Harbor has made the trial (its resolved timeouts are known), before it runs."""
    from harbor.trial.hooks import TrialEvent
    from harbor.trial.trial import Trial

    try:
        trial = await Trial.create(config)
    except Exception as exc:  # a task or environment definition Harbor refuses
        raise TrialNotCreated(exc) from exc
    if on_created is not None:
        on_created(trial)
    if on_phase is not None:
        for harbor_event, phase in HARBOR_PHASES.items():
            trial.add_hook(TrialEvent(harbor_event), _announce(on_phase, phase))
    try:
        return await trial.run()
    finally:
        # Also after a normal return: Harbor swallows a cancel that lands while it stops the
        # sandbox and returns, with the stop still running in a shielded task.
        await _sandbox_gone(trial)


def _announce(on_phase: PhaseCallback, phase: TrialPhase):
    async def hook(_event) -> None:
        await on_phase(phase)

    return hook


async def _sandbox_gone(trial, timeout: float = SANDBOX_STOP_TIMEOUT_SEC) -> None:
    """Harbor may finish stopping a trial's sandbox in the background (after a cancel): wait for
    it, so a caller that raised leaves no sandbox behind when it returns."""
    waiter = getattr(getattr(trial, "agent_environment", None), "wait_stopped", None)
    if waiter is not None:
        try:
            await asyncio.wait_for(waiter(), timeout)
        except TimeoutError:
            pass
