"""The bias audit at the edges: length in words, calibration significance, record validation, honesty rows.

References: scipy (f_oneway, ttest_ind with equal_var=False), Holm's step-down rule written
from its definition, the seed's own formulas, and simulation with stated tolerances.
"""

from __future__ import annotations

import json
import random
import sqlite3
import statistics

import pytest
from click.testing import CliRunner
from rich.console import Console
from scipy import stats as sps
from sqlite_utils import Database

from council import Council
from council.bias.html import render_html
from council.bias.records import BiasRecord, count_words, session_bias_metadata
from council.bias.report import bias_report, report_from_records_files
from council.errors import InputError
from council.methods.significance import holm_adjust, paired_t_test
from council.storage import SQLiteStore
from council.storage.migrations import migrations


def rec(session, reviewer, model, pos, score, chars=100, words=None, **extra):
    return BiasRecord(
        session_id=session, reviewer_id=reviewer, model_id=model, position=pos, response_length_chars=chars,
        response_length_words=words, score_value=float(score), scale_min=1, scale_max=10, **extra,
    )


def line(record: BiasRecord, **override) -> str:
    return json.dumps({**record.model_dump(mode="json"), **override})


def cli(args):
    from council.cli.main import cli as main

    return CliRunner().invoke(main, args)


# ------------------------------------------------------------------- length in words


def test_words_are_counted_as_the_method_counts_them():
    assert count_words("  one two\nthree\tfour  ") == 4 == len("  one two\nthree\tfour  ".split())
    assert count_words("") == 0


def equal_words_session():
    """Every answer has 61 words, characters differ (449–462), and scores follow the characters."""
    chars = {"a": 449, "b": 452, "c": 458, "d": 462}
    scores = {"a": 5, "b": 6, "c": 8, "d": 9}
    out = []
    for i, reviewer in enumerate(["r1", "r2", "r3"]):
        for pos, model in enumerate(sorted(chars, key=lambda m: (hash((i, m)) % 7, m))):
            out.append(rec("s", reviewer, model, pos, scores[model], chars=chars[model], words=61))
    return out


def test_length_correlation_uses_words_by_default():
    meta = session_bias_metadata(equal_words_session())
    assert meta.length_correlation.unit == "words"
    assert meta.length_correlation.r == 0.0 and meta.flags == []  # no spread in words: no verbosity signal
    by_chars = session_bias_metadata(equal_words_session(), length_unit="chars")
    assert by_chars.length_correlation.r > 0.9 and "verbosity" in by_chars.flags[0]
    assert "length in chars" in by_chars.flags[0]


async def test_sessions_record_words_and_characters():
    texts = {"x": "one two three", "y": "a b c d e f g h", "z": "short"}
    council = Council.from_config({"councils": {"default": {"members": ["fake/r1", "fake/r2"]}}})
    from council.session import Candidate

    result = await council.run("Q?", candidates=[Candidate(id=k, text=v) for k, v in texts.items()],
                               synthesis=False, seed=1)
    await council.aclose()
    assert {a.member: a.length_words for a in result.answers} == {k: len(v.split()) for k, v in texts.items()}
    store = SQLiteStore.open()
    rows = list(store.db.query("select model_id, response_length_words, response_length_chars from bias_records"))
    store.close()
    assert rows and all(r["response_length_words"] == len(texts[r["model_id"]].split()) for r in rows)
    assert all(r["response_length_chars"] == len(texts[r["model_id"]]) for r in rows)
    assert result.bias.length_correlation.unit == "words"


def sessions_db(n_sessions=12, *, words=True, seed=0) -> SQLiteStore:
    rnd = random.Random(seed)
    store = SQLiteStore.memory()
    rows = []
    for s in range(n_sessions):
        models = ["m1", "m2", "m3", "m4"]
        chars = {m: rnd.randint(100, 3000) for m in models}
        nwords = {m: rnd.randint(20, 500) for m in models}
        for reviewer in ["r1", "r2", "r3"]:
            order = rnd.sample(models, 4)
            for pos, m in enumerate(order):
                rows.append(rec(f"s{s}", reviewer, m, pos, rnd.randint(1, 10), chars=chars[m],
                                words=nwords[m] if words else None).row())
    store.insert_bias_records(rows)
    return store


def test_report_says_which_length_and_chars_are_an_option():
    db = sessions_db()
    words, chars = bias_report(db), bias_report(db, length_unit="chars")
    assert (words.length_unit, chars.length_unit) == ("words", "chars")
    assert words.length_correlation != chars.length_correlation
    assert words.length_missing == chars.length_missing == 0


def test_old_rows_without_words_still_report_and_say_so():
    db = sessions_db(words=False)
    report = bias_report(db, length_unit="words")  # asked for words: none, and the report says so
    assert report.total_records == 12 * 12 and report.reviewers  # everything else is reported
    assert report.length_missing == 12 * 4 and report.sample_size == 0
    assert report.length_correlation is None and report.length_correlation_ci is None
    assert any("no length in words" in n and "--length-unit chars" in n for n in report.notes)
    assert bias_report(db, length_unit="chars").sample_size == 12
    fallback = bias_report(db)  # by default: characters, said so
    assert fallback.length_unit == "chars" and fallback.sample_size == 12 and fallback.length_missing == 0


def test_migration_adds_words_to_an_old_database(tmp_path):
    path = tmp_path / "old.db"
    old = Database(sqlite3.connect(path))
    migrations.apply(old, stop_before="m005_bias_length_words")
    row = rec("s", "r", "m", 0, 7).row()
    del row["response_length_words"]
    old["bias_records"].insert(row)
    old.conn.close()
    store = SQLiteStore.open(path)
    columns = {c.name for c in store.db["bias_records"].columns}
    indexes = {i.name for i in store.db["bias_records"].indexes}
    assert "response_length_words" in columns
    assert "idx_bias_records_answer_words" in indexes and "idx_bias_records_answer" not in indexes
    assert store.db.execute("select response_length_words from bias_records").fetchall() == [(None,)]
    report = bias_report(store, length_unit="words")
    assert report.total_records == 1 and report.length_missing == 1
    store.close()


# ------------------------------------------------------------- calibration significance


def uniform_scores_db(reviewers=5, per_reviewer=60, seed=3, harsh=None):
    """``per_reviewer`` sessions in each of which every reviewer scores the same one answer,
    uniformly at random (``harsh``: that reviewer 4 points lower)."""
    rnd = random.Random(seed)
    rows = []
    for i in range(per_reviewer):
        for r in range(reviewers):
            score = rnd.randint(1, 10)
            if harsh == r:
                score = max(1, score - 4)
            rows.append(rec(f"s{i}", f"rev{r}", "m", 0, score).row())
    store = SQLiteStore.memory()
    store.insert_bias_records(rows)
    groups = {}
    for row in rows:
        groups.setdefault(row["reviewer_id"], []).append(row["score_value"])
    return store, groups


def gaps_of(groups: dict[str, list[float]]) -> dict[str, list[float]]:
    """Each reviewer's gap to the others, session by session (every reviewer scored the one answer)."""
    sessions = len(next(iter(groups.values())))
    out = {}
    for rid, scores in groups.items():
        others = [[v[i] for other, v in groups.items() if other != rid] for i in range(sessions)]
        out[rid] = [scores[i] - sum(o) / len(o) for i, o in enumerate(others)]
    return out


def holm_reference(p: dict[str, float]) -> dict[str, float]:
    """Holm (1979), from the definition: reject H(1..j) while p(j) <= alpha / (m - j + 1)."""
    ordered = sorted(p, key=p.get)
    m = len(ordered)
    out, running = {}, 0.0
    for j, key in enumerate(ordered):
        running = max(running, min(1.0, (m - j) * p[key]))
        out[key] = running
    return out


def test_calibration_test_matches_scipy_and_labels_are_not_evidence():
    # Random scores: some reviewer lands below z = −1 ("harsh"), yet nothing is significant.
    for seed in range(40):
        db, groups = uniform_scores_db(seed=seed)
        report = bias_report(db)
        labelled = any(p.classification != "neutral" for p in report.reviewers.values())
        if labelled and not report.reviewer_calibration_test.significant:
            break
    else:  # pragma: no cover
        pytest.fail("no random draw produced a harsh or generous label")
    # Each reviewer against the others on the answers they share: a one-sample t-test of its
    # gaps over sessions, Holm over the reviewers; across reviewers, the smallest adjusted p.
    gaps = gaps_of(groups)
    raw = {rid: sps.ttest_1samp(g, 0.0).pvalue for rid, g in gaps.items()}
    adjusted = holm_reference(raw)
    for rid, p in report.reviewers.items():
        assert p.offset == pytest.approx(statistics.mean(gaps[rid]), abs=5e-4)
        assert p.p_value == pytest.approx(adjusted[rid], rel=1e-6)
        assert p.significant == (adjusted[rid] < 0.05)
    t = report.reviewer_calibration_test
    first = min(adjusted, key=adjusted.get)
    assert t.p_value == pytest.approx(adjusted[first], rel=1e-6)
    assert t.statistic == pytest.approx(sps.ttest_1samp(gaps[first], 0.0).statistic, rel=1e-9)
    labelled = [rid for rid, p in report.reviewers.items() if p.classification != "neutral"]
    assert not t.significant and not any(report.reviewers[r].significant for r in labelled)
    row = next(h for h in report.honesty if h.metric == "reviewer_calibration")
    assert "not significant" in row.verdict or row.status == "insufficient"
    console = Console(record=True, width=200)
    from council.bias.wording import render_bias_report_text as render_text

    render_text(report, console)
    text = console.export_text()
    assert "not significant" in text and "not significantly different from the others" in text
    assert "are not significant" in render_html(report)


def test_a_truly_harsh_reviewer_is_significant():
    db, _ = uniform_scores_db(harsh=2, per_reviewer=80)
    report = bias_report(db)
    assert report.reviewer_calibration_test.significant
    assert report.reviewers["rev2"].significant and report.reviewers["rev2"].classification == "harsh"


def test_per_reviewer_tests_hold_the_family_wise_error_rate():
    # Null: 5 reviewers scoring the same answer in 40 sessions, uniformly. Holm over the reviewers'
    # t-tests of their gaps keeps P(any flagged) ≤ 5 %; tolerance: 3 binomial standard errors at 400
    # draws (0.05 + 0.033).
    rnd = random.Random(11)
    trials, any_flagged = 400, 0
    for _ in range(trials):
        gaps = gaps_of({f"r{i}": [rnd.randint(1, 10) for _ in range(40)] for i in range(5)})
        raw = {k: paired_t_test(len(g), sum(g), sum(x * x for x in g)).p_value for k, g in gaps.items()}
        any_flagged += any(p < 0.05 for p in holm_adjust(raw).values())
    assert any_flagged / trials <= 0.05 + 0.033


def test_json_carries_the_contract_fields(council_home):
    db, _ = uniform_scores_db()
    store = SQLiteStore.open()
    store.insert_bias_records([dict(r) for r in db.db.query("select * from bias_records")])
    store.close()
    result = cli(["bias-report", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert {"statistic", "p_value", "significant"} <= set(data["reviewer_calibration_test"])
    assert all("significant" in p for p in data["reviewers"].values())
    assert data["length_unit"] in {"words", "chars"}
    assert data["length_unit"] == ("words" if any(r["response_length_words"] is not None for r in
                                                  db.db.query("select * from bias_records")) else "chars")


# ---------------------------------------------------------------------- record validation


def good_review(session="s1", reviewer="r1", n=3, **kw):
    return [rec(session, reviewer, f"m{i}", i, 5 + i, words=10 * (i + 1), **kw) for i in range(n)]


def write(tmp_path, lines, name="recs.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_huge_score_without_a_scale_is_rejected_not_a_traceback(tmp_path):
    bad = {**good_review()[0].model_dump(mode="json"), "score_value": 1e200, "scale_min": None, "scale_max": None}
    path = write(tmp_path, [line(r) for r in good_review()] + [json.dumps(bad)])
    with pytest.raises(InputError, match=r"recs\.jsonl:4: score_value 1e\+200 is outside 1–10"):
        report_from_records_files([path])
    result = cli(["bias-report", "--records", str(path)])
    assert result.exit_code == 2 and "recs.jsonl:4:" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("override", "field"),
    [({"score_value": "7"}, "score_value"), ({"score_value": True}, "score_value"),
     ({"position": "1"}, "position"), ({"response_length_chars": True}, "response_length_chars"),
     ({"self_review": 1}, "self_review"), ({"response_length_words": 3.5}, "response_length_words")],
)
def test_strict_types(tmp_path, override, field):
    records = good_review()
    path = write(tmp_path, [line(records[0]), line(records[1], **override), line(records[2])])
    with pytest.raises(InputError, match=rf"recs\.jsonl:2: {field}"):
        report_from_records_files([path])


def test_position_beyond_the_answers_of_a_review(tmp_path):
    records = good_review() + good_review("s2")
    lines = [line(r) for r in records]
    lines[2] = line(records[2], position=5)  # s1 has 3 answers: positions 0..2
    path = write(tmp_path, lines)
    with pytest.raises(InputError, match=r"recs\.jsonl:3: position 5 is beyond the 3 answers of this review"):
        report_from_records_files([path])
    report = report_from_records_files([path], skip_bad=True)
    assert (report.total_records, report.skipped_reviews, report.skipped_records) == (3, 1, 3)
    assert report.position_bias.orderings == 1


def test_two_answers_at_one_position(tmp_path):
    records = good_review()
    lines = [line(r) for r in records]
    lines[1] = line(records[1], position=0)
    path = write(tmp_path, lines)
    with pytest.raises(InputError, match=r"recs\.jsonl:2: two answers at position 0 in one review"):
        report_from_records_files([path])


def test_the_database_refuses_invalid_rows_on_write():
    store = SQLiteStore.memory()
    huge = {**good_review()[0].row(), "score_value": 1e200, "scale_min": None, "scale_max": None}
    for bad in (huge, {**huge, "score_value": "abc"}, {**good_review()[0].row(), "position": -1}):
        with pytest.raises(sqlite3.IntegrityError, match="invalid bias record"):
            store.insert_bias_records([bad])
    assert store.count("bias_records") == 0


def test_the_database_is_checked_too(council_home):
    # A database from before the checks existed: the invalid rows are already stored.
    legacy = Database(sqlite3.connect(council_home / "council.db"))
    migrations.apply(legacy, stop_before="m005_bias_length_words")
    rows = [r.row() for r in good_review() + good_review("s2")]
    rows.append({**good_review("s3")[0].row(), "score_value": 1e200, "scale_min": None, "scale_max": None})
    rows += [good_review("s4")[0].row(), {**good_review("s4")[1].row(), "position": 0}]  # two answers at 0
    for row in rows:
        row.pop("response_length_words")
    legacy["bias_records"].insert_all(rows)
    legacy.conn.close()
    result = cli(["bias-report"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "bias record 7: score_value 1.0e+200 is outside 1-10" in result.output
    result = cli(["bias-report", "--skip-bad", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    # the invalid row alone (its review had nothing else) and the review with two answers at position 0
    assert data["total_records"] == 6 and data["skipped_reviews"] == 1 and data["skipped_records"] == 3
    assert "left out 3 records" in result.stderr


# ----------------------------------------------------------------------------- honesty rows


def test_honesty_counts_only_the_data_an_estimate_uses():
    # 10 sessions of 3 answers where length and score line up exactly (r = +1 every time) and 5 of
    # 2 answers. The seed's pooling leaves r = ±1 out: nothing left, its figures are null. The
    # pooled within-session correlation uses them (issue 61: leaving out the strongest sessions
    # biased it); sessions of 2 answers are pooled by neither, and the row counts what was.
    rows = []
    for s in range(15):
        for reviewer in ("r1", "r2"):
            answers = [("a", 10, 3), ("b", 20, 5), ("c", 30, 7)][: 3 if s < 10 else 2]
            for pos, (m, words, score) in enumerate(answers):
                rows.append(rec(f"s{s}", reviewer, m, pos, score, words=words).row())
    store = SQLiteStore.memory()
    store.insert_bias_records(rows)
    report = bias_report(store)
    row = next(h for h in report.honesty if h.metric == "length_correlation")
    assert report.sample_size == 10 and report.length_correlation == 1.0
    assert report.length_correlation_ci == (-1.0, 1.0)  # no session varies from the others: no jackknife
    assert report.length_correlation_seed is None and report.length_correlation_ci_seed is None
    assert (row.data_points, row.status) == (30, "sufficient")


def test_session_honesty_counts_no_pairs_when_no_r_was_computed():
    meta = session_bias_metadata([rec("s", "r", m, i, 5, words=10) for i, m in enumerate("ab")])
    row = next(h for h in meta.honesty if h.metric == "length_correlation")
    assert meta.length_correlation.interpretation == "insufficient_data" and row.data_points == 0
