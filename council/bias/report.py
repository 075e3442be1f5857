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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from council._util.clock import parse_since
from council.bias.loading import load_records_files
from council.bias.records import LENGTH_UNITS, LengthUnit
from council.bias.validation import Problems, problems_of, raise_first
from council.errors import UsageError
from council.methods.bias_indicators import (
    INDICATORS_NOTE,
    REFERENCE_SCALE,
    HonestyRow,
    PooledLengthCorrelation,
    calibration_zscores,
    honesty_row,
    length_correlation_interpretation,
    pooled_length_correlation,
    position_variance_threshold,
    reliability,
    variance_label,
)
from council.methods.consensus_agreement import ReviewerAgreementReport, agreement_report
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
    within_block_anova,
)
from council.storage import BiasQuery, BiasSums, Store

DEFAULT_MAX_POINTS = 2000
"""Length-vs-score points kept for the scatter chart."""


class ReviewerProfile(BaseModel):
    mean: float
    std: float
    z_score: float | None
    """The seed's z (against the median, over the spread) of this reviewer's ``offset`` among the
    reviewers' offsets; None when it shares no answer with another reviewer."""
    classification: str
    """Harsh below z = −1, generous above +1, whatever the significance; "not comparable" when it
    shares no answer with another reviewer (docs/methods.md, "Reviewer calibration")."""
    samples: int
    variance: float
    variance_label: str
    reliability: str
    significant: bool = False
    """This reviewer scores the answers it shares with the others differently (Holm-adjusted p < 0.05)."""
    p_value: float | None = None
    """Holm-adjusted p of the t-test over sessions of this reviewer's gaps to the other reviewers."""
    offset: float | None = None
    """Mean over sessions of its gap to the other reviewers on the answers they both scored (points)."""
    offset_sessions: int = 0
    """Sessions (reviews) in which it shared an answer with another reviewer."""
    seed_z_score: float = 0.0
    """The seed's z of this reviewer's raw mean: valid only when every reviewer grades the same answers."""
    seed_classification: str = "neutral"
    """The seed's class of ``seed_z_score``."""


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
    self-preference with calibration: per session, ``adjusted_difference`` compares the
    reviewer's gap to the other reviewers on its own answer with its gap to them on the
    session's other answers, and the t-test over sessions is on that contrast.
    """

    self_mean: float
    """Mean score the reviewer gave its own answers."""
    others_mean: float
    """Mean score the other reviewers gave those same answers."""
    difference: float
    reviewer_offset: float | None
    """The reviewer's mean gap to the other reviewers on the other answers of those sessions
    (its harshness/generosity where they share answers); None when there are none."""
    adjusted_difference: float | None
    """Mean over sessions of (gap on its own answer − gap on the session's other answers)."""
    n: int
    """Own answers that other reviewers also scored."""
    adjusted_n: int = 0
    """Those of them in sessions where the reviewer shares other answers with the others."""
    test: SignificanceTest


class BiasReport(BaseModel):
    reviewers: dict[str, ReviewerProfile]
    median_of_means: float | None = None
    std_of_means: float | None = None
    median_of_offsets: float | None = None
    std_of_offsets: float | None = None
    """The baseline of the reviewers' z-scores: the median and spread of their offsets."""
    reviewer_calibration_test: SignificanceTest | None = None
    """Do the reviewers differ on the answers they share beyond chance? The smallest Holm-adjusted p
    of the reviewers' t-tests (docs/methods.md, "Calibration significance")."""
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
    reviewer_agreement: ReviewerAgreementReport | None = None
    """Stored council sessions: each reviewer's agreement with the consensus, the reviewers' agreement
    matrix and the agreement-based n_eff (docs/methods.md, "Reviewer agreement"); left out without any."""

    @model_serializer(mode="wrap")
    def _without_absent_agreement(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Added later: a report without stored agreements reads as it always has.
        data = handler(self)
        if data.get("reviewer_agreement", 0) is None:
            del data["reviewer_agreement"]
        return data


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
    query = BiasQuery(
        since=since,
        reviewers=tuple(reviewers),
        council=council,
        length_unit=length_unit,
        max_points=max_points,
        skip_bad=skip_bad,
        reference_scale=REFERENCE_SCALE,
    )
    sums, problems = _checked_sums(store, query, locate or (lambda rid: f"bias record {rid}"))
    unit: LengthUnit = sums.length_unit  # type: ignore[assignment]
    notes, scale = _scale_and_notes(sums, problems, fell_back=length_unit is None and unit == "chars")
    reviewer_sums = {r: GroupSums(*g) for r, g in sums.reviewers.items()}
    profiles, calibration_test, offset_baseline = _profiles(reviewer_sums, sums.reviewer_offsets, reviewers, scale)
    means = [g.total / g.n for g in reviewer_sums.values()]
    length = _length_correlation(sums.sessions, unit, min_sessions)
    if length.note:
        notes.append(length.note)
    position = _position_report(sums, scale)
    honesty = _honesty_rows(sums, length, position, profiles, calibration_test, unit)
    if any(h.status == "insufficient" for h in honesty):
        notes.append(INDICATORS_NOTE)

    return BiasReport(
        reviewers=profiles,
        median_of_means=_median(means),
        std_of_means=_spread(means),
        median_of_offsets=offset_baseline["median"],
        std_of_offsets=offset_baseline["spread"],
        reviewer_calibration_test=calibration_test,
        **length.fields(unit),
        position_bias=position,
        self_preference=_self_preference_report(sums.self_preference),
        honesty=honesty,
        score_scale=scale,
        scales_normalized=sums.normalized,
        filters={"since": since, "reviewer": reviewers or None, "council": council},
        total_records=sum(r[1] for r in sums.sessions),
        sessions=len(sums.sessions),
        skipped_reviews=len(problems.bad_reviews),
        skipped_records=sums.skipped_records,
        unscored_records=sums.unscored,
        notes=notes,
        length_points=sums.points,
        reviewer_agreement=agreement_report(
            store.reviewer_agreement_sums(since=since, council=council, reviewers=reviewers)
        ),
    )


def _checked_sums(store: Store, query: BiasQuery, locate: Callable[[int], str]) -> tuple[BiasSums, Problems]:
    """The store's sums for ``query``, and the bad records found on the way: the first stops the
    report unless ``query.skip_bad`` (then their reviews are left out, and counted)."""
    sums = store.bias_sums(query)
    problems = problems_of(sums.bad, locate)
    if problems and not query.skip_bad:
        raise_first(problems, "use --skip-bad to leave such records out and count them")
    return sums, problems


def _scale_and_notes(
    sums: BiasSums, problems: Problems, *, fell_back: bool
) -> tuple[list[str], tuple[float, float] | None]:
    """The report's first notes (the length unit fallen back to, records left out or unscored,
    scales mixed) and the one score scale every record is on (None: several, or unknown)."""
    notes = ["no record has a word count: the length correlation counts characters"] if fell_back else []
    if problems:
        notes.append(
            f"{len(problems.bad_reviews)} reviews and {len(problems.bad_rows)} invalid records left out "
            f"({sums.skipped_records} records; first: {problems.messages[0] if problems.messages else 'see above'})"
        )
    if sums.unscored:
        notes.append(f"{sums.unscored} records without a score (0.0 in llm-council-core records) are in no statistic")
    scale: tuple[float, float] | None = None
    if sums.normalized:
        notes.append("records use different score scales: every score was rescaled to 1–10 first")
    elif any(lo is not None for lo, _ in sums.scales):
        lo_ref, hi_ref = REFERENCE_SCALE  # records without a scale are taken to be on 1–10
        effective = {(lo if lo is not None else lo_ref, hi if hi is not None else hi_ref) for lo, hi in sums.scales}
        lo, hi = effective.pop()
        scale = (float(lo), float(hi))
    return notes, scale


@dataclass(frozen=True)
class _Length:
    """The length correlation as the report gives it, with what it counted."""

    pooled: PooledLengthCorrelation
    pairs: int  # answers in the pooled sessions
    missing: int  # answers without a length in the unit
    interpretation: str | None
    note: str | None  # why some answers are left out, and how to include them

    def fields(self, unit: LengthUnit) -> dict[str, Any]:
        """The report's fields that give it."""
        pooled = self.pooled
        return {
            "length_correlation": pooled.length_correlation,
            "length_correlation_ci": pooled.length_correlation_ci,
            "length_correlation_ci_seed": pooled.length_correlation_ci_seed,
            "length_correlation_seed": pooled.length_correlation_seed,
            "sample_size": pooled.sample_size,
            "confidence_level": pooled.confidence_level,
            "length_interpretation": self.interpretation,
            "length_pairs": self.pairs,
            "length_unit": unit,
            "length_missing": self.missing,
        }


def _length_correlation(session_rows: Sequence[Sequence[Any]], unit: LengthUnit, min_sessions: int) -> _Length:
    """The pooled within-session correlation over the sessions with ≥ 3 answers with a length;
    the honesty row counts their answers."""
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
    note = None
    if missing:
        other = "chars" if unit == "words" else "words"
        note = (
            f"{missing} answers in {missing_sessions} sessions have no length in {unit} "
            f"(records written before word counts existed, or by another tool) and are left out of the "
            f"length correlation; --length-unit {other} may include them"
        )
    return _Length(pooled, pairs, missing, interpretation, note)


def _honesty_rows(
    sums: BiasSums,
    length: _Length,
    position: PositionBiasReport,
    profiles: dict[str, ReviewerProfile],
    calibration_test: SignificanceTest,
    unit: LengthUnit,
) -> list[HonestyRow]:
    """Each indicator against the minimum sample it needs (docs/methods.md, "Statistical honesty")."""
    interpretation = length.interpretation
    return [
        honesty_row(
            "length_correlation",
            length.pairs,
            None if interpretation is None else f"{interpretation} (length in {unit})",
            estimated=length.pooled.length_correlation is not None,
        ),
        honesty_row(
            "position_bias",
            sums.orderings,
            ("position bias" if position.bias_detected else "no position bias") + f"; {verdict_tests(position)}",
        ),
        honesty_row(  # the minimum is per reviewer: the smallest reviewer's scores decide
            "reviewer_calibration",
            min((p.samples for p in profiles.values()), default=0),
            _calibration_verdict(profiles, calibration_test),
            estimated=sum(o[0] > 0 for o in sums.reviewer_offsets.values()) >= 2,
        ),
    ]


def _p_text(test: SignificanceTest, name: str) -> str:
    return f"; {name} {p_text(test.p_value)}" if test.p_value is not None else ""


NOT_COMPARABLE = "not comparable"
"""The classification of a reviewer that shares no answer with another reviewer."""


def _calibration_verdict(profiles: dict[str, ReviewerProfile], test: SignificanceTest) -> str:
    """The honesty verdict: outlying reviewers, each said significant or not, and the test across them."""
    flagged = []
    for rid, p in sorted(profiles.items()):
        if p.classification in ("harsh", "generous"):
            sig = "significant" if p.significant else "not significant"
            flagged.append(f"{rid}: {p.classification} ({sig})")
    overall = ("reviewers differ" if test.significant else "differences between reviewers not significant") + _p_text(
        test, "smallest Holm-adjusted"
    )
    return "; ".join([*flagged, overall]) if flagged else f"no outlying reviewer; {overall}"


def _profiles(
    sums: dict[str, GroupSums],
    offsets: dict[str, tuple[int, float, float]],
    reviewers: Sequence[str],
    scale: tuple[float, float] | None,
) -> tuple[dict[str, ReviewerProfile], SignificanceTest, dict[str, float | None]]:
    """Calibration on the answers reviewers share: each reviewer's offset (its mean gap to the
    other reviewers over the sessions it shared answers in) and a t-test of it over sessions,
    Holm-adjusted over every reviewer in the baseline; the seed's z-scores of those offsets. The
    seed's z of the raw means is kept beside (docs/methods.md, "Reviewer calibration")."""
    means = {r: g.total / g.n for r, g in sums.items()}
    seed_zs = calibration_zscores(means)
    shared = {r: o for r, o in offsets.items() if o[0] > 0 and r in sums}
    offset_means = {r: total / n for r, (n, total, _) in shared.items()}
    zs = calibration_zscores(offset_means)
    tests = {
        r: paired_t_test(n, total, total_sq, name="t-test of its gaps to the other reviewers (one a session)")
        for r, (n, total, total_sq) in shared.items()
    }
    adjusted = holm_adjust({r: t.p_value for r, t in tests.items()})
    profiles = {}
    for rid in sorted(sums):
        if reviewers and rid not in reviewers:
            continue
        g = sums[rid]
        var = variance_from_sums(*g)
        z, label = zs.get(rid, (None, NOT_COMPARABLE))
        p = adjusted.get(rid)
        profiles[rid] = ReviewerProfile(
            mean=round(means[rid], 3),
            std=round(math.sqrt(var), 3),
            z_score=z,
            classification=label,
            samples=g.n,
            variance=round(var, 3),
            variance_label=variance_label(var, g.n, scale),
            reliability=reliability(g.n),
            p_value=p,
            significant=p is not None and p < ALPHA,
            offset=round(offset_means[rid], 3) if rid in offset_means else None,
            offset_sessions=shared[rid][0] if rid in shared else 0,
            seed_z_score=seed_zs[rid][0],
            seed_classification=seed_zs[rid][1],
        )
    return (
        profiles,
        _calibration_test(tests, adjusted),
        {
            "median": _median(offset_means.values()),
            "spread": _spread(offset_means.values()),
        },
    )


def _median(values: Iterable[float]) -> float | None:
    values = list(values)
    return round(statistics.median(values), 3) if values else None


def _spread(values: Iterable[float]) -> float | None:
    """The seed's spread of reviewer means: their standard deviation above 2 reviewers, else 1."""
    values = list(values)
    if not values:
        return None
    return round(statistics.stdev(values) if len(values) > 2 else 1.0, 3)


def _calibration_test(tests: dict[str, SignificanceTest], adjusted: dict[str, float | None]) -> SignificanceTest:
    """ "Do any reviewers differ?": the reviewer with the smallest Holm-adjusted p, its t and df, and
    that p (Bonferroni's global test, so significant exactly when some reviewer is)."""
    name = "t-tests across reviewers of their gaps on shared answers (Holm-adjusted)"
    known = {r: p for r, p in adjusted.items() if p is not None}
    if not known:
        return SignificanceTest(
            name=name,
            statistic=None,
            df=[0],
            p_value=None,
            significant=False,
            note="no two reviewers scored the same answers in two sessions or more",
        )
    first = min(known, key=lambda r: (known[r], r))
    t = tests[first]
    return SignificanceTest(
        name=name,
        statistic=t.statistic,
        df=t.df,
        p_value=known[first],
        significant=known[first] < ALPHA,
        note=f"smallest: {first}",
    )


def _self_preference_report(self_sums: dict[str, tuple[Any, ...]]) -> dict[str, SelfPreferenceReport]:
    """Per reviewer, per session: c = (its gap to the others on its own answer) − (its mean gap to
    them on the session's other answers); the t-test over sessions is on c (docs/methods.md,
    "Self-preference")."""
    out = {}
    for rid, (n, own, others, sd, _sdd, cn, sg, sc, scc) in sorted(self_sums.items()):
        out[rid] = SelfPreferenceReport(
            self_mean=round(own / n, 3),
            others_mean=round(others / n, 3),
            difference=round(sd / n, 3),
            reviewer_offset=round(sg / cn, 3) if cn else None,
            adjusted_difference=round(sc / cn, 3) if cn else None,
            n=n,
            adjusted_n=cn,
            test=paired_t_test(cn, sc, scc, name="t-test of own-answer gap minus other-answer gap"),
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
        return SignificanceTest(
            name=name,
            statistic=None,
            df=[0, 0],
            p_value=None,
            significant=False,
            note=f"{unblocked} reviews of more than 53 answers have answers without a score",
        )
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
