"""Connected components of an undirected graph on nodes ``0..n-1`` (pure Python, no numpy).

One routine (union–find) for both places that need it: the answers that ballots connect in
Kendall's W (docs/methods.md, "Kendall's W": df = answers − components, one answer grounded
per component) and the models that comparisons connect on the leaderboard (docs/methods.md,
"Bradley-Terry model and prior").
"""

from __future__ import annotations

from collections.abc import Iterable


def component_roots(n: int, edges: Iterable[tuple[int, int]]) -> list[int]:
    """Each node's component representative: union–find, joining ``i``'s root under ``j``'s for
    each edge (i, j) in the order given, so the same edges always give the same representatives."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in edges:
        parent[find(i)] = find(j)
    return [find(x) for x in range(n)]


def components(n: int, edges: Iterable[tuple[int, int]]) -> list[list[int]]:
    """Each component's nodes, ascending; components ordered by their smallest node."""
    groups: dict[int, list[int]] = {}
    for node, root in enumerate(component_roots(n, edges)):
        groups.setdefault(root, []).append(node)
    return list(groups.values())
