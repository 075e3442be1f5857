"""Consensus from rankings, never from raw scores (reviewers do not share a curve).

A *ballot* is one reviewer's ranking of the answers it saw, best first. With
``self_review = "exclude"`` ballots are partial (a reviewer does not rank its own
answer), and a failed review removes a ballot, so answers appear on different
numbers of ballots of different lengths. Every method here accepts that.

Methods (the registry :data:`CONSENSUS_METHODS`, chosen by ``[councils.X] consensus``):

* ``borda`` (the default): normalised per ballot. On a ballot of m ≥ 2 answers, the
  answer in place i (0-based) earns (m − 1 − i)/(m − 1) points, from 1 (first) to 0
  (last); an answer's score is the mean of its points over the ballots it appears on.
  A raw Borda sum would favour the answer that appears on more ballots (the failed
  reviewer's own). Ballots of one answer compare nothing and earn no points.
* ``mean_rank``: the mean 1-based place over the ballots that rank the answer, lower first.
* ``copeland``: pairwise majorities; docs/methods.md, "Copeland".

A new method is one function from ballots to exact scores plus one registry entry.

Ties are reported as ties: tied answers share their rank. Where one order is needed
(the chairman's list, the winner), tied answers are ordered by a key derived from
the session seed and the member id (reproducible, and unrelated to alphabetical
order). Agreement between reviewers (Kendall's W and its p-value) is in
:mod:`council.methods.concordance`. The methods: docs/methods.md, "Borda count", "Mean rank",
"Copeland" and "Tie-breaks".
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

from pydantic import BaseModel

from council.methods.concordance import Agreement, agreement

_TIES = "equal scores are ties and share a rank; the order within a tie comes from the session seed"
TIE_BREAK_RULE = f"Mean Borda points per ballot (normalised to 0–1 on each ballot); {_TIES}"


class ConsensusEntry(BaseModel):
    member: str
    rank: int
    """1-based rank; tied answers share the best rank of their group (1, 1, 3)."""
    score: float | None
    """The consensus method's score (borda: mean normalised points, 0–1; mean_rank: the mean place,
    lower is better; copeland: pairwise wins + ½ pairwise ties). None: no ballot ranked this member."""
    borda: float
    """Raw Borda sum (m − 1 − i per ballot); not comparable across members seen on different ballots."""
    mean_rank: float | None
    """Mean 1-based place over the ballots that ranked this member (None: no ballot did)."""
    first_places: int
    ballots: int
    tied: bool = False
    """Another member has exactly the same score."""
    tied_with_next: bool = False
    """The next entry has the same score: only the seeded tie-break puts this one first."""


class Consensus(BaseModel):
    method: str = "borda"
    ranking: list[ConsensusEntry]
    kendall_w: float | None
    """Agreement between reviewers, 0 (none) to 1 (identical rankings); None when undefined."""
    kendall_w_p_value: float | None = None
    """P-value of the agreement test (Friedman, Durbin or Skillings–Mack); None when W is undefined."""
    agreement: Agreement | None = None
    ballots: int
    tie_break: str = TIE_BREAK_RULE
    seed: int | None = None
    """The seed that ordered tied members."""

    @property
    def order(self) -> list[str]:
        return [e.member for e in self.ranking]


def borda_scores(ballots: Iterable[Sequence[str]]) -> dict[str, float]:
    """Raw Borda sums: m − 1 − i points for place i on a ballot of m."""
    scores: dict[str, float] = defaultdict(float)
    for ballot in ballots:
        m = len(ballot)
        for place, member in enumerate(ballot):
            scores[member] += m - 1 - place
    return dict(scores)


def normalised_borda(ballots: Iterable[Sequence[str]]) -> dict[str, Fraction]:
    """Mean of (m − 1 − i)/(m − 1) over the ballots (of m ≥ 2) each member appears on; exact."""
    points: dict[str, list[Fraction]] = defaultdict(list)
    for ballot in ballots:
        m = len(ballot)
        if m < 2:
            continue
        for place, member in enumerate(ballot):
            points[member].append(Fraction(m - 1 - place, m - 1))
    return {member: sum(p, Fraction(0)) / len(p) for member, p in points.items()}


def exact_mean_ranks(ballots: Iterable[Sequence[str]]) -> dict[str, Fraction]:
    """Mean 1-based place over the ballots each member appears on; exact (docs/methods.md, "Mean rank")."""
    places: dict[str, list[int]] = defaultdict(list)
    for ballot in ballots:
        for place, member in enumerate(ballot, 1):
            places[member].append(place)
    return {member: Fraction(sum(p), len(p)) for member, p in places.items()}


def mean_ranks(ballots: Iterable[Sequence[str]]) -> dict[str, float]:
    return {member: float(v) for member, v in exact_mean_ranks(ballots).items()}


def copeland_scores(ballots: Iterable[Sequence[str]]) -> dict[str, Fraction]:
    """Pairwise majority wins + ½ per pairwise tie, over the pairs some ballot ranks together
    (docs/methods.md, "Copeland"). Ballots of one answer compare nothing."""
    ahead: dict[tuple[str, str], int] = defaultdict(int)
    members: set[str] = set()
    for ballot in ballots:
        if len(ballot) < 2:
            continue
        members.update(ballot)
        for better, worse in combinations(ballot, 2):
            ahead[(better, worse)] += 1
    score = dict.fromkeys(members, Fraction(0))
    for x, y in combinations(sorted(members), 2):
        xy, yx = ahead.get((x, y), 0), ahead.get((y, x), 0)
        if xy == yx == 0:
            continue  # never ranked together: neither a win nor a tie
        if xy == yx:
            score[x] += Fraction(1, 2)
            score[y] += Fraction(1, 2)
        else:
            score[x if xy > yx else y] += 1
    return score


@dataclass(frozen=True)
class ConsensusMethod:
    """One way to turn ballots into an order: exact scores (so ties are exact), and which way is better."""

    scores: Callable[[Sequence[Sequence[str]]], Mapping[str, Fraction]]
    higher_is_better: bool
    rule: str
    """How the order is decided, stored with the consensus as ``tie_break``."""
    title: str
    """What a table of this consensus is ranked by, in a few words."""


CONSENSUS_METHODS: dict[str, ConsensusMethod] = {
    "borda": ConsensusMethod(normalised_borda, True, TIE_BREAK_RULE, "Borda, normalised per ballot"),
    "mean_rank": ConsensusMethod(
        exact_mean_ranks, False, f"Mean place over the ballots that rank it, lower first; {_TIES}", "mean rank"
    ),
    "copeland": ConsensusMethod(
        copeland_scores,
        True,
        f"Copeland: pairwise majority wins + ½ per pairwise tie, higher first; {_TIES}",
        "Copeland, pairwise majorities",
    ),
}
DEFAULT_CONSENSUS = "borda"


def method_title(name: str) -> str:
    """What a consensus by ``name`` is ranked by (the name itself for a method this version lacks)."""
    chosen = CONSENSUS_METHODS.get(name)
    return chosen.title if chosen else name


def seeded_tie_key(seed: int, member: str) -> bytes:
    """The order of ``member`` within a tie: a digest of (seed, member), so no name is favoured."""
    return hashlib.sha256(f"council-tie:{seed}:{member}".encode()).digest()


def consensus_ranking(
    ballots: Sequence[Sequence[str]], candidates: Iterable[str], *, seed: int = 0, method: str = DEFAULT_CONSENSUS
) -> Consensus:
    """The consensus over ``candidates`` by ``method`` (members nobody ranked come last, tied)."""
    try:
        chosen = CONSENSUS_METHODS[method]
    except KeyError:
        choices = ", ".join(CONSENSUS_METHODS)
        raise ValueError(f"unknown consensus method {method!r}; choose one of: {choices}") from None
    candidates = list(dict.fromkeys(candidates))
    score = chosen.scores(ballots)
    borda = borda_scores(ballots)
    means = mean_ranks(ballots)
    firsts: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    for ballot in ballots:
        if ballot:
            firsts[ballot[0]] += 1
        for member in ballot:
            counts[member] += 1

    # Sort keys: unranked members after every ranked one, then the better score first.
    keys = {
        m: (False, -score[m] if chosen.higher_is_better else score[m]) if m in score else (True, Fraction(0))
        for m in candidates
    }
    value = keys.__getitem__
    ordered = sorted(candidates, key=lambda m: (keys[m], seeded_tie_key(seed, m)))
    entries = []
    rank = 0
    for i, member in enumerate(ordered):
        if i == 0 or value(member) != value(ordered[i - 1]):
            rank = i + 1
        same = [o for o in ordered if o != member and value(o) == value(member)]
        entries.append(
            ConsensusEntry(
                member=member,
                rank=rank,
                score=float(score[member]) if member in score else None,
                borda=borda.get(member, 0.0),
                mean_rank=means.get(member),
                first_places=firsts[member],
                ballots=counts[member],
                tied=bool(same),
                tied_with_next=i + 1 < len(ordered) and value(ordered[i + 1]) == value(member),
            )
        )
    agreed = agreement(ballots)
    return Consensus(
        method=method,
        ranking=entries,
        kendall_w=None if agreed is None else agreed.w,
        kendall_w_p_value=None if agreed is None else agreed.p_value,
        agreement=agreed,
        ballots=len(ballots),
        tie_break=chosen.rule,
        seed=seed,
    )
