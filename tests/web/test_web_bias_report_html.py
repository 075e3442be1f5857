"""Issue 28, finding 7: the HTML bias report says no more than the data do, and reads on a phone.

Pure checks of the page, then a real headless Chromium (Debian's, driven by Playwright) for what only
layout shows: the position chart's axis title inside its chart, and a 390 px wide screen.
"""

from __future__ import annotations

import re

import pytest

from council.bias.html import render_html
from council.bias.records import BiasRecord
from council.bias.report import bias_report
from council.storage import SQLiteStore

REVIEWERS = {"p/harsh": -1, "p/mid": 0, "p/kind": 0.5}


def small_report(sessions: int = 6, positions: int = 3):
    """Three reviewers with a few scores each (under the 50 the calibration needs), scale 1–10, means ≤ 7."""
    rows = []
    members = ["m/a", "m/b", "m/c"][:positions]
    for s in range(sessions):
        for reviewer, offset in REVIEWERS.items():
            for pos, m in enumerate(members[s % positions:] + members[: s % positions]):
                rows.append(BiasRecord(
                    session_id=f"s{s}", reviewer_id=reviewer, model_id=m, position=pos,
                    response_length_chars=100 + 37 * pos + s, response_length_words=20 + pos + s,
                    score_value=float(round(5 + offset + 3 * ((s * 2 + pos) % 3 - 1))),
                    timestamp=f"2026-01-01T00:0{s % 10}:00.000000+00:00",
                    scale_min=1, scale_max=10, self_review=False,
                ).row())
    store = SQLiteStore.memory()
    store.insert_bias_records(rows)
    return bias_report(store, max_points=200)


def test_calibration_is_not_sufficient_when_each_reviewer_is_under_the_minimum():
    report = small_report()
    assert all(p.samples < 50 for p in report.reviewers.values())
    assert sum(p.samples for p in report.reviewers.values()) >= 50
    row = next(h for h in report.honesty if h.metric == "reviewer_calibration")
    assert row.status == "insufficient" and row.data_points == min(p.samples for p in report.reviewers.values())


def noisy_report(seed: int):
    """Three reviewers scoring the same three answers in four sessions, at random."""
    import random

    rng = random.Random(seed)
    rows = [
        BiasRecord(session_id=f"s{s}", reviewer_id=reviewer, model_id=m, position=pos, response_length_chars=100,
                   score_value=float(rng.randint(2, 9)), scale_min=1, scale_max=10).row()
        for s in range(4) for reviewer in REVIEWERS for pos, m in enumerate(["m/a", "m/b", "m/c"])
    ]  # fmt: skip
    store = SQLiteStore.memory()
    store.insert_bias_records(rows)
    return bias_report(store)


def test_labels_that_are_not_significant_get_no_colour():
    # Random scores: a reviewer whose offset on the shared answers lands beyond |z| = 1 by chance.
    for seed in range(20):
        report = noisy_report(seed)
        flagged = [r for r, p in report.reviewers.items() if p.classification != "neutral" and not p.significant]
        if flagged:
            break
    assert flagged
    page = render_html(report)
    for rid in flagged:
        bar = re.search(rf'<rect class="([^"]+)"[^>]*><title>{re.escape(rid)}:', page)
        assert bar and bar.group(1) == "neutral"
        assert re.search(rf"{re.escape(rid)}: mean [^<]*not significant", page)


def test_calibration_axis_is_the_scale():
    page = render_html(small_report())
    chart = re.search(r'<svg class="chart reviewers".*?</svg>', page, re.S).group(0)
    ticks = [float(t) for t in re.findall(r'class="xtick"[^>]*>([\d.]+)<', chart)]
    assert ticks[0] == 1 and ticks[-1] >= 9
    axis = re.search(r'<line class="axis" x1="([\d.]+)" y1="[\d.]+" x2="([\d.]+)"', chart)
    x1, x2 = (float(v) for v in axis.groups())
    bar = float(re.search(r'<rect class="[^"]+" x="[\d.]+" y="[\d.]+" width="([\d.]+)"[^>]*><title>p/harsh:', chart)[1])
    assert bar / (x2 - x1) == pytest.approx((4.0 - 1) / 9, abs=0.01)  # mean 4 on a 1–10 axis: a third


def test_position_axis_title_inside_its_chart_and_the_page_reads_at_390_px(browser):
    page_html = render_html(small_report(positions=2))
    page = browser.new_page(viewport={"width": 390, "height": 844})  # the folder's one Chromium (conftest.py)
    try:
        page.set_content(page_html)
        # the position chart's axis titles lie inside the chart
        clipped = page.evaluate("""() => [...document.querySelectorAll('svg.positions text.axis-title')].map(t => {
            const svg = t.ownerSVGElement.getBoundingClientRect(), b = t.getBoundingClientRect();
            return b.left < svg.left - 0.5 || b.right > svg.right + 0.5 || b.top < svg.top - 0.5
                || b.bottom > svg.bottom + 0.5; })""")
        assert clipped == [False, False]
        # nothing wider than the screen makes the page itself scroll sideways
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        # chart text is drawn at a readable size (not a 880 px chart squeezed to 390)
        smallest = page.evaluate("""() => Math.min(...[...document.querySelectorAll('svg text')]
            .map(t => t.getBoundingClientRect().height).filter(h => h > 0))""")
        assert smallest >= 10
        page.screenshot(path="/tmp/council-bias-report-390.png", full_page=False)
    finally:
        page.close()
