"""How far each reviewer of a council session agrees with the final consensus and with the other
reviewers, and, over many sessions, how many independent reviewers the council's reviewers are
worth judged by their agreement (pure).

Agreement of two rankings is Kendall's τ_b over the answers both rank (ties, as a consensus's
tied ranks, handled by τ_b's correction) and top-1 agreement (the first answer of one is among the
first of the other). The agreement-based effective number of reviewers is Kish's design effect
with ρ̄ the mean pairwise τ_b between reviewers: it says how redundant the reviewers' rankings
are, not how often they are right (no label is involved). docs/methods.md, "Reviewer agreement".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from council.methods.panel import effective_judges


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's τ_b of paired values (lower = better on both sides):
    (C − D) / √((n₀ − n₁)(n₀ − n₂)), C and D the concordant and discordant pairs, n₀ all pairs,
    n₁ and n₂ the pairs tied in x and in y. None with fewer than 2 values or a side all tied."""
    n = len(x)
    concordant = discordant = tied_x = tied_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0:
                tied_x += 1
            if dy == 0:
                tied_y += 1
            if dx * dy > 0:
                concordant += 1
            elif dx * dy < 0:
                discordant += 1
    pairs = n * (n - 1) // 2
    denominator = (pairs - tied_x) * (pairs - tied_y)
    return None if n < 2 or denominator <= 0 else (concordant - discordant) / math.sqrt(denominator)


class Agreement(BaseModel):
    """One reviewer's agreement with the consensus (``other`` None) or with another reviewer:
    Kendall's τ_b over the ``items`` both rank (None where undefined) and top-1 agreement (None
    where either ranks nothing)."""

    reviewer: str
    other: str | None
    kendall_tau: float | None
    top1: bool | None
    items: int


def _places(ranking: Sequence[str]) -> dict[str, float]:
    return {member: float(i) for i, member in enumerate(ranking)}


def _agreement(reviewer: str, other: str | None, mine: Mapping[str, float], theirs: Mapping[str, float]) -> Agreement:
    common = [m for m in mine if m in theirs]
    tau = kendall_tau_b([mine[m] for m in common], [theirs[m] for m in common])
    top1 = None
    if mine and theirs:
        my_best, their_best = min(mine.values()), min(theirs.values())
        top1 = bool({m for m, p in mine.items() if p == my_best} & {m for m, p in theirs.items() if p == their_best})
    return Agreement(reviewer=reviewer, other=other, kendall_tau=tau, top1=top1, items=len(common))


def session_agreement(rankings: Mapping[str, Sequence[str]], consensus: Mapping[str, int]) -> list[Agreement]:
    """One session's agreements: each reviewer's ranking (``rankings``: reviewer → its answers,
    best first) with the ``consensus`` (member → its rank, tied members sharing one), then each
    pair of reviewers once, in ``rankings``' order (the agreement is symmetric)."""
    places = {r: _places(ranking) for r, ranking in rankings.items()}
    ranks = {m: float(rank) for m, rank in consensus.items()}
    out = [_agreement(r, None, places[r], ranks) for r in places]
    reviewers = list(places)
    for i, r in enumerate(reviewers):
        for other in reviewers[i + 1 :]:
            out.append(_agreement(r, other, places[r], places[other]))
    return out


@dataclass(frozen=True)
class AgreementSums:
    """Over stored sessions, one (reviewer, other) pair (``other`` None: the consensus): sessions
    counted, the τ_b defined in ``tau_n`` of them summing to ``tau_sum``, and the top-1 agreements
    ``top1`` of ``top1_n``."""

    reviewer: str
    other: str | None
    sessions: int
    tau_n: int
    tau_sum: float
    top1_n: int
    top1: int


def effective_reviewers(matrix: Mapping[str, Mapping[str, float | None]]) -> tuple[float | None, float | None]:
    """The agreement-based effective number of reviewers and its ρ̄: ρ̄ the mean off-diagonal
    entry of ``matrix`` (reviewer → reviewer → mean τ_b; undefined entries left out), n_eff =
    k / (1 + (k − 1)·ρ̄) over the k reviewers of the matrix (None where ρ̄ is undefined or the
    denominator not positive)."""
    reviewers = list(matrix)
    values = [v for r in reviewers for o, v in matrix[r].items() if o != r and v is not None]
    if len(reviewers) < 2 or not values:
        return None, None
    rho = sum(values) / len(values)
    return effective_judges(len(reviewers), rho), rho


#: What the agreement-based n_eff measures, said wherever it is shown.
AGREEMENT_NOTE = (
    "agreement-based, not label-based: the effective number is k / (1 + (k − 1)·ρ̄), ρ̄ the mean Kendall's τ_b between "
    "reviewers' rankings; it measures how redundant the reviewers are, not how often they are right"
)


class ReviewerConsensus(BaseModel):
    """One reviewer over stored sessions: its mean τ_b with the consensus (over the sessions where
    it was defined) and the share of sessions whose consensus first it ranked first."""

    sessions: int
    kendall_tau: float | None
    top1: float | None


class ReviewerAgreementReport(BaseModel):
    """The bias report's ``reviewer_agreement``: each reviewer against the consensus, the matrix of
    mean τ_b between reviewers (diagonal 1; null where they never ranked two answers in common),
    ρ̄, and the agreement-based effective number of reviewers of the k in the matrix."""

    reviewers: dict[str, ReviewerConsensus]
    matrix: dict[str, dict[str, float | None]]
    mean_agreement: float | None
    n_eff: float | None
    k: int
    basis: str = "agreement"
    note: str = AGREEMENT_NOTE


def agreement_report(sums: Sequence[AgreementSums]) -> ReviewerAgreementReport | None:
    """The report from the stored sessions' sums (``AgreementSums``; None without any)."""
    if not sums:
        return None
    reviewers: dict[str, ReviewerConsensus] = {}
    pairs: dict[tuple[str, str], list[float]] = {}
    names: set[str] = set()
    for s in sums:
        names.add(s.reviewer)
        if s.other is None:
            reviewers[s.reviewer] = ReviewerConsensus(
                sessions=s.sessions,
                kendall_tau=s.tau_sum / s.tau_n if s.tau_n else None,
                top1=s.top1 / s.top1_n if s.top1_n else None,
            )
            continue
        names.add(s.other)
        for key in ((s.reviewer, s.other), (s.other, s.reviewer)):  # one unordered pair stored per session
            total = pairs.setdefault(key, [0.0, 0.0])
            total[0] += s.tau_sum
            total[1] += s.tau_n
    ordered = sorted(names)
    matrix = {
        r: {o: 1.0 if r == o else (pairs[(r, o)][0] / pairs[(r, o)][1] if pairs.get((r, o), [0, 0])[1] else None)
            for o in ordered}
        for r in ordered
    }  # fmt: skip
    n_eff, rho = effective_reviewers(matrix)
    return ReviewerAgreementReport(reviewers=dict(sorted(reviewers.items())), matrix=matrix, mean_agreement=rho,
                                   n_eff=n_eff, k=len(ordered))  # fmt: skip
