"""Issue 61, findings 5–7: the bias report's verdicts on seeded councils with known truth.

Seeded, fast versions of benchmarks/bench_bias_indicators.py on a few cells (the figures of every
cell are in docs/methods.md): under the null the share of reports that flag must stay below what
a true rate of 0.05 gives 99 % of the time; with a planted effect the report must find it.
"""

from __future__ import annotations

import importlib.util
import random
import statistics
from pathlib import Path

import pytest
from scipy import stats as sps

_path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_bias_indicators.py"
_spec = importlib.util.spec_from_file_location("bench_bias_indicators", _path)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def report_of(rows):
    reports = bench.Reports()
    try:
        return reports(rows)
    finally:
        reports.close()


def null_ceiling(reps: int, alpha: float = 0.05) -> float:
    """The most flags a test at level ``alpha`` gives 99 % of the time, as a share of ``reps``."""
    return sps.binom.ppf(0.99, reps, alpha) / reps


# Each null scenario at two cells, with what the report said before (docs/methods.md has every cell):
# - position_council_size: a 3-member and a 5-member council whose answers' mean scores differ by 1
#   point, no position effect. Positions 3–4 exist only in the lower-scoring council; the one-way
#   ANOVA over all scores called it position bias (0.44 of reports at 30 sessions, 0.99 at 100).
# - calibration_exclude: four identical reviewers, model a's answers 2 points better, reviews
#   exclude the reviewer's own answer. Reviewer a never scores the best answer, so its raw mean is
#   the lowest: "a: harsh (significant)" in 0.95 of reports at 30 sessions, all at 100.
# - self_preference_generous: reviewer a scores every answer 1 point higher and does not favour
#   its own. Subtracting a's offset against every score removed only (M − 1)/M of it: flagged in
#   0.20 of reports at 30 sessions, 0.59 at 100.
NULL_CELLS = [
    ("position_council_size", 30, 200),
    ("position_council_size", 100, 60),
    ("calibration_exclude", 30, 200),
    ("calibration_exclude", 100, 60),
    ("self_preference_generous", 30, 200),
    ("self_preference_generous", 100, 60),
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
    pb = report_of(rows).position_bias
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


# -- finding 7: calibration under self_review = "exclude" -----------------------------------------


def test_a_harsher_reviewer_is_found_on_shared_answers():
    reports = bench.Reports()
    try:
        found = others_flagged = 0
        for rep in range(40):
            rng = random.Random(f"harsh-{rep}")
            profiles = reports(bench.council(rng, 30, **bench.SCENARIOS["calibration_planted"])).reviewers
            found += profiles["b"].classification == "harsh" and profiles["b"].significant
            others_flagged += sum(profiles[r].significant and profiles[r].classification != "neutral" for r in "acd")
    finally:
        reports.close()
    assert found >= 38 and others_flagged <= 4


def shared_answer_reference(rows):
    """Per reviewer, its gap to the other reviewers on the answers they share, by pandas: every
    non-self score minus the mean of the other non-self scores of the same answer, averaged per
    review (one per session), then a one-sample t-test over sessions (scipy) and Holm
    (statsmodels) over the reviewers."""
    from statsmodels.stats.multitest import multipletests

    frame = records_frame(rows)
    scored = frame[frame["self_review"] == 0].copy()
    answer = scored.groupby(["session_id", "model_id"])["score_value"]
    scored["n"], scored["total"] = answer.transform("size"), answer.transform("sum")
    scored = scored[scored["n"] >= 2]
    scored["gap"] = scored["score_value"] - (scored["total"] - scored["score_value"]) / (scored["n"] - 1)
    per_review = scored.groupby(["reviewer_id", "session_id"])["gap"].mean()
    out = {}
    for reviewer, gaps in per_review.groupby(level=0):
        test = sps.ttest_1samp(gaps.to_numpy(), 0.0)
        out[reviewer] = {"offset": gaps.mean(), "n": len(gaps), "p": test.pvalue, "t": test.statistic}
    names = sorted(out)
    for name, p in zip(names, multipletests([out[n]["p"] for n in names], method="holm")[1], strict=True):
        out[name]["holm"] = p
    return out, per_review


def test_calibration_on_shared_answers_equals_pandas_and_scipy():
    rng = random.Random(71)
    rows = bench.council(rng, 25, members=bench._four, quality={"a": 2.0}, harshness={"c": -1.0},
                         self_review="exclude")  # fmt: skip
    report = report_of(rows)
    want, _ = shared_answer_reference(rows)
    offsets = {r: want[r]["offset"] for r in want}
    median, spread = statistics.median(offsets.values()), statistics.stdev(offsets.values())
    for reviewer, profile in report.reviewers.items():
        w = want[reviewer]
        assert profile.offset == pytest.approx(w["offset"], abs=5e-4) and profile.offset_sessions == w["n"]
        assert profile.p_value == pytest.approx(w["holm"], rel=1e-6)
        assert profile.significant == (w["holm"] < 0.05)
        assert profile.z_score == pytest.approx((offsets[reviewer] - median) / spread, abs=0.0051)
    assert report.reviewers["c"].classification == "harsh" and report.reviewers["c"].significant
    assert report.reviewers["a"].classification == "neutral"  # its raw mean is the lowest
    assert report.reviewers["a"].seed_classification in ("harsh", "neutral")
    best = min(want, key=lambda r: want[r]["holm"])
    test = report.reviewer_calibration_test
    assert test.p_value == pytest.approx(want[best]["holm"], rel=1e-6) and test.significant


def test_reviewers_who_share_no_answer_are_not_compared():
    # One reviewer a session: no answer scored by two reviewers, nothing to compare on.
    rows = [bench._row(f"s{s}", f"r{s % 3}", "m", 0, 3 + s % 5, 100, False) for s in range(60)]
    report = report_of(rows)
    for profile in report.reviewers.values():
        assert profile.classification == "not comparable" and profile.z_score is None
        assert profile.offset is None and not profile.significant and profile.seed_classification
    assert report.reviewer_calibration_test.p_value is None
    row = next(h for h in report.honesty if h.metric == "reviewer_calibration")
    assert row.status == "insufficient"


# -- finding 5: self-preference ---------------------------------------------------------------------


def test_planted_self_preference_is_found_and_equals_the_paired_contrast():
    rng = random.Random(51)
    rows = bench.council(rng, 30, **bench.SCENARIOS["self_preference_planted"])
    report = report_of(rows)
    _, per_review = shared_answer_reference(rows)
    frame = records_frame(rows)
    contrasts = []
    for session, group in frame.groupby("session_id"):
        own = group[(group["model_id"] == "a") & (group["reviewer_id"] == "a")]["score_value"].iloc[0]
        others = group[(group["model_id"] == "a") & (group["reviewer_id"] != "a")]["score_value"].mean()
        contrasts.append((own - others) - per_review[("a", session)])
    sp = report.self_preference["a"]
    test = sps.ttest_1samp(contrasts, 0.0)
    assert sp.adjusted_n == len(contrasts) == 30
    assert sp.adjusted_difference == pytest.approx(sum(contrasts) / len(contrasts), abs=5e-4)
    assert sp.test.statistic == pytest.approx(test.statistic, rel=1e-9)
    assert sp.test.p_value == pytest.approx(test.pvalue, rel=1e-7, abs=1e-15)
    assert sp.test.significant and 1.0 < sp.adjusted_difference < 2.0


def test_the_worked_self_preference_example():
    # docs/methods.md, "Self-preference": three members reviewing every answer, three sessions.
    table = {
        "s1": {"x": (9, 7, 6), "y": (7, 8, 5), "z": (6, 6, 7)},
        "s2": {"x": (8, 6, 7), "y": (7, 7, 6), "z": (5, 5, 8)},
        "s3": {"x": (9, 8, 6), "y": (8, 9, 7), "z": (8, 7, 9)},
    }
    rows = [
        bench._row(session, reviewer, model, position, score, 100, reviewer == model)
        for session, by_reviewer in table.items()
        for reviewer, scores in by_reviewer.items()
        for position, (model, score) in enumerate(zip("xyz", scores, strict=True))
    ]
    sp = report_of(rows).self_preference["x"]
    assert (sp.difference, sp.reviewer_offset, sp.adjusted_difference) == (1.833, 0.667, 1.167)
    assert (sp.n, sp.adjusted_n) == (3, 3) and sp.test.df == [2]
    assert sp.test.statistic == pytest.approx(7.0) and sp.test.p_value == pytest.approx(0.01980394118039314)


def test_when_every_reviewer_scores_every_answer_the_z_scores_are_the_seeds():
    # The offsets are then an affine map of the raw means (docs/methods.md, "Reviewer calibration").
    rng = random.Random(72)
    rows = bench.council(rng, 12, members=bench._four, reviewers=lambda s: ["r1", "r2", "r3", "r4"],
                         harshness={"r1": -1.0, "r3": 0.7})  # fmt: skip
    profiles = report_of(rows).reviewers
    for profile in profiles.values():
        assert profile.z_score == pytest.approx(profile.seed_z_score, abs=0.0101)
        assert profile.classification == profile.seed_classification
