"""Write transactions the database rolled back to break a deadlock are run again (council.storage.retries).

PostgreSQL breaks a deadlock by rolling one transaction back: a real one is made here between two
connections, and is ``TransactionConflict``. A batch worker's record of finished items, a single
judgment and the call log's group commit each run again after one, writing everything once.
"""

from __future__ import annotations

import threading

import pytest
from fake_judges import fake_client

from council.accounting.usage import CallRecord
from council.errors import CouncilFailure, TransactionConflict
from council.judging.batch import BatchSettings, content_digest, parse_batch
from council.judging.engine import compare
from council.storage import location, open_location
from council.storage.judgments import JudgmentSave
from council.storage.retries import ATTEMPTS


def test_a_deadlock_postgresql_breaks_is_a_transaction_conflict(postgres_url):
    store = open_location(location.parse(postgres_url))
    barrier = threading.Barrier(2, timeout=30)

    def write(first: str, second: str):
        def transaction() -> None:
            with store.transaction() as conn:
                for i, call_id in enumerate((first, second)):
                    conn.execute(
                        "INSERT INTO calls (call_id, session_id, stage, member, model, started_at)"
                        " VALUES (%s, 's', 'answer', 'm', 'fake/a', '2026-01-01')",
                        [call_id],
                    )
                    if i == 0:
                        barrier.wait()  # each holds its first row; then each wants the other's

        return transaction

    try:
        outcomes = _both_commit(write("x", "y"), write("y", "x"))
    finally:
        store.close()
    ended = sorted(outcomes.values(), key=str)
    assert "committed" in ended, outcomes  # one went on; the other was rolled back to break the cycle
    [lost] = [e for e in ended if e != "committed"]
    assert isinstance(lost, TransactionConflict) and "deadlock detected" in str(lost)


def _meeting_after_first_row(monkeypatch) -> None:
    """Rows are written one statement each, and each thread, once its transaction's first row is
    written (that row taken), waits up to 2 s for the other to get that far: both do when their
    first rows differ."""
    from council.storage import postgres_connection

    barrier, firsts = threading.Barrier(2), threading.local()
    real = postgres_connection.Statements.executemany

    def one_by_one(self, sql, rows):
        for row in rows:
            real(self, sql, [row])
            if not getattr(firsts, "done", False):
                firsts.done = True
                try:
                    barrier.wait(timeout=2)  # the other cannot come while it waits for this one's row
                except threading.BrokenBarrierError:
                    pass

    monkeypatch.setattr(postgres_connection.Statements, "executemany", one_by_one)


def _call(call_id: str, *, finished: bool) -> dict:
    from council.storage.group_commit import call_row

    record = CallRecord(call_id=call_id, stage="judge", member="j", model="fake/j", started_at="2026-01-01",
                        latency_ms=1.0)  # fmt: skip
    # A started row as the journal writes it (with its owner), a finished one as a final write does.
    return call_row(record, session_id="run-d") | ({} if finished else {"ok": None, "owner": "o"})


def _both_commit(*writes) -> dict:
    """Run the writes in threads of their own, at once: what each ended with, by its place."""
    outcomes: dict = {}

    def run(name, write) -> None:
        try:
            write()
            outcomes[name] = "committed"
        except Exception as exc:  # noqa: BLE001 - what each side ended with is the result
            outcomes[name] = exc

    threads = [threading.Thread(target=run, args=(i, w)) for i, w in enumerate(writes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return outcomes


def test_two_writes_of_the_same_call_rows_given_in_opposite_orders_do_not_deadlock(postgres_url, monkeypatch):
    """Each transaction writes its call rows in the order of their ids, whatever order it was given
    them in: one waits for the other's first row, none holds a row the other waits for. (Given in
    opposite orders as they come, each would take its first row, then wait for the other's.)"""
    store = open_location(location.parse(postgres_url))
    _meeting_after_first_row(monkeypatch)

    def write(rows: list[dict]):
        def transaction() -> None:
            with store.transaction():
                store.write_calls(rows)

        return transaction

    try:
        outcomes = _both_commit(write([_call("y", finished=False), _call("x", finished=True)]),
                                write([_call("x", finished=False), _call("y", finished=True)]))  # fmt: skip
        assert outcomes == {0: "committed", 1: "committed"}, outcomes
        assert sorted((c["call_id"], c["ok"]) for c in store.session_calls("run-d")) == [("x", 1), ("y", 1)]
    finally:
        store.close()


async def test_the_call_rows_a_write_carries_go_in_one_order_with_its_own(postgres_url, monkeypatch):
    """A batch's record carries the call rows waiting for a group commit (some of another item's);
    they are written with its own, in one order: it cannot hold a carried row while it waits for
    one of its own that another transaction holds, while that one waits for the carried row."""
    here, there = (open_location(location.parse(postgres_url)) for _ in range(2))  # two processes
    _meeting_after_first_row(monkeypatch)
    here.journal("run-d").call_started(CallRecord(call_id="y", stage="judge", member="j", model="fake/j",
                                                  started_at="2026-01-01", latency_ms=0.0))  # fmt: skip

    def record() -> None:  # carries y's started row, writes x's finished row
        with here.immediate():
            here.write_calls([_call("x", finished=True)])

    def other() -> None:
        with there.transaction():
            there.write_calls([_call("x", finished=False), _call("y", finished=True)])

    try:  # the event loop does not turn meanwhile: y's row waits, to be carried by the record
        outcomes = _both_commit(record, other)
        assert outcomes == {0: "committed", 1: "committed"}, outcomes
        assert sorted((c["call_id"], c["ok"]) for c in there.session_calls("run-d")) == [("x", 1), ("y", 1)]
    finally:
        here.close()
        there.close()


def conflicting_once(monkeypatch, target, name: str) -> list[int]:
    """``target.name`` raises TransactionConflict on its first call (as a broken deadlock does,
    after some of the transaction's rows were written), then runs as usual."""
    real, calls = getattr(target, name), []

    def first_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise TransactionConflict("the store failed: deadlock detected")
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, first_fails)
    return calls


async def test_items_recorded_together_are_recorded_once_after_a_conflict(store_backend, monkeypatch):
    from council.judging.worker import enqueue

    text = '{"id": "x", "prompt": "Q?", "a": "A.", "b": "B."}\n{"id": "y", "prompt": "Q2?", "a": "A.", "b": "B."}\n'
    items = parse_batch(text, "x.jsonl")
    enqueue(store_backend, items, batch_id="cb", settings=BatchSettings(judges=["fake/j"]), judges=[fake_client()],
            rubrics={}, source="x.jsonl", content_sha256=content_digest(text))  # fmt: skip
    [claimed] = store_backend.claim_items("w", batch_id="cb", lease_seconds=60)
    outcome = await compare("Q?", "A.", "B.", judges=[fake_client()], store=None)
    call = CallRecord(call_id="c-1", stage="judge", member="j", model="fake/j", started_at="2026-01-01", latency_ms=1.0)
    save = JudgmentSave("compare", outcome, [call], keep_text=False, batch_id="cb", item=items[0],
                        item_digest=claimed["digest"])  # fmt: skip
    # The claim, the transaction's last statement, fails the first time: its records are rolled back.
    tries = conflicting_once(monkeypatch, store_backend, "claim_within")
    results, more = store_backend.record_and_claim([save], "w", batch_id="cb", limit=1, lease_seconds=60)
    assert len(tries) == 2 and results == [None] and [r["item_id"] for r in more] == ["y"]
    status = store_backend.batch_status("cb")
    assert (status["done"], status["running"], status["queued"]) == (1, 1, 0)
    assert [c["call_id"] for c in store_backend.session_calls(outcome.run_id)] == ["c-1"]


async def test_a_single_judgment_is_recorded_after_a_conflict(store_backend, monkeypatch):
    from council.storage import judgments

    outcome = await compare("Q?", "A.", "B.", judges=[fake_client()], store=None)
    tries = conflicting_once(monkeypatch, judgments, "record_run")
    store_backend.save_judgment("compare", outcome, [], keep_text=False)
    assert len(tries) == 2 and store_backend.judgment_run(outcome.run_id)["status"] == "ok"


def test_a_group_commit_is_committed_after_a_conflict_and_a_third_conflict_is_raised(store_backend, monkeypatch):
    journal = store_backend.journal("run-c")
    tries = conflicting_once(monkeypatch, store_backend, "write_calls")
    journal.call_started(CallRecord(call_id="c-2", stage="answer", member="m", model="fake/a",
                                    started_at="2026-01-01", latency_ms=0.0))  # fmt: skip
    assert len(tries) == 2 and [c["call_id"] for c in store_backend.session_calls("run-c")] == ["c-2"]

    runs = []

    def always(rows):
        runs.append(1)
        raise TransactionConflict("the store failed: deadlock detected")

    monkeypatch.setattr(store_backend, "write_calls", always)
    with pytest.raises(CouncilFailure, match="deadlock"):  # written at once outside an event loop: raised
        journal.call_started(CallRecord(call_id="c-3", stage="answer", member="m", model="fake/a",
                                        started_at="2026-01-01", latency_ms=0.0))  # fmt: skip
    assert len(runs) == ATTEMPTS
