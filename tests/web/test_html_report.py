"""The HTML bias report renders at its own size, with labelled axes and ranges fitted to the data,
and says in words what is significant and what is not."""

from __future__ import annotations

import html
import random
import re
import xml.etree.ElementTree as ET

import pytest

from council.bias.html import render_html
from council.bias.records import BiasRecord
from council.bias.report import bias_report
from council.bias.wording import describe_test, findings, p_text
from council.methods.significance import SignificanceTest
from council.storage import SQLiteStore

MODELS = ["m/alpha", "m/beta", "m/gamma", "m/delta", "m/eps"]


def records(
    *,
    sessions: int = 60,
    position_bonus: float = 0.0,
    length_slope: float = 0.0,
    self_bonus: float = 0.0,
    lengths: tuple[int, int] = (300, 3000),
    seed: int = 1,
) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for s in range(sessions):
        length = {m: rng.randint(*lengths) for m in MODELS}
        quality = {m: rng.gauss(0, 0.5) for m in MODELS}
        for reviewer in MODELS[:4]:
            order = MODELS[:]
            rng.shuffle(order)
            for pos, m in enumerate(order):
                raw = 6 + quality[m] - position_bonus * pos + length_slope * (length[m] - 1500) / 1000
                raw += self_bonus if m == reviewer else 0.0
                score = min(10, max(1, round(raw + rng.gauss(0, 1))))
                out.append(
                    BiasRecord(
                        session_id=f"s{s:03d}", reviewer_id=reviewer, model_id=m, position=pos,
                        response_length_chars=length[m], response_length_words=length[m] // 6,
                        score_value=float(score), scale_min=1, scale_max=10,
                        self_review=(m == reviewer), timestamp="2026-05-01T00:00:00+00:00",
                    ).row()
                )
    return out


def report_of(rows, points: int = 500):
    store = SQLiteStore.memory()
    store.insert_bias_records(rows)
    return bias_report(store, max_points=points)


def svgs(page: str) -> dict[str, ET.Element]:
    found = {}
    for block in re.findall(r"<svg.*?</svg>", page, re.DOTALL):
        element = ET.fromstring(block)
        found[element.get("class", "").split()[-1]] = element
    return found


def numbers(element: ET.Element, tag: str, attr: str) -> list[float]:
    return [float(e.get(attr)) for e in element.iter(tag) if e.get(attr) is not None]


# -- sizes, axes, ranges --------------------------------------------------------------------


@pytest.fixture(scope="module")
def page():
    return render_html(report_of(records(position_bonus=0.6, length_slope=0.8, self_bonus=1.0)))


def test_every_chart_has_an_explicit_size_matching_its_drawing(page):
    charts = svgs(page)
    assert set(charts) == {"reviewers", "positions", "scatter"}
    for name, svg in charts.items():
        width, height = float(svg.get("width")), float(svg.get("height"))
        assert svg.get("viewBox") == f"0 0 {width:g} {height:g}", name
        assert 300 <= width <= 980 and 150 <= height <= 600, name  # drawn at 1:1 in a 980 px column


def test_every_chart_labels_its_axes(page):
    for name, svg in svgs(page).items():
        titles = [t.text for t in svg.iter("text") if "axis-title" in (t.get("class") or "")]
        expected = 1 if name == "reviewers" else 2
        assert len(titles) == expected and all(titles), (name, titles)


def test_reviewer_values_sit_clear_of_the_median_line(page):
    svg = svgs(page)["reviewers"]
    median = next(e for e in svg.iter("line") if "median" in (e.get("class") or ""))
    values = [t for t in svg.iter("text") if "value" in (t.get("class") or "")]
    assert len(values) == 4
    plot_right = max(numbers(svg, "line", "x2"))
    assert float(median.get("x1")) <= plot_right
    assert all(float(t.get("x")) > plot_right for t in values)


def test_the_scatter_axes_are_fitted_to_the_points():
    # Lengths in a narrow band far from zero: before, they crowded into one corner.
    report = report_of(records(lengths=(4000, 4500), length_slope=0.5))
    scatter = svgs(render_html(report))["scatter"]
    xs, ys = numbers(scatter, "circle", "cx"), numbers(scatter, "circle", "cy")
    plot = [e for e in scatter.iter("line") if "axis" in (e.get("class") or "").split()]
    left = min(float(e.get("x1")) for e in plot)
    right = max(float(e.get("x2")) for e in plot)
    assert (max(xs) - min(xs)) / (right - left) > 0.8
    top = min(float(e.get("y1")) for e in plot)
    bottom = max(float(e.get("y2")) for e in plot)
    assert (max(ys) - min(ys)) / (bottom - top) > 0.6
    ticks = [float(t.text.replace(",", "")) for t in scatter.iter("text") if "xtick" in (t.get("class") or "")]
    assert min(ticks) >= 500  # the length axis (words: 666-750 here) does not start at 0


def test_bars_start_at_the_bottom_of_the_scale(page):
    svg = svgs(page)["positions"]
    labels = [t.text for t in svg.iter("text") if "ytick" in (t.get("class") or "")]
    assert labels[0] == "1"  # bars measure from the lowest possible score, never from a cut axis


# -- words ------------------------------------------------------------------------------------


def test_p_values_are_never_printed_as_zero():
    assert p_text(0.0) == "p < 0.001"
    assert p_text(3e-40) == "p < 0.001"
    assert p_text(0.0432) == "p = 0.043"
    assert p_text(0.5) == "p = 0.5"


def test_a_generic_test_sentence_says_significant_or_not():
    yes = SignificanceTest(name="one-way ANOVA", statistic=12.3, df=[4, 100], p_value=0.0001, significant=True)
    no = SignificanceTest(name="one-way ANOVA", statistic=0.4, df=[4, 100], p_value=0.81, significant=False)
    none = SignificanceTest(name="one-way ANOVA", statistic=None, df=[], p_value=None, significant=False, note="n=1")
    assert "is statistically significant" in describe_test(yes, "The difference")[1]
    assert "is not statistically significant" in describe_test(no, "The difference")[1]
    assert describe_test(none, "The difference")[0] == "not tested"


def by_topic(report) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in findings(report):
        out.setdefault(f.topic, []).append(f)
    return out


def test_planted_effects_are_called_significant_in_plain_words():
    found = by_topic(report_of(records(position_bonus=0.6, length_slope=0.8, self_bonus=1.5)))
    position = found["position"][0]
    assert position.verdict == "significant"
    assert "shown first" in position.text and "p < 0.001" in position.text
    length = found["length"][0]
    assert length.verdict == "significant" and "excludes zero" in length.text and "Longer answers" in length.text
    selfish = [f for f in found["self-preference"] if f.verdict == "significant"]
    assert selfish and all("its own answers" in f.text for f in selfish)


def test_absent_effects_are_called_not_significant():
    found = by_topic(report_of(records(seed=5)))
    assert found["position"][0].verdict == "not significant"
    assert "could be chance" in found["position"][0].text
    length = found["length"][0]
    assert length.verdict == "not significant" and "crosses zero" in length.text
    assert all(f.verdict != "significant" for f in found.get("self-preference", []))


def test_too_little_data_is_said_plainly():
    found = by_topic(report_of(records(sessions=3)))
    assert found["length"][0].verdict == "too little data"
    assert "indicator" in found["position"][0].text.lower()


def test_calibration_labels_say_whether_the_difference_is_significant():
    # Random scores: a reviewer labelled harsh or generous by |z| > 1 is not evidence; the
    # report says so with its test across reviewers and each reviewer's own.
    found = by_topic(report_of(records()))["calibration"]
    across = [f for f in found if "across reviewers" in f.text]
    assert len(across) == 1 and across[0].verdict == "not significant"
    labelled = [f for f in found if "harsh" in f.text or "generous" in f.text]
    assert labelled and all("statistically significant" in f.text for f in labelled)
    assert all(f.verdict == "not significant" for f in labelled)


def test_calibration_labels_are_not_presented_as_tests_without_one():
    from council.bias.wording import calibration_findings

    report = report_of(records())
    untested = calibration_findings(report)  # a report without the test across reviewers
    assert any("not a significance test" in f.text for f in untested)


def test_the_page_and_the_text_report_carry_the_same_sentences():
    from rich.console import Console

    from council.bias.wording import render_bias_report_text as render_text

    report = report_of(records(position_bonus=0.6))
    page = render_html(report)
    console = Console(record=True, width=400)
    render_text(report, console)
    text = console.export_text()
    for finding in findings(report):
        assert finding.text in text
        assert html.escape(finding.text) in page
    assert "p = 0.0<" not in page and ">0.0<" not in page
