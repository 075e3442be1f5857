"""The cross-session bias report: SQL results equal a pure-Python computation of the same statistics."""

from __future__ import annotations

import html
import json
import random
import statistics
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser

import numpy as np
import pytest
from click.testing import CliRunner
from rich.console import Console
from scipy import stats as sps

from council.bias.export import export_bias_records
from council.bias.html import render_html
from council.bias.records import BiasRecord
from council.bias.report import bias_report, report_from_records_files
from council.errors import InputError
from council.methods.bias_indicators import (
    audit_reviewer_calibration,
    pearson_correlation,
    run_aggregated_bias_audit,
)
from council.storage import SQLiteStore
from tests.storage.test_bias_summaries import close

MODELS = [f"prov/model-{i}" for i in range(6)]
START = datetime(2026, 1, 1, tzinfo=UTC)


def make_records(seed: int, sessions: int = 80, scale: tuple[int, int] = (1, 10)) -> list[dict]:
    rng = random.Random(seed)
    out = []
    lo, hi = scale
    for s in range(sessions):
        sid = f"sess-{seed}-{s:04d}"
        members = rng.sample(MODELS, rng.choice([2, 3, 4, 5]))  # 2-model sessions have no length r
        reviewers = rng.sample(MODELS, rng.randint(1, 4))
        lengths = {m: rng.randint(50, 3000) for m in members}
        words = {m: rng.randint(10, 500) for m in members}  # not proportional to chars: the unit matters
        ts = (START + timedelta(hours=s)).isoformat(timespec="microseconds")
        council = rng.choice(["alpha", "beta"])
        for reviewer in reviewers:
            order = members[:]
            rng.shuffle(order)
            for pos, m in enumerate(order):
                bonus = 2 if pos == 0 else 0
                score = min(hi, max(lo, rng.randint(lo, hi) + (bonus if hi > 5 else 0)))
                out.append(
                    BiasRecord(
                        session_id=sid, reviewer_id=reviewer, model_id=m, position=pos,
                        response_length_chars=lengths[m], response_length_words=words[m],
                        score_value=float(score), timestamp=ts,
                        scale_min=lo, scale_max=hi, self_review=(reviewer == m), council=council,
                    ).row()
                )
    return out


def as_line(row: dict) -> str:
    """A database row as a records-file line (``self_review`` a JSON boolean, as the export writes it)."""
    return json.dumps({**row, "self_review": bool(row["self_review"])})


def load(records: list[dict]) -> SQLiteStore:
    store = SQLiteStore.memory()
    store.insert_bias_records(records)
    return store


# -- a pure-Python reference built from the seed functions ------------------------------------


def reference(records, *, reviewers=(), unit="words"):
    """The report's statistics computed record by record (reviewer filter as the report applies it)."""
    base = records
    full = [r for r in records if not reviewers or r["reviewer_id"] in reviewers]
    out = {}

    by_reviewer = defaultdict(dict)
    for i, r in enumerate(base):
        by_reviewer[r["reviewer_id"]][i] = r["score_value"]
    out["calibration"] = audit_reviewer_calibration(by_reviewer)
    out["samples"] = {r: len(v) for r, v in by_reviewer.items()}

    sessions = defaultdict(lambda: defaultdict(list))
    lengths = {}
    for r in full:
        sessions[r["session_id"]][r["model_id"]].append(r["score_value"])
        lengths[(r["session_id"], r["model_id"])] = r[f"response_length_{unit}"]
    rs, pairs, pooled_sessions = [], 0, 0
    for sid, models in sessions.items():
        if len(models) >= 3:
            ms = list(models)
            rs.append(pearson_correlation([lengths[(sid, m)] for m in ms], [statistics.mean(models[m]) for m in ms]))
            pairs += len(ms)
            pooled_sessions += 1
    out["pooled"] = run_aggregated_bias_audit(rs)
    out["within"] = within_session_reference(full, unit)
    out["pooled_sessions"] = pooled_sessions
    out["pairs"] = pairs
    out["sessions"] = len(sessions)
    out["total"] = len(full)

    by_pos = defaultdict(list)
    for r in full:
        by_pos[r["position"]].append(r["score_value"])
    out["position_groups"] = dict(sorted(by_pos.items()))

    reviews = defaultdict(list)
    for r in full:
        reviews[(r["session_id"], r["reviewer_id"])].append(r)
    tables = defaultdict(lambda: None)
    left_out = 0
    for recs in reviews.values():
        top = max(r["score_value"] for r in recs)
        winners = [r["position"] for r in recs if r["score_value"] == top]
        if len(winners) > 1:
            left_out += 1
            continue
        k = len(recs)
        if tables[k] is None:
            tables[k] = [0] * k
        tables[k][winners[0]] += 1
    out["orderings"] = len(reviews)
    out["left_out"] = left_out
    out["top_tables"] = {k: v for k, v in tables.items() if v is not None}

    # Reviewers compared on the answers they share (issue 61): per review, the mean over its
    # non-self scores of an answer someone else also scored of (score − the others' mean).
    answer_scores = defaultdict(list)
    for r in base:
        if not r["self_review"]:
            answer_scores[(r["session_id"], r["model_id"])].append(r["score_value"])
    review_gaps = defaultdict(list)
    for r in base:
        scores = answer_scores[(r["session_id"], r["model_id"])]
        if not r["self_review"] and len(scores) >= 2:
            others = (sum(scores) - r["score_value"]) / (len(scores) - 1)
            review_gaps[(r["session_id"], r["reviewer_id"])].append(r["score_value"] - others)
    gap = {key: statistics.mean(v) for key, v in review_gaps.items()}
    offsets = defaultdict(list)
    for (_, reviewer), g in sorted(gap.items()):
        offsets[reviewer].append(g)
    out["offsets"] = offsets
    self_d = defaultdict(list)
    for r in full:
        if not r["self_review"]:
            continue
        others = answer_scores[(r["session_id"], r["model_id"])]
        if others:
            own_gap = gap.get((r["session_id"], r["model_id"]))
            self_d[r["model_id"]].append((r["score_value"], statistics.mean(others), own_gap))
    out["self"] = {}
    for rid, pairs_ in self_d.items():
        d = [s - o for s, o, _ in pairs_]
        out["self"][rid] = dict(
            n=len(d),
            self_mean=statistics.mean(s for s, _, _ in pairs_),
            others_mean=statistics.mean(o for _, o, _ in pairs_),
            difference=statistics.mean(d),
            adjusted=[s - o - g for s, o, g in pairs_ if g is not None],
        )
    return out


def session_points(rows: list[dict], unit: str = "words") -> list[tuple[np.ndarray, np.ndarray]]:
    """Per session with 3 or more answers: each answer's length and the mean score it received."""
    by_session: dict[str, dict[str, list[float]]] = {}
    length: dict[tuple[str, str], int] = {}
    for r in rows:
        by_session.setdefault(r["session_id"], {}).setdefault(r["model_id"], []).append(r["score_value"])
        length[(r["session_id"], r["model_id"])] = r[f"response_length_{unit}"]
    return [
        (np.array([length[(sid, m)] for m in models], dtype=float), np.array([np.mean(v) for v in models.values()]))
        for sid, models in by_session.items()
        if len(models) >= 3
    ]


def within_session_reference(rows: list[dict], unit: str = "words") -> tuple[float, tuple[float, float]]:
    """The pooled within-session correlation and its jackknife-over-sessions 95 % interval, by numpy:
    each session's lengths and mean scores centred, one Pearson r over all of them; the interval
    on Fisher's z, leaving each session out in turn, with the t quantile on Satterthwaite's df
    2m/(κ − 1) of the leave-one-out z's (at most sessions − 1)."""
    centred = [(x - x.mean(), y - y.mean()) for x, y in session_points(rows, unit)]

    def r_of(parts):
        x = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        return float(x @ y / np.sqrt((x @ x) * (y @ y)))

    m = len(centred)
    r = r_of(centred)
    loo = np.arctanh([r_of(centred[:i] + centred[i + 1:]) for i in range(m)])
    d = loo - loo.mean()
    se = np.sqrt(np.sum(d**2))  # the jackknife's (m − 1)/m · Σd², inflated by m/(m − 1)
    kurtosis = m * np.sum(d**4) / np.sum(d**2) ** 2
    half = sps.t.ppf(0.975, min(m - 1, 2 * m / (kurtosis - 1))) * se
    return r, (float(np.tanh(np.arctanh(r) - half)), float(np.tanh(np.arctanh(r) + half)))


def assert_matches_reference(report, ref, *, reviewers=()):
    expected_reviewers = sorted(r for r in ref["calibration"] if not reviewers or r in reviewers)
    assert sorted(report.reviewers) == expected_reviewers
    for rid in expected_reviewers:
        cal, got = ref["calibration"][rid], report.reviewers[rid]
        assert got.mean == pytest.approx(round(cal["mean"], 3), abs=1e-9)
        assert got.std == pytest.approx(round(cal["std"], 3), abs=1e-3 + 1e-9)
        assert got.variance == pytest.approx(cal["std"] ** 2, abs=6e-4)
        assert got.seed_z_score == pytest.approx(cal["z_score"], abs=0.0101)
        assert got.seed_classification == cal["classification"]
        assert got.samples == ref["samples"][rid]
    # z of the offsets on shared answers, against their median over their spread (the seed's rule)
    means = {rid: statistics.mean(g) for rid, g in ref["offsets"].items()}
    median = statistics.median(means.values())
    spread = statistics.stdev(means.values()) if len(means) > 2 else 1.0
    for rid in expected_reviewers:
        got = report.reviewers[rid]
        if rid not in means:
            assert got.z_score is None and got.classification == "not comparable"
            continue
        assert got.offset == pytest.approx(means[rid], abs=5.01e-4) and got.offset_sessions == len(ref["offsets"][rid])
        assert got.z_score == pytest.approx((means[rid] - median) / spread, abs=0.0051)

    # The pooled within-session correlation and its jackknife interval (issue 61), by numpy; the
    # seed's Fisher-z figures beside them, from the seed's own functions.
    r, ci = ref["within"]
    m = ref["pooled_sessions"]
    assert report.sample_size == m
    assert report.confidence_level == ("high" if m >= 50 else "moderate" if m >= 20 else "preliminary")
    assert report.length_correlation == pytest.approx(r, abs=5.01e-4)
    assert report.length_correlation_ci == pytest.approx(ci, abs=1.01e-3)
    pooled = ref["pooled"]
    assert report.length_correlation_seed == pytest.approx(pooled.length_correlation, abs=1.01e-3)
    for got, want in zip(report.length_correlation_ci_seed, pooled.length_correlation_ci, strict=True):
        assert got == pytest.approx(want, abs=1.01e-3)
    assert report.length_pairs == ref["pairs"]
    assert (report.total_records, report.sessions) == (ref["total"], ref["sessions"])

    groups = ref["position_groups"]
    pb = report.position_bias
    assert pb.counts == {p: len(g) for p, g in groups.items()}
    for p, g in groups.items():
        assert pb.means[p] == pytest.approx(round(statistics.mean(g), 3), abs=1e-9)
    if len(groups) > 1:
        means = [statistics.mean(g) for g in groups.values()]
        assert pb.variance == pytest.approx(statistics.variance(means), abs=6e-4)
        anova = sps.f_oneway(*groups.values())
        assert pb.test.statistic == pytest.approx(anova.statistic, rel=1e-9)
        assert pb.test.p_value == pytest.approx(anova.pvalue, rel=1e-7, abs=1e-15)
    assert pb.orderings == ref["orderings"]
    usable = [t for k, t in sorted(ref["top_tables"].items()) if sum(t) >= 5 * k]
    if usable:
        chi = sum(sps.chisquare(t).statistic for t in usable)
        df = sum(len(t) - 1 for t in usable)
        assert pb.top_position_test.statistic == pytest.approx(chi, rel=1e-9)
        assert pb.top_position_test.df == [df]
        assert pb.top_position_test.p_value == pytest.approx(sps.chi2.sf(chi, df), rel=1e-7, abs=1e-15)
    if ref["left_out"]:
        assert str(ref["left_out"]) in pb.top_position_test.note

    assert sorted(report.self_preference) == sorted(ref["self"])
    for rid, want in ref["self"].items():
        got = report.self_preference[rid]
        assert got.n == want["n"]
        assert got.self_mean == pytest.approx(round(want["self_mean"], 3), abs=1e-9)
        assert got.others_mean == pytest.approx(round(want["others_mean"], 3), abs=1.01e-3)
        assert got.difference == pytest.approx(round(want["difference"], 3), abs=1.01e-3)
        assert got.adjusted_n == len(want["adjusted"])
        if want["adjusted"]:
            assert got.adjusted_difference == pytest.approx(statistics.mean(want["adjusted"]), abs=1.01e-3)
        if len(want["adjusted"]) > 1 and len(set(want["adjusted"])) > 1:
            assert got.test.p_value == pytest.approx(sps.ttest_1samp(want["adjusted"], 0).pvalue, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sql_report_equals_python_reference(seed):
    records = make_records(seed, sessions=60 + 40 * seed)
    report = bias_report(load(records))
    assert_matches_reference(report, reference(records))
    assert report.score_scale == (1.0, 10.0) and not report.scales_normalized
    assert report.position_bias.test.significant  # the planted first-position bonus is found


def test_filters_since_council_and_reviewer():
    records = make_records(7, sessions=120)
    db = load(records)
    since = (START + timedelta(hours=50)).isoformat()
    later = [r for r in records if r["timestamp"] >= bias_ts(since)]
    assert_matches_reference(bias_report(db, since=since), reference(later))
    assert bias_report(db, since=since).filters["since"] == bias_ts(since)

    alpha = [r for r in records if r["council"] == "alpha"]
    assert_matches_reference(bias_report(db, council="alpha"), reference(alpha))

    chosen = MODELS[0]
    filtered = bias_report(db, reviewers=[chosen])
    assert_matches_reference(filtered, reference(records, reviewers=[chosen]), reviewers=[chosen])
    # z-scores stay relative to every reviewer, so filtering does not change a profile
    assert filtered.reviewers[chosen] == bias_report(db).reviewers[chosen]


def bias_ts(since: str) -> str:
    return datetime.fromisoformat(since).astimezone(UTC).isoformat(timespec="microseconds")


def test_since_accepts_a_date_and_rejects_garbage():
    db = load(make_records(3, sessions=30))
    by_date = bias_report(db, since="2026-01-02").total_records
    assert by_date == bias_report(db, since="2026-01-02T00:00:00Z").total_records > 0
    assert bias_report(db, since="2030-01-01").total_records == 0
    with pytest.raises(InputError, match="--since"):
        bias_report(db, since="last tuesday")


def test_mixed_scales_are_rescaled_to_1_10():
    ten = make_records(4, sessions=30)
    five = make_records(5, sessions=30, scale=(1, 5))
    report = bias_report(load(ten + five))
    assert report.scales_normalized and report.score_scale is None
    rescaled = [dict(r, score_value=1 + 9 * (r["score_value"] - r["scale_min"]) / (r["scale_max"] - r["scale_min"]))
                for r in ten + five]
    assert_matches_reference(report, reference(rescaled))
    assert any("rescaled" in n for n in report.notes)


def test_empty_database():
    report = bias_report(SQLiteStore.memory())
    assert (report.total_records, report.sessions, report.reviewers) == (0, 0, {})
    assert report.confidence_level == "insufficient"
    assert report.position_bias.test.p_value is None
    assert all(h.status == "insufficient" for h in report.honesty)


def test_small_data_is_labelled_insufficient():
    report = bias_report(load(make_records(6, sessions=3)))
    rows = {h.metric: h for h in report.honesty}
    assert rows["length_correlation"].status == "insufficient" and rows["length_correlation"].verdict is None
    assert any("indicators, not evidence" in n for n in report.notes)


# -- export and --records round trip ------------------------------------------------------------


def test_export_then_records_gives_the_same_report(tmp_path):
    store = load(make_records(8, sessions=90))
    out = tmp_path / "bias.jsonl"
    n = export_bias_records(store, out)
    assert n == store.count("bias_records")
    lines = out.read_text().splitlines()
    assert len(lines) == n and "id" not in json.loads(lines[0])
    from_db = bias_report(store, max_points=100)
    from_file = report_from_records_files([out], max_points=100)
    # The same report; a gap to the other reviewers is a fraction, summed in another order when the
    # file's records are read by the rows' pass: the last bits of the offsets' tests may differ.
    close(from_file.model_dump(), from_db.model_dump())
    assert len(from_db.length_points) == 100


def test_records_from_several_files_and_since_on_export(tmp_path):
    store = load(make_records(9, sessions=40))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    cut = (START + timedelta(hours=20)).isoformat()
    n_late = export_bias_records(store, a, since=cut)
    with b.open("w") as fh:
        n_all = export_bias_records(store, fh)
    assert 0 < n_late < n_all
    # b holds every record, a the later ones: read together, a's records appear twice
    with pytest.raises(InputError, match=r"b\.jsonl:\d+: the same record as .*a\.jsonl:1 \(a file read twice\?\)"):
        report_from_records_files([a, b])
    early = [line for line in b.read_text().splitlines() if json.loads(line)["timestamp"] < bias_ts(cut)]
    b.write_text("\n".join(early) + "\n")
    combined = report_from_records_files([a, b])
    assert combined.total_records == n_all


def test_a_file_read_twice_keeps_its_first_copy_with_skip_bad_and_is_one_line_without(tmp_path):
    records = make_records(14, sessions=40)
    original, copy = tmp_path / "f.jsonl", tmp_path / "copy-of-f.jsonl"
    original.write_text("".join(as_line(r) + "\n" for r in records))
    copy.write_bytes(original.read_bytes())
    alone = report_from_records_files([original])
    twice = report_from_records_files([original, copy], skip_bad=True)
    # Every copy is skipped as a repeat of its first: the report is the file's own.
    assert twice.skipped_lines == len(records) and twice.total_records == alone.total_records == len(records)
    assert twice.model_dump(exclude={"skipped_lines", "notes"}) == alone.model_dump(exclude={"skipped_lines", "notes"})
    assert any("copy-of-f.jsonl:1: the same record as" in n and "f.jsonl:1" in n for n in twice.notes)
    same_path = report_from_records_files([original, original], skip_bad=True)
    assert same_path.total_records == len(records)
    with pytest.raises(InputError, match=r"^.*copy-of-f\.jsonl:1: the same record as .*f\.jsonl:1 \(a file read"):
        report_from_records_files([original, copy])
    result = _cli_result(["bias-report", "--records", str(original), "--records", str(copy)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "the same record as" in result.output


def test_csv_export(tmp_path):
    store = load(make_records(10, sessions=5))
    out = tmp_path / "bias.csv"
    n = export_bias_records(store, out, fmt="csv")
    rows = out.read_text().splitlines()
    assert rows[0].split(",")[:3] == ["schema_version", "session_id", "reviewer_id"]
    assert len(rows) == n + 1
    with pytest.raises(InputError):
        export_bias_records(store, out, fmt="xml")


def _bad_file(tmp_path):
    good = make_records(11, sessions=4)
    lines = [as_line(r) for r in good]
    lines.insert(1, "{not json")
    lines.insert(2, as_line({**good[0], "response": "the whole answer text"}))
    lines.insert(3, as_line({**good[0], "score_value": 42}))
    lines.insert(4, "")  # blank lines are fine
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, len(good)


def test_bad_line_stops_with_file_and_line(tmp_path):
    path, _ = _bad_file(tmp_path)
    with pytest.raises(InputError, match=r"bad\.jsonl:2: not valid JSON"):
        report_from_records_files([path])
    with pytest.raises(InputError, match="cannot read"):
        report_from_records_files([tmp_path / "missing.jsonl"])


def test_skip_bad_counts_skipped_lines(tmp_path):
    path, good = _bad_file(tmp_path)
    report = report_from_records_files([path], skip_bad=True)
    assert report.skipped_lines == 3
    assert report.total_records == good
    assert any("bad.jsonl:2" in n for n in report.notes)


# -- CLI -------------------------------------------------------------------------------------------


def _cli(args):
    from council.cli.main import cli

    return CliRunner().invoke(cli, args, catch_exceptions=False)


def _cli_result(args):
    from council.cli.main import cli

    return CliRunner().invoke(cli, args)


def test_cli_json_from_database(council_home):
    store = SQLiteStore.open()
    store.insert_bias_records(make_records(12, sessions=50))
    store.close()
    result = _cli(["bias-report", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    for key in ("reviewers", "length_correlation", "length_correlation_ci", "sample_size", "confidence_level",
                "position_bias", "self_preference"):
        assert key in data
    assert {"bias_detected", "means", "variance", "test"} <= set(data["position_bias"])
    assert "length_points" not in data
    some = next(iter(data["reviewers"].values()))
    assert {"mean", "std", "z_score", "classification", "samples", "variance_label", "reliability"} <= set(some)


def test_cli_records_text_and_html(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(as_line(r) + "\n" for r in make_records(13, sessions=40)))
    html_path = tmp_path / "report.html"
    result = _cli(["bias-report", "--records", str(path), "--html", str(html_path)])
    assert result.exit_code == 0, result.output
    assert "=== Reviewer Profiles" in result.output and "Mean score:" in result.output
    assert html_path.read_text().count("<svg") == 3


def test_cli_errors_are_one_line_with_exit_code_2(tmp_path):
    path, _ = _bad_file(tmp_path)
    result = CliRunner().invoke(__import__("council.cli.main", fromlist=["cli"]).cli,
                                ["bias-report", "--records", str(path)])
    assert result.exit_code == 2
    assert "bad.jsonl:2:" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(__import__("council.cli.main", fromlist=["cli"]).cli,
                                ["bias-report", "--records-format", "llm-council-core"])
    assert result.exit_code == 2 and "--records-format" in result.output


def test_text_rendering_of_an_empty_report():
    from council.bias.wording import render_bias_report_text as render_text

    console = Console(record=True, width=100)
    render_text(bias_report(SQLiteStore.memory()), console)
    assert "No bias records yet" in console.export_text()


# -- HTML ----------------------------------------------------------------------------------------


class _TagBalance(HTMLParser):
    VOID = {"meta", "br", "hr", "img", "input", "link", "line", "rect", "circle"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with open {self.stack[-3:]}")
        else:
            self.stack.pop()


def test_html_is_self_contained_well_formed_and_escaped():
    records = make_records(14, sessions=40)
    evil = "<script>alert(1)</script>/model"
    for r in records:  # one reviewer renamed throughout, so its reviews stay whole
        if r["reviewer_id"] == MODELS[0]:
            r["reviewer_id"] = evil
    report = bias_report(load(records), max_points=100)
    page = render_html(report)
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;/model" in page
    assert "http://" not in page and "https://" not in page and " src=" not in page
    parser = _TagBalance()
    parser.feed(page)
    assert parser.errors == [] and parser.stack == []
    assert parser.tags.count("svg") == 3
    assert parser.tags.count("circle") == len(report.length_points) == 100
    assert sum(1 for t in parser.tags if t == "rect") >= len(report.reviewers) + len(report.position_bias.means)


def test_html_of_an_empty_report():
    page = render_html(bias_report(SQLiteStore.memory()))
    assert "No reviewers." in page and "<svg" not in page
    assert "0 records · 0 sessions" in page


def test_reviews_with_tied_tops_or_position_gaps_are_left_out_of_the_top_position_test():
    def rec(session, reviewer, pos, score):
        return BiasRecord(session_id=session, reviewer_id=reviewer, model_id=f"m{pos}", position=pos,
                          response_length_chars=100 * (pos + 1), score_value=score).row()

    records = [rec("s1", "r", p, s) for p, s in [(0, 9), (1, 5), (2, 4)]]  # usable, top at 0
    records += [rec("s2", "r", p, s) for p, s in [(0, 9), (1, 9), (2, 4)]]  # tied top
    records += [rec("s3", "r", p, s) for p, s in [(0, 3), (2, 9), (3, 4)]]  # gap: positions 0, 2, 3
    db = load(records)
    # position 3 in a review of 3 answers is invalid: the report stops (or skips the review)
    with pytest.raises(InputError, match="position 3 is beyond the 3 answers"):
        bias_report(db)
    report = bias_report(db, skip_bad=True)
    test = report.position_bias.top_position_test
    assert report.position_bias.orderings == 2 and report.skipped_reviews == 1 and report.skipped_records == 3
    assert test.p_value is None and test.note.startswith("1 reviews left out")


def test_position_verdict_is_only_an_indicator_below_the_minimum():
    from council.bias.report import position_verdict

    small = bias_report(load(make_records(15, sessions=4)))
    assert "indicator only" in position_verdict(small)
    big = bias_report(load(make_records(15, sessions=80)))
    want = "bias detected" if big.position_bias.bias_detected else "no bias detected"
    assert position_verdict(big).startswith(want) and "; Holm over " in position_verdict(big)
    assert html.escape(position_verdict(big)) in render_html(big)
