"""The bias report as one self-contained HTML page: inline CSS and SVG, no scripts.

Three charts — mean score per reviewer (with z-score and classification), mean
score per display position (with counts), and response length vs mean score
received — followed by the tables of the text report. Every string from the data
is escaped.
"""

from __future__ import annotations

import math
from html import escape

from council.bias.report import BiasReport, position_verdict

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:980px;
color:#1d2430;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}
h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde2ea;padding-bottom:.3rem}
.muted{color:#5b6576}.note{background:#fff7e0;border-left:4px solid #e0a800;padding:.5rem .8rem;margin:.5rem 0}
table{border-collapse:collapse;margin:.6rem 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e6e9ef;padding:.25rem .7rem;text-align:left}th{background:#f4f6f9}
td.num{text-align:right}svg{display:block;margin:.6rem 0;max-width:100%;height:auto}
svg text{font:12px system-ui,sans-serif;fill:#1d2430}svg .axis{stroke:#8a94a6;stroke-width:1}
svg .grid{stroke:#e6e9ef;stroke-width:1}.harsh{fill:#d9534f}.generous{fill:#2f80ed}.neutral{fill:#8a94a6}
.bar{fill:#4f7cac}.pt{fill:#4f7cac;fill-opacity:.35}.median{stroke:#1d2430;stroke-dasharray:4 3}
.insufficient{color:#a15c00;font-weight:600}.sufficient{color:#1e7b34;font-weight:600}
"""


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return escape(str(value))
    return f"{value:.{digits}g}" if abs(value) < 1e-3 and value != 0 else f"{round(value, digits)}"


def _nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    t = first
    while t <= hi + 1e-9:
        ticks.append(round(t, 10))
        t += step
    return ticks


def _score_range(report: BiasReport) -> tuple[float, float]:
    if report.score_scale:
        return report.score_scale
    if report.scales_normalized:
        return (1.0, 10.0)
    values = [p.mean for p in report.reviewers.values()] + list(report.position_bias.means.values())
    values += [y for _, y in report.length_points]
    if not values:
        return (0.0, 10.0)
    return (min(0.0, min(values)), max(values) * 1.05 or 1.0)


def _reviewer_chart(report: BiasReport) -> str:
    rows = list(report.reviewers.items())
    if not rows:
        return '<p class="muted">No reviewers.</p>'
    lo, hi = _score_range(report)
    left, width, row_h = 260, 460, 26
    height = 30 + row_h * len(rows) + 24
    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * width
    parts = [f'<svg class="chart reviewers" viewBox="0 0 {left + width + 190} {height}" role="img" '
             f'aria-label="Mean score per reviewer">']
    for t in _nice_ticks(lo, hi):
        parts.append(f'<line class="grid" x1="{x(t):.1f}" y1="20" x2="{x(t):.1f}" y2="{height - 24}"/>'
                     f'<text x="{x(t):.1f}" y="{height - 8}" text-anchor="middle">{_fmt(t)}</text>')
    for i, (rid, p) in enumerate(rows):
        y = 24 + i * row_h
        cls = escape(p.classification)
        parts.append(
            f'<text x="{left - 8}" y="{y + 15}" text-anchor="end">{escape(rid)}</text>'
            f'<rect class="{cls}" x="{left}" y="{y + 3}" width="{max(x(p.mean) - left, 0):.1f}" height="{row_h - 8}">'
            f'<title>{escape(rid)}: mean {p.mean}, z {p.z_score:+.2f} ({cls}), {p.samples} scores</title></rect>'
            f'<text x="{x(p.mean) + 6:.1f}" y="{y + 15}">{p.mean:.2f}  z={p.z_score:+.2f} {cls}</text>'
        )
    if report.median_of_means is not None:
        mx = x(report.median_of_means)
        parts.append(f'<line class="median" x1="{mx:.1f}" y1="16" x2="{mx:.1f}" y2="{height - 24}"/>'
                     f'<text x="{mx:.1f}" y="12" text-anchor="middle">median {report.median_of_means:.2f}</text>')
    parts.append(f'<line class="axis" x1="{left}" y1="{height - 24}" x2="{left + width}" y2="{height - 24}"/></svg>')
    return "".join(parts)


def _position_chart(report: BiasReport) -> str:
    pb = report.position_bias
    if not pb.means:
        return '<p class="muted">No positions.</p>'
    lo, hi = _score_range(report)
    top, plot_h, bar_w, gap, left = 24, 220, 56, 24, 50
    width = left + len(pb.means) * (bar_w + gap) + gap
    def y(v: float) -> float:
        return top + plot_h - (v - lo) / (hi - lo) * plot_h
    parts = [f'<svg class="chart positions" viewBox="0 0 {width} {top + plot_h + 50}" role="img" '
             f'aria-label="Mean score by display position">']
    for t in _nice_ticks(lo, hi):
        parts.append(f'<line class="grid" x1="{left}" y1="{y(t):.1f}" x2="{width}" y2="{y(t):.1f}"/>'
                     f'<text x="{left - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    for i, (pos, mean) in enumerate(sorted(pb.means.items())):
        bx = left + gap + i * (bar_w + gap)
        count = pb.counts.get(pos, 0)
        parts.append(
            f'<rect class="bar" x="{bx}" y="{y(mean):.1f}" width="{bar_w}" height="{max(y(lo) - y(mean), 0):.1f}">'
            f'<title>position {pos}: mean {mean}, n = {count}</title></rect>'
            f'<text x="{bx + bar_w / 2}" y="{y(mean) - 5:.1f}" text-anchor="middle">{mean:.2f}</text>'
            f'<text x="{bx + bar_w / 2}" y="{top + plot_h + 16}" text-anchor="middle">pos {pos}</text>'
            f'<text x="{bx + bar_w / 2}" y="{top + plot_h + 32}" text-anchor="middle" class="muted">n={count}</text>'
        )
    parts.append(f'<line class="axis" x1="{left}" y1="{top + plot_h}" x2="{width}" y2="{top + plot_h}"/></svg>')
    return "".join(parts)


def _scatter(report: BiasReport) -> str:
    points = report.length_points
    if not points:
        return '<p class="muted">No length/score points in this report.</p>'
    xs = [p[0] for p in points]
    lo_y, hi_y = _score_range(report)
    lo_x, hi_x = 0.0, max(xs) * 1.05 or 1.0
    left, top, w, h = 60, 16, 640, 300
    def sx(v: float) -> float:
        return left + (v - lo_x) / (hi_x - lo_x) * w
    def sy(v: float) -> float:
        return top + h - (v - lo_y) / (hi_y - lo_y) * h
    parts = [f'<svg class="chart scatter" viewBox="0 0 {left + w + 20} {top + h + 46}" role="img" '
             f'aria-label="Response length vs mean score received">']
    for t in _nice_ticks(lo_x, hi_x, 6):
        parts.append(f'<line class="grid" x1="{sx(t):.1f}" y1="{top}" x2="{sx(t):.1f}" y2="{top + h}"/>'
                     f'<text x="{sx(t):.1f}" y="{top + h + 16}" text-anchor="middle">{_fmt(t, 6)}</text>')
    for t in _nice_ticks(lo_y, hi_y):
        parts.append(f'<line class="grid" x1="{left}" y1="{sy(t):.1f}" x2="{left + w}" y2="{sy(t):.1f}"/>'
                     f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    parts.extend(f'<circle class="pt" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5"/>' for x, y in points)
    parts.append(
        f'<line class="axis" x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}"/>'
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + h}"/>'
        f'<text x="{left + w / 2}" y="{top + h + 38}" text-anchor="middle">response length '
        f"({escape(report.length_unit)})</text>"
        f'<text x="14" y="{top + h / 2}" transform="rotate(-90 14 {top + h / 2})" text-anchor="middle">'
        f"mean score received</text></svg>"
    )
    return "".join(parts)


def _table(headers: list[str], rows: list[list[object]], numeric: frozenset[int] | set[int] = frozenset()) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(
            f'<td class="num">{escape(str(c))}</td>' if i in numeric else f"<td>{escape(str(c))}</td>"
            for i, c in enumerate(row)
        ) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _significance(significant: bool, p: float | None) -> str:
    if p is None:
        return "not tested"
    return f"{'yes' if significant else 'no'} (p = {_fmt(p, 3)})"


def _calibration_test(report: BiasReport) -> str:
    """One line: do the reviewers differ at all (one-way ANOVA), said plainly."""
    t = report.reviewer_calibration_test
    if t is None:
        return ""
    if t.p_value is None:
        return f'<p class="note">{escape(t.name)}: not computed — {escape(t.note or "")}</p>'
    if t.significant:
        return (f'<p class="muted">{escape(t.name)}: p = {_fmt(t.p_value, 3)}: '
                "the reviewers' mean scores differ.</p>")
    return (f'<p class="note">{escape(t.name)}: p = {_fmt(t.p_value, 3)}: the differences between reviewers '
            "are not significant; a harsh or generous label may be chance.</p>")


def render_html(report: BiasReport, title: str = "council bias report") -> str:
    """A standalone HTML page for ``report`` (open it in any browser, offline)."""
    pb = report.position_bias
    filters = ", ".join(
        f"{k} = {', '.join(v) if isinstance(v, list) else v}" for k, v in report.filters.items() if v
    )
    scope = " · " + escape(filters) if filters else ""
    if report.scales_normalized:
        scope += " · scores rescaled to 1–10"
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in report.notes)
    reviewers = _table(
        ["reviewer", "mean", "std", "z", "classification", "variance", "label", "samples", "reliability",
         "differs from the others (Holm-adjusted p)"],
        [[rid, p.mean, p.std, f"{p.z_score:+.2f}", p.classification, p.variance, p.variance_label, p.samples,
          p.reliability, _significance(p.significant, p.p_value)] for rid, p in report.reviewers.items()],
        {1, 2, 3, 5, 7},
    )
    calibration_test = _calibration_test(report)
    ci = report.length_correlation_ci
    length = _table(
        ["pooled r", "95% CI", "sessions", "confidence", "interpretation", "pairs"],
        [[report.length_correlation, f"[{ci[0]}, {ci[1]}]", report.sample_size, report.confidence_level,
          report.length_interpretation or "—", report.length_pairs]],
        {0, 2, 5},
    )
    tests = _table(
        ["test", "statistic", "df", "p-value", "significant (α = 0.05)", "note"],
        [[t.name, _fmt(t.statistic, 4), ", ".join(map(str, t.df)), _fmt(t.p_value, 3), "yes" if t.significant else "no",
          t.note or ""] for t in (pb.test, pb.top_position_test)],
    )
    self_pref = _table(
        ["reviewer", "own answers (mean)", "others on the same answers", "difference", "reviewer offset",
         "adjusted difference", "n", "p (paired t, adjusted)"],
        [[rid, sp.self_mean, sp.others_mean, f"{sp.difference:+.3f}", f"{sp.reviewer_offset:+.3f}",
          f"{sp.adjusted_difference:+.3f}", sp.n, _fmt(sp.test.p_value, 3)]
         for rid, sp in report.self_preference.items()],
        {1, 2, 3, 4, 5, 6, 7},
    ) if report.self_preference else '<p class="muted">No self-review records.</p>'
    honesty = "<table><thead><tr>" + "".join(
        f"<th>{h}</th>" for h in ("metric", "data points", "minimum", "status", "verdict")
    ) + "</tr></thead><tbody>"
    honesty += "".join(
        f'<tr><td>{escape(h.metric)}</td><td class="num">{h.data_points}</td>'
        f'<td class="num">{h.minimum} {escape(h.unit)}</td>'
        f'<td class="{escape(h.status)}">{escape(h.status)}</td><td>{escape(h.verdict or "—")}</td></tr>'
        for h in report.honesty
    ) + "</tbody></table>"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{escape(title)}</h1>
<p class="muted">{report.total_records} records · {report.sessions} sessions{scope}.
Diagnostic only: no score is ever adjusted.</p>
{notes}
<h2>Reviewer calibration</h2>
<p class="muted">Mean score per reviewer; z against the median of reviewer means
(std of means {_fmt(report.std_of_means)}). Harsh below z = −1, generous above +1.</p>
{calibration_test}
{_reviewer_chart(report)}
{reviewers}
<h2>Position bias</h2>
<p class="muted">Mean score by 0-based display position. Variance of the means {pb.variance}
(threshold {pb.threshold}): {escape(position_verdict(report))}.</p>
{_position_chart(report)}
{tests}
<h2>Length vs score</h2>
<p class="muted">Length in {escape(report.length_unit)}. Each point is one answer in one session: its length and
the mean score it received
({len(report.length_points)} points shown). Pooled r = {report.length_correlation}.</p>
{_scatter(report)}
{length}
<h2>Self-preference</h2>
{self_pref}
<h2>Statistical honesty</h2>
{honesty}
</body></html>
"""
