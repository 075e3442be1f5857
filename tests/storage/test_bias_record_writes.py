"""The bias_records table from m017 on: the record rules as a CHECK constraint (no trigger),
only the indexes the report reads, bulk writes in one statement per batch, every row of an
older database kept by the rebuild."""

from __future__ import annotations

import re
import sqlite3

import pytest

from council.bias.records import BiasRecord
from council.storage import BiasQuery, SQLiteStore
from council.storage.bias_rows import INDEXES
from council.storage.migrations import migrations
from council.storage.sqlite import Database


def row(session: str, reviewer: str, model: str, position: int, score: float, **extra: object) -> dict:
    return BiasRecord(
        session_id=session, reviewer_id=reviewer, model_id=model, position=position,
        response_length_chars=50 + position, response_length_words=10 + position, score_value=score,
        timestamp="2026-01-01T00:00:00Z", **extra,
    ).row()  # fmt: skip


def review(session: str, reviewer: str, positions: list[int]) -> list[dict]:
    return [row(session, reviewer, f"m{i}", p, 1 + (i * 7) % 10) for i, p in enumerate(positions)]


def sqlite_schema(store: SQLiteStore) -> tuple[set[str], set[str], str]:
    entries = store.db.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'bias_records' AND sql IS NOT NULL"
    ).fetchall()
    triggers = {name for kind, name, _ in entries if kind == "trigger"}
    indexes = {name for kind, name, _ in entries if kind == "index"}
    [table_sql] = [sql for kind, _, sql in entries if kind == "table"]
    return triggers, indexes, table_sql


def test_the_rules_are_a_check_constraint_and_only_the_report_indexes_are_kept():
    store = SQLiteStore.memory()
    triggers, indexes, table_sql = sqlite_schema(store)
    assert triggers == set()  # a trigger runs a statement per row; the CHECK is evaluated inline
    assert 'CONSTRAINT "invalid bias record" CHECK' in table_sql
    assert indexes == set(INDEXES)
    assert "idx_bias_records_reviewer_id_score_value" not in indexes  # the review pass sums reviewers
    store.close()


def test_postgresql_keeps_the_same_indexes(postgres_url, monkeypatch):
    from council.storage import open_store

    monkeypatch.setenv("COUNCIL_DATABASE_URL", postgres_url)
    store = open_store()
    try:
        names = {r[0] for r in store.db.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'bias_records'")}
        assert names == {*INDEXES, "bias_records_pkey"}
        checks = store.db.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = 'bias_records'::regclass AND contype = 'c'"
        ).fetchall()
        assert [c[0] for c in checks] == ["bias_record_valid"]
    finally:
        store.close()


def test_every_kept_index_is_read_by_the_report_and_nothing_sorts_the_table():
    store = SQLiteStore.memory()
    rows = [r for s in range(6) for rv in ("r1", "r2") for r in review(f"s{s}", rv, [2, 0, 1])]
    store.insert_bias_records(rows)
    statements: list[str] = []
    store.db.conn.set_trace_callback(statements.append)
    store.bias_sums(BiasQuery(max_points=3))
    store.db.conn.set_trace_callback(None)
    used, plans = set(), []
    for sql in statements:
        if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
            continue
        plan = " / ".join(p[3] for p in store.db.execute("EXPLAIN QUERY PLAN " + sql).fetchall())
        plans.append(plan)
        used |= set(re.findall(r"USING (?:COVERING )?INDEX (\w+)", plan))
        assert not re.search(r"SCAN bias_records\b(?! USING)", plan), plan  # no pass reads the table itself
    assert used == set(INDEXES), plans
    # Per review, per session, per self-reviewed answer and per position the report reads the summaries (m020).
    for table in ("bias_review_outcomes", "bias_session_sums", "bias_self_sums", "bias_position_sums"):
        assert any(f"SCAN {table}" in plan for plan in plans), (table, plans)
    store.close()


def test_the_rebuild_keeps_every_row_of_an_old_database(tmp_path):
    # A database from before m005: rows that break the rules were stored then and must survive
    # m017's rebuild, still listed as invalid; new writes are held to the rules.
    path = tmp_path / "council.db"
    legacy = Database(sqlite3.connect(path))
    migrations.apply(legacy, stop_before="m005_bias_length_words")
    rows = review("s1", "r1", [0, 1, 2]) + [{**row("s2", "r1", "m0", 0, 5), "score_value": 99.0, "scale_min": None,
                                               "scale_max": None}]  # fmt: skip
    for i, r in enumerate(rows):
        r.pop("response_length_words")
        r["id"] = 10 + 3 * i
    legacy["bias_records"].insert_all(rows)
    before = legacy.execute("SELECT * FROM bias_records ORDER BY id").fetchall()
    legacy.conn.close()

    store = SQLiteStore.open(path)
    after = store.db.execute("SELECT * FROM bias_records ORDER BY id").fetchall()
    assert after == [(*r, None) for r in before]  # the same ids and values; words (m005) unknown
    assert store.db.execute("SELECT id FROM bias_records_invalid").fetchall() == [(19,)]
    triggers, indexes, _ = sqlite_schema(store)
    assert triggers == set() and indexes == set(INDEXES)  # m019 dropped the per-review index
    with pytest.raises(sqlite3.IntegrityError, match="invalid bias record"):
        store.insert_bias_records([{**row("s3", "r1", "m0", 0, 5), "position": -1}])
    with pytest.raises(sqlite3.IntegrityError, match="invalid bias record"):  # an update is held too
        store.db.execute("UPDATE bias_records SET score_value = 11 WHERE id = 10")
    assert store.count("bias_records") == 4
    store.close()


def test_a_field_that_is_no_column_is_refused_and_nothing_is_written(store_backend):
    good = row("s1", "r1", "m0", 0, 5)
    with pytest.raises(ValueError, match="not columns of bias_records: scroe"):
        store_backend.insert_bias_records([good, {**good, "scroe": 5}])
    assert store_backend.count("bias_records") == 0


def test_records_written_in_many_batches_with_and_without_ids(store_backend):
    rows = [row(f"s{i // 3}", "r1", f"m{i % 3}", i % 3, 1 + i % 10) for i in range(30)]
    rows[4] = {k: v for k, v in rows[4].items() if k not in ("query_hash", "council")}  # left out: NULL
    rows[5]["self_review"] = True  # a boolean, as model_dump writes it: stored as 1
    assert store_backend.insert_bias_records(iter(rows), batch_size=7) == 30
    fields = ("session_id", "model_id", "position", "score_value", "self_review", "council")
    assert list(store_backend.bias_record_rows(fields)) == [
        (r["session_id"], r["model_id"], r["position"], r["score_value"], int(r["self_review"]), r.get("council"))
        for r in rows
    ]
    assert store_backend.insert_bias_records([{**rows[0], "id": 1000}]) == 1  # an id given is kept
    assert list(store_backend.bias_record_rows(("id",)))[-1] == (1000,)


def test_reviews_of_more_than_53_answers_are_checked_exactly(store_backend):
    # The fast positions check sums 2^position in a float: exact up to 53 positions. Larger
    # reviews take the exact pass; a position beyond a small review's size is bad either way.
    big = review("s1", "r1", list(range(60)))
    store_backend.insert_bias_records(big + review("s2", "r1", [0, 1, 60]))
    sums = store_backend.bias_sums(BiasQuery())
    assert sums.bad.reviews == [("s2", "r1")]
    store_backend.insert_bias_records(review("s3", "r2", [*range(59), 3]))  # 60 answers, position 3 twice
    assert sorted(store_backend.bias_sums(BiasQuery()).bad.reviews) == [("s2", "r1"), ("s3", "r2")]
    skipped = store_backend.bias_sums(BiasQuery(skip_bad=True))
    assert skipped.orderings == 1 and skipped.reviewers["r1"][0] == 60 and "r2" not in skipped.reviewers
