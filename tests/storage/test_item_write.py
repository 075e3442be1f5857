"""A judged batch item's write on SQLite: one transaction that reads nothing back
(docs/benchmark-history.md, section 17: the item's write is most of council's own CPU per call)."""

from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from typing import NamedTuple

from fake_judges import fake_client
from hypothesis import given
from hypothesis import strategies as st

from council.accounting.usage import CallLog, CallRecord
from council.judging.batch import BatchSettings, content_digest, parse_batch
from council.judging.engine import compare
from council.judging.worker import enqueue
from council.storage import SQLiteStore, judgments


async def _judged_item_write(store: SQLiteStore, log: CallLog) -> list[str]:
    """One batch item queued, claimed, judged (its calls to ``log``) and written: the write's statements."""
    text = '{"id": "x", "prompt": "Q?", "a": "A.", "b": "B."}\n'
    [item] = parse_batch(text, "x.jsonl")
    enqueue(store, [item], batch_id="b", settings=BatchSettings(judges=["fake/j"]), judges=[fake_client()],
            rubrics={}, source="x.jsonl", content_sha256=content_digest(text))  # fmt: skip
    [claimed] = store.claim_items("w", batch_id="b", lease_seconds=60)
    outcome = await compare("Q?", "A.", "B.", judges=[fake_client()], store=None, sink=log, run_id="run-x")
    statements: list[str] = []
    store.db.conn.set_trace_callback(statements.append)
    store.save_judgment("compare", outcome, log.records, keep_text=True, batch_id="b", item=item,
                        item_digest=claimed["digest"])  # fmt: skip
    store.db.conn.set_trace_callback(None)
    return statements


async def test_a_judged_items_write_is_one_transaction_of_writes_only(tmp_path):
    store = SQLiteStore.open(tmp_path / "council.db")
    statements = await _judged_item_write(store, CallLog())
    assert statements[0] == "BEGIN IMMEDIATE" and statements[-1] == "COMMIT"
    verbs = [s.split()[0] for s in statements[1:-1]]
    # the run, its two passes, the queue's entry done, the batch's item, its two calls (written with
    # those of the runs recorded beside it): nothing read, nothing deleted
    assert verbs == ["INSERT", "INSERT", "INSERT", "UPDATE", "INSERT", "INSERT", "INSERT"], statements
    assert [s.split()[2] for s in statements[-3:-1]] == ["calls", "calls"]
    assert store.batch_item_status("b") == {"x": "ok"} and store.batch_status("b")["done"] == 1
    store.close()


@given(
    st.builds(
        CallRecord,
        stage=st.text(max_size=5),
        member=st.text(max_size=5),
        model=st.text(max_size=5),
        started_at=st.text(max_size=5),
        latency_ms=st.floats(allow_nan=False),
        prompt_tokens=st.integers(0, 10**6),
        cost_usd=st.none() | st.floats(0, 10),
        ok=st.booleans(),
        error=st.none() | st.text(max_size=20),
        cached=st.booleans(),
        saved_usd=st.none() | st.floats(0, 10),
    )
)
def test_a_call_records_row_is_its_dump(record):
    """The journal and the item's write take a call's row without pydantic's dump: the same dict."""
    row = record.row()
    assert row == record.model_dump() and list(row) == list(record.model_dump())
    row["ok"] = None  # a copy: the record is untouched
    assert record.ok is not None


async def test_a_judged_items_write_writes_each_call_row_once_with_the_call_log(tmp_path):
    # The call log journals each call as it starts and ends (committed as the loop turns); the
    # item's write then writes no second row of its own for them.
    store = SQLiteStore.open(tmp_path / "council.db")
    statements = await _judged_item_write(store, CallLog(store.journal("run-x")))
    written = [s for s in statements if s.startswith("INSERT INTO calls")]
    assert written == [], statements  # before: the two calls' rows again
    rows = store.db.execute("SELECT session_id, ok, owner IS NOT NULL FROM calls").fetchall()
    assert rows == [("run-x", 1, 1), ("run-x", 1, 1)]
    store.close()


class _Point(NamedTuple):
    x: int
    y: int


#: Every kind of value a run's or a pass's row can hold, subclasses of the JSON types among them.
_ROW = {"s": "naïve", "i": 3, "f": 1.5, "b": True, "n": None, "d": {"é": [1]}, "l": [1, "x"], "t": (1, 2),
        "od": OrderedDict(a=1), "nt": _Point(1, 2)}  # fmt: skip
_PLAIN = {k: v for k, v in _ROW.items() if not isinstance(v, dict | list | tuple)}
#: A row of scalars only, one with each kind of container beside them, and one with them all.
_ROWS = [_PLAIN, *({**_PLAIN, k: v} for k, v in _ROW.items() if k not in _PLAIN), _ROW]


def _stored(row, bools=lambda b: b):
    """The row as read back: containers as JSON text, booleans as the backend keeps them."""

    def value(v):
        if isinstance(v, bool):
            return bools(v)
        return json.dumps(v, ensure_ascii=False) if isinstance(v, dict | list | tuple) else v

    return tuple(value(row.get(k)) for k in _ROW)


def test_rows_keep_scalars_and_write_containers_as_json_on_sqlite():
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE TABLE t ({', '.join(_ROW)})")
    judgments.insert_rows(conn, "t", _ROWS)
    rows = conn.execute(f"SELECT {', '.join(_ROW)} FROM t ORDER BY rowid").fetchall()
    assert rows == [_stored(row) for row in _ROWS]
    assert rows[-1][list(_ROW).index("nt")] == "[1, 2]"


def test_rows_keep_scalars_and_write_containers_as_json_on_postgresql(postgres_url):
    import psycopg

    from council.storage import postgres_connection

    types = {"s": "TEXT", "i": "BIGINT", "f": "DOUBLE PRECISION", "b": "BIGINT", "n": "TEXT"}
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        columns = ", ".join(f"{k} {types.get(k, 'TEXT')}" for k in _ROW)
        conn.execute(f"CREATE TABLE t (position SERIAL, {columns})")
        judgments.insert_rows(postgres_connection.Statements(conn), "t", _ROWS)
        rows = conn.execute(f"SELECT {', '.join(_ROW)} FROM t ORDER BY position").fetchall()
    assert rows == [_stored(row, bools=int) for row in _ROWS]
