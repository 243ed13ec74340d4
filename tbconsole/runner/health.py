"""Gateway health: a probe before training, then a watch that says when the gateway is down.

Before anything starts (``wait_until_ready``): the SDK alone retries a dead gateway for five
minutes before failing; a short probe of ``GET {base_url}/api/v1/healthz`` fails in seconds with
a message instead. A gateway answering 503 is *starting*, not dead (the Miles gateway answers 503
until its trainer exists, which for a 35B model takes minutes): it is waited for, with progress,
up to ``gateway.start_timeout``. Then ``check_sdk`` asks the gateway's ``/api/v1/client/config``
whether it serves the installed SDK's version, so a gateway that speaks another wire format
refuses the run before a sandbox starts (docs/gateways.md).

During the run, ``GatewayWatch`` probes every few seconds (and at once when the proxy reports a
failed model call); two failed probes in a row (four when they only time out) mark the gateway
down, which cancels the groups in flight as an infrastructure failure (see ``rollout``): no
trial is scored against a dead gateway. The groups run again once it answers, if that is within
``gateway.outage_limit`` of the outage's first failed probe; past it the run stops.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import NamedTuple

import aiohttp
import chz

from tbconsole.common.formatting import format_duration
from tbconsole.common.inert import one_line
from tbconsole.record.enums import LogLevel
from tbconsole.record.events import Event, GatewayHealth, LogLine

PROBE_TIMEOUT_SEC = 3.0
INTERVAL_SEC = 5.0  # between probes while the gateway answers
RETRY_SEC = 1.0  # between probes once one failed, to confirm quickly
FAILURES_TO_DOWN = 2  # refused or erroring: one can be a hiccup; two in a row is an outage
# A probe that only timed out is weaker evidence: a gateway busy with a long train step (or a
# machine under load) can be slow to answer, and calling it down cancels every group in flight.
TIMEOUTS_TO_DOWN = 4
STARTING_POLL_SEC = 2.0  # between probes of a starting gateway
STARTING_SAY_SEC = 15.0  # between the "still starting" lines


@chz.chz
class GatewayOptions:
    """Not in the upstream recipe: how long the run waits on its gateway (``gateway.*``)."""

    # Seconds a gateway that answers healthz 503 (starting: loading its model) is waited for
    # before the run is refused as unreachable. A closed port is refused at once.
    start_timeout: float = 1800.0
    # Seconds an outage (the gateway frozen or gone mid-run) is ridden out: the groups in flight
    # are cancelled unscored and run again once it answers. Past it the run stops. The default
    # is the Miles gateway's own stall timeout for an operation (600 s). 0: never ride one out
    # (the error decision is asked, as for any other failed group).
    outage_limit: float = 600.0
    # The gateway serves only its latest weights and expires nothing (the Miles gateway): the
    # checkpoints save the training state only, without a TTL, and each batch samples the latest
    # weights published without a name (runner.checkpoints). Left unset, the run asks the gateway
    # at its start (runner.checkpoints.serves_older_weights) and turns it on where it refuses.
    latest_weights_only: bool = False


def options_problems(options: GatewayOptions) -> list[str]:
    problems = []
    if not options.start_timeout >= 0:
        problems.append("gateway.start_timeout must be 0 or more seconds")
    if not options.outage_limit >= 0:
        problems.append("gateway.outage_limit must be 0 or more seconds")
    return problems


class GatewayUnreachable(RuntimeError):
    pass


class GatewayRefusesSdk(RuntimeError):
    """The gateway answered that it does not serve the installed SDK's version (a usage error:
    the run needs another gateway or another SDK; nothing was started)."""


def resolve_base_url(base_url: str | None) -> str:
    from tinker.lib.base_url import resolve_base_url as sdk_resolve  # the SDK's own fallback chain

    return sdk_resolve(base_url).rstrip("/")


class Probe(NamedTuple):
    latency_ms: float
    error: str | None  # None: the gateway answered 200
    timed_out: bool = False
    starting: bool = False  # healthz answered 503: up, still starting


async def probe(base_url: str, timeout: float = PROBE_TIMEOUT_SEC) -> Probe:
    started = time.perf_counter()
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session:
            async with session.get(f"{base_url}/api/v1/healthz") as response:
                body = await response.read()
                latency = (time.perf_counter() - started) * 1000
                if response.status == 503:
                    said = _detail(body)
                    return Probe(latency, "starting: healthz answered HTTP 503" + (f" ({said})" if said else ""),
                                 starting=True)  # fmt: skip
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


def _detail(body: bytes, limit: int = 300) -> str:
    """What an error body says (its JSON ``detail`` or ``error``, else its text), one inert line."""
    import json

    text = body.decode("utf-8", "replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        text = str(parsed.get("detail") or parsed.get("error") or text)
    return one_line(" ".join(text.split()), limit)


async def wait_until_ready(
    base_url: str,
    publish: Callable[[Event], None],
    start_timeout: float,
    *,
    poll: float = STARTING_POLL_SEC,
    say_every: float = STARTING_SAY_SEC,
) -> None:
    """Return once healthz answers 200. A gateway that is not there (refused, no answer, another
    status) is refused at once (one probe: about 3 s at most); one answering 503 is starting and
    is waited for, with a line now and then, up to ``start_timeout`` seconds."""
    started = time.monotonic()
    said: float | None = None
    while True:
        latency, error, _, starting = await probe(base_url)
        publish(GatewayHealth(base_url=base_url, ok=error is None, latency_ms=latency, error=error, starting=starting))
        if error is None:
            if said is not None:
                publish(LogLine(level=LogLevel.INFO, message=f"the gateway at {base_url} is ready "
                                f"after {format_duration(time.monotonic() - started)} of starting"))  # fmt: skip
            return
        if not starting:
            raise GatewayUnreachable(unreachable_message(base_url, error))
        waited = time.monotonic() - started
        if waited >= start_timeout:
            raise GatewayUnreachable(
                f"The Tinker gateway at {base_url} is still starting after {format_duration(waited)} "
                f"({error}). Wait for it to finish loading its model, or let the run wait longer "
                f"with gateway.start_timeout=SECONDS (now {start_timeout:g})."
            )
        if said is None or time.monotonic() - said >= say_every:
            said = time.monotonic()
            publish(LogLine(level=LogLevel.INFO, message=f"the gateway at {base_url} is starting "
                            f"({error.removeprefix('starting: ')}); "
                            f"waiting, {format_duration(waited)} of {format_duration(start_timeout)} "
                            "(gateway.start_timeout)"))  # fmt: skip
        await asyncio.sleep(min(poll, max(0.0, start_timeout - waited)))


async def check_sdk(base_url: str, sdk_version: str | None = None, api_key: str | None = None) -> None:
    """Ask the gateway whether it serves this SDK (``POST /api/v1/client/config``, as the SDK's
    first call does): a 400 or 422 there means every later call would fail, so the run is
    refused now with the gateway's own words. A gateway without the route (404) or any other
    answer is left to the SDK."""
    from importlib.metadata import version as installed  # not ``import tinker``: that loads torch

    version = sdk_version or installed("tinker")
    key = api_key if api_key is not None else os.environ.get("TINKER_API_KEY")
    headers = {"X-API-Key": key} if key else {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_SEC * 3)) as session:
            async with session.post(
                f"{base_url}/api/v1/client/config", json={"sdk_version": version}, headers=headers
            ) as response:
                status, body = response.status, await response.read()
    except (TimeoutError, aiohttp.ClientError):
        return  # the health watch and the SDK say what is wrong with a gateway that stops answering
    if status in (400, 422):
        raise GatewayRefusesSdk(refuses_sdk_message(base_url, version, _detail(body)))


def refuses_sdk_message(base_url: str, version: str, detail: str) -> str:
    return (
        f"The gateway at {base_url} does not serve tinker {version}, the SDK installed here: "
        f"\u201c{detail or 'HTTP 400'}\u201d. The recipe runs on tinker-cookbook 0.5.8, which needs "
        "tinker 0.34 or newer, so it cannot train through this gateway as it is. Point "
        "config.base_url at a gateway that serves this SDK (hosted Tinker, the local engine, or a "
        "Miles gateway that serves tinker >= 0.34); docs/gateways.md lists which work together."
    )


class GatewayWatch:
    """Whether the gateway answers, kept current by ``run()`` (a background task).

    ``down`` is set once ``FAILURES_TO_DOWN`` probes in a row failed (``TIMEOUTS_TO_DOWN`` when
    they only timed out) and cleared by the next good one; ``suspect()`` (a failed model call)
    asks for a probe now instead of at the next interval. ``wait_up()`` returns once the gateway
    answers again; ``ride_out()`` waits for that within the outage limit."""

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
        outage_limit: float = GatewayOptions.outage_limit,
    ):
        self.base_url = base_url
        self._publish = publish
        self.interval = interval
        self.retry = retry
        self.failures_to_down = failures_to_down
        self.timeouts_to_down = timeouts_to_down
        self.probe_timeout = probe_timeout
        self.outage_limit = outage_limit
        self._timeouts = 0
        self.down = asyncio.Event()
        self.up = asyncio.Event()
        self.up.set()
        self.error: str | None = None
        # The outage under way: its first failed probe, wall clock (for events) and monotonic.
        self.down_since: float | None = None
        self._down_since_mono: float | None = None
        self._failures = 0
        self._wake = asyncio.Event()
        self._answered = asyncio.Event()  # set by each probe the gateway answers

    def suspect(self) -> None:
        """A model call failed: probe now."""
        self._wake.set()

    async def check(self) -> bool:
        """One probe; updates ``down``/``up``. True when the gateway answered."""
        latency, error, timed_out, starting = await probe(self.base_url, self.probe_timeout)
        if error is None:
            self._failures = self._timeouts = 0
            self.error = None
            self.down_since = self._down_since_mono = None
            self.down.clear()
            self.up.set()
            self._answered.set()
        else:
            if self.down_since is None:
                self.down_since, self._down_since_mono = time.time(), time.monotonic()
            self._failures += 1
            self._timeouts = self._timeouts + 1 if timed_out else 0
            self.error = error
            refused = self._failures - self._timeouts  # failures in this run that were not timeouts
            if (refused and self._failures >= self.failures_to_down) or self._timeouts >= self.timeouts_to_down:
                self.up.clear()
                self.down.set()
        self._publish(
            GatewayHealth(
                base_url=self.base_url, ok=error is None, latency_ms=latency, error=error, starting=starting,
                down_since=self.down_since, outage_limit_s=self.outage_limit if error is not None else None,
            )
        )  # fmt: skip
        return error is None

    @property
    def reason(self) -> str:
        return unreachable_message(self.base_url, self.error or "no answer")

    def down_for(self) -> float:
        """Seconds since the outage under way began (0 while the gateway answers)."""
        return 0.0 if self._down_since_mono is None else time.monotonic() - self._down_since_mono

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

    async def confirm_down(self) -> bool:
        """After a failed model call: probe now and wait for the watch's verdict — True once it
        marks the gateway down, False once a probe answers (or, with no watch running, after as
        long as a verdict can take)."""
        if self.down.is_set():
            return True
        self._answered.clear()
        self.suspect()
        verdicts = [asyncio.create_task(self.down.wait()), asyncio.create_task(self._answered.wait())]
        longest = (self.timeouts_to_down + 1) * (self.probe_timeout + self.retry) + self.interval
        try:
            await asyncio.wait(verdicts, timeout=longest, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for verdict in verdicts:
                verdict.cancel()
        return self.down.is_set()

    async def ride_out(self) -> bool:
        """Wait for the gateway to answer again, as long as the outage under way has lasted less
        than ``outage_limit``: True once it answers, False when the limit passed first (or is 0)."""
        if self.up.is_set():
            return True
        left = self.outage_limit - self.down_for()
        if left <= 0:
            return False
        try:
            await asyncio.wait_for(self.up.wait(), left)
        except TimeoutError:
            return False
        return True
