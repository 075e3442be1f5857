"""The bias report in plain words: what is statistically significant, what is not, and what
there is too little data to say.

Each :class:`Finding` is one sentence built from the report's own numbers and tests; the HTML
page and the text report print the same sentences. Significance is at the report's alpha
(0.05). A statistic without a test (the harsh/generous labels) says so instead of implying one.

:func:`render_bias_report_text` draws the whole report as text (rich, imported when drawing):
``council bias-report`` prints it, and the MCP tool returns it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from council.bias.report import BiasReport
from council.methods.significance import SignificanceTest, p_text

if TYPE_CHECKING:
    from rich.console import Console

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


# -- the whole report as text -----------------------------------------------------------------

_VARIANCE_TEXT = {"compressed": "compressed range"}


def render_bias_report_text(report: BiasReport, console: Console) -> None:
    """Reviewer profiles (docs/methods.md, "Reviewer profiles"), then tables for the other statistics."""
    if report.total_records == 0:
        console.print("No bias records" + (" match these filters." if any(report.filters.values()) else " yet."))
        return
    for part in (_print_findings, _print_reviewer_profiles, _print_length_correlation, _print_position_bias,
                 _print_self_preference, _print_reviewer_agreement, _print_honesty):  # fmt: skip
        part(report, console)


def _print_findings(report: BiasReport, console: Console) -> None:
    """What the data says, in words (:func:`findings`)."""
    from rich.text import Text

    console.print(Text("=== What the data says ===", style="bold"), "(significant: unlikely to be chance, p < 0.05)")
    for finding in findings(report):
        console.print(f"- [{finding.verdict}] {finding.text}", markup=False, highlight=False)
    console.print()


def _print_reviewer_profiles(report: BiasReport, console: Console) -> None:
    """Each reviewer's mean, offset on shared answers, variance and reliability; then the test
    of whether reviewers differ."""
    from rich.text import Text

    from council.methods.significance import p_text
    from council.untrusted.terminal import literal

    console.print(
        Text(f"=== Reviewer Profiles ({report.sessions} sessions, {report.total_records} records) ===", style="bold")
    )
    for rid, p in report.reviewers.items():
        console.print()
        console.print(literal(rid, "bold"))
        sig = "" if p.p_value is None else (
            f"; differs from the others, {p_text(p.p_value)}" if p.significant
            else f"; not significantly different from the others, {p_text(p.p_value)}"
        )
        if p.z_score is None:
            console.print(f"  Mean score: {p.mean:.1f} (not comparable: it shares no answer with another reviewer; "
                          f"the seed's z={p.seed_z_score:+.1f})", highlight=False)
        else:
            side = "above" if (p.offset or 0) >= 0 else "below"
            console.print(
                f"  Mean score: {p.mean:.1f}; on shared answers {abs(p.offset or 0):.2f} {side} the others over "
                f"{p.offset_sessions} sessions ({p.classification}, z={p.z_score:+.1f}{sig})",
                highlight=False,
            )
        label = _VARIANCE_TEXT.get(p.variance_label, p.variance_label)
        console.print(f"  Score variance: {p.variance:.1f} ({label})", highlight=False)
        console.print(f"  Reliability: {p.reliability} ({p.samples} samples)", highlight=False)
    console.print()
    ct = report.reviewer_calibration_test
    if ct is not None:
        if ct.p_value is None:
            console.print(f"{ct.name}: not computed — {ct.note}", markup=False, highlight=False)
        else:
            verdict = (
                "reviewers score the answers they share differently" if ct.significant
                else "the differences between reviewers are not significant (they could be chance)"
            )
            stat = "∞" if ct.statistic is None else f"{ct.statistic:.3f}"
            console.print(
                f"{ct.name}: t = {stat} (df {', '.join(map(str, ct.df))}; {ct.note}), p = {ct.p_value:.3g}: {verdict}",
                markup=False, highlight=False,
            )
        console.print()


def _print_length_correlation(report: BiasReport, console: Console) -> None:
    from rich.table import Table

    length = Table(title=f"Length–score correlation, length in {report.length_unit} (pooled within sessions)")
    for col in ("pooled r", "95% CI", "sessions", "confidence", "interpretation", "seed's r", "seed's CI"):
        length.add_column(col)
    r, ci, seed = report.length_correlation, report.length_correlation_ci, report.length_correlation_ci_seed
    seed_r = report.length_correlation_seed
    length.add_row(
        "—" if r is None else f"{r:+.3f}", "—" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]",
        str(report.sample_size), report.confidence_level, report.length_interpretation or "—",
        "—" if seed_r is None else f"{seed_r:+.3f}", "—" if seed is None else f"[{seed[0]:+.3f}, {seed[1]:+.3f}]",
    )
    console.print(length)


def _print_position_bias(report: BiasReport, console: Console) -> None:
    """Mean score by display position, its tests (Holm-adjusted where they make the verdict)
    and the per-reviewer view."""
    from rich.table import Table

    from council.bias.report import position_verdict
    from council.untrusted.terminal import literal

    pb = report.position_bias
    positions = Table(title="Mean score by display position")
    for col in ("position", "mean", "scores"):
        positions.add_column(col, justify="right")
    for pos, mean in pb.means.items():
        positions.add_row(str(pos), f"{mean:.3f}", str(pb.counts[pos]))
    console.print(positions)
    console.print(
        f"Variance of position means: {pb.variance} (threshold {pb.threshold}): {position_verdict(report)}",
        highlight=False,
    )
    adjusted = pb.adjusted_p_values
    for key, test in (("within_review", pb.within_review_test), ("top_position", pb.top_position_test), ("", pb.test)):
        if test is None:
            continue
        if test.p_value is None:
            console.print(f"{test.name}: not computed — {test.note}", markup=False, highlight=False)
            continue
        stat = "∞" if test.statistic is None else f"{test.statistic:.3f}"
        df = ", ".join(map(str, test.df))
        if key and adjusted.get(key) is not None:
            p_adj = adjusted[key]
            sig = f"Holm-adjusted p = {p_adj:.3g}, {'significant' if p_adj < test.alpha else 'not significant'}"
        else:
            sig = "not part of the verdict"
        extra = f" — {test.note}" if test.note else ""
        console.print(f"{test.name}: {stat} (df {df}), p = {test.p_value:.3g}, {sig}{extra}",
                      markup=False, highlight=False)
    if pb.reviewers:
        per = Table(title="Position by reviewer (positions compared within each of its reviews)")
        for col in ("reviewer", "reviews", "mean by position", "F", "p", "Holm-adjusted p"):
            per.add_column(col, justify="left" if col in ("reviewer", "mean by position") else "right")
        for rid, view in pb.reviewers.items():
            t, p_adj = view.test, adjusted.get(f"reviewer:{rid}")
            per.add_row(
                literal(rid), str(view.orderings), ", ".join(f"{p}: {m:.2f}" for p, m in view.means.items()),
                ("∞" if t.p_value == 0 else "—") if t.statistic is None else f"{t.statistic:.3f}",
                "—" if t.p_value is None else f"{t.p_value:.3g}",
                "—" if p_adj is None else f"{p_adj:.3g}" + (" *" if view.significant else ""),
            )
        console.print(per)


def _print_self_preference(report: BiasReport, console: Console) -> None:
    from rich.table import Table

    from council.untrusted.terminal import literal

    if report.self_preference:
        sp_table = Table(title="Self-preference (own answers vs the other reviewers' scores of them)")
        for col in ("reviewer", "own", "others", "difference", "n", "gap on its other answers", "adjusted",
                    "sessions", "p (t over sessions)"):
            sp_table.add_column(col, justify="left" if col == "reviewer" else "right")
        for rid, sp in report.self_preference.items():
            p = "—" if sp.test.p_value is None else f"{sp.test.p_value:.3g}"
            sp_table.add_row(
                literal(rid), f"{sp.self_mean:.3f}", f"{sp.others_mean:.3f}", f"{sp.difference:+.3f}", str(sp.n),
                "—" if sp.reviewer_offset is None else f"{sp.reviewer_offset:+.3f}",
                "—" if sp.adjusted_difference is None else f"{sp.adjusted_difference:+.3f}", str(sp.adjusted_n), p,
            )
        console.print(sp_table)


def _print_reviewer_agreement(report: BiasReport, console: Console) -> None:
    """Each reviewer against the sessions' consensus, the reviewers' agreement matrix, the
    agreement-based n_eff (docs/methods.md, "Reviewer agreement")."""
    agreement = report.reviewer_agreement
    if agreement is None:
        return
    from rich.table import Table

    from council.untrusted.terminal import literal

    def tau(value: float | None) -> str:
        return "—" if value is None else f"{value:+.3f}"

    table = Table(title="Agreement with the consensus (Kendall's τ_b of each ranking; top-1: same first answer)")
    for col in ("reviewer", "sessions", "mean τ_b", "top-1 agreement"):
        table.add_column(col, justify="left" if col == "reviewer" else "right")
    for rid, r in agreement.reviewers.items():
        table.add_row(literal(rid), str(r.sessions), tau(r.kendall_tau), "—" if r.top1 is None else f"{r.top1:.1%}")
    console.print(table)
    matrix = Table(title="Reviewers' agreement (mean Kendall's τ_b over the sessions they share)")
    matrix.add_column("reviewer")
    for rid in agreement.matrix:
        matrix.add_column(literal(rid), justify="right")
    for rid, row in agreement.matrix.items():
        matrix.add_row(literal(rid), *(tau(v) for v in row.values()))
    console.print(matrix)
    n_eff = "—" if agreement.n_eff is None else f"{agreement.n_eff:.2f}"
    console.print(literal(f"Effective number of reviewers: {n_eff} of {agreement.k} (mean τ_b "
                          f"{tau(agreement.mean_agreement)}); {agreement.note}"))  # fmt: skip
    console.print()


def _print_honesty(report: BiasReport, console: Console) -> None:
    """Whether each statistic has the data it needs, then the report's notes."""
    from rich.table import Table
    from rich.text import Text

    from council.untrusted.terminal import literal

    honesty = Table(title="Statistical honesty")
    for col in ("metric", "data points", "minimum", "status", "verdict"):
        honesty.add_column(col)
    for h in report.honesty:
        style = "green" if h.status == "sufficient" else "yellow"
        honesty.add_row(
            h.metric, str(h.data_points), f"{h.minimum} {h.unit}", Text(h.status, style=style),
            literal(h.verdict or "—"),
        )
    console.print(honesty)
    for note in report.notes:
        console.print(literal(f"note: {note}"))
