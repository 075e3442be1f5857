"""Ensemble voting (docs/methods.md, "Ensemble voting"): N judgments, one verdict by strict majority.

Rules (:func:`majority_vote`):

* every vote the same -> that verdict, confidence ``high``;
* one verdict has a strict majority (more than half the votes) -> it wins, ``moderate``;
* no strict majority (e.g. A, B, TIE; or A, A, B, B) -> ``"TIE"``, confidence ``low``
  and ``flagged_for_review``. A plurality is not enough: with no majority the
  ensemble has not decided, and a tie says so without favouring either side.

A single vote is unanimous by definition (``high``); ask for N >= 3 when the
confidence level matters.

Adaptive voting (:func:`majority_decided`, :func:`run_votes` with ``adaptive=True``)
stops as soon as the *full-vote winner* is fixed whatever the remaining votes would
be, so the adaptive winner is always the full-vote winner. The other fields
(``counts``, ``agreement``, ``confidence_level``) describe the votes actually cast;
they can be more confident than the full vote would have been (A, A of 3 planned
is ``high``; a third vote B would have made it ``moderate``). ``votes_planned`` and
``calls_saved`` show that the vote stopped early.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, computed_field

from council.methods.verdicts import ConfidenceLevel

DEFAULT_VOTES = 3
#: Votes per judge by default: a grade votes three times (docs/methods.md, "Ensemble voting");
#: a comparison's one vote is already a swap pair of two passes, so more are asked for explicitly.
GRADE_VOTES = DEFAULT_VOTES
PAIRWISE_VOTES = 1
NO_MAJORITY = "TIE"

H = TypeVar("H", bound=Hashable)


class VoteResult(BaseModel):
    winner: str
    #: Votes per verdict, most frequent first (ties in order of first appearance).
    counts: dict[str, int]
    confidence_level: ConfidenceLevel
    #: The winning (or, with no majority, the most frequent) verdict's share of the votes cast.
    agreement: float
    flagged_for_review: bool
    votes_cast: int
    votes_planned: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def calls_saved(self) -> int:
        return self.votes_planned - self.votes_cast


def tally(votes: Iterable[H]) -> tuple[H | None, Counter[H], ConfidenceLevel, float]:
    """``(majority value or None, counts, confidence level, agreement)`` for any hashable votes."""
    counts: Counter[H] = Counter(votes)
    n = sum(counts.values())
    if n == 0:
        raise ValueError("no votes to count")
    top, top_count = counts.most_common(1)[0]
    agreement = top_count / n
    if top_count == n:
        return top, counts, "high", agreement
    if 2 * top_count > n:
        return top, counts, "moderate", agreement
    return None, counts, "low", agreement


def majority_vote(verdicts: Sequence[str], *, planned: int | None = None) -> VoteResult:
    """Aggregate verdicts ("A", "B", "TIE" or any labels) by strict majority."""
    majority, counts, level, agreement = tally(verdicts)
    return VoteResult(
        winner=NO_MAJORITY if majority is None else majority,
        counts=dict(counts.most_common()),
        confidence_level=level,
        agreement=agreement,
        flagged_for_review=level == "low",
        votes_cast=len(verdicts),
        votes_planned=len(verdicts) if planned is None else planned,
    )


def decided_winner(verdicts_so_far: Sequence[str], total_n: int) -> str | None:
    """The full-vote winner if the remaining votes cannot change it, else None.

    The full vote ends in verdict ``v`` when ``v`` has more than ``total_n / 2`` votes,
    and in ``"TIE"`` otherwise, so "TIE" wins both by majority and by default. With
    ``r`` votes still to come, the winner is fixed exactly when either
    (a) some verdict already has more than ``total_n / 2`` votes (it keeps its majority), or
    (b) no verdict other than "TIE" can still reach a majority: the most frequent of
        them plus all ``r`` remaining votes stays at or below ``total_n / 2`` (and so
        would a verdict not seen yet); then the result is "TIE" whatever comes.
    Otherwise some verdict ``v`` other than "TIE" can still win, and giving the
    remaining votes elsewhere leaves ``v`` short of a majority: two completions, two
    different winners, so the vote must go on. At a decided point the majority of the
    votes cast already names the same winner.
    """
    k = len(verdicts_so_far)
    if total_n < 1 or k > total_n:
        raise ValueError(f"{k} votes cast of {total_n} planned")
    counts = Counter(verdicts_so_far)
    top, top_count = counts.most_common(1)[0] if counts else (None, 0)
    if 2 * top_count > total_n:
        return top
    contender = max((c for v, c in counts.items() if v != NO_MAJORITY), default=0)
    if 2 * (contender + total_n - k) <= total_n:
        return NO_MAJORITY
    return None


def majority_decided(verdicts_so_far: Sequence[str], total_n: int) -> bool:
    """True as soon as no remaining vote could change the full-vote majority winner."""
    return decided_winner(verdicts_so_far, total_n) is not None


def min_votes_for_decision(total_n: int) -> int:
    """A bare majority of ``total_n``: the fewest votes that can decide a winner A or B.

    (Only an all-"TIE" start can be decided sooner, at half the votes; the adaptive
    first round does not wait for that rare case to save one call.)
    """
    return total_n // 2 + 1


async def _all(awaitables: Sequence[Awaitable[Any]]) -> list[Any]:
    """Run concurrently, in order; on the first failure cancel the rest and re-raise it. One
    (a single vote) is awaited in place, without a task of its own."""
    if len(awaitables) == 1:
        return [await awaitables[0]]
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def run_votes(
    judge_once: Callable[[int], Awaitable[str]],
    n: int = DEFAULT_VOTES,
    adaptive: bool = False,
) -> tuple[VoteResult, int, int]:
    """Collect up to ``n`` verdicts from ``judge_once(i)`` (i = 0..n-1) and vote.

    Not adaptive: all ``n`` judgments run concurrently. Adaptive: first the
    :func:`min_votes_for_decision` judgments concurrently, then one at a time until
    :func:`majority_decided`. Returns ``(result, calls_made, calls_saved)``.
    A judgment that raises stops the vote and the error propagates.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    if not adaptive:
        verdicts = await _all([judge_once(i) for i in range(n)])
        return majority_vote(verdicts), n, 0

    first_round = min_votes_for_decision(n)
    verdicts = await _all([judge_once(i) for i in range(first_round)])
    while not majority_decided(verdicts, n):
        verdicts.append(await judge_once(len(verdicts)))
    result = majority_vote(verdicts, planned=n)
    winner = decided_winner(verdicts, n)
    if result.winner != winner:  # cannot happen (see decided_winner); never report a wrong winner
        raise AssertionError(f"adaptive vote winner {result.winner!r} differs from the decided {winner!r}")
    return result, len(verdicts), n - len(verdicts)
