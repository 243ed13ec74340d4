"""Gateway health: a fast probe before training, then samples during the run.

The SDK alone retries a dead gateway for five minutes before failing; a short probe of
``GET {base_url}/api/v1/healthz`` fails in seconds with a message instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import aiohttp

from tbconsole.events import Event, GatewayHealth

PROBE_TIMEOUT_SEC = 3.0


class GatewayUnreachable(RuntimeError):
    pass


def resolve_base_url(base_url: str | None) -> str:
    from tinker.lib.base_url import resolve_base_url as sdk_resolve  # the SDK's own fallback chain

    return sdk_resolve(base_url).rstrip("/")


async def probe(base_url: str, timeout: float = PROBE_TIMEOUT_SEC) -> tuple[float, str | None]:
    """(latency in ms, error or None)."""
    started = time.perf_counter()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            async with session.get(f"{base_url}/api/v1/healthz") as response:
                await response.read()
                latency = (time.perf_counter() - started) * 1000
                if response.status != 200:
                    return latency, f"healthz answered HTTP {response.status}"
                return latency, None
    except TimeoutError:
        return (time.perf_counter() - started) * 1000, f"no answer within {timeout:g} s"
    except aiohttp.ClientError as exc:
        return (time.perf_counter() - started) * 1000, f"{type(exc).__name__}: {exc}"


async def check_reachable(base_url: str, publish: Callable[[Event], None]) -> None:
    latency, error = await probe(base_url)
    publish(GatewayHealth(base_url=base_url, ok=error is None, latency_ms=latency, error=error))
    if error is not None:
        raise GatewayUnreachable(
            f"The Tinker gateway at {base_url} is not answering ({error}). Start it (for the "
            "local engine: tbconsole engine), or fix config.base_url."
        )


async def monitor(base_url: str, publish: Callable[[Event], None], interval: float = 5.0,
                  sampler_path: Callable[[], str | None] | None = None) -> None:
    """Publish a health sample every ``interval`` seconds until cancelled."""
    while True:
        await asyncio.sleep(interval)
        latency, error = await probe(base_url)
        publish(GatewayHealth(base_url=base_url, ok=error is None, latency_ms=latency, error=error,
                              sampler_path=sampler_path() if sampler_path else None))
