"""Session events ride the call log's group commit on every backend: a server running many
sessions commits their events once a turn of the event loop, not once each (on PostgreSQL each
batch of events was a transaction of its own, a blocking round trip on the server's event loop)."""

from __future__ import annotations

import asyncio
import json

import pytest

from council.storage.group_commit import GroupCommit


def events(session: str, n: int, kind: str | None = "stage") -> list[dict]:
    return [{"seq": seq, "type": kind, "session_id": session, "detail": f"{session} {seq}"} for seq in range(1, n + 1)]


@pytest.fixture
def transactions(monkeypatch) -> list[int]:
    """Counts the store's write transactions: each one, on every backend, carries the waiting rows."""
    opened: list[int] = []
    carry = GroupCommit._carry_calls

    def counted(self, *args):  # type: ignore[no-untyped-def]
        opened.append(1)
        return carry(self, *args)

    monkeypatch.setattr(GroupCommit, "_carry_calls", counted)
    return opened


async def test_events_of_many_sessions_in_one_turn_are_one_commit_and_read_back_at_once(store_backend, transactions):
    for s in range(40):
        store_backend.append_events(f"s{s}", events(f"s{s}", 3))
    assert len(transactions) == 0  # waiting for the end of this turn
    rows = store_backend.events_after("s7")  # a reader in this process sees them at once
    assert [(seq, kind) for seq, kind, _ in rows] == [(1, "stage"), (2, "stage"), (3, "stage")]
    assert json.loads(rows[2][2])["detail"] == "s7 3"
    assert len(transactions) == 1
    store_backend.append_events("s1", events("s1", 4))  # a batch sent again, with one more event
    await asyncio.sleep(0)  # the end of the turn commits it (on PostgreSQL in the group commit's thread)
    store_backend.wait_group_commit()
    assert len(transactions) == 2
    assert [seq for seq, _, _ in store_backend.events_after("s1")] == [1, 2, 3, 4]
    assert all(len(store_backend.events_after(f"s{s}")) == 3 for s in range(2, 40))


async def test_events_that_cannot_be_stored_are_lost_never_the_write_that_carries_them(store_backend, transactions):
    store_backend.append_events("good-1", events("good-1", 2))
    store_backend.append_events("bad", events("bad", 2, kind=None))  # NOT NULL: refused by the database
    store_backend.append_events("good-2", events("good-2", 1))
    # A write in the same turn takes the waiting events into its transaction, and commits.
    store_backend.begin_session("kept-1", council="c", question="Kept?")
    assert len(transactions) == 1
    assert store_backend.get_session("kept-1")["question"] == "Kept?"
    assert store_backend.events_after("bad") == []
    assert [seq for seq, _, _ in store_backend.events_after("good-1")] == [1, 2]
    assert [seq for seq, _, _ in store_backend.events_after("good-2")] == [1]
