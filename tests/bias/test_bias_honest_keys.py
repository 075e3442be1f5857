"""Issue 28: the keys users read hold honest values (SPEC, "Bias report keys").

One position-bias verdict, from the test; records without word counts fall back to characters.
"""

from __future__ import annotations

import random

import pytest
from scipy import stats as sps

from council.bias.html import render_html
from council.bias.records import BiasRecord
from council.bias.report import bias_report, position_verdict
from council.bias.wording import findings
from council.storage import SQLiteStore
from tests.bias.test_bias_report import session_points, within_session_reference


def _store(rows: list[dict]) -> SQLiteStore:
    store = SQLiteStore.memory()
    store.insert_bias_records(rows)
    return store


def planted_first_slot(
    seed: int = 4, sessions: int = 60, bonus: int = 1, words: bool = True, size: int = 3
) -> list[dict]:
    """Three answers a review, a one-point bonus at position 0: small, real, below the seed's variance bar."""
    rng = random.Random(seed)
    rows = []
    models = ["p/a", "p/b", "p/c", "p/d", "p/e"]
    for s in range(sessions):
        members = rng.sample(models, size)
        lengths = {m: rng.randint(50, 3000) for m in members}
        for reviewer in rng.sample(models, 2):
            order = members[:]
            rng.shuffle(order)
            for pos, m in enumerate(order):
                score = min(10, rng.randint(2, 9) + (bonus if pos == 0 else 0))
                rows.append(BiasRecord(
                    session_id=f"s{s:03d}", reviewer_id=reviewer, model_id=m, position=pos,
                    response_length_chars=lengths[m], response_length_words=(lengths[m] // 6 if words else None),
                    score_value=float(score), timestamp=f"2026-01-01T00:{s % 60:02d}:00.000000+00:00",
                    scale_min=1, scale_max=10, self_review=(reviewer == m),
                ).row())
    return rows


def test_position_bias_verdict_is_the_test_and_the_seed_flag_sits_beside_it():
    rows = planted_first_slot()
    pb = bias_report(_store(rows)).position_bias
    groups: dict[int, list[float]] = {}
    for r in rows:
        groups.setdefault(r["position"], []).append(r["score_value"])
    p = sps.f_oneway(*groups.values()).pvalue
    assert p < 0.05  # the planted effect is real
    assert pb.variance < pb.threshold  # ... and below the seed's bar
    assert pb.bias_detected is True
    assert pb.seed_variance_flag is False
    report = bias_report(_store(rows))
    row = next(h for h in report.honesty if h.metric == "position_bias")
    assert row.verdict.startswith("position bias")
    assert position_verdict(report).startswith("bias detected")
    html = render_html(report)
    assert "no bias detected" not in html and "no position bias" not in html
    text = " ".join(f.text for f in findings(report))
    assert "no position bias" not in text


def test_no_planted_effect_no_verdict():
    pb = bias_report(_store(planted_first_slot(seed=5, bonus=0))).position_bias
    assert pb.test.p_value > 0.05 and pb.bias_detected is False


def _pooled_chars_reference(rows: list[dict], unit: str = "chars") -> float:
    """The seed's Fisher-z pooled r (characters by default), by numpy (sessions with 3+ answers)."""
    import numpy as np

    zs = []
    for x, y in session_points(rows, unit):
        r = np.corrcoef(x, y)[0, 1]
        if -1 < r < 1:
            zs.append(np.arctanh(r))
    return float(np.tanh(np.mean(zs)))


def test_records_with_only_chars_fall_back_to_characters():
    rows = planted_first_slot(words=False)
    report = bias_report(_store(rows))
    assert report.length_unit == "chars"
    assert report.sample_size == 60 and report.length_missing == 0
    assert report.length_correlation == round(within_session_reference(rows, "chars")[0], 3)
    assert report.length_correlation_seed == round(_pooled_chars_reference(rows), 3)
    assert any("characters" in n for n in report.notes)
    text = " ".join(f.text for f in findings(report))
    assert "too few sessions" not in text


def test_no_length_data_is_null_not_zero():
    rows = planted_first_slot(sessions=8)  # 8 sessions: below the 10 needed to pool
    report = bias_report(_store(rows))
    assert report.length_correlation is None and report.length_correlation_ci is None
    assert report.length_correlation_ci_seed is None
    dumped = report.model_dump(mode="json")
    assert dumped["length_correlation"] is None and dumped["length_correlation_ci"] is None
    two = planted_first_slot(sessions=30, size=2)  # two answers a session: no r at all
    report = bias_report(_store(two))
    assert report.length_correlation is None
    text = " ".join(f.text for f in findings(report))
    assert "(0;" not in text and "three or more answers" in text


def correlated_lengths(rho: float, sessions: int = 300, seed: int = 8) -> list[dict]:
    """Four answers a session, one reviewer: within a session the score an answer gets has
    correlation ``rho`` with its length in words; sessions differ in mean length and score."""
    rng = random.Random(seed)
    rows = []
    for s in range(sessions):
        length_mean, score_mean = rng.uniform(150, 450), rng.uniform(4, 7)
        for pos in range(4):
            u, e = rng.gauss(0, 1), rng.gauss(0, 1)
            words = round(length_mean + 40 * u)
            score = score_mean + 0.8 * (rho * u + (1 - rho * rho) ** 0.5 * e)
            rows.append(BiasRecord(
                session_id=f"s{s:03d}", reviewer_id="p/r", model_id=f"p/m{pos}", position=pos,
                response_length_chars=6 * words, response_length_words=words, score_value=min(10.0, max(1.0, score)),
                timestamp="2026-01-01T00:00:00.000000+00:00", scale_min=1, scale_max=10,
            ).row())
    return rows


def test_the_pooled_length_correlation_is_not_biased_away_from_zero():
    # Issue 61, finding 8: the mean of the sessions' Fisher z read 0.69 for rho = 0.5 (and
    # 0.86, "strong_positive", for 0.7), with an interval that excluded the truth.
    rows = correlated_lengths(0.5)
    report = bias_report(_store(rows))
    r, (lo, hi) = within_session_reference(rows)
    assert report.length_correlation == pytest.approx(r, abs=5e-4)
    assert report.length_correlation_ci == pytest.approx((lo, hi), abs=1e-3)
    assert lo < 0.5 < hi and abs(report.length_correlation - 0.5) < 0.06
    assert report.length_interpretation == "moderate_positive"
    # The seed's figure stays beside it, by its own recipe: far from the truth.
    assert report.length_correlation_seed == round(_pooled_chars_reference(rows, "words"), 3)
    assert report.length_correlation_seed > 0.6
    strong = bias_report(_store(correlated_lengths(0.7, seed=9)))
    assert abs(strong.length_correlation - 0.7) < 0.05 and strong.length_correlation_seed > 0.75
