"""Reviewers' agreement with the consensus (council.methods.consensus_agreement): Kendall's τ_b
against scipy, top-1 agreement and the agreement-based n_eff by hand."""

from __future__ import annotations

import random

import pytest
from scipy.stats import kendalltau

from council.methods.consensus_agreement import (
    AgreementSums,
    agreement_report,
    effective_reviewers,
    kendall_tau_b,
    session_agreement,
)


def test_tau_b_is_scipys_with_and_without_ties():
    rng = random.Random(58)
    for _ in range(200):
        n = rng.randint(2, 8)
        x = [rng.randint(1, 4) for _ in range(n)]
        y = [rng.randint(1, 4) for _ in range(n)]
        expected = kendalltau(x, y).statistic  # tau-b
        got = kendall_tau_b(x, y)
        if got is None:
            assert expected != expected  # scipy: nan where a side is all tied
        else:
            assert got == pytest.approx(expected)
    assert kendall_tau_b([1], [1]) is None


def test_a_session_by_hand():
    rankings = {"r1": ["a", "b", "c"], "r2": ["c", "b", "a"], "r3": ["a", "c"]}
    consensus = {"a": 1, "b": 2, "c": 2}  # b and c tied
    by = {(g.reviewer, g.other): g for g in session_agreement(rankings, consensus)}
    # r1 against (1, 2, 2): pairs ab +, ac +, bc tied in the consensus: (2 − 0) / √(3 · 2)
    assert by[("r1", None)].kendall_tau == pytest.approx(2 / 6**0.5)
    assert by[("r1", None)].top1 is True and by[("r2", None)].top1 is False
    assert by[("r2", None)].kendall_tau == pytest.approx(-2 / 6**0.5)
    assert by[("r1", "r2")].kendall_tau == pytest.approx(-1.0) and by[("r1", "r2")].top1 is False
    assert by[("r1", "r3")].items == 2 and by[("r1", "r3")].kendall_tau == pytest.approx(1.0)
    assert ("r2", "r1") not in by  # each pair once
    assert len(by) == 3 + 3


def test_n_eff_is_kishs_design_effect_on_the_mean_agreement():
    matrix = {"a": {"a": 1.0, "b": 0.5, "c": 0.2}, "b": {"a": 0.5, "b": 1.0, "c": None},
              "c": {"a": 0.2, "b": None, "c": 1.0}}  # fmt: skip
    n_eff, rho = effective_reviewers(matrix)
    assert rho == pytest.approx(0.35)
    assert n_eff == pytest.approx(3 / (1 + 2 * 0.35))


def test_the_report_from_stored_sums():
    sums = [
        AgreementSums("a", None, sessions=4, tau_n=3, tau_sum=1.5, top1_n=4, top1=3),
        AgreementSums("b", None, sessions=2, tau_n=0, tau_sum=0.0, top1_n=0, top1=0),
        AgreementSums("a", "b", sessions=2, tau_n=2, tau_sum=0.8, top1_n=2, top1=1),
    ]
    report = agreement_report(sums)
    assert report.reviewers["a"].kendall_tau == pytest.approx(0.5) and report.reviewers["a"].top1 == 0.75
    assert report.reviewers["b"].kendall_tau is None
    assert report.matrix["a"]["b"] == report.matrix["b"]["a"] == pytest.approx(0.4)
    assert report.n_eff == pytest.approx(2 / 1.4) and report.k == 2
    assert report.basis == "agreement" and "not label-based" in report.note
    assert agreement_report([]) is None
