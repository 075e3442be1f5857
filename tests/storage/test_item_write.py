"""A judged batch item's write on SQLite: one transaction that reads nothing back
(docs/benchmarks.md, section 17: the item's write is most of council's own CPU per call)."""

from __future__ import annotations

from fake_judges import fake_client
from hypothesis import given
from hypothesis import strategies as st

from council.judging.batch import BatchSettings, content_digest, parse_batch
from council.judging.engine import compare
from council.judging.worker import enqueue
from council.storage import SQLiteStore
from council.usage import CallLog, CallRecord


async def test_a_judged_items_write_is_one_transaction_of_writes_only(tmp_path):
    store = SQLiteStore.open(tmp_path / "council.db")
    text = '{"id": "x", "prompt": "Q?", "a": "A.", "b": "B."}\n'
    [item] = parse_batch(text, "x.jsonl")
    enqueue(store, [item], batch_id="b", settings=BatchSettings(judges=["fake/j"]), judges=[fake_client()],
            rubrics={}, source="x.jsonl", content_sha256=content_digest(text))  # fmt: skip
    [claimed] = store.claim_items("w", batch_id="b", lease_seconds=60)
    log = CallLog()
    outcome = await compare("Q?", "A.", "B.", judges=[fake_client()], store=None, sink=log)
    statements: list[str] = []
    store.db.conn.set_trace_callback(statements.append)
    store.save_judgment("compare", outcome, log.records, keep_text=True, batch_id="b", item=item,
                        item_digest=claimed["digest"])  # fmt: skip
    store.db.conn.set_trace_callback(None)
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
