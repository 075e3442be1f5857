"""The CLI's HTML reports and the web app's report views are one source: each page is its
fragment (what ``GET /v1/leaderboard?format=html`` and ``/v1/bias-report?format=html`` send)
under a title and the shared style sheet; the leaderboard's chart starts its plot right after
the longest name, so a phone shows the plot, not a column of blank space."""

from __future__ import annotations

import re

from council._util.html_parts import PAGE_CSS, standalone_page
from council.bias.html import render_html
from council.bias.report import bias_report
from council.leaderboard.html import leaderboard_chart, render_leaderboard_html
from council.leaderboard.shape import Leaderboard, ModelRating
from council.storage import SQLiteStore


def board(*names: str) -> Leaderboard:
    models = [ModelRating(model=n, rating=1000 + 10 * i, ci=(990.0 + 10 * i, 1010.0 + 10 * i), comparisons=4, wins=2,
                          win_rate=0.5, rank=str(i + 1)) for i, n in enumerate(names)]  # fmt: skip
    return Leaderboard(bootstrap=50, seed=0, confidence=0.95, prior_games=1.0, source="sessions", models=models,
                       sessions=2, comparisons=8)  # fmt: skip


def test_each_page_is_its_fragment_under_its_title_and_the_shared_styles():
    lead = board("m/a", "m/b")
    fragment = render_leaderboard_html(lead, fragment=True)
    assert render_leaderboard_html(lead) == standalone_page("council leaderboard", fragment)
    report = bias_report(SQLiteStore.memory())
    assert render_html(report) == standalone_page("council bias report", render_html(report, fragment=True))
    for body in (fragment, render_html(report, fragment=True)):
        assert "<style" not in body and "<html" not in body and " style=" not in body  # a CSP drops inline styles
    assert PAGE_CSS in render_leaderboard_html(lead)


def test_the_leaderboard_plot_starts_after_the_longest_name():
    def plot_left(chart: str) -> float:
        axis = r'<line class="axis" x1="([\d.]+)" y1="[\d.]+" x2="[\d.]+" y2="[\d.]+"/></svg>'  # the x axis, last
        return float(re.search(axis, chart)[1])

    assert plot_left(leaderboard_chart(board("m/a", "m/b"))) < 60
    assert plot_left(leaderboard_chart(board("openai/mock-alpha", "m/b"))) < 150
    assert plot_left(leaderboard_chart(board("x" * 80))) == 260  # a long name is cut by the column, never the plot
