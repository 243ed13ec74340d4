"""Pure binning and scaling for the console's text plots (sparklines, bars, histograms, overlays).

No Textual here: these are unit-tested on their own; widgets turn the results into styled text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

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


OVERLAP = -1  # an overlay cell where points of more than one series fall


@dataclass(frozen=True)
class Overlay:
    """Several series on one grid: ``cells[row][col]`` is the index of the series with a point
    there (row 0 at the top), ``OVERLAP`` where several have, None where none has. The axes'
    ranges are what the grid spans."""

    cells: list[list[int | None]]
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float


def overlay(
    series: Sequence[Sequence[tuple[float, float]]],
    width: int,
    height: int,
    lo: float | None = None,
    hi: float | None = None,
) -> Overlay | None:
    """Series of (x, y) points on one ``width`` × ``height`` grid with shared axes (None: no
    point at all). The x range is every series' points; points of one series that share a column
    are averaged (as ``resample`` does); y is scaled as ``scale`` does, between lo and hi (the
    data's min/max by default)."""
    points = [[(x, y) for x, y in s if math.isfinite(y)] for s in series]
    xs = [x for s in points for x, _ in s]
    if not xs or width <= 0 or height <= 0:
        return None
    x_lo, x_hi = min(xs), max(xs)
    ys = [y for s in points for _, y in s]
    y_lo = min(ys) if lo is None else lo
    y_hi = max(ys) if hi is None else hi

    def column(x: float) -> int:
        return 0 if x_hi == x_lo else int((x - x_lo) / (x_hi - x_lo) * (width - 1) + 0.5)

    cells: list[list[int | None]] = [[None] * width for _ in range(height)]
    for index, s in enumerate(points):
        buckets: dict[int, list[float]] = {}
        for x, y in s:
            buckets.setdefault(column(x), []).append(y)
        means = {col: sum(ys) / len(ys) for col, ys in buckets.items()}
        levels = scale(list(means.values()), height, y_lo, y_hi)
        for col, level in zip(means, levels, strict=True):
            row = height - 1 - level
            cells[row][col] = index if cells[row][col] in (None, index) else OVERLAP
    return Overlay(cells, x_lo, x_hi, y_lo, y_hi)
