"""Percentiles of timing samples: the one home of picking the q-th percentile of a list.

A percentile here is always one of the samples (no interpolation between two), so a figure is
a time that was measured. Where it sits in the sorted samples is a convention; two are in use:

- ``"nearest"``: the sample at index ``round(q/100 · (n−1))`` (numpy's "nearest"): the benchmarks'
  p50 / p99 (``tbconsole.bench``);
- ``"floor"``: the sample at index ``⌊q/100 · n⌋`` (the last one at most): the first sample with
  more than a share q/100 of them at or below it. The soak's per-step p95.

They differ by at most one rank; a figure keeps its convention so that it compares with its own
earlier runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

Method = Literal["nearest", "floor"]


def percentile(samples: Iterable[float], q: float, method: Method = "nearest") -> float:
    """The ``q``-th percentile (0 to 100) of ``samples``, one of them (see the module's
    conventions); ValueError for no samples."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("a percentile of no samples")
    n = len(ordered)
    if method == "nearest":
        index = round(q / 100 * (n - 1))
    elif method == "floor":
        index = int(q / 100 * n)
    else:
        raise ValueError(f"unknown percentile method {method!r}")
    return ordered[min(n - 1, max(0, index))]
