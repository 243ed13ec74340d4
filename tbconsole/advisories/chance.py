"""How likely what a run shows is by chance: the few exact tail probabilities the rules test their
null hypotheses with. Exact (no normal approximation): the counts involved are small (a handful
of groups, a few steps), which is where approximations are worst.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations


def at_least(k: int, chances: Sequence[float]) -> float:
    """P(at least ``k`` of independent events happen), event i with probability ``chances[i]``
    (the Poisson-binomial tail; ``k`` <= 0: 1)."""
    if k <= 0:
        return 1.0
    # dist[j]: probability that exactly j of the events so far happened
    dist = [1.0]
    for q in chances:
        q = min(1.0, max(0.0, q))
        dist = [
            (dist[j] if j < len(dist) else 0.0) * (1 - q) + (dist[j - 1] * q if j >= 1 else 0.0)
            for j in range(len(dist) + 1)
        ]
    return min(1.0, max(0.0, sum(dist[k:])))


def all_fail(p: float, n: int) -> float:
    """P(every one of ``n`` trials fails) when each solves with probability ``p``."""
    return (1 - min(1.0, max(0.0, p))) ** n


def all_same(p: float, n: int) -> float:
    """P(all ``n`` trials of a group get the same binary outcome): p^n + (1-p)^n."""
    p = min(1.0, max(0.0, p))
    return p**n + (1 - p) ** n


def lower_ranks(recent: Sequence[float], earlier: Sequence[float]) -> float:
    """One-sided exact rank test (Mann-Whitney): P(the ``recent`` values sit at least this low
    among all of them) when the order of all the values is chance (no trend). Ties count half.
    Enumerates the splits: meant for a few values a side (10 of 5+5 is 252 splits)."""
    values = [*recent, *earlier]
    m = len(recent)
    if not recent or not earlier:
        return 1.0

    def u(chosen: Sequence[float], rest: Sequence[float]) -> float:
        return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in chosen for b in rest)

    observed = u(recent, earlier)
    splits = low = 0
    for pick in combinations(range(len(values)), m):
        chosen = [values[i] for i in pick]
        rest = [values[i] for i in range(len(values)) if i not in pick]
        splits += 1
        low += u(chosen, rest) <= observed + 1e-9
    return low / splits
