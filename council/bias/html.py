"""The bias report as one self-contained HTML page: inline CSS and SVG, no scripts.

First, in plain words, what is statistically significant and what is not
(:mod:`council.bias.wording`); then three charts — mean score per reviewer (with z-score
and classification), mean score per display position (with counts), and response length
vs mean score received — each with the tables of the text report. Charts are drawn at
their own size (width and height set, never stretched), with labelled axes; bars start at
the bottom of the score scale, the scatter's axes are fitted to its points. Every string
from the data is escaped.
"""

from __future__ import annotations

import math
from html import escape

from council._util.html_parts import TABLE, html_table, nice_ticks, number, scroll, standalone_page
from council.bias.report import BiasReport, position_verdict
from council.bias.wording import findings, p_text
from council.methods.significance import SignificanceTest


def _score_range(report: BiasReport) -> tuple[float, float]:
    """The score axis of the bar charts: from the bottom of the scale (a bar's honest
    baseline) to just above the highest mean shown (fitted to the data, within the scale)."""
    means = [p.mean for p in report.reviewers.values()] + list(report.position_bias.means.values())
    if report.score_scale:
        lo, top = report.score_scale
    elif report.scales_normalized:
        lo, top = 1.0, 10.0
    else:
        lo, top = min([0.0, *means]), max(means, default=10.0) * 1.05 or 1.0
    if not means or top <= lo:
        return lo, top if top > lo else lo + 1.0
    if report.score_scale or report.scales_normalized:
        return lo, top  # the whole scale: a mean of 7 on 1–10 must not fill the chart
    step = _tick_step(lo, max(means))
    # The first tick above the tallest bar with room for its value label, on the ticks from
    # the baseline (so the axis ends on a labelled tick), within the scale.
    hi = lo + math.ceil((max(means) + step * 0.25 - lo) / step) * step
    return lo, min(hi, top)


def _tick_step(lo: float, hi: float) -> float:
    ticks = nice_ticks(lo, hi)
    return ticks[1] - ticks[0] if len(ticks) > 1 else (hi - lo) or 1.0


def _bar_ticks(lo: float, hi: float) -> list[float]:
    """Ticks from the baseline up (1, 3, 5... on a 1-10 scale), so the baseline is labelled."""
    step = _tick_step(lo, hi)
    count = int(math.floor((hi - lo) / step + 1e-9))
    return [round(lo + k * step, 10) for k in range(count + 1)]


def _fitted_range(values: list[float], clamp: tuple[float, float] | None = None) -> tuple[float, float]:
    """[min, max] of ``values`` padded by 5 % (kept inside ``clamp``)."""
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.05 or max(abs(hi) * 0.05, 0.5)
    lo, hi = lo - pad, hi + pad
    if clamp is not None:
        lo, hi = max(lo, clamp[0]), min(hi, clamp[1])
    return lo, hi


def _svg_open(kind: str, width: float, height: float, label: str) -> str:
    # An explicit size: drawn at 1:1 (CSS may shrink it on narrow screens, never stretch it).
    return (
        f'<svg class="chart {kind}" width="{width:g}" height="{height:g}" viewBox="0 0 {width:g} {height:g}" '
        f'role="img" aria-label="{escape(label)}">'
    )


def _reviewer_chart(report: BiasReport) -> str:
    rows = list(report.reviewers.items())
    if not rows:
        return '<p class="muted">No reviewers.</p>'
    lo, hi = _score_range(report)
    left, width, row_h, value_w = 250, 420, 26, 210
    top = 30
    bottom = top + row_h * len(rows)
    height = bottom + 46

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * width

    parts = [_svg_open("reviewers", left + width + value_w, height, "Mean score per reviewer")]
    for t in _bar_ticks(lo, hi):
        parts.append(
            f'<line class="grid" x1="{x(t):.1f}" y1="{top - 6}" x2="{x(t):.1f}" y2="{bottom}"/>'
            f'<text class="xtick" x="{x(t):.1f}" y="{bottom + 16}" text-anchor="middle">{_tick(t)}</text>'
        )
    for i, (rid, p) in enumerate(rows):
        y = top + i * row_h
        # Colour only a label the test backs: a harsh/generous reviewer that is not significant is grey.
        label = p.classification if p.significant or p.classification not in ("harsh", "generous") else \
            f"{p.classification} (not significant)"
        cls = p.classification if p.significant else "neutral"
        z = "—" if p.z_score is None else f"{p.z_score:+.2f}"
        parts.append(
            f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{escape(rid)}</text>'
            f'<rect class="{cls}" x="{left}" y="{y + 3}" width="{max(x(p.mean) - left, 0):.1f}" height="{row_h - 8}">'
            f"<title>{escape(rid)}: mean {p.mean}, z {z} ({escape(label)}), {p.samples} scores"
            "</title></rect>"
            # Values sit in their own column right of the plot, clear of the bars and the median line.
            f'<text class="value" x="{left + width + 12}" y="{y + 15}">{p.mean:.2f}  z = {z}  '
            f"{escape(label)}</text>"
        )
    if report.median_of_means is not None:
        mx = x(report.median_of_means)
        parts.append(
            f'<line class="median" x1="{mx:.1f}" y1="{top - 10}" x2="{mx:.1f}" y2="{bottom}"/>'
            f'<text x="{mx:.1f}" y="{top - 14}" text-anchor="middle">median {report.median_of_means:.2f}</text>'
        )
    parts.append(
        f'<line class="axis" x1="{left}" y1="{bottom}" x2="{left + width}" y2="{bottom}"/>'
        f'<text class="axis-title" x="{left + width / 2}" y="{bottom + 38}" text-anchor="middle">'
        "mean score given</text></svg>"
    )
    return "".join(parts)


def _position_chart(report: BiasReport) -> str:
    pb = report.position_bias
    if not pb.means:
        return '<p class="muted">No positions.</p>'
    lo, hi = _score_range(report)
    top, plot_h, bar_w, gap, left = 20, 200, 48, 28, 70
    # At least as wide as the axis title (≈ 230 px at 12 px), however few positions there are.
    width = max(left + len(pb.means) * (bar_w + gap) + gap, left + 250)
    bottom = top + plot_h
    height = bottom + 66

    def y(v: float) -> float:
        return bottom - (v - lo) / (hi - lo) * plot_h

    parts = [_svg_open("positions", width, height, "Mean score by display position")]
    for t in _bar_ticks(lo, hi):
        parts.append(
            f'<line class="grid" x1="{left}" y1="{y(t):.1f}" x2="{width}" y2="{y(t):.1f}"/>'
            f'<text class="ytick" x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{_tick(t)}</text>'
        )
    for i, (pos, mean) in enumerate(sorted(pb.means.items())):
        bx = left + gap + i * (bar_w + gap)
        count = pb.counts.get(pos, 0)
        parts.append(
            f'<rect class="bar" x="{bx}" y="{y(mean):.1f}" width="{bar_w}" height="{max(y(lo) - y(mean), 0):.1f}">'
            f"<title>position {pos}: mean {mean}, n = {count}</title></rect>"
            f'<text class="value" x="{bx + bar_w / 2}" y="{y(mean) - 5:.1f}" text-anchor="middle">{mean:.2f}</text>'
            f'<text x="{bx + bar_w / 2}" y="{bottom + 16}" text-anchor="middle">{pos}</text>'
            f'<text x="{bx + bar_w / 2}" y="{bottom + 31}" text-anchor="middle" class="muted">n = {count}</text>'
        )
    parts.append(
        f'<line class="axis" x1="{left}" y1="{bottom}" x2="{width}" y2="{bottom}"/>'
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{bottom}"/>'
        f'<text class="axis-title" x="{(left + width) / 2}" y="{bottom + 54}" text-anchor="middle">'
        "display position (0 = shown first)</text>"
        f'<text class="axis-title" x="16" y="{top + plot_h / 2}" transform="rotate(-90 16 {top + plot_h / 2})" '
        'text-anchor="middle">mean score received</text></svg>'
    )
    return "".join(parts)


def _scatter(report: BiasReport) -> str:
    points = report.length_points
    if not points:
        return '<p class="muted">No length/score points in this report.</p>'
    lo_x, hi_x = _fitted_range([p[0] for p in points], clamp=(0.0, math.inf))
    scale = report.score_scale or ((1.0, 10.0) if report.scales_normalized else None)
    lo_y, hi_y = _fitted_range([p[1] for p in points], clamp=scale)
    left, top, w, h = 64, 16, 620, 300
    bottom = top + h

    def sx(v: float) -> float:
        return left + (v - lo_x) / (hi_x - lo_x) * w

    def sy(v: float) -> float:
        return bottom - (v - lo_y) / (hi_y - lo_y) * h

    parts = [_svg_open("scatter", left + w + 24, bottom + 50, "Response length vs mean score received")]
    for t in nice_ticks(lo_x, hi_x, 6):
        if lo_x <= t <= hi_x:
            parts.append(
                f'<line class="grid" x1="{sx(t):.1f}" y1="{top}" x2="{sx(t):.1f}" y2="{bottom}"/>'
                f'<text class="xtick" x="{sx(t):.1f}" y="{bottom + 16}" text-anchor="middle">{_length_tick(t)}</text>'
            )
    for t in nice_ticks(lo_y, hi_y):
        if lo_y <= t <= hi_y:
            parts.append(
                f'<line class="grid" x1="{left}" y1="{sy(t):.1f}" x2="{left + w}" y2="{sy(t):.1f}"/>'
                f'<text class="ytick" x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{_tick(t)}</text>'
            )
    parts.extend(f'<circle class="pt" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5"/>' for x, y in points)
    parts.append(
        f'<line class="axis" x1="{left}" y1="{bottom}" x2="{left + w}" y2="{bottom}"/>'
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{bottom}"/>'
        f'<text class="axis-title" x="{left + w / 2}" y="{bottom + 40}" text-anchor="middle">'
        f"response length ({escape(report.length_unit)})</text>"
        f'<text class="axis-title" x="16" y="{top + h / 2}" transform="rotate(-90 16 {top + h / 2})" '
        'text-anchor="middle">mean score received</text></svg>'
    )
    return "".join(parts)


def _tick(tick: float) -> str:
    return f"{tick:.6g}"


def _length_tick(tick: float) -> str:
    return f"{int(tick):,}" if float(tick).is_integer() else number(tick, 6)


def _p(p: float | None) -> str:
    return "—" if p is None else p_text(p).removeprefix("p = ").removeprefix("p ")


def _stat(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"


def _yes_no(test: SignificanceTest) -> str:
    return "not computed" if test.p_value is None else "yes" if test.significant else "no"


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"


def _adjusted_yes_no(test: SignificanceTest, adjusted: float | None) -> str:
    return "not computed" if test.p_value is None or adjusted is None else "yes" if adjusted < test.alpha else "no"


def _significance(significant: bool, p: float | None) -> str:
    if p is None:
        return "not tested"
    return f"{'yes' if significant else 'no'} (p = {number(p, 3)})"


def _calibration_test(report: BiasReport) -> str:
    """One line: do the reviewers differ at all on the answers they share, said plainly."""
    t = report.reviewer_calibration_test
    if t is None:
        return ""
    if t.p_value is None:
        return f'<p class="note">{escape(t.name)}: not computed — {escape(t.note or "")}</p>'
    if t.significant:
        return (f'<p class="muted">{escape(t.name)}: p = {number(t.p_value, 3)}: '
                "the reviewers score the answers they share differently.</p>")
    return (f'<p class="note">{escape(t.name)}: p = {number(t.p_value, 3)}: the differences between reviewers '
            "are not significant; a harsh or generous label may be chance.</p>")


def _reviewers_table(report: BiasReport) -> str:
    """Each reviewer's calibration: mean, offset on shared answers, z and labels."""
    return html_table(
        ["reviewer", "mean", "std", "offset on shared answers", "sessions", "z", "classification", "variance",
         "label", "samples", "reliability", "differs from the others (Holm-adjusted p)", "seed's z (raw means)"],
        [[rid, p.mean, p.std, "—" if p.offset is None else f"{p.offset:+.3f}", p.offset_sessions,
          "—" if p.z_score is None else f"{p.z_score:+.2f}", p.classification, p.variance, p.variance_label,
          p.samples, p.reliability, _significance(p.significant, p.p_value),
          f"{p.seed_z_score:+.2f} ({p.seed_classification})"] for rid, p in report.reviewers.items()],
        {1, 2, 3, 4, 5, 7, 9},
    )


def _length_table(report: BiasReport) -> str:
    """The pooled length correlation, its interval and the seed's figures beside it."""
    r, ci, seed = report.length_correlation, report.length_correlation_ci, report.length_correlation_ci_seed
    seed_r = report.length_correlation_seed
    return html_table(
        ["pooled r", "95% CI", "significant (CI excludes 0)", "sessions", "confidence", "strength", "pairs",
         "seed's r (biased)", "seed's CI (too narrow)"],
        [["—" if r is None else f"{r:+.3f}", "—" if ci is None else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]",
          "not computed" if ci is None else ("yes" if ci[0] > 0 or ci[1] < 0 else "no"), report.sample_size,
          report.confidence_level, (report.length_interpretation or "—").replace("_", " "), report.length_pairs,
          "—" if seed_r is None else f"{seed_r:+.3f}", "—" if seed is None else f"[{seed[0]:+.3f}, {seed[1]:+.3f}]"]],
        {0, 3, 6, 7},
    )


def _position_tables(report: BiasReport) -> tuple[str, str]:
    """The position-bias tests (the verdict's, Holm-adjusted) and each reviewer's own test."""
    pb = report.position_bias
    adjusted = pb.adjusted_p_values
    in_verdict = [(k, t) for k, t in (("within_review", pb.within_review_test), ("top_position", pb.top_position_test),
                                      ("", pb.test)) if t is not None]  # fmt: skip
    tests = html_table(
        ["test", "statistic", "df", "p-value", "Holm-adjusted p (the verdict's)", "significant (α = 0.05)", "note"],
        [[t.name, _stat(t.statistic), ", ".join(map(str, t.df)), _p(t.p_value),
          _p(adjusted.get(k)) if k else "not in the verdict", _adjusted_yes_no(t, adjusted.get(k)) if k else "—",
          t.note or ""] for k, t in in_verdict],
        {1, 2, 3, 4},
    )
    by_reviewer = html_table(
        ["reviewer", "reviews", "mean by position", "F (within its reviews)", "df", "p-value", "Holm-adjusted p",
         "significant"],
        [[rid, v.orderings, ", ".join(f"{p}: {m:.2f}" for p, m in v.means.items()), _stat(v.test.statistic),
          ", ".join(map(str, v.test.df)), _p(v.test.p_value), _p(adjusted.get(f"reviewer:{rid}")),
          _adjusted_yes_no(v.test, adjusted.get(f"reviewer:{rid}"))] for rid, v in pb.reviewers.items()],
        {1, 3, 4, 5, 6},
    ) if pb.reviewers else ""
    return tests, by_reviewer


def _self_preference_table(report: BiasReport) -> str:
    """Each reviewer's own answers against the others' scores of them."""
    return html_table(
        ["reviewer", "own answers (mean)", "others on the same answers", "difference", "n",
         "gap on its other answers", "adjusted difference", "sessions compared", "p (t over sessions)",
         "significant"],
        [[rid, sp.self_mean, sp.others_mean, f"{sp.difference:+.3f}", sp.n, _signed(sp.reviewer_offset),
          _signed(sp.adjusted_difference), sp.adjusted_n, _p(sp.test.p_value), _yes_no(sp.test)]
         for rid, sp in report.self_preference.items()],
        {1, 2, 3, 4, 5, 6, 7, 8},
    ) if report.self_preference else '<p class="muted">No self-review records.</p>'


def _agreement_section(report: BiasReport) -> str:
    """Each reviewer against the consensus, the reviewers' agreement matrix, the agreement-based n_eff."""
    agreement = report.reviewer_agreement
    if agreement is None:
        return ""

    def tau(value: float | None) -> str:
        return "—" if value is None else f"{value:+.3f}"

    consensus = html_table(
        ["reviewer", "sessions", "mean Kendall's τ_b with the consensus", "top-1 agreement"],
        [[rid, r.sessions, tau(r.kendall_tau), "—" if r.top1 is None else f"{r.top1:.1%}"]
         for rid, r in agreement.reviewers.items()],
        {1, 2, 3},
    )  # fmt: skip
    reviewers = list(agreement.matrix)
    matrix = html_table(["reviewer", *reviewers], [[rid, *(tau(v) for v in row.values())]
                                                   for rid, row in agreement.matrix.items()],
                        set(range(1, len(reviewers) + 1)))  # fmt: skip
    n_eff = "—" if agreement.n_eff is None else f"{agreement.n_eff:.2f}"
    return (f"<h2>Reviewer agreement</h2>\n{scroll(consensus)}\n{scroll(matrix)}\n"
            f'<p class="note">Effective number of reviewers: {escape(n_eff)} of {agreement.k} (mean τ_b '
            f"{escape(tau(agreement.mean_agreement))}); {escape(agreement.note)}.</p>")  # fmt: skip


def _findings_list(report: BiasReport) -> str:
    """What the data says, one verdict a line."""
    said = findings(report)
    return (
        '<ul class="findings">' + "".join(
            f'<li><span class="verdict v-{f.verdict.replace(" ", "-")}">{escape(f.verdict)}</span>'
            f"{escape(f.text)}</li>"
            for f in said
        ) + "</ul>"
        if said else '<p class="muted">Nothing to report yet.</p>'
    )


def _honesty_table(report: BiasReport) -> str:
    """Each indicator against the minimum sample it needs."""
    honesty = TABLE + "<thead><tr>" + "".join(
        f"<th>{h}</th>" for h in ("metric", "data points", "minimum", "status", "verdict")
    ) + "</tr></thead><tbody>"
    honesty += "".join(
        f'<tr><td>{escape(h.metric.replace("_", " "))}</td><td class="num">{h.data_points}</td>'
        f'<td class="num">{h.minimum} {escape(h.unit)}</td>'
        f'<td class="{escape(h.status)}">{escape(h.status)}</td>'
        f'<td>{escape((h.verdict or "—").replace("_", " "))}</td></tr>'
        for h in report.honesty
    ) + "</tbody></table>"
    return honesty


def render_html(report: BiasReport, title: str = "council bias report", *, fragment: bool = False) -> str:
    """A standalone HTML page for ``report`` (open it in any browser, offline); with ``fragment``,
    only what its body holds under the title (what the web app shows, styled by the same
    ``PAGE_CSS``)."""
    pb = report.position_bias
    filters = ", ".join(
        f"{k} = {', '.join(v) if isinstance(v, list) else v}" for k, v in report.filters.items() if v
    )
    scope = " · " + escape(filters) if filters else ""
    if report.scales_normalized:
        scope += " · scores rescaled to 1–10"
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in report.notes)
    reviewers = _reviewers_table(report)
    calibration_test = _calibration_test(report)
    length = _length_table(report)
    tests, by_reviewer = _position_tables(report)
    self_pref = _self_preference_table(report)
    summary = _findings_list(report)
    honesty = _honesty_table(report)
    body = f"""<p class="muted">{report.total_records} records · {report.sessions} sessions{scope}.
Diagnostic only: no score is ever adjusted.</p>
{notes}
<h2>What the data says</h2>
<p class="muted">Significant means unlikely to be chance at the 5% level (p &lt; 0.05). Not significant
means the data are consistent with no effect, not that there is none.</p>
{summary}
<h2>Reviewer calibration</h2>
<p class="muted">Mean score per reviewer. Each reviewer's offset is its mean gap to the other reviewers on the
answers they both scored; z is that offset against the median of the offsets (spread {number(report.std_of_offsets)}).
Harsh below z = −1, generous above +1; a reviewer that shares no answer with another is not comparable.</p>
{calibration_test}
{scroll(_reviewer_chart(report))}
{reviewers}
<h2>Position bias</h2>
<p class="muted">Mean score by 0-based display position. Variance of the means {pb.variance}
(threshold {pb.threshold}): {escape(position_verdict(report))}.</p>
{scroll(_position_chart(report))}
{tests}
{by_reviewer}
<h2>Length vs score</h2>
<p class="muted">Each point is one answer in one session: its length in {escape(report.length_unit)} and the mean
score it received ({len(report.length_points)} points shown). The pooled r is one correlation over every session's
answers, each measured from its own session's mean length and mean score.</p>
{scroll(_scatter(report))}
{length}
<h2>Self-preference</h2>
{self_pref}
{_agreement_section(report)}
<h2>Statistical honesty</h2>
{honesty}
"""
    return body if fragment else standalone_page(title, body)
