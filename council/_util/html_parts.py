"""What council's self-contained HTML pages (the bias report, the leaderboard) are drawn with:
one style sheet, numbers, axis ticks, tables and sideways-scrolling chart boxes. Every cell is
escaped."""

from __future__ import annotations

import math
from html import escape

PAGE_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:980px;
color:#1d2430;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}
h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #dde2ea;padding-bottom:.3rem}
.muted{color:#5b6576}.note{background:#fff7e0;border-left:4px solid #e0a800;padding:.5rem .8rem;margin:.5rem 0}
table{border-collapse:collapse;margin:.6rem 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e6e9ef;padding:.25rem .7rem;text-align:left}th{background:#f4f6f9}
td.num{text-align:right;white-space:nowrap}td:not(.num){min-width:8rem}svg{display:block;margin:.6rem 0;max-width:none}
.scroll{overflow-x:auto;max-width:100%}table{display:block;overflow-x:auto;max-width:100%}
svg text{font:12px system-ui,sans-serif;fill:#1d2430}svg .axis{stroke:#8a94a6;stroke-width:1}
svg .interval{stroke-width:2}
svg text.axis-title{font-weight:600;fill:#5b6576}svg text.muted{fill:#5b6576}
ul.findings{padding-left:1.2rem}ul.findings li{margin:.35rem 0}
.verdict{display:inline-block;min-width:8.5rem;font-size:12px;font-weight:600;border-radius:3px;padding:0 .4rem;
margin-right:.4rem;text-align:center}.v-significant{background:#fde2e1;color:#8a1f17}
.v-not-significant,.v-not-tested,.v-too-little-data{background:#eef0f4;color:#4a5466}
svg .grid{stroke:#e6e9ef;stroke-width:1}.harsh{fill:#d9534f}.generous{fill:#2f80ed}.neutral{fill:#8a94a6}
.bar{fill:#4f7cac}.pt{fill:#4f7cac;fill-opacity:.35}.median{stroke:#1d2430;stroke-dasharray:4 3}
.insufficient{color:#a15c00;font-weight:600}.sufficient{color:#1e7b34;font-weight:600}
"""


def standalone_page(title: str, body: str) -> str:
    """A page that opens offline in any browser: ``body`` (markup) under ``title`` (text), styled by
    ``PAGE_CSS``."""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title><style>{PAGE_CSS}</style></head>
<body>
<h1>{escape(title)}</h1>
{body}</body></html>
"""


def number(value: float | None, digits: int = 3) -> str:
    """A number as a page shows it: rounded to ``digits`` places (below 0.001: ``digits`` significant
    digits), a dash for None."""
    if value is None:
        return "—"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return escape(str(value))
    return f"{value:.{digits}g}" if abs(value) < 1e-3 and value != 0 else f"{round(value, digits)}"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round ticks (steps of 1, 2, 2.5 or 5 times a power of ten) from ``lo`` to ``hi``."""
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


def scroll(chart: str) -> str:
    """A chart drawn at 1:1 in a box that scrolls sideways on a narrow screen (a phone), rather than
    shrunk until its text is unreadable (focusable: the keyboard scrolls it too)."""
    return f'<div class="scroll" tabindex="0">{chart}</div>'


#: A table's opening tag: it scrolls sideways on a phone (CSS), so the keyboard can focus it to scroll.
TABLE = '<table tabindex="0">'


def html_table(headers: list[str], rows: list[list[object]], numeric: frozenset[int] | set[int] = frozenset()) -> str:
    """A table of escaped cells; the columns in ``numeric`` are right-aligned."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(
            f'<td class="num">{escape(str(c))}</td>' if i in numeric else f"<td>{escape(str(c))}</td>"
            for i, c in enumerate(row)
        ) + "</tr>"
        for row in rows
    )
    return f"{TABLE}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
