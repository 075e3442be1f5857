"""The bias report in plain words: what is statistically significant, what is not, and what
there is too little data to say.

Each :class:`Finding` is one sentence built from the report's own numbers and tests; the HTML
page and the text report print the same sentences. Significance is at the report's alpha
(0.05). A statistic without a test (the harsh/generous labels) says so instead of implying one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from council.bias.report import BiasReport
from council.methods.significance import SignificanceTest, p_text

Verdict = Literal["significant", "not significant", "not tested", "too little data"]



def _unit(report: BiasReport) -> str:
    """How the report measured answer length, in words a reader says."""
    return {"chars": "characters"}.get(report.length_unit, report.length_unit)
"""What the length correlation measures (one place to change if the unit changes)."""


@dataclass(frozen=True)
class Finding:
    topic: str
    """position | length | self-preference | calibration"""
    verdict: Verdict
    text: str


_SYMBOLS = {"one-way ANOVA": "F", "two-way ANOVA": "F", "chi-square": "χ²", "paired t": "t", "t-test": "t"}


def stat_detail(test: SignificanceTest) -> str:
    """"one-way ANOVA: F = 1,696, p < 0.001" (a test's short name, its statistic, its p-value)."""
    name = test.name.split(" (")[0]
    symbol = next((s for prefix, s in _SYMBOLS.items() if name.startswith(prefix)), "statistic")
    if test.statistic is None:
        stat = ""
    elif abs(test.statistic) >= 100:
        stat = f"{symbol} = {test.statistic:,.0f}, "
    else:
        stat = f"{symbol} = {test.statistic:.3g}, "
    p = p_text(test.p_value) if test.p_value is not None else "no p-value"
    return f"{name}: {stat}{p}"


def describe_test(test: SignificanceTest, subject: str) -> tuple[Verdict, str]:
    """``subject`` ("The difference between positions") + whether ``test`` finds it significant."""
    if test.p_value is None:
        why = f": {test.note}" if test.note else ""
        return "not tested", f"{subject} could not be tested ({test.name.split(' (')[0]}{why})."
    detail = f"({stat_detail(test)})"
    if test.significant:
        return "significant", f"{subject} is statistically significant {detail}: unlikely to be chance."
    return "not significant", f"{subject} is not statistically significant {detail}: it could be chance."


def _honesty(report: BiasReport, metric: str) -> tuple[bool, str]:
    """(enough data?, "12 of 20 orderings")"""
    row = next((h for h in report.honesty if h.metric == metric), None)
    if row is None:
        return True, ""
    return row.status == "sufficient", f"{row.data_points} of {row.minimum} {row.unit}"


def _indicator(report: BiasReport, metric: str, finding: Finding) -> Finding:
    enough, counts = _honesty(report, metric)
    if enough:
        return finding
    return Finding(finding.topic, finding.verdict, f"Indicator only, too little data ({counts}): {finding.text}")


def _adjusted(test: SignificanceTest, p: float | None, subject: str) -> tuple[Verdict, str]:
    """:func:`describe_test` with the p-value Holm-adjusted in the position verdict's family."""
    if test.p_value is None or p is None:
        return describe_test(test, subject)
    adjusted = test.model_copy(update={"p_value": p, "significant": p < test.alpha})
    verdict, text = describe_test(adjusted, subject)
    return verdict, text.replace(f"{p_text(p)})", f"Holm-adjusted {p_text(p)})", 1)


def position_findings(report: BiasReport) -> list[Finding]:
    """Positions compared within reviews (every reviewer, then each reviewer found to differ) and
    where the top score lands; every p-value Holm-adjusted over the verdict's tests."""
    pb = report.position_bias
    if len(pb.means) < 2:
        return []
    first, last = min(pb.means), max(pb.means)
    best = max(pb.means, key=lambda p: pb.means[p])
    worst = min(pb.means, key=lambda p: pb.means[p])
    if best == first:
        lead = "Answers shown first get the highest mean score"
    elif best == last:
        lead = "Answers shown last get the highest mean score"
    else:
        lead = f"Answers shown at position {best} get the highest mean score"
    shape = f"{lead} ({pb.means[best]:.2f}; lowest {pb.means[worst]:.2f}, at position {worst})."
    adjusted = pb.adjusted_p_values
    out = []
    if pb.within_review_test is not None:
        subject = "Compared within each review, the difference between positions"
        verdict, sentence = _adjusted(pb.within_review_test, adjusted.get("within_review"), subject)
        out.append(_indicator(report, "position_bias", Finding("position", verdict, f"{shape} {sentence}")))
    for rid, view in pb.reviewers.items():
        if not view.significant:
            continue
        top = max(view.means, key=lambda p: view.means[p])
        low = min(view.means, key=lambda p: view.means[p])
        _, sentence = _adjusted(view.test, adjusted.get(f"reviewer:{rid}"), "This")
        text = (
            f"{rid}'s scores depend on display position ({view.means[top]:.2f} at position {top}, "
            f"{view.means[low]:.2f} at position {low}, over its {view.orderings} reviews). {sentence}"
        )
        out.append(_indicator(report, "position_bias", Finding("position", "significant", text)))
    top = pb.top_position_test
    if top.p_value is not None:
        p = adjusted.get("top_position", top.p_value)
        if p is not None and p < top.alpha:
            finding = Finding(
                "position",
                "significant",
                f"The best-scored answer of a review lands at some positions more often than chance would "
                f"({stat_detail(top)}; Holm-adjusted {p_text(p)}).",
            )
        else:
            finding = Finding(
                "position",
                "not significant",
                f"The best-scored answer of a review lands at each position about equally often "
                f"({stat_detail(top)}): no evidence that the top place depends on position.",
            )
        out.append(_indicator(report, "position_bias", finding))
    return out


def length_findings(report: BiasReport) -> list[Finding]:
    if report.total_records == 0:
        return []
    r, ci = report.length_correlation, report.length_correlation_ci
    if r is None or ci is None:
        text = (
            f"Length vs score: too few sessions with three or more answers with a length in {_unit(report)} "
            f"({report.sample_size} such sessions; at least 10 needed) to pool a correlation."
        )
        return [Finding("length", "too little data", text)]
    lo, hi = ci
    strength = (report.length_interpretation or "weak").split("_")[0]
    interval = f"pooled r = {r:+.2f}, 95% CI {lo:+.2f} to {hi:+.2f}, over {report.sample_size} sessions"
    if lo > 0 or hi < 0:
        direction = "Longer answers get higher scores" if r > 0 else "Longer answers get lower scores"
        text = (
            f"{direction} ({strength} correlation, length in {_unit(report)}; {interval}). The interval excludes "
            "zero, so the link is statistically significant at the 5% level."
        )
        finding = Finding("length", "significant", text)
    else:
        text = (
            f"No significant link between answer length ({_unit(report)}) and score ({interval}): the interval "
            "crosses zero."
        )
        finding = Finding("length", "not significant", text)
    return [_indicator(report, "length_correlation", finding)]


def self_preference_findings(report: BiasReport) -> list[Finding]:
    """Each significant self-preference in its own sentence; the rest grouped."""
    out = []
    calm: list[tuple[str, float]] = []
    untested: list[str] = []
    for rid, sp in report.self_preference.items():
        if sp.test.p_value is None or sp.adjusted_difference is None:
            untested.append(rid)
            continue
        if not sp.test.significant:
            calm.append((rid, sp.test.p_value))
            continue
        side = "above" if sp.adjusted_difference >= 0 else "below"
        shape = (
            f"{rid} scores its own answers {abs(sp.adjusted_difference):.2f} points {side} what the other reviewers "
            f"give them, beyond its gap to them on the other answers of the same sessions ({sp.adjusted_n} sessions)."
        )
        _, sentence = describe_test(sp.test, "This self-preference")
        out.append(Finding("self-preference", "significant", f"{shape} {sentence}"))
    if calm:
        ps = sorted(p for _, p in calm)
        spread = p_text(ps[0]) if len(ps) == 1 else f"{p_text(ps[0])} to {ps[-1]:.2g}"
        names = ", ".join(rid for rid, _ in calm)
        text = (
            f"No significant self-preference for {names} (t-tests over sessions, {spread}): their scores of their "
            "own answers are consistent with the other reviewers' scores of them."
        )
        out.append(Finding("self-preference", "not significant", text))
    if untested:
        text = f"Too few own answers scored by others to test self-preference for {', '.join(untested)}."
        out.append(Finding("self-preference", "too little data", text))
    return out


def calibration_findings(
    report: BiasReport,
    test: SignificanceTest | None = None,
    significant: Mapping[str, bool] | None = None,
) -> list[Finding]:
    """The harsh/generous labels; ``test`` (a test across reviewers) and ``significant`` (per
    reviewer) turn them from a description into a tested claim when the report carries them."""
    out = []
    if test is not None:
        tested, sentence = describe_test(test, "The difference between reviewers on the answers they share")
        out.append(_indicator(report, "reviewer_calibration", Finding("calibration", tested, sentence)))
    flagged = {rid: p for rid, p in report.reviewers.items() if p.classification in ("harsh", "generous")}
    for rid, profile in flagged.items():
        how = "lower" if profile.classification == "harsh" else "higher"
        shape = (
            f"{rid} scores {how} than the other reviewers on the answers they both scored (by "
            f"{abs(profile.offset or 0):.2f} points on average over {profile.offset_sessions} sessions; "
            f"z = {profile.z_score:+.2f} among the reviewers' offsets, {profile.classification})."
        )
        verdict: Verdict
        if significant is not None and rid in significant:
            verdict = "significant" if significant[rid] else "not significant"
            tail = f"This difference is {'' if significant[rid] else 'not '}statistically significant."
        else:
            verdict = "not tested"
            tail = "The label compares reviewers' offsets (|z| > 1); it is not a significance test."
        out.append(_indicator(report, "reviewer_calibration", Finding("calibration", verdict, f"{shape} {tail}")))
    apart = [rid for rid, p in report.reviewers.items() if p.z_score is None]
    if apart:
        text = (
            f"{', '.join(apart)} scored no answer another reviewer also scored: their harshness cannot be told "
            "from the quality of the answers they saw, so they are not compared."
        )
        out.append(Finding("calibration", "not tested", text))
    if not flagged and len(apart) < len(report.reviewers):
        text = (
            "No reviewer's offset on shared answers stands out from the others' (every |z| ≤ 1); this is not a "
            "significance test."
        )
        out.append(Finding("calibration", "not tested", text))
    return out


def findings(report: BiasReport) -> list[Finding]:
    """Every finding of ``report``, topic by topic."""
    if report.total_records == 0:
        return []
    return [
        *position_findings(report),
        *length_findings(report),
        *self_preference_findings(report),
        *calibration_findings(
            report,
            report.reviewer_calibration_test,
            {rid: p.significant for rid, p in report.reviewers.items() if p.p_value is not None},
        ),
    ]
