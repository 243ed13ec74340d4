"""The gateway (the Tinker API the run samples and trains through): gateway-latency (its probes
answer much slower than they used to), gateway-probes (probes failing in a row) and sdk-retries
(the SDK retrying failed requests: the gateway is overloaded or flaky before anything fails).

Null hypotheses: gateway-latency, the probes' latency stays within its own baseline's range (5×
the median of the run's first probes, and never for less than 500 ms: a local engine's 2 ms
doubling is no news); gateway-probes, a probe fails now and then (one in a row is allowed); an
error, the gateway is down and every group in flight with it: a person is needed now."""

from __future__ import annotations

import statistics
from collections import deque
from typing import Any

from tbconsole.advisories.base import Advice, Rule
from tbconsole.advisories.facts import SdkRetry
from tbconsole.advisories.thresholds import Thresholds
from tbconsole.record import events as ev
from tbconsole.record.enums import LogLevel

RECENT = 3  # probes that make "now"; the rest of the answered probes are the baseline


class GatewayLatency(Rule):
    """Warning: the median of the last 3 probes is ``advise.latency_factor`` × the baseline (the
    median of the answered probes before them, at least ``advise.latency_baseline_probes``) and
    over ``advise.latency_floor_ms``."""

    name = "gateway-latency"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.latencies: list[float] = []

    def observe(self, item: Any) -> None:
        if not (isinstance(item, ev.GatewayHealth) and item.ok and item.latency_ms is not None):
            return
        self.latencies.append(item.latency_ms)
        t = self.t
        baseline_probes = self.latencies[:-RECENT]
        if len(baseline_probes) < t.latency_baseline_probes:
            return
        baseline = statistics.median(baseline_probes)
        now = statistics.median(self.latencies[-RECENT:])
        factor = now / baseline if baseline > 0 else float("inf")
        if now <= t.latency_floor_ms or factor <= t.latency_factor:
            self.release(self.name, f"gateway probes answer in {now:.0f} ms again (baseline {baseline:.0f} ms)")
            return
        # Re-raised only when the factor's order of magnitude moves (5×, 10×, 20×, 50×…): not per probe.
        band = _band(factor)
        old = self.conditions.get(self.name)
        if old is not None and old.value is not None and _band(old.value) == band:
            return
        self.warn(
            message=(
                f"gateway probes answer in {now:.0f} ms, {band}× or more their baseline of {baseline:.0f} ms "
                "— the gateway is overloaded or the network slow; sampling and training will be too"
            ),
            threshold=f"advise.latency_factor={t.latency_factor:g}, advise.latency_floor_ms={t.latency_floor_ms:g}",
            value=round(factor, 2),
        )


BANDS = [m * 10**e for e in range(7) for m in (1, 2, 5)]  # 1, 2, 5, 10, 20, 50, …


def _band(factor: float) -> int:
    """The largest band not above ``factor`` (1 below 1)."""
    return max((b for b in BANDS if b <= factor), default=1)


class GatewayProbes(Rule):
    """Error (a person is needed now): ``advise.failed_probes`` probes in a row failed."""

    name = "gateway-probes"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.failed = 0
        self.last_error: str | None = None

    def observe(self, item: Any) -> None:
        if not isinstance(item, ev.GatewayHealth):
            return
        if item.ok:
            if self.failed:
                self.release(self.name, f"the gateway answers again ({item.latency_ms or 0:.0f} ms)")
            self.failed = 0
            return
        self.failed += 1
        if self.failed < self.t.failed_probes or self.name in self.conditions:
            return
        self.hold(
            Advice(
                key=self.name,
                severity=LogLevel.ERROR,
                message=_probes_message(item, self.failed),
                threshold=f"advise.failed_probes={self.t.failed_probes}",
                value=float(self.failed),
            )
        )


def _probes_message(item: ev.GatewayHealth, failed: int) -> str:
    """Down or (re)starting, and what the run does about it: rides the outage out up to its limit
    (the groups run again once the gateway answers), or cancels the groups until it answers."""
    what = "is restarting (it answers 503: loading)" if item.starting else "is down"
    head = f"the gateway at {item.base_url} {what}: {failed} probes in a row failed ({item.error or 'no answer'})"
    if item.outage_limit_s:
        return (
            f"{head} — groups in flight are cancelled unscored and run again once it answers; the run "
            f"stops if it is still down {item.outage_limit_s:g} s after its first failed probe (gateway.outage_limit)"
        )
    return f"{head} — groups in flight are cancelled until it answers; check the gateway"


# What the SDK logs when it sends a request again after a failure (an HTTP status it retries,
# 408/409/429/5xx, or a connection error; or its retry handler after an exception). Its reason
# lines ("Retrying due to status code 503") come just before the first and are not counted twice.
RETRY_AFTER_FAILURE = ("Retrying request to ", "Retrying in ")
# The long poll: a future not done yet answers "try_again" and the SDK asks again. A healthy
# engine answers every slow request (a training step, a checkpoint) this way: no failure.
LONG_POLL = "because of try_again"


def is_failure_retry(message: str) -> bool:
    """A retry after a failed request (counted), not the long poll's "ask again" (not counted)."""
    return LONG_POLL not in message and message.startswith(RETRY_AFTER_FAILURE)


class SdkRetries(Rule):
    """H0: the gateway answers; a request fails now and then (a dropped connection), as healthy
    runs show a few times a day at most (the calibration corpus: none). Fires when requests fail
    and are retried ``advise.sdk_retries`` times within ``advise.sdk_retry_window_s``. The SDK's
    long-poll retries (``try_again``: the answer is not ready yet) are the engine working, and are
    not counted; the reason the last failure gave is quoted."""

    name = "sdk-retries"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.retries: deque[float] = deque()
        self.last = ""
        self.reason = ""

    def observe(self, item: Any) -> None:
        if not isinstance(item, SdkRetry):
            return
        if LONG_POLL in item.message:
            return
        if not is_failure_retry(item.message):
            if item.message.startswith("Retrying due to") or item.message.startswith("Retrying as"):
                self.reason = item.message  # why the retry that follows is made
            return
        self.retries.append(item.ts)
        self.last = f"{self.reason}; {item.message}" if self.reason else item.message
        self.reason = ""
        self.tick(item.ts)

    def tick(self, now: float) -> None:
        t = self.t
        while self.retries and self.retries[0] < now - t.sdk_retry_window_s:
            self.retries.popleft()
        count = len(self.retries)
        if count < t.sdk_retries:
            if self.name in self.conditions:
                self.release(self.name, f"no more than {count} SDK retries in the last {t.sdk_retry_window_s:g} s")
            return
        if self.name in self.conditions:
            return
        self.warn(
            message=(
                f"the Tinker SDK retried {count} failed requests in the last {t.sdk_retry_window_s:g} s "
                f"(last: {self.last[:160]}) — the gateway is overloaded or flaky"
            ),
            threshold=f"advise.sdk_retries={t.sdk_retries} in advise.sdk_retry_window_s={t.sdk_retry_window_s:g}",
            value=float(count),
        )
