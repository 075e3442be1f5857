"""Concordance of reviewers' rankings: Kendall's W and its test, for any ballot design.

A *ballot* ranks a subset of the answers, best first (with ``self_review = "exclude"``
each reviewer ranks every answer but its own). The ballots form a block design:
*complete* when every ballot ranks the same answers, *balanced incomplete* (BIBD)
when all ballots have the same size k, every answer is ranked r times and every pair
λ times (a full self-excluding council), otherwise *incomplete* (e.g. a review failed).

One statistic covers all three: Skillings & Mack's (1981) generalisation of
Friedman's test, SM = Aᵀ L⁺ A, where A_j = Σ_b √(12/(k_b+1)) (rank_bj − (k_b+1)/2) over
the ballots b that rank answer j, and L is the Laplacian of the co-occurrence counts
λ_jl (Var A = L under the null of independent uniformly random ballots). SM equals
Friedman's χ² on complete ballots and Durbin's T on a BIBD.

W = SM / SM*, where SM* is the statistic the same design gives when every ballot
follows one reference order: an order consistent with every ballot if there is one
(so perfect agreement is exactly 1), else the order of the least-squares scores L⁺A.
On complete ballots and BIBDs SM* is the same for every order, and W is Kendall's W
and Kendall–Gibbons' incomplete-block W exactly; 0 ≤ W ≤ 1 always (the proofs:
docs/methods.md, "Kendall's W").

The p-value is P(SM ≥ observed) under that null: exact, by enumerating the
distribution of A, when the ballots allow at most ``EXACT_LIMIT`` arrangements (small
councils, where the chi-square approximation is poor), else from χ² with
rank(L) = answers − connected components degrees of freedom. On complete ballots SM does
not change when the answers are relabelled, so the first ballot is held fixed: the
arrangements to enumerate are divided by k! (docs/methods.md, "Kendall's W").
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Sequence
from itertools import combinations, pairwise, permutations
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel

from council.methods.distributions import chi2_sf
from council.methods.graphs import component_roots

EXACT_LIMIT = 20_000
"""Largest number of ballot arrangements enumerated for an exact p-value (Π kᵢ!, ÷ k₁! on complete
ballots); arrangements with the same A are merged as they are enumerated, so this stays fast."""

MC_DRAWS = 10_000
"""Random arrangements drawn for a Monte-Carlo p beyond the exact limit: its standard error is at
most 0.005, and about 0.002 near 0.05 (docs/methods.md, "Kendall's W")."""
MC_SEED = 0
"""The draws' seed: the same ballots always get the same p."""

_REL_TOL = 1e-9

Design = Literal["complete", "balanced incomplete", "incomplete"]


class Agreement(BaseModel):
    """Kendall's W and the test that reviewers agree more than chance."""

    w: float
    test: str
    """Friedman (complete ballots), Durbin (balanced incomplete) or Skillings-Mack (other designs)."""
    design: Design
    statistic: float
    df: int
    p_value: float
    p_method: Literal["exact", "monte-carlo", "chi-square"]
    p_standard_error: float | None = None
    """Monte-Carlo only: √(p(1 − p)/draws), the p's own sampling error."""
    p_draws: int | None = None
    """Monte-Carlo only: random arrangements drawn (seeded, :data:`MC_SEED`)."""
    ballots: int
    """Ballots used: those ranking at least two answers."""
    answers: int


_T = TypeVar("_T")


class _Once(Generic[_T]):
    """A function's values cached per arguments, each computed once even when threads ask together.

    The null distributions are computed ahead of need in a worker thread (:func:`null_job`); a
    second caller of the same design waits for that computation instead of repeating it. The
    least recently used values beyond ``maxsize`` are dropped."""

    def __init__(self, fn: Callable[..., _T], maxsize: int = 64) -> None:
        self.fn, self.maxsize = fn, maxsize
        self.values: OrderedDict[Hashable, _T] = OrderedDict()
        self.locks: dict[Hashable, threading.Lock] = {}
        self.guard = threading.Lock()

    @staticmethod
    def key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable:
        return args, tuple(sorted(kwargs.items()))

    def cached(self, *args: Any, **kwargs: Any) -> bool:
        return self.key(args, kwargs) in self.values

    def __call__(self, *args: Any, **kwargs: Any) -> _T:
        key = self.key(args, kwargs)
        with self.guard:
            if key in self.values:
                self.values.move_to_end(key)
                return self.values[key]
            lock = self.locks.setdefault(key, threading.Lock())
        with lock:
            if key in self.values:  # computed by the thread this one waited for
                return self.values[key]
            value = self.fn(*args, **kwargs)
            with self.guard:
                self.values[key] = value
                while len(self.values) > self.maxsize:
                    self.values.popitem(last=False)
                self.locks.pop(key, None)
        return value


def _grounded_inverse(items: list[str], co: dict[tuple[int, int], int]) -> tuple[list[int], list[list[float]], int]:
    """(free indices, inverse of L restricted to them, components) for the Laplacian of ``co``.

    One answer per connected component is grounded (its score fixed at 0); the rest of
    L is then positive definite, and Aᵀ L⁺ A = A_fᵀ (L_ff)⁻¹ A_f for any A summing to
    zero within each component.
    """
    n = len(items)
    grounded = set(component_roots(n, co))
    free = [i for i in range(n) if i not in grounded]
    pos = {i: p for p, i in enumerate(free)}
    size = len(free)
    m = [[0.0] * size for _ in range(size)]
    for (i, j), c in co.items():
        for a, b in ((i, j), (j, i)):
            if a in pos:
                m[pos[a]][pos[a]] += c
                if b in pos:
                    m[pos[a]][pos[b]] -= c
    # Gauss–Jordan on [M | I]; M is symmetric positive definite, so no pivoting is needed.
    # (Not numpy: a session never loads it, and M has one row per answer.)
    aug = [row + [1.0 if r == c else 0.0 for c in range(size)] for r, row in enumerate(m)]
    for col in range(size):
        piv = aug[col][col]
        aug[col] = [v / piv for v in aug[col]]
        for r in range(size):
            if r != col and aug[r][col] != 0.0:
                f = aug[r][col]
                aug[r] = [v - f * p for v, p in zip(aug[r], aug[col], strict=True)]
    return free, [row[size:] for row in aug], len(grounded)


class _Design:
    """The fixed part of the statistic: which answers each ballot ranks."""

    def __init__(self, ballots: Sequence[Sequence[str]]) -> None:
        self.ballots = [list(b) for b in ballots]
        self.items = sorted({x for b in self.ballots for x in b})
        self.index = {x: i for i, x in enumerate(self.items)}
        co: dict[tuple[int, int], int] = defaultdict(int)
        for b in self.ballots:
            for x, y in combinations(sorted(self.index[m] for m in b), 2):
                co[(x, y)] += 1
        self.co = dict(co)
        self.free, self.inverse, self.components = _grounded_inverse(self.items, self.co)
        self.df = len(self.items) - self.components

    @property
    def kind(self) -> Design:
        sets = {frozenset(b) for b in self.ballots}
        if len(sets) == 1:
            return "complete"
        t = len(self.items)
        sizes = {len(b) for b in self.ballots}
        counts: dict[str, int] = defaultdict(int)
        for b in self.ballots:
            for x in b:
                counts[x] += 1
        pair_counts = set(self.co.values())
        if (
            len(sizes) == 1
            and len(set(counts.values())) == 1
            and len(self.co) == t * (t - 1) // 2
            and len(pair_counts) == 1
        ):
            return "balanced incomplete"
        return "incomplete"

    def a_vector(self, ballots: Sequence[Sequence[str]]) -> list[float]:
        a = [0.0] * len(self.items)
        for b in ballots:
            k = len(b)
            w = math.sqrt(12.0 / (k + 1))
            for rank, x in enumerate(b, 1):
                a[self.index[x]] += w * (rank - (k + 1) / 2)
        return a

    def statistic(self, a: Sequence[float]) -> float:
        af = [a[i] for i in self.free]
        return max(0.0, sum(x * sum(g * y for g, y in zip(row, af, strict=True)) for x, row in zip(af, self.inverse,
                                                                                                   strict=True)))

    def scores(self, a: Sequence[float]) -> dict[str, float]:
        """Least-squares scores L⁺A (0 for each component's grounded answer); lower = better."""
        v = [0.0] * len(self.items)
        af = [a[i] for i in self.free]
        for i, row in zip(self.free, self.inverse, strict=True):
            v[i] = sum(g * y for g, y in zip(row, af, strict=True))
        return dict(zip(self.items, v, strict=True))

    def perfect(self, order: Sequence[str]) -> list[list[str]]:
        """The ballots as they would be if every reviewer followed ``order``."""
        place = {x: i for i, x in enumerate(order)}
        return [sorted(b, key=place.__getitem__) for b in self.ballots]


def consistent_order(ballots: Sequence[Sequence[str]]) -> list[str] | None:
    """An order of all answers that every ballot follows, or None if the ballots conflict."""
    items = sorted({x for b in ballots for x in b})
    after: dict[str, set[str]] = {x: set() for x in items}
    for b in ballots:
        for better, worse in pairwise(b):
            after[better].add(worse)
    indegree = {x: 0 for x in items}
    for worse_set in after.values():
        for w in worse_set:
            indegree[w] += 1
    ready = [x for x in items if indegree[x] == 0]
    order = []
    while ready:
        x = ready.pop()
        order.append(x)
        for w in after[x]:
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    return order if len(order) == len(items) else None


def _symmetric(ballots: Sequence[Sequence[str]]) -> bool:
    """Complete ballots: relabelling the answers leaves SM unchanged, so the first ballot can be fixed."""
    return len({frozenset(b) for b in ballots}) == 1


def _enumerated(ballots: Sequence[Sequence[str]]) -> int:
    """Arrangements the exact p enumerates: Π kᵢ!, divided by k₁! when the first ballot is fixed."""
    total = arrangements(ballots)
    return total // math.factorial(len(ballots[0])) if _symmetric(ballots) else total


def _enumerate_null(
    blocks: tuple[tuple[str, ...], ...], fix_first: bool = True
) -> tuple[list[float], list[float]]:
    """The statistic's exact null distribution for one design: (sorted values, upper-tail shares).

    Enumerates the distribution of A ballot by ballot (arrangements giving the same A
    are merged). Keys are integers: per ballot size k, the sums of 2·rank − (k+1).
    On complete ballots (and ``fix_first``) the first ballot keeps one order: every
    arrangement is a relabelling of one with that first ballot, with the same SM, so
    the shares are unchanged. Cached: a design recurs from session to session."""
    design = _Design(blocks)
    fixed = fix_first and _symmetric(blocks)
    sizes = sorted({len(b) for b in blocks})
    slot = {k: s for s, k in enumerate(sizes)}
    n = len(design.items)
    dist: dict[tuple[int, ...], int] = {tuple([0] * (n * len(sizes))): 1}
    for i, b in enumerate(blocks):
        k = len(b)
        offset = slot[k] * n
        orders = [tuple(b)] if fixed and i == 0 else permutations(b)
        moves = [[(offset + design.index[x], 2 * r - (k + 1)) for r, x in enumerate(perm, 1)] for perm in orders]
        new: dict[tuple[int, ...], int] = defaultdict(int)
        for key, count in dist.items():
            for move in moves:
                nk = list(key)
                for i, d in move:
                    nk[i] += d
                new[tuple(nk)] += count
        dist = new
    weights = [math.sqrt(12.0 / (k + 1)) / 2 for k in sizes]
    by_value: dict[float, int] = defaultdict(int)
    for key, count in dist.items():
        a = [sum(weights[s] * key[s * n + j] for s in range(len(sizes))) for j in range(n)]
        by_value[design.statistic(a)] += count
    values = sorted(by_value)
    total = sum(by_value.values())
    tail, upper = 0, [0.0] * len(values)
    for i in range(len(values) - 1, -1, -1):
        tail += by_value[values[i]]
        upper[i] = tail / total
    return values, upper


_null_distribution = _Once(_enumerate_null)


def _exact_p(design: _Design, observed: float) -> float:
    """P(SM ≥ observed) over every arrangement of the ballots, equally likely under the null."""
    values, upper = _null_distribution(tuple(tuple(sorted(b)) for b in design.ballots))
    i = bisect_left(values, observed - _REL_TOL * max(1.0, observed))
    return upper[i] if i < len(values) else 0.0


def _draw_null(blocks: tuple[tuple[str, ...], ...], draws: int, seed: int) -> list[float]:
    """The statistic over ``draws`` arrangements drawn uniformly at random (each ballot an
    independent random order: the null), sorted. Cached, as the exact distribution is.
    numpy, imported here only: a session whose ballots stay within the exact limit never loads it."""
    import numpy as np

    design = _Design(blocks)
    rng = np.random.default_rng(seed)
    a = np.zeros((draws, len(design.items)))
    for b in blocks:
        k = len(b)
        columns = np.array([design.index[x] for x in b])
        ranks = rng.random((draws, k)).argsort(axis=1).argsort(axis=1) + 1  # a uniform random order
        a[:, columns] += math.sqrt(12.0 / (k + 1)) * (ranks - (k + 1) / 2)
    free = a[:, design.free]
    stats = np.einsum("di,ij,dj->d", free, np.array(design.inverse), free)
    return sorted(np.maximum(stats, 0.0).tolist())


_sampled_null = _Once(_draw_null)


def _monte_carlo_p(design: _Design, observed: float, draws: int, seed: int) -> tuple[float, float]:
    """(p, its standard error): (1 + draws with SM ≥ observed) / (1 + draws), never 0 (Phipson
    & Smyth 2010: the observed arrangement is one of the null's)."""
    sample = _sampled_null(tuple(tuple(sorted(b)) for b in design.ballots), draws, seed)
    hits = len(sample) - bisect_left(sample, observed - _REL_TOL * max(1.0, observed))
    p = (1 + hits) / (1 + draws)
    return p, math.sqrt(p * (1 - p) / draws)


def null_job(answer_sets: Sequence[Sequence[str]]) -> Callable[[], None] | None:
    """The work that :func:`agreement` (with its defaults) will do for ballots ranking these sets
    of answers, one set per ballot in ballot order, as a function to run ahead of time (in a
    worker thread, while the ballots are being written); None when it is cached already.

    The null distribution depends only on which answers each ballot ranks, never on the order
    it gives them, so it can be computed before the reviews come back; the p-value is then a
    lookup. A session does this so that the Monte-Carlo draws (and importing numpy) are off its
    critical path (docs/methods.md, "Kendall's W")."""
    used = [sorted(b) for b in answer_sets if len(b) >= 2]
    if len(used) < 2:
        return None
    blocks = tuple(tuple(b) for b in used)
    if _enumerated(used) <= EXACT_LIMIT:
        if _null_distribution.cached(blocks):
            return None

        def enumerate_it() -> None:
            _null_distribution(blocks)

        return enumerate_it
    if _sampled_null.cached(blocks, MC_DRAWS, MC_SEED):
        return None

    def draw_it() -> None:
        _sampled_null(blocks, MC_DRAWS, MC_SEED)

    return draw_it


def arrangements(ballots: Sequence[Sequence[str]]) -> int:
    return math.prod(math.factorial(len(b)) for b in ballots)


def agreement(
    ballots: Sequence[Sequence[str]], *, exact_limit: int = EXACT_LIMIT, draws: int = MC_DRAWS, seed: int = MC_SEED
) -> Agreement | None:
    """Kendall's W with its test; None with fewer than two ballots of two or more answers.

    The p-value is exact up to ``exact_limit`` arrangements, beyond that a seeded Monte-Carlo p
    from ``draws`` random arrangements (0: the chi-square approximation)."""
    used = [list(b) for b in ballots if len(b) >= 2]
    if len(used) < 2:
        return None
    for b in used:
        if len(set(b)) != len(b):
            raise ValueError(f"a ballot ranks an answer twice: {b}")
    design = _Design(used)
    if design.df == 0:
        return None
    a = design.a_vector(used)
    observed = design.statistic(a)
    reference = consistent_order(used)
    if reference is None:
        scores = design.scores(a)
        reference = sorted(design.items, key=lambda x: (scores[x], x))
    best = design.statistic(design.a_vector(design.perfect(reference)))
    if best <= 0:
        return None
    w = min(1.0, observed / best)
    kind = design.kind
    test = {"complete": "Friedman", "balanced incomplete": "Durbin", "incomplete": "Skillings-Mack"}[kind]
    error = None
    if _enumerated(used) <= exact_limit:
        p, method = _exact_p(design, observed), "exact"
    elif draws > 0:
        (p, error), method = _monte_carlo_p(design, observed, draws, seed), "monte-carlo"
    else:
        p, method = chi2_sf(observed, design.df), "chi-square"
    return Agreement(
        w=w,
        test=test,
        design=kind,
        statistic=observed,
        df=design.df,
        p_value=min(1.0, max(0.0, p)),
        p_method=method,  # type: ignore[arg-type]
        p_standard_error=error,
        p_draws=draws if error is not None else None,
        ballots=len(used),
        answers=len(design.items),
    )


def kendalls_w(ballots: Sequence[Sequence[str]]) -> float | None:
    """Kendall's coefficient of concordance for any ballot design (see :func:`agreement`)."""
    result = agreement(ballots, exact_limit=0, draws=0)
    return None if result is None else result.w
