"""Which model wins: Bradley–Terry ratings from stored rankings, judged pairs and judgment files.

- ``stored``: the leaderboard of everything in the store (``council leaderboard``).
- ``judged``: the leaderboard of pairwise judgments, style-controlled and against a baseline.
- ``judgment_files``: pairwise judgments read from files, ours or AlpacaEval's.
- ``ratings``: ratings from counted comparisons (pure).
- ``shape``: what every output of the leaderboard prints (text, JSON, HTML, server, MCP).
- ``html``: the leaderboard as one self-contained HTML page.
- ``text``: the leaderboard as text (the CLI's table, the MCP tool's text).
"""

from __future__ import annotations

from council._util.lazy_exports import lazy_exports

_EXPORTS = {
    "Leaderboard": "council.leaderboard.shape",
    "leaderboard": "council.leaderboard.stored",
    "judged_leaderboard": "council.leaderboard.judged",
    "render_leaderboard_html": "council.leaderboard.html",
    "render_leaderboard_text": "council.leaderboard.text",
    "export_judged_pairs": "council.leaderboard.judgment_files",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
