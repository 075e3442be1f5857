"""What PostgreSQL's work costs: round trips a write asks for, rows a claim reads, row versions a
write leaves (docs/benchmark-history.md, section 36).

A round trip is the client waiting for the server: it sends a Sync (the end of a pipeline), a
Flush (a read inside one) or a simple query, found here in libpq's own trace of the connection's
messages. On a
busy server each such wait is also a wait for the interpreter lock, so a session's final write,
which every session pays on the store's one write thread, is counted. Writing fewer round trips
must not lose the transaction's guarantees: a refused statement, or an error in the Python that
builds the rows, rolls the whole write back and leaves the connection clean for the next one.

A batch worker claims its next items many times a batch: a claim must read the first items of
the queue, not every item queued (counted by the database's own per-transaction statistics).
And a call's row written again with the outcome it already has is left as it is (its ``xmin``,
the transaction that wrote its version, stays). A worker's record of finished items and its next
claim are sent in one pipeline.
"""

from __future__ import annotations

import logging
import tempfile
from contextlib import contextmanager

import pytest
from psycopg_pool import ConnectionPool

from council import Council
from council.storage import location, open_location

MEMBERS = ["fake/alpha", "fake/beta", "fake/gamma", "fake/delta"]


def _one_connection_store(postgres_url):
    """The store with a pool of one connection: every write below goes through the same one."""
    store = open_location(location.parse(postgres_url))
    store.pool.close()
    store.pool = ConnectionPool(store.pool.conninfo, min_size=1, max_size=1, kwargs=store.pool.kwargs, open=True)
    return store


def _trace(store):
    """Start libpq's trace of every connection the store's operations borrow; returns the
    function that stops it and gives, per connection, the frontend's messages in order
    ('Parse\t "" "BEGIN" 0', "Sync", ...)."""
    from psycopg import pq

    sinks: dict[int, tuple] = {}
    borrow = store.connection

    @contextmanager
    def traced():
        with borrow() as conn:
            if id(conn) not in sinks:
                sinks[id(conn)] = (conn, tempfile.TemporaryFile())
                conn.pgconn.trace(sinks[id(conn)][1].fileno())
                conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            yield conn

    store.connection = traced

    def stop():
        del store.connection
        traces = []
        for conn, sink in sinks.values():
            conn.pgconn.untrace()  # flushes the trace
            sink.seek(0)
            lines = sink.read().decode("utf-8", "replace").splitlines()
            traces.append([line.split("\t", 2)[-1] for line in lines if line.startswith("F\t")])
        return traces

    return stop


def _round_trips(messages):
    """Syncs, Flushes not right after a Sync (a pipeline's end sends both: one wait), and simple
    queries (a statement sent alone, waited for)."""
    trips = 0
    for i, message in enumerate(messages):
        after_sync = message.startswith("Flush") and messages[i - 1].startswith("Sync")
        if message.startswith(("Sync", "Query", "Flush")) and not after_sync:
            trips += 1
    return trips


def _transaction_of(traces, statement):
    """The messages of the transaction that sent ``statement`` (its connection's): from its
    BEGIN to the Sync after its COMMIT."""
    [(messages, at)] = [
        (messages, i) for messages in traces for i, m in enumerate(messages) if m.startswith("Parse") and statement in m
    ]
    begin = max(i for i, m in enumerate(messages[:at]) if m.startswith("Parse") and '"BEGIN"' in m)
    commit = next(i for i, m in enumerate(messages) if i > at and m.startswith("Parse") and '"COMMIT"' in m)
    end = next(i for i, m in enumerate(messages) if i > commit and m.startswith("Sync"))
    return messages[begin : end + 1]


async def test_a_sessions_final_write_is_two_round_trips_and_its_start_one(postgres_url):
    # Before: psycopg's transaction() in the pipeline opened two nested pipelines, each synced as
    # it closed (a session's start took 3 round trips, its final write 5: those 3, the summary
    # rows it reads, and the pipeline's end).
    store = _one_connection_store(postgres_url)
    council = Council.from_config({"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}},
                                  store=store)  # fmt: skip
    await council.run("A warm-up: the connection's staging table and prepared statements", seed=1)
    stop = _trace(store)
    result = await council.run("Why is the sky blue?", seed=3)
    await council.aclose()
    traces = stop()
    assert result.status == "complete"
    start = _transaction_of(traces, 'INSERT INTO "sessions"')
    assert _round_trips(start) == 1, start
    final = _transaction_of(traces, "UPDATE sessions SET status")
    # One to read which of the session's summary rows exist (bias_summaries.fold_staged), one at the end.
    assert _round_trips(final) == 2, final
    assert not any("TRUNCATE" in m for m in final)  # the staging table empties at the commit
    store.close()


async def test_sessions_written_one_after_another_on_one_connection_each_store_their_records_once(postgres_url):
    # The staging table is emptied by each commit, not by a statement: a second session on the
    # same connection must not find the first one's rows still there.
    store = _one_connection_store(postgres_url)
    council = Council.from_config({"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}},
                                  store=store)  # fmt: skip
    results = [await council.run(f"Question {i}?", seed=i) for i in range(3)]
    await council.aclose()
    with store.pool.connection() as conn:
        rows = conn.execute("SELECT session_id, COUNT(*) AS n FROM bias_records GROUP BY 1").fetchall()
        counts = {r["session_id"]: r["n"] for r in rows}
        summed = {
            r["session_id"]: r["records"] for r in conn.execute("SELECT session_id, records FROM bias_session_sums")
        }
        staged = conn.execute("SELECT COUNT(*) AS n FROM bias_records_staged").fetchone()["n"]
    expected = {r.session_id: sum(len(review.display_order) for review in r.reviews) for r in results}
    assert counts == expected and summed == expected
    assert staged == 0
    store.close()


class _Unwritable:
    """A bias record whose row the store refuses: by the table's CHECK (a score outside its
    scale), or before any statement (a field that is not a column)."""

    def __init__(self, record, **change):
        self.record, self.change = record, change

    def row(self):
        return {**self.record.row(), **self.change}


@pytest.mark.parametrize(
    ("change", "refused_by"),
    [({"score_value": 99.0}, "StoreRefused"), ({"not_a_column": 1}, "ValueError")],
    ids=["the-database", "python"],
)
async def test_a_refused_final_write_leaves_nothing_and_a_clean_connection(postgres_url, caplog, change, refused_by):
    store = _one_connection_store(postgres_url)
    council = Council.from_config({"councils": {"default": {"members": MEMBERS, "chairman": MEMBERS[0]}}},
                                  store=store)  # fmt: skip
    real, refused = store.save_session, []

    def save_twice(result, records, **kwargs):
        # First with one record the store refuses, then as it is, on the same connection.
        try:
            real(result, [_Unwritable(records[0], **change), *records[1:]], **kwargs)
        except Exception as exc:  # noqa: BLE001 - which error it was is asserted below
            refused.append(type(exc).__name__)
        real(result, records, **kwargs)

    store.save_session = save_twice
    with caplog.at_level(logging.WARNING, logger="psycopg"):
        result = await council.run("Why is the sky blue?", seed=3)
    await council.aclose()
    assert refused == [refused_by]
    assert result.status == "complete"
    row = store.get_session(result.session_id)
    assert row["status"] == "complete"
    assert sorted(a["member"] for a in row["answers"]) == sorted(MEMBERS)  # written once, by the second write
    with store.pool.connection() as conn:
        stored = conn.execute("SELECT COUNT(*) AS n FROM bias_records").fetchone()["n"]
        summed = conn.execute("SELECT records FROM bias_session_sums").fetchall()
    assert stored == sum(len(review.display_order) for review in result.reviews)
    assert [r["records"] for r in summed] == [stored]
    # The pool found the connection idle when it came back: nothing it had to roll back itself.
    assert not [r for r in caplog.records if r.name.startswith("psycopg")], caplog.text
    store.close()


def _queued(i: int) -> dict:
    item = {"id": f"q{i}", "mode": "pairwise", "line": i + 1, "prompt": f"Q{i}?", "a": "yes", "b": "no"}
    return {"item_id": f"q{i}", "position": i + 1, "digest": f"d{i}", "item": item}


def test_a_claim_reads_the_first_items_of_the_queue_not_all_of_them(postgres_url):
    # Before: the claimable items (queued, or running with a passed lease) were one condition
    # with an OR, so every queued item of the batch was read and sorted for each claim: 3,108
    # rows read to claim 4 of 3,000, ~1.1 ms a claim in an 8,000-call batch, growing with it.
    from council.judging.batch import BatchSettings

    store = open_location(location.parse(postgres_url))
    settings = BatchSettings(judges=["fake/j"]).model_dump(mode="json")
    common = {"source": "c.jsonl", "content_sha256": "c1", "settings": settings, "spec": {"judges": ["fake/j"]}}
    store.enqueue_batch("big", items=[_queued(i) for i in range(3000)], **common)
    store.claim_items("live", batch_id="big", limit=2, lease_seconds=60)  # q0, q1: held
    store.claim_items("dead", batch_id="big", limit=3, lease_seconds=-1)  # q2-q4: leases already passed
    with store.immediate() as db:
        claimed = store.claim_within(db, "w", batch_id="big", limit=4, lease_seconds=60)
        read = db.conn.execute(
            "SELECT COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables"
            " WHERE relname = 'batch_queue'"
        ).fetchone()[0]
    # In file order, the items back from a passed lease first, the held ones skipped.
    assert [r["item_id"] for r in claimed] == ["q2", "q3", "q4", "q5"]
    assert read <= 20, read
    store.close()


def test_a_finished_call_written_again_unchanged_makes_no_new_row_version(postgres_url):
    # A judgment's or a session's final write records its calls again, after the call log's
    # group commit already wrote most of them finished: each was an UPDATE of the row and of
    # its four indexes (~0.14 ms of the database's time a call in a batch) that changed nothing.
    from council.accounting.usage import CallRecord

    store = open_location(location.parse(postgres_url))
    record = CallRecord(call_id="c1", stage="judge", member="j", model="fake/j", started_at="2026-01-01T00:00:00Z",
                        latency_ms=5.0, prompt_tokens=3, attempt=1, ok=True)  # fmt: skip
    journal = store.journal("s1")
    journal.call_started(record)
    store.flush_calls()

    def version():
        with store.pool.connection() as conn:
            return conn.execute("SELECT xmin::text AS v, ok, latency_ms FROM calls WHERE call_id = 'c1'").fetchone()

    started = version()
    journal.call_finished(record)
    store.flush_calls()
    finished = version()
    assert finished["v"] != started["v"] and finished["ok"] == 1  # the started row completed
    with store.transaction():
        store.write_calls([{**row, "session_id": "s1"} for row in [_call_row(record)]])
    assert version() == finished  # the same outcome again: the row untouched
    with store.transaction():
        store.write_calls([{**_call_row(record.model_copy(update={"latency_ms": 7.0})), "session_id": "s1"}])
    changed = version()
    assert changed["v"] != finished["v"] and changed["latency_ms"] == 7.0  # another outcome still replaces it
    store.close()


def _call_row(record):
    from council.storage.group_commit import call_row

    return call_row(record)


async def test_a_workers_record_of_finished_items_and_its_claim_are_a_few_round_trips(postgres_url):
    # Before: each statement waited for its result, five per item (its run, passes, calls, queue
    # entry and item row), so recording 4 items and claiming 4 more took 23 round trips (14 ms
    # median inside a batch, 50 ms at p90). The checks that need a statement's count now run once
    # the counts are back: from the claim's read on.
    from fake_judges import fake_client

    from council.accounting.usage import CallRecord
    from council.judging.batch import BatchSettings, content_digest, parse_batch
    from council.judging.engine import compare
    from council.judging.worker import enqueue
    from council.storage import JudgmentSave

    store = open_location(location.parse(postgres_url))
    text = "".join(f'{{"id": "r{i}", "prompt": "Q{i}?", "a": "A.", "b": "B."}}\n' for i in range(8))
    items = parse_batch(text, "r.jsonl")
    enqueue(store, items, batch_id="rb", settings=BatchSettings(judges=["fake/j"]), judges=[fake_client()],
            rubrics={}, source="r.jsonl", content_sha256=content_digest(text))  # fmt: skip
    held = {r["item_id"]: r["digest"] for r in store.claim_items("w", batch_id="rb", limit=4, lease_seconds=60)}
    saves = []
    for i in range(4):
        outcome = await compare(f"Q{i}?", "A.", "B.", judges=[fake_client()], store=None)
        calls = [CallRecord(call_id=f"c{i}", stage="judge", member="j", model="fake/j",
                            started_at="2026-01-01T00:00:00Z", latency_ms=1.0, attempt=1, ok=True)]  # fmt: skip
        saves.append(JudgmentSave("compare", outcome, calls, keep_text=True, batch_id="rb", item=items[i],
                                  item_digest=held[f"r{i}"]))  # fmt: skip
    stop = _trace(store)
    results, claimed = store.record_and_claim(saves, "w", batch_id="rb", limit=4, lease_seconds=60)
    [messages] = [m for m in stop() if m]
    assert results == [None] * 4 and [r["item_id"] for r in claimed] == ["r4", "r5", "r6", "r7"]
    assert store.batch_item_status("rb") == {f"r{i}": "ok" for i in range(4)}
    # BEGIN, the claim's read, the pipeline's end, COMMIT.
    assert _round_trips(messages) == 4, messages
    store.close()
