"""The cross-session bias report, from per-group sums the store computes.

Every statistic is reduced to per-group sums (n, Σx, Σx², Σxy) by the store
(``Store.bias_sums``); this module only combines the groups (a handful of reviewers
and positions, one row per session for the length correlation). Reports from JSONL
files load the files into a temporary store and ask it the same: one code path.

The report is diagnostic: it never changes a score.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from council.bias.loading import load_records_files
from council.bias.records import LENGTH_UNITS, LengthUnit
from council.bias.validation import problems_of, raise_first
from council.clock import parse_since
from council.errors import UsageError
from council.methods.bias_indicators import (
    INDICATORS_NOTE,
    REFERENCE_SCALE,
    HonestyRow,
    calibration_zscores,
    honesty_row,
    length_correlation_interpretation,
    pooled_length_correlation,
    position_variance_threshold,
    reliability,
    variance_label,
)
from council.methods.significance import (
    ALPHA,
    Block,
    GroupSums,
    SignificanceTest,
    chi_square_uniform,
    holm_adjust,
    one_way_anova,
    p_text,
    paired_t_test,
    variance_from_sums,
    welch_t_test,
    within_block_anova,
)
from council.storage import BiasQuery, BiasSums, Store

DEFAULT_MAX_POINTS = 2000
"""Length-vs-score points kept for the scatter chart."""


class ReviewerProfile(BaseModel):
    mean: float
    std: float
    z_score: float
    classification: str
    """Harsh below z = −1, generous above +1, whatever the significance (docs/methods.md, "Reviewer calibration")."""
    samples: int
    variance: float
    variance_label: str
    reliability: str
    significant: bool = False
    """This reviewer's mean differs from the other reviewers' (Welch's t, Holm-adjusted p < 0.05)."""
    p_value: float | None = None
    """Holm-adjusted p of Welch's t-test of this reviewer's scores against every other reviewer's."""


class ReviewerPositionReport(BaseModel):
    """One reviewer's scores by display position, compared within its own reviews."""

    means: dict[int, float]
    counts: dict[int, int]
    orderings: int
    """This reviewer's reviews."""
    test: SignificanceTest
    """Two-way ANOVA of this reviewer's scores, its reviews as blocks: positions within reviews."""
    significant: bool = False
    """Holm-adjusted p < 0.05 in the verdict's family (``PositionBiasReport.adjusted_p_values``)."""


class PositionBiasReport(BaseModel):
    means: dict[int, float]
    counts: dict[int, int]
    variance: float
    """Sample variance of the per-position means (docs/methods.md, "Position bias")."""
    threshold: float
    bias_detected: bool
    """The verdict: a test of the family in ``adjusted_p_values`` is significant after Holm's
    adjustment (docs/methods.md, "Position bias")."""
    seed_variance_flag: bool = False
    """The seed's rule, shown as the seed's: variance > threshold (0.5 on a 1–10 scale)."""
    orderings: int
    """Reviews (one shuffled display order each)."""
    test: SignificanceTest
    """One-way ANOVA of all scores across display positions: confounded with council size when
    reviews differ in size; not the verdict."""
    top_position_test: SignificanceTest
    """Chi-square: is the top-scored answer's position uniform over positions?"""
    within_review_test: SignificanceTest | None = None
    """Two-way ANOVA, reviews as blocks: positions compared within each review (every reviewer)."""
    reviewers: dict[str, ReviewerPositionReport] = Field(default_factory=dict)
    """Per reviewer: its position means and its own within-review test."""
    adjusted_p_values: dict[str, float | None] = Field(default_factory=dict)
    """Holm-adjusted p of each test in the verdict: ``within_review``, ``top_position`` and
    ``reviewer:<id>`` for every reviewer shown."""


class SelfPreferenceReport(BaseModel):
    """A reviewer's scores of its own answers against the other reviewers' scores of them.

    A harsh reviewer scores its own answer low too, so the raw difference mixes
    self-preference with calibration: ``adjusted_difference`` subtracts the
    reviewer's offset (its mean score minus the mean of all scores), and the paired
    t-test is on that adjusted difference.
    """

    self_mean: float
    """Mean score the reviewer gave its own answers."""
    others_mean: float
    """Mean score the other reviewers gave those same answers."""
    difference: float
    reviewer_offset: float
    """The reviewer's mean score minus the mean of every score (its harshness/generosity)."""
    adjusted_difference: float
    n: int
    """Own answers that other reviewers also scored."""
    test: SignificanceTest


class BiasReport(BaseModel):
    reviewers: dict[str, ReviewerProfile]
    median_of_means: float | None = None
    std_of_means: float | None = None
    reviewer_calibration_test: SignificanceTest | None = None
    """One-way ANOVA of scores across all reviewers: do their mean scores differ beyond chance?"""
    length_correlation: float | None = None
    """The pooled within-session correlation; None when there is no estimate (never 0 for "no data")."""
    length_correlation_ci: tuple[float, float] | None = None
    """95 % interval that keeps its level at any correlation (docs/methods.md, "Pooling across sessions")."""
    length_correlation_ci_seed: tuple[float, float] | None = None
    """The seed's interval, se = 1/√(sessions − 3) around its Fisher-z mean: too narrow, off-centre."""
    length_correlation_seed: float | None = None
    """The seed's estimate, the mean of the sessions' Fisher z: biased away from zero in small sessions."""
    sample_size: int
    """Sessions whose length correlation was pooled (at least 3 answers with a length)."""
    confidence_level: str
    length_interpretation: str | None = None
    length_pairs: int = 0
    """(model, session) points in the sessions pooled."""
    length_unit: LengthUnit = "words"
    """What the length correlation counts: words (default, the method's unit) or characters."""
    length_missing: int = 0
    """Answers left out of the length correlation: their records carry no length in ``length_unit``."""
    position_bias: PositionBiasReport
    self_preference: dict[str, SelfPreferenceReport]
    honesty: list[HonestyRow]
    score_scale: tuple[float, float] | None = None
    """The scale of the scores; None when scales were mixed and normalised to 1–10."""
    scales_normalized: bool = False
    filters: dict[str, Any]
    total_records: int
    sessions: int
    skipped_lines: int = 0
    """Records files: bad lines skipped with ``skip_bad``."""
    skipped_reviews: int = 0
    """Reviews left out with ``skip_bad`` (their positions are inconsistent, or a record is invalid)."""
    skipped_records: int = 0
    """Records in those reviews (and invalid database rows), left out of every statistic."""
    unscored_records: int = 0
    """Records without a score (llm-council-core's 0.0): checked with their review, counted nowhere else."""
    notes: list[str] = Field(default_factory=list)
    length_points: list[tuple[float, float]] = Field(default_factory=list)
    """A bounded sample of (response length in ``length_unit``, mean score) per (session, model), for charts."""


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------


def bias_report(
    store: Store,
    *,
    since: str | None = None,
    reviewers: Sequence[str] = (),
    council: str | None = None,
    max_points: int = 0,
    min_sessions: int = 10,
    length_unit: LengthUnit | None = None,
    skip_bad: bool = False,
    locate: Callable[[int], str] | None = None,
) -> BiasReport:
    """The cross-session bias report over ``store``'s bias records.

    ``since`` keeps records with ``timestamp >= since``; ``reviewers`` keeps those
    reviewers' records for every statistic except the calibration baseline: z-scores
    are always against all reviewers in the period, so filtering does not change a
    reviewer's classification. ``max_points`` > 0 also returns that many
    length-vs-score points for charts. All queries read one snapshot.

    Records are checked first (:mod:`council.bias.validation`): a bad one stops the
    report with its location (``locate(id)``, default "bias record ID"), or with
    ``skip_bad`` its review is left out of every statistic and counted.
    ``length_unit`` picks what the length correlation counts; by default words, or characters
    when no answer in the selection has a word count (older and llm-council-core records).
    """
    if length_unit is not None and length_unit not in LENGTH_UNITS:
        raise UsageError(f"unknown length unit {length_unit!r}; choose words or chars")
    reviewers = list(dict.fromkeys(reviewers))
    since = parse_since(since) if since else None
    locate = locate or (lambda rid: f"bias record {rid}")
    sums = store.bias_sums(
        BiasQuery(
            since=since,
            reviewers=tuple(reviewers),
            council=council,
            length_unit=length_unit,
            max_points=max_points,
            skip_bad=skip_bad,
            reference_scale=REFERENCE_SCALE,
        )
    )
    problems = problems_of(sums.bad, locate)
    if problems and not skip_bad:
        raise_first(problems, "use --skip-bad to leave such records out and count them")
    scales, normalize, skipped_records, unscored = sums.scales, sums.normalized, sums.skipped_records, sums.unscored
    lo_ref, hi_ref = REFERENCE_SCALE  # records without a scale are taken to be on 1–10
    effective = {(lo if lo is not None else lo_ref, hi if hi is not None else hi_ref) for lo, hi in scales}
    orderings = sums.orderings
    reviewer_sums = {r: GroupSums(*g) for r, g in sums.reviewers.items()}
    session_rows, self_sums, points = sums.sessions, sums.self_preference, sums.points
    unit: LengthUnit = sums.length_unit  # type: ignore[assignment]
    fell_back = length_unit is None and unit == "chars"  # no word count anywhere: characters
    notes_unit = ["no record has a word count: the length correlation counts characters"] if fell_back else []

    notes: list[str] = list(notes_unit)
    if problems:
        notes.append(
            f"{len(problems.bad_reviews)} reviews and {len(problems.bad_rows)} invalid records left out "
            f"({skipped_records} records; first: {problems.messages[0] if problems.messages else 'see above'})"
        )
    if unscored:
        notes.append(f"{unscored} records without a score (0.0 in llm-council-core records) are in no statistic")
    scale: tuple[float, float] | None = None
    if normalize:
        notes.append("records use different score scales: every score was rescaled to 1–10 first")
    elif any(lo is not None for lo, _ in scales):
        lo, hi = effective.pop()
        scale = (float(lo), float(hi))

    calibration_test = one_way_anova(list(reviewer_sums.values()), name="one-way ANOVA across reviewers")
    profiles, median_of_means, std_of_means = _profiles(reviewer_sums, reviewers, scale)

    # Length correlation: the pooled within-session correlation over the sessions with ≥ 3
    # answers with a length; the honesty row counts their answers.
    pooled_sessions, pairs, missing, missing_sessions = [], 0, 0, 0
    for answered, _records, *session in session_rows:
        n = session[0]
        if n < answered:
            missing += answered - n
            missing_sessions += 1
        if n >= 3:
            pooled_sessions.append(session)
            pairs += n
    pooled = pooled_length_correlation(pooled_sessions, min_sessions=min_sessions)
    estimated = pooled.length_correlation is not None
    interpretation = length_correlation_interpretation(pooled.length_correlation) if estimated else None
    if missing:
        other = "chars" if unit == "words" else "words"
        notes.append(
            f"{missing} answers in {missing_sessions} sessions have no length in {unit} "
            f"(records written before word counts existed, or by another tool) and are left out of the "
            f"length correlation; --length-unit {other} may include them"
        )

    position = _position_report(sums, scale)

    self_pref = _self_preference_report(self_sums, reviewer_sums)

    honesty = [
        honesty_row(
            "length_correlation",
            pairs,
            None if interpretation is None else f"{interpretation} (length in {unit})",
            estimated=estimated,
        ),
        honesty_row(
            "position_bias",
            orderings,
            ("position bias" if position.bias_detected else "no position bias") + f"; {verdict_tests(position)}",
        ),
        honesty_row(  # the minimum is per reviewer: the smallest reviewer's scores decide
            "reviewer_calibration",
            min((p.samples for p in profiles.values()), default=0),
            _calibration_verdict(profiles, calibration_test),
            estimated=len(reviewer_sums) >= 2,
        ),
    ]
    if any(h.status == "insufficient" for h in honesty):
        notes.append(INDICATORS_NOTE)

    return BiasReport(
        reviewers=profiles,
        median_of_means=median_of_means,
        std_of_means=std_of_means,
        reviewer_calibration_test=calibration_test,
        length_correlation=pooled.length_correlation,
        length_correlation_ci=pooled.length_correlation_ci,
        length_correlation_ci_seed=pooled.length_correlation_ci_seed,
        length_correlation_seed=pooled.length_correlation_seed,
        sample_size=pooled.sample_size,
        confidence_level=pooled.confidence_level,
        length_interpretation=interpretation,
        length_pairs=pairs,
        length_unit=unit,
        length_missing=missing,
        position_bias=position,
        self_preference=self_pref,
        honesty=honesty,
        score_scale=scale,
        scales_normalized=normalize,
        filters={"since": since, "reviewer": reviewers or None, "council": council},
        total_records=sum(r[1] for r in session_rows),
        sessions=len(session_rows),
        skipped_reviews=len(problems.bad_reviews),
        skipped_records=skipped_records,
        unscored_records=unscored,
        notes=notes,
        length_points=points,
    )


def _p_text(test: SignificanceTest, name: str) -> str:
    return f"; {name} {p_text(test.p_value)}" if test.p_value is not None else ""


def _calibration_verdict(profiles: dict[str, ReviewerProfile], test: SignificanceTest) -> str:
    """The honesty verdict: outlying reviewers, each said significant or not, and the ANOVA."""
    flagged = []
    for rid, p in sorted(profiles.items()):
        if p.classification != "neutral":
            sig = "significant" if p.significant else "not significant"
            flagged.append(f"{rid}: {p.classification} ({sig})")
    overall = (
        "reviewers differ" if test.significant else "differences between reviewers not significant"
    ) + _p_text(test, "ANOVA")
    return "; ".join([*flagged, overall]) if flagged else f"no outlying reviewer; {overall}"


def _profiles(
    sums: dict[str, GroupSums], reviewers: Sequence[str], scale: tuple[float, float] | None
) -> tuple[dict[str, ReviewerProfile], float | None, float | None]:
    """Calibration over each reviewer's scores; the baseline is every reviewer in ``sums``
    (docs/methods.md, "Reviewer calibration" and "Calibration significance")."""
    means = {r: g.total / g.n for r, g in sums.items()}
    zs = calibration_zscores(means)
    # Each reviewer against all the others (Welch), Holm-adjusted over every reviewer in the baseline.
    total = GroupSums(sum(g.n for g in sums.values()), sum(g.total for g in sums.values()),
                      sum(g.total_sq for g in sums.values()))
    raw_p = {
        r: welch_t_test(g, GroupSums(total.n - g.n, total.total - g.total, total.total_sq - g.total_sq)).p_value
        for r, g in sums.items()
    }
    adjusted = holm_adjust(raw_p)
    profiles = {}
    for rid in sorted(sums):
        if reviewers and rid not in reviewers:
            continue
        g = sums[rid]
        var = variance_from_sums(*g)
        profiles[rid] = ReviewerProfile(
            mean=round(means[rid], 3),
            std=round(math.sqrt(var), 3),
            z_score=zs[rid][0],
            classification=zs[rid][1],
            samples=g.n,
            variance=round(var, 3),
            variance_label=variance_label(var, g.n, scale),
            reliability=reliability(g.n),
            p_value=adjusted[rid],
            significant=adjusted[rid] is not None and adjusted[rid] < ALPHA,
        )
    if not means:
        return profiles, None, None
    values = list(means.values())
    std_of_means = statistics.stdev(values) if len(values) > 2 else 1.0
    return profiles, round(statistics.median(values), 3), round(std_of_means, 3)


def _self_preference_report(
    self_sums: dict[str, tuple[int, float, float, float, float]], reviewer_sums: dict[str, GroupSums]
) -> dict[str, SelfPreferenceReport]:
    all_n = sum(g.n for g in reviewer_sums.values())
    grand_mean = sum(g.total for g in reviewer_sums.values()) / all_n if all_n else 0.0
    out = {}
    for rid, (n, own, others, sd, sdd) in sorted(self_sums.items()):
        g = reviewer_sums.get(rid)
        c = g.total / g.n - grand_mean if g and g.n else 0.0
        # d − c for every pair, from the sums: Σ(d−c) = Σd − nc, Σ(d−c)² = Σd² − 2cΣd + nc².
        out[rid] = SelfPreferenceReport(
            self_mean=round(own / n, 3),
            others_mean=round(others / n, 3),
            difference=round(sd / n, 3),
            reviewer_offset=round(c, 3),
            adjusted_difference=round(sd / n - c, 3),
            n=n,
            test=paired_t_test(n, sd - n * c, sdd - 2 * c * sd + n * c * c, name="paired t-test (adjusted)"),
        )
    return out


def _position_report(sums: BiasSums, scale: tuple[float, float] | None) -> PositionBiasReport:
    """Variance of per-position means, the tests and the verdict (docs/methods.md, "Position bias")."""
    position_sums = {p: GroupSums(*g) for p, g in sums.positions.items()}
    means = {p: g.total / g.n for p, g in position_sums.items()}
    anova = one_way_anova(list(position_sums.values()))
    sizes = {len(members) for _, members in sums.review_blocks}
    if len(sizes) > 1 and anova.p_value is not None:
        anova.note = f"reviews of {len(sizes)} sizes pooled: confounded with council size (not the verdict)"
    variance = statistics.variance(means.values()) if len(means) > 1 else 0.0
    threshold = position_variance_threshold(scale)
    top_test = chi_square_uniform(
        [sums.top_positions[k] for k in sorted(sums.top_positions)],
        name="chi-square goodness of fit (top-scored position vs uniform)",
    )
    if sums.left_out:
        why = f"{sums.left_out} reviews left out (tied top score, or an answer without a score)"
        top_test.note = f"{why}; {top_test.note}" if top_test.note else why
    within = _within_reviews(position_sums, sums.review_blocks.items(), sums.unblocked)
    reviewers = {}
    for rid, by_position in sums.reviewer_positions.items():
        own = {p: GroupSums(*g) for p, g in by_position.items()}
        blocks = [(key, g) for key, g in sums.review_blocks.items() if key[0] == rid]
        reviewers[rid] = ReviewerPositionReport(
            means={p: round(g.total / g.n, 3) for p, g in own.items()},
            counts={p: g.n for p, g in own.items()},
            orderings=sum(g[0] for _, g in blocks),
            test=_within_reviews(own, blocks, sums.unblocked, name=f"two-way ANOVA within {rid}'s reviews"),
        )
    family = {
        "within_review": within.p_value,
        "top_position": top_test.p_value,
        **{f"reviewer:{rid}": view.test.p_value for rid, view in reviewers.items()},
    }
    adjusted = holm_adjust(family)
    for rid, view in reviewers.items():
        p = adjusted[f"reviewer:{rid}"]
        view.significant = p is not None and p < ALPHA
    return PositionBiasReport(
        means={p: round(m, 3) for p, m in means.items()},
        counts={p: g.n for p, g in position_sums.items()},
        variance=round(variance, 3),
        threshold=round(threshold, 3),
        bias_detected=any(p is not None and p < ALPHA for p in adjusted.values()),
        seed_variance_flag=len(means) >= 2 and variance > threshold,
        orderings=sums.orderings,
        test=anova,
        top_position_test=top_test,
        within_review_test=within,
        reviewers=reviewers,
        adjusted_p_values=adjusted,
    )


def _within_reviews(
    positions: dict[int, GroupSums],
    blocks: Iterable[tuple[tuple[str, tuple[int, ...]], tuple[int, float, float]]],
    unblocked: int,
    *,
    name: str = "two-way ANOVA within reviews (reviews as blocks)",
) -> SignificanceTest:
    """Positions compared within each review: ``blocks`` of reviews ((reviewer, positions) →
    (reviews, Σ totals, Σ totals²)), merged over reviewers by their positions."""
    if unblocked:
        return SignificanceTest(name=name, statistic=None, df=[0, 0], p_value=None, significant=False,
                                note=f"{unblocked} reviews of more than 53 answers have answers without a score")
    merged: dict[tuple[int, ...], list[Any]] = {}
    for (_, members), (count, total, totals_sq) in blocks:
        acc = merged.setdefault(members, [0, 0.0, 0.0])
        acc[0] += count
        acc[1] += total
        acc[2] += totals_sq
    return within_block_anova(positions, [Block(m, *acc) for m, acc in merged.items()], name=name)


_TEST_NAMES = {"within_review": "within reviews", "top_position": "top position"}


def verdict_tests(pb: PositionBiasReport) -> str:
    """The tests behind the verdict, as "within reviews p = 0.003, reviewer a p < 0.001; Holm over
    6 tests": the significant ones, or the smallest adjusted p when none is."""
    known = {k: p for k, p in pb.adjusted_p_values.items() if p is not None}
    if not known:
        return "not tested"

    def name(key: str) -> str:
        return _TEST_NAMES.get(key) or key.replace(":", " ", 1)

    hits = [f"{name(k)} {p_text(p)}" for k, p in sorted(known.items(), key=lambda kv: kv[1]) if p < ALPHA]
    if not hits:
        key = min(known, key=lambda k: known[k])
        hits = [f"smallest: {name(key)} {p_text(known[key])}"]
    return f"{', '.join(hits)}; Holm over {len(known)} tests"


def position_verdict(report: BiasReport) -> str:
    """The verdict in words with the tests behind it, then the seed's variance rule as the seed's;
    only an indicator below the minimum orderings (docs/methods.md, "Position bias")."""
    pb = report.position_bias
    row = next(h for h in report.honesty if h.metric == "position_bias")
    seed = f"the seed's variance rule: {'above' if pb.seed_variance_flag else 'below'} the threshold"
    if row.status == "sufficient":
        verdict = "bias detected" if pb.bias_detected else "no bias detected"
        return f"{verdict} ({verdict_tests(pb)}); {seed}"
    return f"{seed}, an indicator only ({row.data_points} of {row.minimum} orderings)"


# ---------------------------------------------------------------------------
# Reports from JSONL files
# ---------------------------------------------------------------------------


def report_from_records_files(
    paths: Iterable[Path | str],
    *,
    skip_bad: bool = False,
    records_format: str = "auto",
    since: str | None = None,
    reviewers: Sequence[str] = (),
    council: str | None = None,
    max_points: int = 0,
    length_unit: LengthUnit | None = None,
) -> BiasReport:
    """The same report as :func:`bias_report`, over records read from JSONL files (ours, or
    llm-council-core's ``bias_metrics.jsonl``: ``records_format`` auto | council | llm-council-core)."""
    loaded = load_records_files(paths, skip_bad=skip_bad, records_format=records_format)
    try:
        report = bias_report(
            loaded.store,
            since=since,
            reviewers=reviewers,
            council=council,
            max_points=max_points,
            length_unit=length_unit,
            skip_bad=skip_bad,
            locate=loaded.locate,
        )
    finally:
        loaded.store.close()
    report.skipped_lines = len(loaded.skipped)
    if loaded.skipped:
        report.notes.append(f"{len(loaded.skipped)} bad record lines skipped (first: {loaded.skipped[0]})")
    foreign = sorted(p for p, fmt in loaded.formats.items() if fmt != "council")
    if foreign:
        report.notes.append(f"read as llm-council-core records (schema 1.2.x, mapped): {', '.join(foreign)}")
    if loaded.dropped_hashes:
        report.notes.append(
            f"{loaded.dropped_hashes} llm-council-core query hashes dropped (16-hex, keyed by another installation)"
        )
    return report
