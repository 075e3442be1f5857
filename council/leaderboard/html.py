"""The leaderboard as one self-contained HTML page (``council leaderboard --html``): a forest
plot of the ratings with their intervals, the table and the notes, in the bias report's styles
(:mod:`council._util.html_parts`); inline SVG, no scripts, every string from the data escaped."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from council._util.html_parts import html_table, nice_ticks, number, scroll, standalone_page

if TYPE_CHECKING:
    from council.leaderboard.shape import Leaderboard


def leaderboard_chart(board: Leaderboard, group: int | None = None) -> str:
    """Each model's rating as a dot on its 95 % interval, best at the top (an SVG forest plot);
    ``group``: that connected group's models only (groups never compared get an axis each)."""
    rows = [m for m in board.models if group is None or m.group == group]
    if not rows:
        return '<p class="muted">No pairwise comparisons on record.</p>'
    lows = [m.ci[0] if m.ci else m.rating for m in rows]
    highs = [m.ci[1] if m.ci else m.rating for m in rows]
    lo, hi = min(*lows, 1000.0), max(*highs, 1000.0)
    pad = max((hi - lo) * 0.05, 10.0)
    lo, hi = lo - pad, hi + pad
    # The names' column as wide as the longest name (about 7 px a character at 12 px), at most
    # 260 px: on a phone the plot starts on screen, not after a column of blank space.
    left = min(260, 24 + 7 * max(len(m.model) for m in rows))
    width, row_h, top = 460, 26, 24
    axis_y = top + row_h * len(rows) + 4
    height, total_width = axis_y + 44, left + width + 150

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * width

    # An explicit size: drawn at 1:1, never stretched.
    parts = [f'<svg class="chart leaderboard" width="{total_width}" height="{height}" '
             f'viewBox="0 0 {total_width} {height}" role="img" '
             f'aria-label="Bradley–Terry rating per model with its interval">']
    for t in nice_ticks(lo, hi, 6):
        parts.append(f'<line class="grid" x1="{x(t):.1f}" y1="{top - 6}" x2="{x(t):.1f}" y2="{axis_y}"/>'
                     f'<text x="{x(t):.1f}" y="{axis_y + 16}" text-anchor="middle">{number(t, 6)}</text>')
    parts.append(f'<line class="median" x1="{x(1000):.1f}" y1="{top - 10}" x2="{x(1000):.1f}" y2="{axis_y}"/>'
                 f'<text x="{x(1000):.1f}" y="{top - 12}" text-anchor="middle">mean 1000</text>'
                 f'<text class="axis-title" x="{left + width / 2}" y="{axis_y + 36}" text-anchor="middle">'
                 f"rating (Elo-style: 400 points = 10:1 odds)</text>")
    for i, m in enumerate(rows):
        y = top + i * row_h + row_h / 2
        name = escape(m.model)
        ci = f"{m.ci[0]:.0f}–{m.ci[1]:.0f}" if m.ci else "no interval"
        tip = f"{name}: {m.rating:.0f} ({ci}), {m.comparisons} comparisons"
        parts.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{name}</text>')
        if m.ci:
            parts.append(f'<line class="axis interval" x1="{x(m.ci[0]):.1f}" y1="{y:.1f}" '
                         f'x2="{x(m.ci[1]):.1f}" y2="{y:.1f}"/>')
        parts.append(f'<circle class="bar" cx="{x(m.rating):.1f}" cy="{y:.1f}" r="5"><title>{tip}</title></circle>'
                     f'<text x="{left + width + 8}" y="{y + 4:.1f}">{m.rating:.0f} ({ci})</text>')
    parts.append(f'<line class="axis" x1="{left}" y1="{axis_y}" x2="{left + width}" y2="{axis_y}"/></svg>')
    return "".join(parts)


def leaderboard_section(board: Leaderboard, scope: str = "") -> str:
    """The leaderboard as an HTML section: its heading, ``scope`` (what was rated), chart, table and notes."""
    several = len(board.groups) > 1
    table = html_table(
        [*(["group"] if several else []), "rank", "model", "rating", "95% CI", "comparisons", "wins", "win rate"],
        [[*([m.group] if several else []), m.rank, m.model, f"{m.rating:.1f}",
          f"{m.ci[0]:.1f} – {m.ci[1]:.1f}" if m.ci else "—", m.comparisons,
          f"{m.wins:g}", "—" if m.win_rate is None else f"{m.win_rate:.1%}"] for m in board.models],
        {0, 2, 4, 5, 6} if not several else {0, 1, 3, 5, 6, 7},
    )
    charts = (
        "".join(f'<h3>Group {g}</h3>{scroll(leaderboard_chart(board, g))}' for g in range(1, len(board.groups) + 1))
        if several else scroll(leaderboard_chart(board))
    )
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in board.notes)
    groups = "".join(
        f'<p class="muted">group {i}: {escape(", ".join(g))}</p>' for i, g in enumerate(board.groups, 1)
    )
    intervals = (f"{board.confidence:.0%} percentile intervals from {board.bootstrap} bootstrap rounds "
                 f"(seed {board.seed})" if board.bootstrap else "no intervals (no bootstrap)")
    scope_line = f'<p class="muted">{escape(scope)}</p>\n' if scope else ""
    return f"""<h2>Leaderboard</h2>
{scope_line}<p class="muted">Bradley–Terry ratings from {board.sessions} sessions and {board.judgments} judged pairs
({board.comparisons} pairwise comparisons; a tie is half a win); {escape(intervals)}.
Elo-style scale: the mean rating is 1000, a 400-point gap means 10:1 odds of winning.</p>
{notes}{charts}{table}{groups}"""


def render_leaderboard_html(board: Leaderboard, title: str = "council leaderboard", *, fragment: bool = False) -> str:
    """A standalone HTML page for ``board`` (open it in any browser, offline); with ``fragment``,
    only what its body holds under the title (what the web app shows, styled by the same
    ``PAGE_CSS``)."""
    filters = ", ".join(f"{k} = {v}" for k, v in board.filters.items() if v)
    scope = f"source: {board.source}" + (f" · {filters}" if filters else "")
    body = leaderboard_section(board, scope)
    return body if fragment else standalone_page(title, body)
