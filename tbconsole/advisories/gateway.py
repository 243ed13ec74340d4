"""The gateway (the Tinker API the run samples and trains through): gateway-latency (its probes
answer much slower than they used to), gateway-probes (probes failing in a row) and sdk-retries
(the SDK retrying requests: the gateway is overloaded or flaky before anything fails)."""

from __future__ import annotations

import statistics
from collections import deque
from typing import Any

from tbconsole import events as ev
from tbconsole.advisories.base import Advice, Rule
from tbconsole.advisories.facts import SdkRetry
from tbconsole.advisories.thresholds import Thresholds
from tbconsole.enums import AdvisorySeverity

RECENT = 3  # probes that make "now"; the rest of the answered probes are the baseline


class GatewayLatency(Rule):
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
                severity=AdvisorySeverity.ERROR,
                message=(
                    f"the gateway at {item.base_url} failed {self.failed} probes in a row: {item.error or 'no answer'} "
                    "— groups in flight are cancelled until it answers; check the gateway"
                ),
                threshold=f"advise.failed_probes={self.t.failed_probes}",
                value=float(self.failed),
            )
        )


class SdkRetries(Rule):
    name = "sdk-retries"

    def __init__(self, thresholds: Thresholds):
        super().__init__(thresholds)
        self.retries: deque[float] = deque()
        self.last = ""

    def observe(self, item: Any) -> None:
        if isinstance(item, SdkRetry):
            self.retries.append(item.ts)
            self.last = item.message
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
                f"the Tinker SDK retried {count} requests in the last {t.sdk_retry_window_s:g} s "
                f"(last: {self.last[:120]}) — the gateway is overloaded or flaky"
            ),
            threshold=f"advise.sdk_retries={t.sdk_retries} in advise.sdk_retry_window_s={t.sdk_retry_window_s:g}",
            value=float(count),
        )
