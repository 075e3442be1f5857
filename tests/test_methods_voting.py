"""Ensemble voting (seed 003 step 6): majority rules, confidence levels, exact adaptive stopping."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from council.judging import decided_winner, majority_decided, majority_vote, run_votes
from council.methods.voting import min_votes_for_decision

VERDICTS = ("A", "B", "TIE")


@pytest.mark.parametrize(
    "votes, winner, level, agreement, flagged",
    [
        (["A", "A", "A"], "A", "high", 1.0, False),
        (["B", "A", "B"], "B", "moderate", 2 / 3, False),
        (["TIE", "TIE", "A"], "TIE", "moderate", 2 / 3, False),
        (["A", "B", "TIE"], "TIE", "low", 1 / 3, True),
        (["A", "A", "B", "B"], "TIE", "low", 0.5, True),  # half is not a majority
        (["A", "A", "B", "TIE", "B"], "TIE", "low", 0.4, True),  # a plurality is not a majority
        (["B"], "B", "high", 1.0, False),
    ],
)
def test_majority_and_confidence_rules(votes, winner, level, agreement, flagged):
    result = majority_vote(votes)
    assert result.winner == winner
    assert result.confidence_level == level
    assert result.agreement == pytest.approx(agreement)
    assert result.flagged_for_review is flagged
    assert sum(result.counts.values()) == len(votes) == result.votes_cast == result.votes_planned
    assert result.calls_saved == 0


def test_counts_are_most_frequent_first():
    assert list(majority_vote(["B", "A", "A"]).counts.items()) == [("A", 2), ("B", 1)]


def test_no_votes_is_an_error():
    with pytest.raises(ValueError):
        majority_vote([])


@given(st.lists(st.sampled_from(VERDICTS), min_size=1, max_size=9))
def test_majority_properties(votes):
    result = majority_vote(votes)
    top = max(votes.count(v) for v in VERDICTS)
    if 2 * votes.count(result.winner) > len(votes):
        assert result.confidence_level == ("high" if top == len(votes) else "moderate")
        assert not result.flagged_for_review
    else:
        assert result.winner == "TIE" and result.confidence_level == "low" and result.flagged_for_review
        assert 2 * top <= len(votes)


# ------------------------------------------------------------------ adaptive decision


def full_winner(votes):
    return majority_vote(list(votes)).winner


@settings(max_examples=400)
@given(st.integers(1, 7).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.sampled_from(VERDICTS), max_size=n))))
def test_decision_is_exact(case):
    """Decided <=> every completion of the remaining votes gives the same full-vote winner."""
    n, prefix = case
    outcomes = {full_winner(prefix + list(rest)) for rest in itertools.product(VERDICTS, repeat=n - len(prefix))}
    decided = decided_winner(prefix, n)
    if decided is None:
        assert len(outcomes) > 1  # stopping here could return a wrong winner
        assert not majority_decided(prefix, n)
    else:
        assert outcomes == {decided}
        assert majority_decided(prefix, n)


def test_decision_examples():
    assert decided_winner(["A", "A"], 3) == "A"
    assert decided_winner(["A", "B"], 3) is None
    assert decided_winner(["A", "B", "TIE"], 4) == "TIE"  # nobody can reach 3 of 4
    assert decided_winner(["A", "A"], 4) is None
    assert decided_winner(["TIE"], 2) == "TIE"  # a TIE majority or no majority: TIE either way
    assert decided_winner(["TIE", "TIE"], 4) == "TIE"
    assert decided_winner([], 1) is None
    with pytest.raises(ValueError):
        decided_winner(["A", "A"], 1)


def test_min_votes_for_decision():
    assert [min_votes_for_decision(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]


# --------------------------------------------------------------------------- driver


def scripted(votes, log=None):
    async def judge_once(i: int) -> str:
        if log is not None:
            log.append(i)
        await asyncio.sleep(0)
        return votes[i]

    return judge_once


@settings(max_examples=300)
@given(st.integers(1, 9).flatmap(lambda n: st.lists(st.sampled_from(VERDICTS), min_size=n, max_size=n)))
def test_adaptive_never_changes_the_winner(votes):
    n = len(votes)
    full, full_calls, full_saved = asyncio.run(run_votes(scripted(votes), n, adaptive=False))
    called: list[int] = []
    adaptive, calls, saved = asyncio.run(run_votes(scripted(votes, called), n, adaptive=True))
    assert adaptive.winner == full.winner == full_winner(votes)
    assert (full_calls, full_saved) == (n, 0)
    assert calls + saved == n and calls == adaptive.votes_cast and saved == adaptive.calls_saved
    assert sorted(called) == list(range(calls))  # judgments 0..calls-1, each once
    assert min_votes_for_decision(n) <= calls <= n
    # it stopped at the first point where the outcome was fixed, not later
    assert all(not majority_decided(votes[:k], n) for k in range(min_votes_for_decision(n), calls))
    first = votes[: min_votes_for_decision(n)]
    if len(set(first)) == 1:
        assert calls == min_votes_for_decision(n)


async def test_adaptive_saves_calls_when_early_votes_agree():
    result, calls, saved = await run_votes(scripted(["A"] * 5), 5, adaptive=True)
    assert (result.winner, calls, saved) == ("A", 3, 2)
    assert result.votes_planned == 5 and result.votes_cast == 3
    assert result.model_dump()["calls_saved"] == 2
    # confidence is over the votes actually cast
    assert result.confidence_level == "high"


async def test_adaptive_continues_one_at_a_time_until_decided():
    called: list[int] = []
    result, calls, saved = await run_votes(scripted(["A", "B", "A", "B", "B"], called), 5, adaptive=True)
    assert (result.winner, calls, saved) == ("B", 5, 0)
    assert called == [0, 1, 2, 3, 4]


class InFlight:
    def __init__(self):
        self.now = 0
        self.peak = 0

    def judge(self, verdict="A"):
        async def judge_once(i: int) -> str:
            self.now += 1
            self.peak = max(self.peak, self.now)
            await asyncio.sleep(0.01)
            self.now -= 1
            return verdict

        return judge_once


async def test_full_voting_runs_concurrently():
    tracker = InFlight()
    await run_votes(tracker.judge(), 5, adaptive=False)
    assert tracker.peak == 5


async def test_adaptive_first_round_is_concurrent():
    tracker = InFlight()
    _, calls, _ = await run_votes(tracker.judge(), 7, adaptive=True)
    assert calls == 4 and tracker.peak == 4


async def test_a_failing_judgment_stops_the_vote():
    started, cancelled = [], []

    async def judge_once(i: int) -> str:
        started.append(i)
        if i == 0:
            raise RuntimeError("provider down")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(i)
            raise
        return "A"

    with pytest.raises(RuntimeError, match="provider down"):
        await run_votes(judge_once, 3, adaptive=False)
    assert sorted(cancelled) == [1, 2]


async def test_n_must_be_positive():
    with pytest.raises(ValueError):
        await run_votes(scripted(["A"]), 0)
