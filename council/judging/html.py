"""A batch's summary as a standalone HTML page (``council batch results ID --summary --html``):
its numbers, the jury's panel (each judge, the agreement and error-correlation matrices, n_eff)
and, with labels, the calibration of its verdicts' probabilities as a reliability plot (inline
SVG, no script) beside the reliability table. Drawn with the bias report's and leaderboard's
parts (:mod:`council._util.html_parts`); every text is escaped."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from council._util.html_parts import PAGE_CSS, html_table, number, scroll
from council.judging.wording import num, panel_judge_rows, panel_numbers, pct

if TYPE_CHECKING:
    from council.judging.batch import BatchSummary
    from council.judging.calibrating import AppliedCalibration
    from council.methods.calibration import Calibration
    from council.methods.panel import Panel

#: The reliability plot's square, in pixels, and its margins (left for the y labels, bottom for the x).
PLOT = 300
LEFT, TOP, BOTTOM, RIGHT = 56, 16, 48, 16
RELIABILITY_CSS = (
    ".diagonal{stroke:#8a94a6;stroke-dasharray:4 3}.series-raw{fill:#4f7cac;stroke:#4f7cac}"
    ".series-calibrated{fill:#c0392b;stroke:#c0392b}polyline.series-raw,polyline.series-calibrated{fill:none;"
    "stroke-width:1.5}"
)


def _x(p: float) -> float:
    return round(LEFT + p * PLOT, 2)


def _y(p: float) -> float:
    return round(TOP + (1 - p) * PLOT, 2)


def _series(bins: list, kind: str, label: str) -> str:
    """One series of the plot: a point per non-empty bin at (mean probability, share right), its
    area growing with the bin's pairs, joined by a line; each point says its numbers on hover."""
    shown = [b for b in bins if b.count and b.mean_probability is not None and b.accuracy is not None]
    if not shown:
        return ""
    most = max(b.count for b in shown)
    points = " ".join(f"{_x(b.mean_probability)},{_y(b.accuracy)}" for b in shown)
    parts = [f'<polyline class="series-{kind}" points="{points}"/>']
    for b in shown:
        radius = round(3 + 5 * (b.count / most) ** 0.5, 2)
        tip = (f"{label}: {b.lo:.1f}-{b.hi:.1f}, {b.count} pairs, mean probability {b.mean_probability:.3f}, "
               f"right {b.accuracy:.1%}")  # fmt: skip
        parts.append(
            f'<circle class="series-{kind}" cx="{_x(b.mean_probability)}" cy="{_y(b.accuracy)}" r="{radius}">'
            f"<title>{escape(tip)}</title></circle>"
        )
    return "".join(parts)


def reliability_svg(raw: Calibration | None, calibrated: AppliedCalibration | None = None) -> str:
    """The reliability plot: the share of right verdicts against the mean stated probability, per
    bin (the summary's ``calibration.bins``), with the diagonal a calibrated jury would follow; the
    calibrated probabilities' bins in a second series with ``--calibration``."""
    width, height = LEFT + PLOT + RIGHT, TOP + PLOT + BOTTOM
    parts = [
        f'<svg class="chart reliability" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" aria-label="Reliability plot: share of right verdicts against the stated probability">'
    ]
    for tick in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0):
        parts.append(f'<line class="grid" x1="{_x(0)}" y1="{_y(tick)}" x2="{_x(1)}" y2="{_y(tick)}"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{_y(tick) + 4}" text-anchor="end">{tick:.1f}</text>')
        parts.append(f'<text x="{_x(tick)}" y="{TOP + PLOT + 16}" text-anchor="middle">{tick:.1f}</text>')
    parts.append(f'<line class="axis" x1="{_x(0)}" y1="{_y(0)}" x2="{_x(1)}" y2="{_y(0)}"/>')
    parts.append(f'<line class="axis" x1="{_x(0)}" y1="{_y(0)}" x2="{_x(0)}" y2="{_y(1)}"/>')
    parts.append(f'<line class="diagonal" x1="{_x(0)}" y1="{_y(0)}" x2="{_x(1)}" y2="{_y(1)}"/>')
    if raw is not None:
        parts.append(_series(raw.bins, "raw", "raw"))
    if calibrated is not None:
        parts.append(_series(calibrated.bins, "calibrated", f"calibrated by {calibrated.name}"))
    parts.append(f'<text class="axis-title" x="{_x(0.5)}" y="{height - 10}" text-anchor="middle">'
                 "stated probability of the verdict</text>")  # fmt: skip
    parts.append(f'<text class="axis-title" transform="translate(14 {_y(0.5)}) rotate(-90)" text-anchor="middle">'
                 "share of verdicts right</text></svg>")  # fmt: skip
    return "".join(parts)


def calibration_section(raw: Calibration | None, calibrated: AppliedCalibration | None) -> str:
    bins = raw.bins if raw is not None else calibrated.bins if calibrated is not None else []
    headers = ["probability", "pairs", "mean probability", "right"]
    if calibrated is not None:
        headers += ["calibrated: pairs", "mean probability", "right"]
    rows = []
    for i, b in enumerate(bins):
        row: list[object] = [f"{b.lo:.1f}-{b.hi:.1f}", b.count, num(b.mean_probability), pct(b.accuracy)]
        if calibrated is not None:
            c = calibrated.bins[i]
            row += [c.count, num(c.mean_probability), pct(c.accuracy)]
        rows.append(row)
    lines = []
    if raw is not None:
        lines.append(f"ECE {number(raw.ece)}, Brier {number(raw.brier)}")
    if calibrated is not None:
        lines.append(f"calibrated by {calibrated.name} (fitted on {calibrated.fitted_on}): "
                     f"ECE {number(calibrated.ece)}, Brier {number(calibrated.brier)}")  # fmt: skip
    legend = ("Points: the bins' pairs (larger: more pairs); blue the stated probabilities"
              + (", red the calibrated ones" if calibrated is not None else "")
              + "; the dashed diagonal is where a calibrated jury's points lie.")  # fmt: skip
    return f"""<h2>Calibration of the verdicts' probabilities (labelled pairs)</h2>
<p class="muted">{escape("; ".join(lines))}. 10 equal-width bins (docs/methods.md, "Verdict calibration").
{escape(legend)}</p>
{scroll(reliability_svg(raw, calibrated))}
{html_table(headers, rows, numeric=set(range(1, len(headers))))}"""


def panel_section(p: Panel) -> str:
    headers, rows = panel_judge_rows(p)
    names = [j.judge for j in p.judges]
    parts = ["<h2>Panel</h2>", html_table(headers, rows, numeric=set(range(1, len(headers))))]
    matrices = [("Agreement between judges", p.agreement, pct)]
    if p.error_correlation is not None:
        matrices.append(("Correlation of the judges' errors", p.error_correlation, num))
    for title, matrix, shown in matrices:
        parts.append(f"<h3>{escape(title)}</h3>")
        parts.append(html_table(["", *names], [[a, *(shown(matrix[a][b]) for b in names)] for a in names],
                                numeric=set(range(1, len(names) + 1))))  # fmt: skip
    parts.append(html_table(["", "value"], [list(row) for row in panel_numbers(p)], numeric={1}))
    return "\n".join(parts)


def render_batch_html(s: BatchSummary, title: str | None = None) -> str:
    """A standalone HTML page for the summary ``s`` (open it in any browser, offline)."""
    title = title or f"council batch {s.batch_id}"
    rows: list[list[object]] = [
        ["items", f"{s.items} ({s.finished} finished, {s.failed} failed, {s.missing} missing)"],
    ]
    if s.combine is not None:
        rows.append(["verdicts combined by", s.combine])
    if s.pairwise:
        rows += [
            ["A wins / B wins / ties", f"{pct(s.a_win_rate)} / {pct(s.b_win_rate)} / {pct(s.tie_rate)}"],
            ["inconsistent swap pairs", f"{pct(s.inconsistency_rate)} ({s.inconsistent_pairs} of {s.swap_pairs})"],
        ]
    if s.graded:
        rows += [["graded items", s.graded], ["mean normalized score", number(s.mean_normalized_score)]]
    if s.labels is not None:
        rows.append(["labelled items: verdict = label",
                     f"{s.labels.agree} of {s.labels.labelled} ({pct(s.labels.accuracy)})"])  # fmt: skip
    cost = "unknown" if s.cost_usd is None else f"${s.cost_usd:.4f}"
    rows += [["flagged for review", s.flagged_for_review], ["calls made", s.calls], ["cost", cost]]
    sections = [html_table(["", "value"], rows, numeric={1})]
    if s.panel is not None:
        sections.append(panel_section(s.panel))
    if s.calibration is not None or s.calibrated is not None:
        sections.append(calibration_section(s.calibration, s.calibrated))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title><style>{PAGE_CSS}{RELIABILITY_CSS}</style></head>
<body>
<h1>{escape(title)}</h1>
<p class="muted">{escape(f"source: {s.source}")}</p>
{chr(10).join(sections)}
</body></html>
"""
