"""The bias report's summaries kept as records are written (m020, council.storage.bias_summaries):
the report reads them when they answer its query exactly and gives what the rows give."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from council.bias.records import BiasRecord
from council.storage import BiasQuery, SQLiteStore
from council.storage import bias_sums as sums_module
from council.storage.bias_summaries import ALL_TABLES, REVIEW_TABLE, SELF_TABLE, SESSION_TABLE
from council.storage.copying import copy_store
from council.storage.migrations import migrations
from council.storage.sqlite import Database

MODELS = ("m0", "m1", "m2", "m3")


def row(session: str, reviewer: str, model: str, position: int, score: float, **extra: Any) -> dict[str, Any]:
    return record(session, reviewer, model, position, score, **extra).row()


def record(session: str, reviewer: str, model: str, position: int, score: float, **extra: Any) -> BiasRecord:
    fields: dict[str, Any] = {
        "session_id": session, "reviewer_id": reviewer, "model_id": model, "position": position,
        "response_length_chars": 40 + 7 * position, "response_length_words": 8 + position,
        "score_value": score, "timestamp": "2026-01-01T00:00:00Z", **extra,
    }  # fmt: skip
    return BiasRecord(**fields)


def close(a: Any, b: Any, where: str = "") -> None:
    """Equal, integers exactly and floats to 1e-12 relative or 1e-9 (sums added in another order);
    the distinct scales in any order (the report reads them as a set)."""
    if dataclasses.is_dataclass(a):
        for field in dataclasses.fields(a):
            x, y = getattr(a, field.name), getattr(b, field.name)
            if field.name == "scales":
                x, y = sorted(x, key=repr), sorted(y, key=repr)
            close(x, y, f"{where}.{field.name}")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            close(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):  # a gap may be 0 one way, 1e-16 the other
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-9), (where, a, b)
    else:
        assert a == b and type(a) is type(b), (where, a, b)


def from_rows(store: Any, query: BiasQuery, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        m.setattr(sums_module, "_summaries_complete", lambda db: False)
        return store.bias_sums(query)


def statements(store: SQLiteStore, query: BiasQuery) -> list[str]:
    seen: list[str] = []
    store.db.conn.set_trace_callback(seen.append)
    try:
        store.bias_sums(query)
    finally:
        store.db.conn.set_trace_callback(None)
    return seen


@st.composite
def record_sets(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Sessions of reviews (one shuffled order each, sometimes a broken one), a few councils,
    days, scales (sometimes mixed) and missing word counts."""
    records = []
    mixed = draw(st.booleans()) and draw(st.booleans())
    for s in range(draw(st.integers(1, 6))):
        models = draw(st.lists(st.sampled_from(MODELS), min_size=2, max_size=4, unique=True))
        council = draw(st.sampled_from(["default", "research", None]))
        day = draw(st.integers(1, 4))
        scale = (0, 5) if mixed and draw(st.booleans()) else None
        for reviewer in draw(st.lists(st.sampled_from(MODELS), min_size=1, max_size=3, unique=True)):
            if draw(st.integers(0, 6)) == 0:  # a review on another day or council than the session's others
                day = draw(st.integers(1, 4))
                council = draw(st.sampled_from(["default", "research", None]))
            order = draw(st.permutations(models))
            broken = draw(st.integers(0, 12)) == 0  # a position given twice: a bad review
            for pos, model in enumerate(order):
                lo, hi = scale or (1, 10)
                extra: dict[str, Any] = {"timestamp": f"2026-01-0{day}T00:00:00Z", "council": council}
                if scale:
                    extra.update(scale_min=lo, scale_max=hi)
                record = row(
                    f"s{s}", reviewer, model, 0 if broken else pos, draw(st.integers(lo, hi)),
                    self_review=reviewer == model, **extra,
                )  # fmt: skip
                if draw(st.integers(0, 5)) == 0:
                    record["response_length_words"] = None
                records.append(record)
    return records


QUERIES = st.builds(
    BiasQuery,
    since=st.sampled_from([None, "2026-01-02T00:00:00Z", "2026-01-03T12:00:00Z"]),
    reviewers=st.sampled_from([(), ("m1",), ("m0", "m2")]),
    council=st.sampled_from([None, "default", "research"]),
    length_unit=st.sampled_from([None, "words", "chars"]),
    max_points=st.sampled_from([0, 3, 100]),
    skip_bad=st.booleans(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=record_sets(),
    cuts=st.lists(st.integers(0, 200), max_size=4),
    queries=st.lists(QUERIES, min_size=1, max_size=4),
)
def test_the_summaries_give_the_sums_of_the_rows(records, cuts, queries, monkeypatch):
    # Written in several calls, cut anywhere: a review's records may land in separate calls.
    store = SQLiteStore.memory()
    try:
        bounds = sorted({0, len(records), *(c for c in cuts if c < len(records))})
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            store.insert_bias_records(records[lo:hi])
        assert sums_module._summaries_complete(store.db)
        for query in queries:
            close(store.bias_sums(query), from_rows(store, query, monkeypatch))
    finally:
        store.close()


@pytest.mark.parametrize(
    "query", [BiasQuery(), BiasQuery(reviewers=("r1",)), BiasQuery(since="2026-01-01T00:00:00Z", council="default")]
)
def test_the_report_reads_the_summaries_not_the_rows(query):
    store = SQLiteStore.memory()
    store.insert_bias_records([row("s1", "r1", m, i, 3 + i, council="default") for i, m in enumerate(MODELS)])
    store.insert_bias_records([row("s1", "r2", m, 3 - i, 4 + i, council="default") for i, m in enumerate(MODELS)])
    seen = statements(store, query)
    assert any(f"FROM {REVIEW_TABLE} WHERE" in sql and "GROUP BY reviewer_id, k, code" in sql for sql in seen)
    assert not any("FROM bias_records" in sql and "GROUP BY r.session_id, r.reviewer_id" in sql for sql in seen)
    # Per answer: the summaries, unless a reviewer filter asks for the selected reviewers' scores.
    assert any("records, words_n" in sql and f"FROM {SESSION_TABLE} WHERE" in sql for sql in seen) == (
        not query.reviewers
    )
    assert any(f"FROM {SELF_TABLE} WHERE" in sql for sql in seen)  # the selected reviewers' own answers too
    assert any("WITH a AS MATERIALIZED" in sql for sql in seen) == bool(query.reviewers)
    assert store.db.execute(f"SELECT COUNT(*), SUM(k) FROM {REVIEW_TABLE}").fetchone() == (2, 8)
    assert store.db.execute(f"SELECT records, answers FROM {SESSION_TABLE}").fetchall() == [(8, 4)]
    store.close()


def test_a_filter_cutting_through_a_session_sends_the_report_to_the_rows(monkeypatch):
    # The summaries stand for whole sessions: a --since or --council that keeps some of a
    # session's records and not others is answered from the rows, and gives what they give.
    store = SQLiteStore.memory()
    store.insert_bias_records([row("s1", "r1", m, i, 3 + i, council="default") for i, m in enumerate(MODELS)])
    later = {"timestamp": "2026-01-03T00:00:00Z", "council": "research"}
    store.insert_bias_records([row("s1", "r2", m, 3 - i, 4 + i, **later) for i, m in enumerate(MODELS)])
    for query in (BiasQuery(since="2026-01-02T00:00:00Z"), BiasQuery(council="research")):
        seen = " ".join(statements(store, query))
        assert f"FROM {REVIEW_TABLE} WHERE" not in seen and "GROUP BY r.session_id, r.reviewer_id" in seen
        summed = store.bias_sums(query)
        assert summed.orderings == 1 and summed.reviewers == {"r2": (4, 22.0, 126.0)}
        close(summed, from_rows(store, query, monkeypatch))
    # A filter keeping or leaving out whole sessions is still answered from the summaries.
    seen = " ".join(statements(store, BiasQuery(since="2025-12-01T00:00:00Z")))
    assert f"FROM {REVIEW_TABLE} WHERE" in seen
    store.close()


def test_a_bad_review_sends_the_report_to_the_rows_which_list_it(monkeypatch):
    store = SQLiteStore.memory()
    store.insert_bias_records([row("s1", "r1", m, i, 3 + i) for i, m in enumerate(MODELS)])
    store.insert_bias_records([row("s1", "r2", m, 0, 4 + i) for i, m in enumerate(MODELS)])  # every answer at 0
    assert store.db.execute(f"SELECT code FROM {REVIEW_TABLE} ORDER BY reviewer_id").fetchall() == [(3,), (-1,)]
    summed = store.bias_sums(BiasQuery())
    assert summed.bad.reviews == [("s1", "r2")] and summed.reviewers == {}
    skipped = store.bias_sums(BiasQuery(skip_bad=True))
    assert skipped.orderings == 1 and skipped.skipped_records == 4
    close(skipped, from_rows(store, BiasQuery(skip_bad=True), monkeypatch))
    store.close()


def test_a_record_written_past_the_summaries_sends_the_report_to_the_rows(monkeypatch):
    store = SQLiteStore.memory()
    store.insert_bias_records([row("s1", "r1", m, i, 3 + i) for i, m in enumerate(MODELS)])
    extra = row("s1", "r2", "m0", 0, 9)
    names = ", ".join(extra)
    store.db.execute(
        f"INSERT INTO bias_records ({names}) VALUES ({', '.join('?' for _ in extra)})", list(extra.values())
    )
    assert not sums_module._summaries_complete(store.db)
    seen = " ".join(statements(store, BiasQuery()))
    assert f"FROM {REVIEW_TABLE} WHERE" not in seen
    sums = store.bias_sums(BiasQuery())
    assert sums.reviewers["r2"] == (1, 9.0, 81.0)  # the hand-written row is counted
    close(sums, from_rows(store, BiasQuery(), monkeypatch))
    store.close()


@pytest.mark.parametrize("before", ["m019_bias_summaries", "m020_bias_session_summaries", "m023_bias_review_gaps"])
def test_m020_summarizes_the_rows_already_stored_and_keeps_them(before, tmp_path, monkeypatch):
    # A database from before m019 (no summaries), from m019 (per-review sums, now dropped) or from
    # m020 (summaries without the reviews' gaps to the other reviewers: m023 makes them again).
    path = tmp_path / "council.db"
    legacy = Database(sqlite3.connect(path, isolation_level=None))
    migrations.apply(legacy, stop_before=before)
    rows = [row(f"s{s}", f"r{r}", m, (i + r) % 4, 1 + (s + i + r) % 10) for s in range(3) for r in range(2)
            for i, m in enumerate(MODELS)]  # fmt: skip
    legacy["bias_records"].insert_all(rows)
    before_rows = legacy.execute("SELECT * FROM bias_records ORDER BY id").fetchall()
    legacy.conn.close()

    store = SQLiteStore.open(path)
    assert store.db.execute("SELECT * FROM bias_records ORDER BY id").fetchall() == before_rows
    assert sums_module._summaries_complete(store.db)
    assert store.db.execute(f"SELECT COUNT(*) FROM {REVIEW_TABLE}").fetchone()[0] == 6
    assert store.db.execute(f"SELECT COUNT(*) FROM {SESSION_TABLE}").fetchone()[0] == 3
    assert "bias_review_sums" not in store.db.table_names()
    assert store.db.execute(f"SELECT COUNT(gap) FROM {REVIEW_TABLE}").fetchone()[0] == 6
    summed = store.bias_sums(BiasQuery())
    assert set(summed.reviewer_offsets) == {"r0", "r1"}
    close(summed, from_rows(store, BiasQuery(), monkeypatch))
    store.close()


def test_a_session_saved_whole_and_a_store_copy_keep_the_summaries(tmp_path, monkeypatch):
    source = SQLiteStore.open(tmp_path / "a.db")
    source.begin_session("s1", council="default", question="q", query_hash=None, seed=None, offline=False, members=[])
    records = [record("s1", "r1", m, i, 2 + i) for i, m in enumerate(MODELS)]
    source._finish_session("s1", status="ok", result=None, bias_records=[r.model_dump(mode="json") for r in records])
    assert sums_module._summaries_complete(source.db) and source.count("bias_records") == 4
    target = SQLiteStore.open(tmp_path / "b.db")
    copy_store(source, target)
    assert sums_module._summaries_complete(target.db)
    close(target.bias_sums(BiasQuery()), source.bias_sums(BiasQuery()))
    close(target.bias_sums(BiasQuery()), from_rows(target, BiasQuery(), monkeypatch))
    source.close()
    target.close()


def test_many_sessions_saved_one_after_another_on_one_connection(store_backend, monkeypatch):
    # Session after session saved on one store, as a server does: each write's summaries add up
    # to what the rows give (the whole save path on PostgreSQL: the test below).
    for i in range(12):
        session = f"s{i}"
        store_backend.begin_session(session, council="default", question="q")
        saved = [record(session, f"r{j}", m, (i + j + p) % 4, 1 + (i + p) % 9, council="default")
                 .model_dump(mode="json") for j in range(2) for p, m in enumerate(MODELS)]  # fmt: skip
        store_backend._finish_session(
            session, status="ok", result=None, bias_records=saved,
            answers=[{"session_id": session, "member": m, "model": m, "text": "t", "status": "ok"} for m in MODELS],
        )  # fmt: skip
    assert sums_module._summaries_complete(store_backend.db) and store_backend.count("bias_records") == 96
    summed = store_backend.bias_sums(BiasQuery())
    assert summed.orderings == 24 and len(summed.sessions) == 12
    close(summed, from_rows(store_backend, BiasQuery(), monkeypatch))


def test_a_council_saves_session_after_session_on_postgresql(postgres_url, monkeypatch):
    # The whole save path (calls, events, answers, reviews, bias records) on one connection for
    # a dozen sessions: psycopg prepares a statement run five times and forgets every prepared
    # statement when a DROP goes by, so nothing in the summaries' upkeep may DROP.
    import asyncio

    from council import Council
    from council.storage import open_location
    from council.storage.location import parse

    members = ["fake/alpha", "fake/beta", "fake/gamma"]
    store = open_location(parse(postgres_url))
    council = Council.from_config({"councils": {"default": {"members": members, "chairman": members[0]}}}, store=store)

    async def sessions() -> list[str]:
        try:
            return [(await council.run(f"Question {i}?", seed=i)).status for i in range(12)]
        finally:
            await council.aclose()

    try:
        assert asyncio.run(sessions()) == ["complete"] * 12
        assert sums_module._summaries_complete(store.db)
        summed = store.bias_sums(BiasQuery())
        assert len(summed.sessions) == 12 and summed.orderings == 36
        close(summed, from_rows(store, BiasQuery(), monkeypatch))
    finally:
        store.close()


def test_both_backends_keep_the_summaries_of_records_written_in_parts(store_backend, monkeypatch):
    # One review's records in two calls (COPY through the staging table on PostgreSQL), then a
    # session's records by its final write: the summaries add up to what the rows give.
    first = [row("s1", "r1", m, i, 2 + 2 * i, council="default") for i, m in enumerate(MODELS)]
    store_backend.insert_bias_records(first[:2])
    store_backend.insert_bias_records(first[2:] + [row("s1", "r2", m, 3 - i, 9 - i) for i, m in enumerate(MODELS)])
    store_backend.begin_session("s2", council="default", question="q")
    saved = [record("s2", "r1", m, i, 5 + (i % 2), council="default").model_dump(mode="json") for i, m in
             enumerate(MODELS)]  # fmt: skip
    store_backend._finish_session("s2", status="ok", result=None, bias_records=saved)
    assert sums_module._summaries_complete(store_backend.db)
    k = store_backend.db.execute(f"SELECT SUM(k) FROM {REVIEW_TABLE} WHERE session_id = 's1'").fetchone()[0]
    assert int(k) == 8
    for query in (BiasQuery(), BiasQuery(council="default", reviewers=("r1",)), BiasQuery(max_points=5)):
        summed = store_backend.bias_sums(query)
        assert summed.orderings == (3 if not query.council else 2) and not summed.bad
        close(summed, from_rows(store_backend, query, monkeypatch))


@pytest.mark.parametrize("summaries", [True, False])
def test_a_reviewer_filter_with_a_council_or_since_filter_selects_the_reviewers_reviews(summaries, monkeypatch):
    # The reviewer filter's values were bound after the council's and --since's, which come
    # later in the statement: with both filters no review was counted.
    if not summaries:
        monkeypatch.setattr(sums_module, "_summaries_complete", lambda db: False)
    store = SQLiteStore.memory()
    store.insert_bias_records([row("s1", r, m, i, 2 + 2 * i, council="default") for r in ("r1", "r2")
                               for i, m in enumerate(MODELS)])  # fmt: skip
    for query in (BiasQuery(council="default", reviewers=("r1",)), BiasQuery(since="2025-12-01", reviewers=("r1",))):
        summed = store.bias_sums(query)
        assert summed.orderings == 1 and summed.top_positions == {4: [0, 0, 0, 1]}
    store.close()


def test_writers_at_once_on_postgresql_add_up_in_the_summaries(postgres_url, monkeypatch):
    # Four writers COPY the records of the same reviews at the same time, each through its
    # own connection's staging table: every record is folded once, whatever commits first.
    from concurrent.futures import ThreadPoolExecutor

    from council.storage import open_location
    from council.storage.location import parse

    store = open_location(parse(postgres_url))
    try:
        parts = [
            [row(f"s{s}", f"r{w}", m, i, 1 + (s + i + w) % 10) for s in range(20) for i, m in enumerate(MODELS)]
            for w in range(4)
        ]
        for part in parts:  # each writer splits its reviews over two calls
            part.sort(key=lambda r: r["position"] % 2)
        with ThreadPoolExecutor(4) as pool:
            written = list(
                pool.map(lambda p: store.insert_bias_records(p[:40]) + store.insert_bias_records(p[40:]), parts)
            )
        assert sum(written) == store.count("bias_records") == 320
        assert sums_module._summaries_complete(store.db)
        summed = store.bias_sums(BiasQuery())
        assert summed.orderings == 80 and not summed.bad
        close(summed, from_rows(store, BiasQuery(), monkeypatch))
    finally:
        store.close()


def test_m020_on_postgresql_summarizes_the_rows_already_stored(postgres_url, monkeypatch):
    # A database from m019: its rows written by plain INSERTs, then m020 applied.
    import psycopg

    from council.storage import open_location
    from council.storage.location import parse

    rows = [row(f"s{s}", f"r{r}", m, (i + r) % 4, 1 + (s + i + r) % 10) for s in range(3) for r in range(2)
            for i, m in enumerate(MODELS)]  # fmt: skip
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for table in ALL_TABLES:
            conn.execute(f"DROP TABLE {table}")
        conn.execute("CREATE TABLE bias_review_sums (k BIGINT)")  # m019's table, which m020 drops
        conn.execute(
            "DELETE FROM _council_migrations WHERE name IN ('m020_bias_session_summaries', 'm023_bias_review_gaps')"
        )
        names = ", ".join(f'"{c}"' for c in rows[0])
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO bias_records ({names}) VALUES ({', '.join('%s' for _ in rows[0])})",
                [tuple(r.values()) for r in rows],
            )
    store = open_location(parse(postgres_url))
    try:
        assert sums_module._summaries_complete(store.db) and store.count("bias_records") == 24
        assert int(store.db.execute(f"SELECT COUNT(*) FROM {REVIEW_TABLE}").fetchone()[0]) == 6
        assert store.db.execute("SELECT to_regclass('bias_review_sums')").fetchone()[0] is None
        assert int(store.db.execute(f"SELECT COUNT(gap) FROM {REVIEW_TABLE}").fetchone()[0]) == 6
        close(store.bias_sums(BiasQuery()), from_rows(store, BiasQuery(), monkeypatch))
    finally:
        store.close()


def summary_tables(store: SQLiteStore) -> dict[str, list[tuple[Any, ...]]]:
    """The summaries' rows without their ids and runs of ids (which differ with the writes' cuts)."""
    tables = {}
    for table in ALL_TABLES:
        columns = [c for c in store.db[table].columns_dict if c != "id" and not c.endswith(("_from", "_to"))]
        order = ", ".join(columns[:4])
        tables[table] = store.db.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}").fetchall()
    return tables


def assert_runs_name_the_rows(store: SQLiteStore) -> None:
    """Every review and self row lies in its own session's run of ids, and every run holds only
    its session's rows (what a write deletes when it computes a session again)."""
    for table, first, last in ((REVIEW_TABLE, "reviews_from", "reviews_to"), (SELF_TABLE, "selves_from", "selves_to")):
        outside = store.db.execute(
            f"""SELECT COUNT(*) FROM {table} t WHERE NOT EXISTS (SELECT 1 FROM {SESSION_TABLE} s
                WHERE s.session_id = t.session_id AND t.id BETWEEN s.{first} AND s.{last})"""
        ).fetchone()[0]
        foreign = store.db.execute(
            f"""SELECT COUNT(*) FROM {SESSION_TABLE} s JOIN {table} t ON t.id BETWEEN s.{first} AND s.{last}
                WHERE t.session_id <> s.session_id"""
        ).fetchone()[0]
        assert (outside, foreign) == (0, 0), table


@settings(max_examples=60, deadline=None)
@given(records=record_sets(), cuts=st.lists(st.integers(0, 200), max_size=4))
def test_the_summaries_computed_in_python_are_the_statements_own(records, cuts):
    # A write computes its sessions' summaries in Python (council.storage.bias_summary_rows),
    # again from all of a session's records when it adds to one: that is what the statements
    # give when they sum every row again (the rebuild of m020 and of a store copy).
    held_to_the_statements(records, cuts)


@pytest.mark.parametrize("cuts", [[], [5], [3, 11]])
@pytest.mark.parametrize("model_major", [True, False])
def test_answers_of_one_session_with_times_and_councils_of_their_own_are_summed_as_stored(model_major, cuts):
    # A session's records share one time, council and scale, and so do the first records of its
    # answers, which the Python summaries compare; an import may bring answers that differ.
    # The property test above never drew one (its differences are a reviewer's).
    times = {
        "m0": ("2026-01-02T00:00:00Z", "a"),
        "m1": ("2026-01-01T00:00:00Z", None),
        "m2": ("2026-01-03T00:00:00Z", "b"),
    }
    pairs = [(reviewer, model) for reviewer in ("m0", "m1", "r") for model in ("m0", "m1", "m2")]
    if model_major:
        pairs.sort(key=lambda pair: pair[1])
    records = [
        row("s1", reviewer, model, int(model[1]), 2 + i % 7, self_review=reviewer == model,
            timestamp=times[model][0], council=times[model][1])
        for i, (reviewer, model) in enumerate(pairs)
    ] + [row("s2", "r", m, i, 5 + i) for i, m in enumerate(MODELS)]  # fmt: skip
    held_to_the_statements(records, cuts)


def held_to_the_statements(records: list[dict[str, Any]], cuts: list[int]) -> None:
    """``records`` written in parts cut at ``cuts``: the summaries the writes computed are those
    the statements compute from every row, and their runs of ids name their rows."""
    from council.storage.bias_summaries import rebuild_statements

    store = SQLiteStore.memory()
    try:
        bounds = sorted({0, len(records), *(c for c in cuts if c < len(records))})
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            store.insert_bias_records(records[lo:hi])
            assert_runs_name_the_rows(store)
        written = summary_tables(store)
        for statement in rebuild_statements(postgres=False):
            store.db.execute(statement)
        close(written, summary_tables(store))
        assert_runs_name_the_rows(store)
    finally:
        store.close()


def test_a_value_sqlite_would_convert_is_summed_as_stored(monkeypatch):
    from council.storage import bias_summary_rows

    rows = [row("s1", "r1", m, i, 3 + i) for i, m in enumerate(MODELS)]
    rows[1]["score_value"] = "4"  # SQLite stores the text as the number 4.0
    assert bias_summary_rows.canonical(list(rows[0]), [tuple(r.values()) for r in rows]) is None
    store = SQLiteStore.memory()
    store.insert_bias_records(rows)
    assert sums_module._summaries_complete(store.db)
    assert store.db.execute(f"SELECT k, code, total FROM {REVIEW_TABLE}").fetchall() == [(4, 3, 18.0)]
    close(store.bias_sums(BiasQuery()), from_rows(store, BiasQuery(), monkeypatch))
    store.close()
