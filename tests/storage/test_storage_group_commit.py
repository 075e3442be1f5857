"""The call journal's group commit: one transaction per turn of the event loop, and never a
result on disk without the calls journaled before it (docs/benchmark-history.md, the batch)."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from council.accounting.usage import CallRecord
from council.storage import open_store


def _record(i: int) -> CallRecord:
    return CallRecord(stage="judge", member="j", model="fake/a", started_at="2026-01-01T00:00:00", latency_ms=1.0,
                      call_id=f"call-{i}")  # fmt: skip


def _on_disk(store, sql: str = "SELECT call_id, ok FROM calls ORDER BY call_id") -> list[tuple]:
    """What another process sees: the committed rows (by default, the call rows)."""
    if getattr(store, "kind", "sqlite") == "postgresql":
        import psycopg

        with psycopg.connect(store.url) as conn:
            return conn.execute(sql).fetchall()
    conn = sqlite3.connect(store.path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _count_transactions(store) -> list[str]:
    begins: list[str] = []
    if getattr(store, "kind", "sqlite") == "postgresql":
        store.lease()  # this process's lease row is written once, before the counting starts
        outer = store.connection

        def connection():  # each transaction takes a pooled connection
            begins.append("BEGIN")
            return outer()

        store.connection = connection
    else:
        store.db.conn.set_trace_callback(lambda sql: begins.append(sql) if sql.startswith("BEGIN") else None)
    return begins


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request, tmp_path, monkeypatch):
    url = request.getfixturevalue("postgres_url") if request.param == "postgresql" else f"sqlite:///{tmp_path}/c.db"
    monkeypatch.setenv("COUNCIL_DATABASE_URL", url)
    opened = open_store()
    opened.begins = _count_transactions(opened)  # type: ignore[attr-defined]
    yield opened
    opened.close()


def test_calls_journaled_in_one_turn_of_the_loop_share_one_transaction(store):
    journal = store.journal("run-1")

    async def run() -> None:
        for i in range(10):
            journal.call_started(_record(i))
        assert _on_disk(store) == []  # not yet: at the end of this turn
        await asyncio.sleep(0)
        store.wait_group_commit()  # on PostgreSQL it commits in a thread of its own
        assert len(_on_disk(store)) == 10
        for i in range(10):
            journal.call_finished(_record(i))
        await asyncio.sleep(0)
        store.wait_group_commit()

    asyncio.run(run())
    assert len(store.begins) == 2
    assert _on_disk(store) == [(f"call-{i}", 1) for i in range(10)]


def test_a_result_written_in_the_same_turn_carries_the_pending_calls(store):
    journal = store.journal("run-1")

    async def run() -> list[tuple]:
        journal.call_started(_record(1))
        journal.call_finished(_record(1))
        store.open_batch("b-1", source="b.jsonl", content_sha256="c", settings={}, items=0)
        return _on_disk(store)  # before the loop turns: the write took the calls along

    assert asyncio.run(run()) == [("call-1", 1)]
    assert len(store.begins) == 1


def test_a_sessions_start_carries_the_pending_calls_only_where_writes_take_turns(store):
    # On PostgreSQL a session starts on any thread while the write thread commits call rows: its
    # row alone cannot deadlock with them (section 35's deadlocks were two writes of call rows).
    journal = store.journal("run-1")

    async def run() -> tuple[list[tuple], list[tuple]]:
        journal.call_started(_record(1))
        store.begin_session("s-1", council="default", question="q")
        at_start = _on_disk(store)
        await asyncio.sleep(0)  # the end of the turn: the group commit
        store.wait_group_commit()
        return at_start, _on_disk(store)

    at_start, after = asyncio.run(run())
    assert _on_disk(store, "SELECT id, status FROM sessions") == [("s-1", "running")]
    assert at_start == ([] if store.threadsafe else [("call-1", None)])
    assert after == [("call-1", None)]


def test_a_failed_write_keeps_the_pending_calls_for_the_next_one(store):
    journal = store.journal("run-1")

    async def run() -> None:
        journal.call_started(_record(1))
        with pytest.raises(RuntimeError), store.immediate():
            raise RuntimeError("the caller's write fails")
        assert _on_disk(store) == []  # rolled back with it...
        await asyncio.sleep(0)
        store.wait_group_commit()  # on PostgreSQL it commits in a thread of its own
        assert _on_disk(store) == [("call-1", None)]  # ...and written at the end of the turn

    asyncio.run(run())


def test_a_finished_call_written_again_keeps_or_replaces_its_outcome_as_it_says(store):
    # A final write records its calls again after the group commit wrote them: the same outcome
    # leaves the row as it is (tests/storage/test_postgres_costs.py counts its versions); another
    # one, as a call's real outcome after a recovery marked it interrupted, replaces it.
    from council.storage.group_commit import call_row

    store.journal("run-3").call_finished(_record(7))
    row = call_row(_record(7), session_id="run-3")
    sql = "SELECT ok, latency_ms, error FROM calls"
    for stored in [(1, 1.0, None), (0, None, "interrupted")]:
        with store.immediate() as db:
            db.execute("UPDATE calls SET ok = ?, latency_ms = ?, error = ? WHERE call_id = 'call-7'", list(stored))
        assert _on_disk(store, sql) == [stored]
        with store.immediate():
            store.write_calls([row])
        assert _on_disk(store, sql) == [(1, 1.0, None)]


def test_a_final_write_leaves_out_the_finished_calls_the_call_log_has_on_record(store):
    # Calls 1 and 2 finished and committed; 3 finished, waiting for the end of the turn (this
    # write carries it); 4 only started; 5 never journaled. The final write writes 4 and 5 only.
    from council.storage.group_commit import call_row

    journal = store.journal("run-1")
    rows = [call_row(_record(i), session_id="run-1") for i in range(1, 6)]

    async def run() -> tuple[list[str], list[str]]:
        for i in (1, 2, 3, 4):
            journal.call_started(_record(i))
        journal.call_finished(_record(1))
        journal.call_finished(_record(2))
        await asyncio.sleep(0)
        store.wait_group_commit()
        journal.call_finished(_record(3))
        with store.immediate():
            first = store.calls_to_record(rows)
            store.write_calls(first)
        with store.immediate():  # each call is left out once: a final write tried again writes it all
            again = store.calls_to_record(rows)
        return [r["call_id"] for r in first], [r["call_id"] for r in again]

    first, again = asyncio.run(run())
    assert first == ["call-4", "call-5"]
    assert not store._finished_on_record  # nothing kept once the final writes left them out
    assert again == [f"call-{i}" for i in range(1, 6)]
    assert _on_disk(store) == [(f"call-{i}", 1) for i in range(1, 6)]


def test_a_final_write_records_the_calls_whose_group_commit_failed(store, monkeypatch):
    from council.storage.group_commit import call_row

    journal = store.journal("run-1")
    real = type(store).write_calls

    def failing(self, rows):
        raise sqlite3.OperationalError("disk I/O error")

    async def run() -> list[str]:
        journal.call_finished(_record(1))
        monkeypatch.setattr(type(store), "write_calls", failing)
        await asyncio.sleep(0)  # the group commit fails: its rows are dropped (and logged)
        store.wait_group_commit()
        monkeypatch.setattr(type(store), "write_calls", real)
        with store.immediate():
            kept = store.calls_to_record([call_row(_record(1), session_id="run-1")])
            store.write_calls(kept)
        return [r["call_id"] for r in kept]

    assert asyncio.run(run()) == ["call-1"]
    assert _on_disk(store) == [("call-1", 1)]


def test_a_final_write_records_the_calls_its_own_transaction_failed_to_carry(lite, monkeypatch):
    # On SQLite a carried write that fails is logged and the transaction goes on without it.
    from council.storage.group_commit import call_row

    journal = lite.journal("run-1")
    real = type(lite).write_calls
    calls = []

    def failing_once(self, rows):
        calls.append(len(rows))
        if len(calls) == 1:
            raise sqlite3.OperationalError("disk I/O error")
        return real(self, rows)

    async def run() -> list[str]:
        journal.call_finished(_record(1))
        monkeypatch.setattr(type(lite), "write_calls", failing_once)
        with lite.immediate():  # carries call 1, whose write fails
            kept = lite.calls_to_record([call_row(_record(1), session_id="run-1")])
            lite.write_calls(kept)
        return [r["call_id"] for r in kept]

    assert asyncio.run(run()) == ["call-1"]
    assert _on_disk(lite) == [("call-1", 1)]


def test_outside_an_event_loop_each_call_is_written_at_once(store):
    store.journal("run-1").call_started(_record(1))
    assert _on_disk(store) == [("call-1", None)]


def test_closing_the_store_writes_what_is_pending(store):
    async def run() -> None:
        store.journal("run-1").call_started(_record(1))
        store.close()

    asyncio.run(run())
    assert _on_disk(store) == [("call-1", None)]


def test_the_commit_scheduled_before_the_store_closed_leaves_the_closed_store_alone(store):
    """Closing writes what was pending; the end-of-turn commit scheduled for it then finds
    nothing to do and must not touch the closed connection (it raised in the event loop)."""
    raised: list[dict] = []

    async def run() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: raised.append(context))
        store.journal("run-1").call_started(_record(1))
        store.close()
        await asyncio.sleep(0)  # the turn ends: the scheduled commit runs

    asyncio.run(run())
    assert raised == []
    assert _on_disk(store) == [("call-1", None)]


def _event(session_id: str, seq: int) -> dict:
    return {"session_id": session_id, "seq": seq, "type": "stage", "at": "2026-01-01T00:00:00Z"}


def _events_on_disk(store) -> list[tuple]:
    return _on_disk(store, "SELECT session_id, seq FROM session_events ORDER BY session_id, seq")


@pytest.fixture
def lite(tmp_path):
    """A SQLite store (events ride the group commit on PostgreSQL too: tests/storage/test_event_group_commit.py)."""
    opened = open_store(tmp_path / "council.db")
    opened.begins = _count_transactions(opened)  # type: ignore[attr-defined]
    yield opened
    opened.close()


def test_events_of_many_sessions_in_one_turn_share_the_calls_transaction(lite):
    # A server running 200 sessions stores each one's events: one commit a turn, not one a batch.
    journal = lite.journal("run-1")

    async def run() -> None:
        journal.call_started(_record(1))
        for s in range(20):
            lite.append_events(f"s-{s}", [_event(f"s-{s}", 1), _event(f"s-{s}", 2)])
        assert _events_on_disk(lite) == []  # not yet: at the end of this turn
        await asyncio.sleep(0)

    asyncio.run(run())
    assert len(lite.begins) == 1
    assert len(_events_on_disk(lite)) == 40
    assert _on_disk(lite) == [("call-1", None)]


def test_events_waiting_for_the_commit_are_read_back_by_this_process(lite):
    async def run() -> list[tuple]:
        lite.append_events("s-1", [_event("s-1", 1)])
        return lite.events_after("s-1")

    assert [seq for seq, *_ in asyncio.run(run())] == [1]


def test_events_outside_an_event_loop_are_written_at_once(lite):
    lite.append_events("s-1", [_event("s-1", 1)])
    assert _events_on_disk(lite) == [("s-1", 1)]


def test_closing_the_store_writes_the_events_still_waiting(lite):
    async def run() -> None:
        lite.append_events("s-1", [_event("s-1", 1)])
        lite.close()

    asyncio.run(run())
    assert _events_on_disk(lite) == [("s-1", 1)]


def test_each_call_row_is_redacted_in_its_own_privacy_scope_whoever_commits_it(store):
    """Two runs with transcripts off journal in one turn: the commit runs in the first one's
    context, yet the second run's private text never reaches the disk in its error."""
    from council.untrusted.redaction import private_scope

    def failed(i: int, error: str) -> CallRecord:
        return _record(i).model_copy(update={"ok": False, "error": error})

    async def main() -> None:
        with private_scope(keep_text=False, texts=["first run's secret question"]):
            store.journal("s1").call_finished(failed(1, "upstream said: first run's secret question"))
        with private_scope(keep_text=False, texts=["second run's secret question"]):
            store.journal("s2").call_finished(failed(2, "upstream said: second run's secret question"))
        await asyncio.sleep(0.05)

    asyncio.run(main())
    errors = [e for (e,) in _on_disk(store, "SELECT error FROM calls ORDER BY call_id")]
    assert len(errors) == 2
    assert not any("secret question" in e for e in errors), errors
