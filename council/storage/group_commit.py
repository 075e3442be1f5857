"""The call journal's group commit, the same on every store (``benchmarks/bench_bare_client.py``,
``benchmarks/bench_store_backends.py`` and ``benchmarks/bench_scaleout.py`` measure the writes).

A call is journaled twice (as it starts and as it finishes). Inside a running event loop the
rows of one turn of the loop wait in memory and are committed together at its end, and any
write transaction of the store takes the waiting rows first, in the same transaction: nothing
recorded after a call (its result, its session) is ever durable without the call. Outside an
event loop a row is written at once.

A session's events ride the same commits (``queue_events``; a server running many sessions
would otherwise commit for each of their events, on PostgreSQL a blocking round trip each).

A batch worker that records finished items (a few milliseconds after the first of them
finished: council.judging.worker.RECORD_HOLD_S) says so (``expect_write``):
the rows of those milliseconds then go in its transaction instead of one of their own.

A store using this mixin provides ``_write_transaction(carry=True)`` (a context manager: its write
transaction, which runs inside ``_carry_calls(carry)``), ``_in_transaction()`` (this
thread holds one) and ``write_calls(rows)``. Rows may be added on one thread and committed
by a transaction on another (the PostgreSQL store's operations may run off the event loop):
a lock guards the waiting rows, and a call's started row never overwrites its finished one
(``write_calls``), whichever commits first.

On such a store (``threadsafe``) the group commits run in one thread of its own, the store's
write thread, where a session's final write goes too (``write_thread``): the event loop never
waits on their round trips (on PostgreSQL a large part of a busy server's loop:
``benchmarks/bench_serve_sessions.py``), and the events, which only that thread commits, keep their
order: a reader polling for the events after the last it saw never finds a gap that fills later.
A session's start is written on whichever thread starts it, carrying nothing: a transaction with
no call rows waits on no other one.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from council._util.logs import get_logger
from council.storage.retries import retried
from council.untrusted.redaction import redact

if TYPE_CHECKING:
    from council.accounting.usage import CallRecord

log = get_logger("council.storage")


class GroupCommit:
    """The waiting call-log rows of a store, and how they reach the database."""

    _pending_calls: list[dict[str, Any]]
    _pending_events: list[tuple[str, Sequence[dict[str, Any]]]]
    _flush_scheduled: bool
    _pending_lock: threading.Lock
    _writes_expected: int
    threadsafe: bool  # the store's (council.storage.protocol.Store)

    def _init_group_commit(self) -> None:
        self._pending_calls = []
        self._pending_events = []
        self._flush_scheduled = False
        self._pending_lock = threading.Lock()
        self._writes_expected = 0
        self._flusher: ThreadPoolExecutor | None = None
        self._flush_waiting: Future[None] | None = None
        self._flush_thread: threading.Thread | None = None
        # Calls whose finished row a committed transaction wrote, until a final write leaves them
        # out (:meth:`calls_to_record`); and the Carried of the transaction under way on each thread.
        self._finished_on_record: set[str] = set()
        self._carrying = threading.local()

    # What each store provides.
    def _write_transaction(self) -> Any:
        raise NotImplementedError

    def _in_transaction(self) -> bool:
        raise NotImplementedError

    def write_calls(self, rows: Sequence[dict[str, Any]]) -> None:
        raise NotImplementedError

    def _write_carried(self, rows: Sequence[dict[str, Any]]) -> bool:
        """Write the waiting rows inside the transaction being opened; False: they were not
        written, and the transaction goes on without them (a store may soften a failure so)."""
        self.write_calls(rows)
        return True

    def _write_pending_events(self, pending: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> None:
        raise NotImplementedError  # only a store that calls ``queue_events`` has any

    def journal_calls(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write call-log rows by group commit: inside a running event loop, every row journaled
        during one turn of the loop is committed together at its end (one transaction instead of
        two per call); outside one, at once. The rows are :func:`call_row`'s, already redacted."""
        with self._pending_lock:
            self._pending_calls.extend(rows)
        self._commit_this_turn()

    def queue_events(self, session_id: str, events: Sequence[dict[str, Any]]) -> None:
        """A session's events, committed as the call-log rows are (with them)."""
        with self._pending_lock:
            self._pending_events.append((session_id, events))
        self._commit_this_turn()

    def _commit_this_turn(self) -> None:
        """Commit what is pending at the end of this turn of the event loop (outside one: now)."""
        with self._pending_lock:
            schedule = not self._flush_scheduled
            self._flush_scheduled = True
        loop = _running_loop()
        if loop is None:
            with self._pending_lock:
                self._flush_scheduled = False
            self.flush_calls()
        elif schedule:
            loop.call_soon(self._scheduled_flush)

    def expect_write(self) -> Callable[[], None]:
        """A write transaction of this store is on its way (a batch worker recording the items that
        finished in the last few milliseconds): until the function returned is called (the write
        done, or given up), the waiting rows are left to it instead of taking a transaction of their
        own first; then any left are committed at the end of the turn."""
        with self._pending_lock:
            self._writes_expected += 1
        called = False

        def done() -> None:
            nonlocal called
            if called:
                return
            called = True
            with self._pending_lock:
                self._writes_expected -= 1
                left = not self._writes_expected and bool(self._pending_calls or self._pending_events)
            if left:
                self._commit_this_turn()

        return done

    def _scheduled_flush(self) -> None:
        with self._pending_lock:
            if not (self._pending_calls or self._pending_events):  # written meanwhile (or the store closed)
                self._flush_scheduled = False
                return
        if self._in_transaction():  # a transaction held across an await: the next turn
            _running_loop().call_soon(self._scheduled_flush)
            return
        with self._pending_lock:
            self._flush_scheduled = False
            if not (self._pending_calls or self._pending_events):  # carried meanwhile by a write on another thread
                return
            if self._writes_expected:  # the expected write takes them (or schedules this again when done)
                return
        if self.threadsafe:
            self._in_flush_thread()
            return
        try:
            self.flush_calls()
        except Exception as exc:
            _logged_error(exc)

    def _in_flush_thread(self) -> Future[None]:
        """On a store whose operations may run on several threads, every group commit runs in a
        thread of its own: its round trip stalls no session on the event loop (on PostgreSQL a busy
        server's loop would otherwise wait on it), and a session's events, which only that thread
        commits, are committed in their order (a reader that polls for the events after the last it
        saw would miss one committed late by another thread). One commit at a time; one waiting to
        start takes whatever is pending when it starts, so it is the one returned."""
        with self._pending_lock:
            waiting = self._flush_waiting
            if waiting is not None and not waiting.running() and not waiting.done():
                return waiting
            self._flush_waiting = flush = self._writer().submit(self._flush_now)
        flush.add_done_callback(_logged)
        return flush

    def write_thread(self) -> ThreadPoolExecutor | None:
        """On a store whose operations may run on several threads (PostgreSQL), the one thread its
        group commits run on, where a session's final write goes too: off the event loop, and one
        write after another, so a session's write never waits on a group commit holding some of
        its call rows (two such waits make a deadlock) and its events keep their order. None: the
        store's writes stay on the caller's thread (SQLite)."""
        if not self.threadsafe:
            return None
        with self._pending_lock:
            return self._writer()

    def _writer(self) -> ThreadPoolExecutor:
        if self._flusher is None:  # under _pending_lock
            self._flusher = ThreadPoolExecutor(1, "council-group-commit", initializer=self._mark_writer)
        return self._flusher

    def _mark_writer(self) -> None:
        self._flush_thread = threading.current_thread()

    def _takes_events(self) -> bool:
        return not self.threadsafe or threading.current_thread() is self._flush_thread

    def wait_group_commit(self) -> None:
        """Wait for the group commit under way in its thread, if any (its error is logged there)."""
        with self._pending_lock:
            waiting = self._flush_waiting
        if waiting is not None:
            wait([waiting])

    def _stop_flushing(self) -> None:
        """Let the group commit's thread finish what it is writing, and end it (a store closing)."""
        with self._pending_lock:
            flusher, self._flusher, self._flush_waiting = self._flusher, None, None
        if flusher is not None:
            flusher.shutdown(wait=True)

    def flush_calls(self) -> None:
        """Commit the call-log rows and events waiting for a group commit (if any). If that fails
        they are dropped, as a direct write's failure would drop them, and the error is raised.
        On a store whose operations may run on several threads, in the group commit's thread
        (waited for)."""
        if self._takes_events():
            self._flush_now()
        elif (self._pending_calls or self._pending_events) and not self._in_transaction():
            self._in_flush_thread().result()

    def _flush_now(self) -> None:
        if not (self._pending_calls or self._pending_events) or self._in_transaction():
            return

        def commit() -> None:
            with self._write_transaction():
                pass

        try:
            retried(commit)  # a deadlock's rollback puts the rows back: they are taken again
        except BaseException:
            with self._pending_lock:
                self._pending_calls.clear()
                self._pending_events.clear()
            raise

    def calls_to_record(self, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Inside a final write's transaction (a session's, a judgment's): the call-log rows
        (``call_row``'s) it has to write. A finished call that the call log has on record, its
        finished row committed by an earlier transaction or carried by this one, is left out:
        written again it would change nothing but cost a batch an upsert per call
        (``benchmarks/bench_bare_client.py``).
        Any other row is written, as it always was: the final write records what the call log
        may have lost. Each call is left out once (a final write tried again writes it)."""
        carried = getattr(self._carrying, "carried", None)
        here = carried.finished_ids() if carried is not None else frozenset()
        kept = []
        with self._pending_lock:
            on_record = self._finished_on_record
            for row in rows:
                call_id = row["call_id"]
                if row.get("ok") is None:
                    kept.append(row)
                elif call_id in here:
                    assert carried is not None
                    carried.recorded.add(call_id)  # not kept on record once this commits
                elif call_id in on_record:
                    on_record.discard(call_id)
                else:
                    kept.append(row)
        return kept

    def _committed_finished(self, carried: Carried) -> None:
        """The transaction that carried these rows has committed: their finished calls are on record."""
        written = carried.finished_ids() - carried.recorded
        if not written:
            return
        with self._pending_lock:
            if len(self._finished_on_record) >= _ON_RECORD_MAX:  # calls no final write came for
                self._finished_on_record.clear()  # (a run given up): their final rows are written again
            self._finished_on_record.update(written)

    @contextmanager
    def _carry_calls(self, take: bool = True) -> Iterator[Carried]:
        """Around a write transaction, its commit included: the waiting rows and events are taken,
        and the :class:`Carried` yielded writes them (call it first inside the transaction); if the
        transaction fails they wait again for the next one. ``take=False``: nothing is taken (a
        transaction that must wait on no other one)."""
        events_here = take and self._takes_events()
        with self._pending_lock:
            rows = self._pending_calls[:] if take else []
            events = self._pending_events[:] if events_here else []
            if take:
                self._pending_calls.clear()
            if events_here:
                self._pending_events.clear()
        carried = Carried(self, rows, events)
        self._carrying.carried = carried
        try:
            yield carried
        except BaseException:
            with self._pending_lock:
                self._pending_calls[:0] = rows
                self._pending_events[:0] = events
            raise
        else:
            self._committed_finished(carried)
        finally:
            self._carrying.carried = None


class Carried:
    """The call-log rows and events a write transaction took from the waiting ones. Called, it
    writes them all; or its events first and its rows with the first call rows the transaction
    writes of its own (``take_rows``), so that the transaction writes call rows in one pass, in
    one order (council.storage.postgres: no deadlock), and the rest before it commits."""

    def __init__(self, store: GroupCommit, rows: list[dict[str, Any]], events: list[Any]) -> None:
        self._store, self._rows, self._events = store, rows, events
        self._taken = rows  # all of them, written or to be written in the transaction
        self._finished: frozenset[str] | None = None
        self.recorded: set[str] = set()  # those a final write in the transaction left out

    def finished_ids(self) -> frozenset[str]:
        """The calls whose finished row this transaction writes (none if their write failed)."""
        if self._finished is None:
            self._finished = frozenset(row["call_id"] for row in self._taken if row.get("ok") is not None)
        return self._finished

    def __call__(self) -> None:
        self.write_rows()
        self.write_events()

    def write_events(self) -> None:
        events, self._events = self._events, []
        if events:
            self._store._write_pending_events(events)

    def take_rows(self) -> list[dict[str, Any]]:
        rows, self._rows = self._rows, []
        return rows

    def write_rows(self) -> None:
        rows = self.take_rows()
        if rows and not self._store._write_carried(rows):
            self._taken, self._finished = [], frozenset()  # not written: none of them is on record


#: Calls kept on record for final writes to leave out, at most (then forgotten: written again).
_ON_RECORD_MAX = 100_000


def _logged(done: Future[None]) -> None:
    if not done.cancelled() and done.exception() is not None:
        _logged_error(done.exception())


def _logged_error(exc: BaseException | None) -> None:
    # As a direct write's failure: logged; the final write records the calls.
    log.warning("could not write the call log", error=str(exc))


def call_row(record: CallRecord, **extra: Any) -> dict[str, Any]:
    """A call-log row of ``record`` (with ``extra`` columns), its error redacted here, in the
    privacy scope of the run the call belongs to: every call row is made this way, because it
    may be committed later from another run's context (a group commit, a worker's shared
    transaction), whose scope does not know this run's private text."""
    row = {**extra, **record.row()}
    if row.get("error"):
        row["error"] = redact(row["error"])
    return row


def _running_loop() -> Any:
    """The running event loop, or None. asyncio is not imported for it: no loop runs in a
    process that never imported asyncio (a bias report, a listing), which is spared its import."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
