"""Issue 61, findings 5–7: the bias report's verdicts on seeded councils with known truth.

Seeded, fast versions of scripts/bench_bias_indicators.py on a few cells (the figures of every
cell are in docs/methods.md): under the null the share of reports that flag must stay below what
a true rate of 0.05 gives 99 % of the time; with a planted effect the report must find it.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest
from scipy import stats as sps

_path = Path(__file__).resolve().parents[2] / "scripts" / "bench_bias_indicators.py"
_spec = importlib.util.spec_from_file_location("bench_bias_indicators", _path)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def null_ceiling(reps: int, alpha: float = 0.05) -> float:
    """The most flags a test at level ``alpha`` gives 99 % of the time, as a share of ``reps``."""
    return sps.binom.ppf(0.99, reps, alpha) / reps


# Each null scenario at two cells, with what the report said before (docs/methods.md has every cell):
# - position_council_size: a 3-member and a 5-member council whose answers' mean scores differ by 1
#   point, no position effect. Positions 3–4 exist only in the lower-scoring council; the one-way
#   ANOVA over all scores called it position bias (0.44 of reports at 30 sessions, 0.99 at 100).
NULL_CELLS = [
    ("position_council_size", 30, 200),
    ("position_council_size", 100, 60),
]


@pytest.mark.parametrize(("scenario", "sessions", "reps"), NULL_CELLS)
def test_no_effect_is_flagged_at_no_more_than_the_stated_rate(scenario, sessions, reps):
    assert bench.rate(scenario, sessions, reps, seed=61) <= null_ceiling(reps)


# -- finding 6: position bias ---------------------------------------------------------------------


def test_one_positional_reviewer_is_found_and_the_chi_square_is_part_of_the_verdict():
    # One of four reviewers scores 10/9/8/7 by position: the pooled ANOVA diluted it ("no bias" in
    # most reports at 10 sessions) while the report's own chi-square was significant.
    reports = bench.Reports()
    try:
        found = chi_alone = a_found = others_flagged = 0
        for rep in range(60):
            rng = random.Random(f"one-reviewer-{rep}")
            pb = reports(bench.council(rng, 10, **bench.SCENARIOS["position_one_reviewer"])).position_bias
            found += pb.bias_detected
            chi_alone += pb.top_position_test.significant and not pb.bias_detected
            a_found += pb.reviewers["a"].significant
            others_flagged += sum(pb.reviewers[r].significant for r in "bcd")
    finally:
        reports.close()
    assert found == a_found == 60 and chi_alone == 0
    assert others_flagged / 180 <= null_ceiling(180)


def records_frame(rows):
    import pandas as pd

    frame = pd.DataFrame(rows)
    frame["review"] = frame["session_id"] + "/" + frame["reviewer_id"]
    return frame


def statsmodels_position_test(frame):
    """Positions within reviews: OLS with a review and a position factor, the position row of the
    sequential (type I) ANOVA table with reviews first."""
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    table = anova_lm(smf.ols("score_value ~ C(review) + C(position)", data=frame).fit(), typ=1)
    row = table.loc["C(position)"]
    return row["F"], int(row["df"]), int(table.loc["Residual", "df"]), row["PR(>F)"]


def test_the_within_review_tests_equal_statsmodels():
    # Reviews of 3 and 5 answers, a half-point first-slot bonus for reviewer b only.
    rng = random.Random(62)
    rows = bench.council(rng, 24, members=bench._three_or_five, council_mean=lambda s: 7.0 if s % 2 else 6.0)
    for row in rows:
        if row["reviewer_id"] == "b" and row["position"] == 0 and row["score_value"] < 10:
            row["score_value"] += 1
    report = bench.Reports()
    try:
        pb = report(rows).position_bias
    finally:
        report.close()
    frame = records_frame(rows)
    f, df1, df2, p = statsmodels_position_test(frame)
    test = pb.within_review_test
    assert test.statistic == pytest.approx(f, rel=1e-9) and test.df == [df1, df2]
    assert test.p_value == pytest.approx(p, rel=1e-7, abs=1e-15)
    for reviewer, view in pb.reviewers.items():
        own = frame[frame["reviewer_id"] == reviewer]
        f, df1, df2, p = statsmodels_position_test(own)
        assert view.test.statistic == pytest.approx(f, rel=1e-9) and view.test.df == [df1, df2]
        assert view.test.p_value == pytest.approx(p, rel=1e-7, abs=1e-15)
        assert view.orderings == own["review"].nunique()
        assert view.counts == own.groupby("position").size().to_dict()
        assert view.means == pytest.approx(own.groupby("position")["score_value"].mean().round(3).to_dict())
    family = {"within_review": pb.within_review_test.p_value, "top_position": pb.top_position_test.p_value,
              **{f"reviewer:{r}": v.test.p_value for r, v in pb.reviewers.items()}}  # fmt: skip
    from statsmodels.stats.multitest import multipletests

    keys = [k for k, v in family.items() if v is not None]
    holm = multipletests([family[k] for k in keys], method="holm")[1]
    assert pb.adjusted_p_values == pytest.approx(dict(zip(keys, holm, strict=True)), rel=1e-12)
    assert pb.bias_detected == (min(holm) < 0.05) and pb.reviewers["b"].significant
