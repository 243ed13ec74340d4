"""Benchmarks: `tbconsole bench NAME`. Each prints its figures beside a baseline measured in
the same run, and the ratio between them, so numbers from different machines compare."""

import statistics


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def describe_ms(samples: list[float]) -> str:
    return (
        f"p50 {percentile(samples, 50) * 1e3:7.2f} ms  p99 {percentile(samples, 99) * 1e3:7.2f} ms  "
        f"mean {statistics.fmean(samples) * 1e3:7.2f} ms"
    )
