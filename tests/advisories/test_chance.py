"""The exact tail probabilities the rules test their null hypotheses with, against hand counts."""

import math

import pytest

from tbconsole.advisories.chance import all_fail, all_same, at_least, lower_ranks


def test_poisson_binomial_tail():
    assert at_least(0, [0.3]) == 1.0 and at_least(1, []) == 0.0
    assert at_least(1, [0.5, 0.5]) == pytest.approx(0.75)
    assert at_least(2, [0.5, 0.2]) == pytest.approx(0.1)
    # equal chances: the binomial tail
    assert at_least(3, [0.3] * 5) == pytest.approx(sum(math.comb(5, k) * 0.3**k * 0.7 ** (5 - k) for k in (3, 4, 5)))


def test_a_group_all_the_same():
    # the demo: groups of 4 at solve rate 0.25 all fail one time in three
    assert all_fail(0.25, 4) == pytest.approx(0.3164, abs=1e-4)
    assert all_same(0.25, 4) == pytest.approx(0.75**4 + 0.25**4)


def test_rank_test():
    # every later value under every earlier one: 1 split in C(4, 2) = 6, in C(10, 5) = 252
    assert lower_ranks([1.0, 2.0], [3.0, 4.0]) == pytest.approx(1 / 6)
    assert lower_ranks([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]) == pytest.approx(1 / 252)
    assert lower_ranks([6, 7, 8, 9, 10], [1, 2, 3, 4, 5]) == 1.0
    assert lower_ranks([1.0, 1.0], [1.0, 1.0]) == 1.0  # ties: no evidence either way
