"""Gateway health: a fast probe before training, then a watch that says when the gateway is down.

The SDK alone retries a dead gateway for five minutes before failing; a short probe of
``GET {base_url}/api/v1/healthz`` fails in seconds with a message instead. During the run,
``GatewayWatch`` probes every few seconds (and at once when the proxy reports a failed model
call); two failed probes in a row (four when they only time out) mark the gateway down, which
cancels the groups in flight as an infrastructure failure (see ``rollout``): no trial is scored
against a dead gateway.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import NamedTuple

import aiohttp

from tbconsole.record.events import Event, GatewayHealth

PROBE_TIMEOUT_SEC = 3.0
INTERVAL_SEC = 5.0  # between probes while the gateway answers
RETRY_SEC = 1.0  # between probes once one failed, to confirm quickly
FAILURES_TO_DOWN = 2  # refused or erroring: one can be a hiccup; two in a row is an outage
# A probe that only timed out is weaker evidence: a gateway busy with a long train step (or a
# machine under load) can be slow to answer, and calling it down cancels every group in flight.
TIMEOUTS_TO_DOWN = 4


class GatewayUnreachable(RuntimeError):
    pass


def resolve_base_url(base_url: str | None) -> str:
    from tinker.lib.base_url import resolve_base_url as sdk_resolve  # the SDK's own fallback chain

    return sdk_resolve(base_url).rstrip("/")


class Probe(NamedTuple):
    latency_ms: float
    error: str | None  # None: the gateway answered 200
    timed_out: bool = False


async def probe(base_url: str, timeout: float = PROBE_TIMEOUT_SEC) -> Probe:
    started = time.perf_counter()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            async with session.get(f"{base_url}/api/v1/healthz") as response:
                await response.read()
                latency = (time.perf_counter() - started) * 1000
                if response.status != 200:
                    return Probe(latency, f"healthz answered HTTP {response.status}")
                return Probe(latency, None)
    except TimeoutError:
        return Probe((time.perf_counter() - started) * 1000, f"no answer within {timeout:g} s", timed_out=True)
    except aiohttp.ClientError as exc:
        return Probe((time.perf_counter() - started) * 1000, f"{type(exc).__name__}: {exc}")


def unreachable_message(base_url: str, error: str) -> str:
    from tbconsole.common.formatting import command_line

    return (
        f"The Tinker gateway at {base_url} is not answering ({error}). Start it (for the "
        f"local engine: {command_line('engine')}), or fix config.base_url."
    )


async def check_reachable(base_url: str, publish: Callable[[Event], None]) -> None:
    latency, error, _ = await probe(base_url)
    publish(GatewayHealth(base_url=base_url, ok=error is None, latency_ms=latency, error=error))
    if error is not None:
        raise GatewayUnreachable(unreachable_message(base_url, error))


class GatewayWatch:
    """Whether the gateway answers, kept current by ``run()`` (a background task).

    ``down`` is set once ``FAILURES_TO_DOWN`` probes in a row failed (``TIMEOUTS_TO_DOWN`` when
    they only timed out) and cleared by the next good one; ``suspect()`` (a failed model call)
    asks for a probe now instead of at the next interval. ``wait_up()`` returns once the gateway
    answers again."""

    def __init__(
        self,
        base_url: str,
        publish: Callable[[Event], None],
        *,
        interval: float = INTERVAL_SEC,
        retry: float = RETRY_SEC,
        failures_to_down: int = FAILURES_TO_DOWN,
        timeouts_to_down: int = TIMEOUTS_TO_DOWN,
        probe_timeout: float = PROBE_TIMEOUT_SEC,
    ):
        self.base_url = base_url
        self._publish = publish
        self.interval = interval
        self.retry = retry
        self.failures_to_down = failures_to_down
        self.timeouts_to_down = timeouts_to_down
        self.probe_timeout = probe_timeout
        self._timeouts = 0
        self.down = asyncio.Event()
        self.up = asyncio.Event()
        self.up.set()
        self.error: str | None = None
        self._failures = 0
        self._wake = asyncio.Event()

    def suspect(self) -> None:
        """A model call failed: probe now."""
        self._wake.set()

    async def check(self) -> bool:
        """One probe; updates ``down``/``up``. True when the gateway answered."""
        latency, error, timed_out = await probe(self.base_url, self.probe_timeout)
        self._publish(GatewayHealth(base_url=self.base_url, ok=error is None, latency_ms=latency, error=error))
        if error is None:
            self._failures = self._timeouts = 0
            self.error = None
            self.down.clear()
            self.up.set()
            return True
        self._failures += 1
        self._timeouts = self._timeouts + 1 if timed_out else 0
        self.error = error
        refused = self._failures - self._timeouts  # failures in this run that were not timeouts
        if (refused and self._failures >= self.failures_to_down) or self._timeouts >= self.timeouts_to_down:
            self.up.clear()
            self.down.set()
        return False

    @property
    def reason(self) -> str:
        return unreachable_message(self.base_url, self.error or "no answer")

    async def run(self) -> None:
        """Probe until cancelled: every ``interval`` while healthy, every ``retry`` after a failure."""
        while True:
            wait = self.retry if self._failures else self.interval
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
            except TimeoutError:
                pass
            self._wake.clear()
            await self.check()

    async def wait_up(self) -> None:
        await self.up.wait()
