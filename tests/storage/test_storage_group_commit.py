"""The call journal's group commit: one transaction per turn of the event loop, and never a
result on disk without the calls journaled before it (docs/benchmarks.md, the batch)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from council.storage import open_store
from council.usage import CallRecord


def _record(i: int) -> CallRecord:
    return CallRecord(stage="judge", member="j", model="fake/a", started_at="2026-01-01T00:00:00", latency_ms=1.0,
                      call_id=f"call-{i}")  # fmt: skip


def _on_disk(path: Path, sql: str = "SELECT call_id, ok FROM calls ORDER BY call_id") -> list[tuple]:
    """What another process sees: the committed rows (by default, the call rows)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture
def store(tmp_path):
    opened = open_store(tmp_path / "council.db")
    begins: list[str] = []
    opened.db.conn.set_trace_callback(lambda sql: begins.append(sql) if sql.startswith("BEGIN") else None)
    opened.begins = begins  # type: ignore[attr-defined]
    yield opened
    opened.close()


def test_calls_journaled_in_one_turn_of_the_loop_share_one_transaction(store):
    journal = store.journal("run-1")

    async def run() -> None:
        for i in range(10):
            journal.call_started(_record(i))
        assert _on_disk(store.path) == []  # not yet: at the end of this turn
        await asyncio.sleep(0)
        assert len(_on_disk(store.path)) == 10
        for i in range(10):
            journal.call_finished(_record(i))
        await asyncio.sleep(0)

    asyncio.run(run())
    assert len(store.begins) == 2
    assert _on_disk(store.path) == [(f"call-{i}", 1) for i in range(10)]


def test_a_result_written_in_the_same_turn_carries_the_pending_calls(store):
    journal = store.journal("run-1")

    async def run() -> list[tuple]:
        journal.call_started(_record(1))
        journal.call_finished(_record(1))
        store.begin_session("s-1", council="default", question="q")
        return _on_disk(store.path)  # before the loop turns: the write took the calls along

    assert asyncio.run(run()) == [("call-1", 1)]
    assert len(store.begins) == 1


def test_a_failed_write_keeps_the_pending_calls_for_the_next_one(store):
    journal = store.journal("run-1")

    async def run() -> None:
        journal.call_started(_record(1))
        with pytest.raises(RuntimeError), store.immediate():
            raise RuntimeError("the caller's write fails")
        assert _on_disk(store.path) == []  # rolled back with it...
        await asyncio.sleep(0)
        assert _on_disk(store.path) == [("call-1", None)]  # ...and written at the end of the turn

    asyncio.run(run())


def test_outside_an_event_loop_each_call_is_written_at_once(store):
    store.journal("run-1").call_started(_record(1))
    assert _on_disk(store.path) == [("call-1", None)]


def test_closing_the_store_writes_what_is_pending(tmp_path):
    store = open_store(tmp_path / "council.db")

    async def run() -> None:
        store.journal("run-1").call_started(_record(1))
        store.close()

    asyncio.run(run())
    assert _on_disk(tmp_path / "council.db") == [("call-1", None)]


def _event(session_id: str, seq: int) -> dict:
    return {"session_id": session_id, "seq": seq, "type": "stage", "at": "2026-01-01T00:00:00Z"}


def _events_on_disk(path: Path) -> list[tuple]:
    return _on_disk(path, "SELECT session_id, seq FROM session_events ORDER BY session_id, seq")


def test_events_of_many_sessions_in_one_turn_share_the_calls_transaction(store):
    # A server running 200 sessions stores each one's events: one commit a turn, not one a batch.
    journal = store.journal("run-1")

    async def run() -> None:
        journal.call_started(_record(1))
        for s in range(20):
            store.append_events(f"s-{s}", [_event(f"s-{s}", 1), _event(f"s-{s}", 2)])
        assert _events_on_disk(store.path) == []  # not yet: at the end of this turn
        await asyncio.sleep(0)

    asyncio.run(run())
    assert len(store.begins) == 1
    assert len(_events_on_disk(store.path)) == 40
    assert _on_disk(store.path) == [("call-1", None)]


def test_events_waiting_for_the_commit_are_read_back_by_this_process(store):
    async def run() -> list[tuple]:
        store.append_events("s-1", [_event("s-1", 1)])
        return store.events_after("s-1")

    assert [seq for seq, *_ in asyncio.run(run())] == [1]


def test_events_outside_an_event_loop_are_written_at_once(store):
    store.append_events("s-1", [_event("s-1", 1)])
    assert _events_on_disk(store.path) == [("s-1", 1)]


def test_closing_the_store_writes_the_events_still_waiting(tmp_path):
    store = open_store(tmp_path / "council.db")

    async def run() -> None:
        store.append_events("s-1", [_event("s-1", 1)])
        store.close()

    asyncio.run(run())
    assert _events_on_disk(tmp_path / "council.db") == [("s-1", 1)]
