"""One connected-components routine for Kendall's W and the leaderboard (council.methods.graphs)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from council.methods.bradley_terry import components as compared_models
from council.methods.concordance import agreement
from council.methods.graphs import component_roots, components


def test_components_by_hand():
    assert components(6, [(0, 2), (4, 5), (2, 3)]) == [[0, 2, 3], [1], [4, 5]]
    assert components(0, []) == []
    assert components(3, []) == [[0], [1], [2]]


@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1),
                                                                                      st.integers(0, n - 1))))))
def test_roots_agree_with_components_and_reachability(case):
    n, edges = case
    roots = component_roots(n, edges)
    parts = components(n, edges)
    assert sorted(x for part in parts for x in part) == list(range(n))
    for part in parts:
        assert len({roots[x] for x in part}) == 1 and roots[part[0]] in part
    # two nodes share a component exactly when a path joins them
    reach = np.eye(n, dtype=bool)
    for i, j in edges:
        reach[i, j] = reach[j, i] = True
    for _ in range(n):
        reach = reach | ((reach.astype(int) @ reach.astype(int)) > 0)
    for i in range(n):
        for j in range(n):
            assert reach[i, j] == (roots[i] == roots[j])


def test_the_leaderboard_and_kendalls_w_count_the_same_components():
    wins = np.zeros((4, 4))
    wins[0, 1] = wins[2, 3] = 1
    assert compared_models(wins) == [[0, 1], [2, 3]]
    # ballots {a, b} and {c, d} never meet: 4 answers, 2 components, df = 2
    result = agreement([["a", "b"], ["b", "a"], ["c", "d"], ["d", "c"]])
    assert result is not None and result.df == 2
