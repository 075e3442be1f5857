"""Consensus from rankings, never from raw scores (reviewers do not share a curve).

A *ballot* is one reviewer's ranking of the answers it saw, best first. With
``self_review = "exclude"`` ballots are partial (a reviewer does not rank its own
answer), so every statistic here accepts ballots over different subsets.

Borda: on a ballot of m answers, the answer in place i (0-based) earns m − 1 − i
points; an answer's Borda score is the sum over ballots.

Tie-breaks, deterministic and in this order: higher Borda score; lower mean rank;
more first places; then the member id in alphabetical order (arbitrary but stable,
and reported as a tie so nobody reads meaning into it).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import combinations

from pydantic import BaseModel

TIE_BREAK_RULE = "Borda points, then lower mean rank, then more first places, then member id (alphabetical)"


class ConsensusEntry(BaseModel):
    member: str
    rank: int
    """1-based place in the consensus."""
    borda: float
    mean_rank: float | None
    """Mean 1-based place over the ballots that ranked this member (None: no ballot did)."""
    first_places: int
    ballots: int
    tied_with_next: bool = False
    """True when only the alphabetical tie-break separates this entry from the next."""


class Consensus(BaseModel):
    method: str = "borda"
    ranking: list[ConsensusEntry]
    kendall_w: float | None
    """Agreement between reviewers, 0 (none) to 1 (identical rankings); None when undefined."""
    ballots: int
    tie_break: str = TIE_BREAK_RULE

    @property
    def order(self) -> list[str]:
        return [e.member for e in self.ranking]


def borda_scores(ballots: Iterable[Sequence[str]]) -> dict[str, float]:
    scores: dict[str, float] = defaultdict(float)
    for ballot in ballots:
        m = len(ballot)
        for place, member in enumerate(ballot):
            scores[member] += m - 1 - place
    return dict(scores)


def mean_ranks(ballots: Iterable[Sequence[str]]) -> dict[str, float]:
    places: dict[str, list[int]] = defaultdict(list)
    for ballot in ballots:
        for place, member in enumerate(ballot, 1):
            places[member].append(place)
    return {member: sum(p) / len(p) for member, p in places.items()}


def consensus_ranking(ballots: Sequence[Sequence[str]], candidates: Iterable[str]) -> Consensus:
    """Borda consensus over ``candidates`` (members nobody ranked come last)."""
    candidates = list(dict.fromkeys(candidates))
    borda = borda_scores(ballots)
    means = mean_ranks(ballots)
    firsts: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for ballot in ballots:
        if ballot:
            firsts[ballot[0]] += 1
        for member in ballot:
            counts[member] += 1

    def key(member: str) -> tuple[float, float, int, str]:
        mean = means.get(member, math.inf)
        return (-borda.get(member, 0.0), mean, -firsts[member], member)

    ordered = sorted(candidates, key=key)
    entries = []
    for i, member in enumerate(ordered):
        tied = i + 1 < len(ordered) and key(member)[:3] == key(ordered[i + 1])[:3]
        entries.append(
            ConsensusEntry(
                member=member,
                rank=i + 1,
                borda=borda.get(member, 0.0),
                mean_rank=means.get(member),
                first_places=firsts[member],
                ballots=counts[member],
                tied_with_next=tied,
            )
        )
    return Consensus(ranking=entries, kendall_w=kendalls_w(ballots), ballots=len(ballots))


def _ranks(ballot: Sequence[str], keep: set[str]) -> dict[str, int]:
    """1-based ranks of the members in ``keep``, re-ranked within that subset."""
    return {member: i for i, member in enumerate((m for m in ballot if m in keep), 1)}


def kendalls_w(ballots: Sequence[Sequence[str]]) -> float | None:
    """Kendall's coefficient of concordance W.

    Complete ballots over one set: the textbook W = 12 S / (m² (n³ − n)), rankings have
    no ties. Partial ballots (self-review excluded): the mean pairwise Spearman rho over
    the answers both reviewers ranked, mapped to W by the identity that holds for
    complete rankings, W = ((m − 1) · mean_rho + 1) / m. None when fewer than two
    ballots or answers make agreement meaningless.
    """
    ballots = [b for b in ballots if len(b) >= 2]
    m = len(ballots)
    if m < 2:
        return None
    sets = [frozenset(b) for b in ballots]
    if all(s == sets[0] for s in sets):
        n = len(ballots[0])
        totals: dict[str, int] = defaultdict(int)
        for ballot in ballots:
            for member, r in _ranks(ballot, set(ballot)).items():
                totals[member] += r
        mean_total = m * (n + 1) / 2
        s = sum((t - mean_total) ** 2 for t in totals.values())
        return 12 * s / (m**2 * (n**3 - n))
    rhos = []
    for a, b in combinations(ballots, 2):
        common = set(a) & set(b)
        k = len(common)
        if k < 2:
            continue
        ra, rb = _ranks(a, common), _ranks(b, common)
        d2 = sum((ra[x] - rb[x]) ** 2 for x in common)
        rhos.append(1 - 6 * d2 / (k * (k * k - 1)))
    if not rhos:
        return None
    mean_rho = sum(rhos) / len(rhos)
    return max(0.0, ((m - 1) * mean_rho + 1) / m)

