"""tbconsole.common.stats.percentile: one of the samples, at the rank its convention gives."""

import random

import pytest

from tbconsole.common.stats import percentile


def test_nearest_is_the_sample_nearest_its_linear_position():
    samples = [5.0, 1.0, 4.0, 2.0, 3.0]  # any order
    assert [percentile(samples, q) for q in (0, 25, 50, 75, 100)] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 3.0  # 1.5 rounds half to even: index 2
    assert percentile(range(1, 101), 99) == 99  # index round(98.01)
    assert percentile([7.0], 99) == 7.0


def test_floor_is_the_first_sample_past_the_share():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50, "floor") == 3.0
    assert percentile(range(1, 101), 99, "floor") == 100  # index 99
    assert percentile(range(1, 101), 95, "floor") == 96
    assert percentile(range(1, 21), 100, "floor") == 20  # never past the last
    assert percentile([7.0], 95, "floor") == 7.0


def test_both_pick_what_the_readers_they_replaced_picked():
    """The benchmarks' ``round(q/100·(n−1))`` and the soak's ``min(n−1, int(0.95·n))``."""
    rng = random.Random(7)
    for n in range(1, 400):
        samples = [rng.random() for _ in range(n)]
        ordered = sorted(samples)
        for q in (50, 95, 99):
            assert percentile(samples, q) == ordered[min(n - 1, max(0, round(q / 100 * (n - 1))))]
        assert percentile(samples, 95, "floor") == ordered[min(n - 1, int(0.95 * n))]


def test_no_samples_and_an_unknown_method_are_errors():
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 50, "linear")
