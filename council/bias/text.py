"""The bias report as text for people and models: ``council bias-report``, and the MCP tool's
text, both print it through here."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from council.bias.report import BiasReport


_VARIANCE_TEXT = {"compressed": "compressed range"}


def render_bias_report_text(report: BiasReport, console: Console) -> None:
    """Reviewer profiles (docs/methods.md, "Reviewer profiles"), then tables for the other statistics."""
    if report.total_records == 0:
        console.print("No bias records" + (" match these filters." if any(report.filters.values()) else " yet."))
        return
    for part in (_findings, _reviewer_profiles, _length_correlation, _position_bias, _self_preference, _honesty):
        part(report, console)


def _findings(report: BiasReport, console: Console) -> None:
    """What the data says, in words (:mod:`council.bias.wording`)."""
    from rich.text import Text

    from council.bias.wording import findings

    console.print(Text("=== What the data says ===", style="bold"), "(significant: unlikely to be chance, p < 0.05)")
    for finding in findings(report):
        console.print(f"- [{finding.verdict}] {finding.text}", markup=False, highlight=False)
    console.print()


def _reviewer_profiles(report: BiasReport, console: Console) -> None:
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


def _length_correlation(report: BiasReport, console: Console) -> None:
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


def _position_bias(report: BiasReport, console: Console) -> None:
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


def _self_preference(report: BiasReport, console: Console) -> None:
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


def _honesty(report: BiasReport, console: Console) -> None:
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
