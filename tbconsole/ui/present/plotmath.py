"""Pure binning and scaling for the console's text plots (sparklines, bars, histograms).

No Textual here: these are unit-tested on their own; widgets turn the results into styled text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

SPARK = "▁▂▃▄▅▆▇█"
EIGHTHS = " ▏▎▍▌▋▊▉█"


def finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def resample(values: Sequence[float], width: int) -> list[float]:
    """At most ``width`` points: the values themselves when they fit, else bucket means
    (oldest to newest, every value in exactly one bucket)."""
    values = list(values)
    if width <= 0:
        return []
    n = len(values)
    if n <= width:
        return values
    out = []
    for i in range(width):
        lo = i * n // width
        hi = (i + 1) * n // width
        bucket = values[lo:hi]
        out.append(sum(bucket) / len(bucket))
    return out


def scale(values: Sequence[float], levels: int, lo: float | None = None, hi: float | None = None) -> list[int]:
    """Map each value to 0..levels-1 between lo and hi (the data's min/max by default). A flat
    series sits in the middle."""
    if not values:
        return []
    lo = min(values) if lo is None else lo
    hi = max(values) if hi is None else hi
    if hi - lo <= 1e-12 * max(1.0, abs(hi), abs(lo)):
        return [levels // 2 if hi != 0 or lo != 0 else 0 for _ in values]
    out = []
    for v in values:
        f = (min(max(v, lo), hi) - lo) / (hi - lo)
        out.append(min(levels - 1, int(f * (levels - 1) + 0.5)))
    return out


def sparkline(values: Sequence[float | None], width: int, lo: float | None = None, hi: float | None = None) -> str:
    """A one-line trend of the last values, ``width`` characters at most."""
    points = resample(finite(values), width)
    return "".join(SPARK[i] for i in scale(points, len(SPARK), lo, hi))


def histogram(
    values: Sequence[float | None], bins: int, lo: float | None = None, hi: float | None = None
) -> tuple[list[int], list[float]]:
    """Counts per bin and the bins' edges (``bins + 1`` of them). Values outside [lo, hi] go to
    the end bins; the last bin is closed on the right."""
    data = finite(values)
    if bins <= 0:
        return [], []
    if lo is None:
        lo = min(data) if data else 0.0
    if hi is None:
        hi = max(data) if data else 1.0
    if hi <= lo:
        hi = lo + 1.0
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in data:
        i = int((v - lo) / width)
        counts[min(bins - 1, max(0, i))] += 1
    edges = [lo + width * i for i in range(bins + 1)]
    return counts, edges


def bar(value: float, maximum: float, width: int) -> str:
    """A horizontal bar in eighths of a cell: ``width`` cells at ``maximum``."""
    if width <= 0 or maximum <= 0 or value <= 0:
        return ""
    eighths = int(round(min(value, maximum) / maximum * width * 8))
    full, part = divmod(eighths, 8)
    return "█" * full + (EIGHTHS[part] if part else "")


def reward_bins(values: Sequence[float | None]) -> tuple[list[int], list[str]]:
    """Bins for a batch's rewards: one per distinct value when there are few (binary 0/1
    rewards are the usual case), else ten over [min, max]. Returns counts and labels."""
    data = finite(values)
    distinct = sorted(set(data))
    if 0 < len(distinct) <= 6:
        return [sum(1 for v in data if v == d) for d in distinct], [f"{d:g}" for d in distinct]
    counts, edges = histogram(
        data, 10, 0.0 if data and min(data) >= 0 else None, 1.0 if data and max(data) <= 1 and min(data) >= 0 else None
    )
    return counts, [f"{edges[i]:.2g}" for i in range(len(counts))]
