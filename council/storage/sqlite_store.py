"""One store class over council.db (SQLite through sqlite-utils, WAL mode).

Write discipline, so several processes can share one database and a crash never
leaves a session half-recorded:
- a session row is inserted with status ``running`` in its own short transaction;
- everything else of the session (answers, reviews, bias records, call log) is
  written together with the final status in ONE ``BEGIN IMMEDIATE`` transaction;
- every connection has a busy timeout, so writers queue instead of failing;
- a new database's switch to WAL is retried: the busy timeout does not cover it
  (several processes creating council.db at once; see ``_enable_wal``).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from council.clock import parse_since, utc_now
from council.errors import EnvironmentFailure, NotFoundError, UsageError
from council.home import ensure_home
from council.logs import get_logger
from council.redaction import redact, redact_document, redacted_model_json
from council.storage import bias_rows, budgets, call_cache, ownership, queue
from council.storage.bias_summary_rows import write_summaries
from council.storage.bias_sums import sum_bias_records
from council.storage.checkpoints import WAL_CAP_PAGES, Checkpointer
from council.storage.comparisons import count_comparisons
from council.storage.dialect import SQLITE
from council.storage.group_commit import GroupCommit, call_row
from council.storage.migrations import migrations
from council.storage.opening import connect_checked, set_schema_version, write_refused
from council.storage.rate_limits import adjust_sqlite, reserve_sqlite
from council.storage.shared_operations import SharedOperations
from council.storage.sqlite import Database

if TYPE_CHECKING:  # pydantic's import (~50 ms) is not every command's: a listing reads no call record
    from council.usage import CallJournal, CallRecord

log = get_logger("council.storage")
BUSY_TIMEOUT_S = 60.0
#: The shortest id prefix a session can be found by (the tables show 8 characters).
MIN_ID_PREFIX = 8
_CALL_COLUMNS = ("call_id", "session_id", "owner", "stage", "member", "model", "started_at", "latency_ms",
                 "prompt_tokens", "completion_tokens", "cost_usd", "attempt", "ok", "error", "cached",
                 "saved_usd", "usage_untrusted")  # fmt: skip
_CALL_OUTCOME = frozenset(
    {"latency_ms", "prompt_tokens", "completion_tokens", "cost_usd", "ok", "error", "cached", "saved_usd",
     "usage_untrusted"}
)  # fmt: skip


def _connect(path: Path | str, *, uri: bool = False) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN ourselves (sqlite-utils' atomic()
    # nests as savepoints inside our BEGIN IMMEDIATE).
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False, uri=uri)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA synchronous = NORMAL")  # safe with WAL: durable at checkpoint, never corrupt
    return conn


def _write_bias_records(conn: sqlite3.Connection, records: Iterable[Mapping[str, Any]], batch_size: int) -> int:
    """Insert the records and the report's summaries of their sessions (council.storage.
    bias_summary_rows), a chunk at a time, inside the caller's transaction. One writer at a
    time holds the file, so the rows past the largest id before a chunk are that chunk's."""
    written = 0
    it = iter(records)
    while chunk := list(itertools.islice(it, max(1, batch_size))):
        before = conn.execute(f"SELECT COALESCE(MAX(id), {_SMALLEST_ID}) FROM bias_records").fetchone()[0]
        columns, rows = bias_rows.record_rows(chunk)
        marks = ", ".join("?" for _ in columns)
        conn.executemany(f"INSERT INTO bias_records ({', '.join(columns)}) VALUES ({marks})", rows)
        write_summaries(conn, columns, rows, before)
        written += len(rows)
    return written


_SMALLEST_ID = -(2**63)


def _is_locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "database is locked" in str(exc)


def _enable_wal(db: Database) -> None:
    """Switch the file to WAL (the mode is kept in the file: only a new database switches).

    The switch rewrites the file header, so the pragma upgrades the read lock it holds
    to a write lock, and SQLite does not call the busy handler for an upgrade inside an
    open transaction (waiting there could deadlock). So when several processes create
    the same database at once, the losers get "database is locked" at once, whatever
    the busy timeout: retry them, within the busy timeout's budget.
    """
    if db.journal_mode == "wal":
        return
    from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

    for attempt in Retrying(
        retry=retry_if_exception(_is_locked),
        wait=wait_random_exponential(multiplier=0.005, max=0.2),
        stop=stop_after_delay(BUSY_TIMEOUT_S),
        reraise=True,
    ):
        with attempt:
            db.enable_wal()


def _private_database(path: Path) -> None:
    """council.db is created 0600 (SQLite gives its -wal and -shm files the same mode); an
    existing one readable by others is made private."""
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    except IsADirectoryError:
        raise UsageError(f"the database path {path} is a directory") from None
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            if file.stat().st_mode & 0o077:
                os.chmod(file, 0o600)
        except OSError:  # absent, or not ours to change
            pass


class SQLiteStore(GroupCommit, SharedOperations):
    """The SQLite backend of :class:`council.storage.protocol.Store` (council.db)."""

    #: One connection, used by one thread at a time: council.judging.worker calls it on its event loop.
    threadsafe = False
    dialect = SQLITE

    def __init__(self, db: Database, path: Path | None = None) -> None:
        self.db = db
        self.path = path
        self.read_only = False
        self._write_refused: EnvironmentFailure | None = None  # why writes fail on a read-only store
        self._leased = False  # a file others may share (set by open): its work is owned by leases
        self._lease_due: ownership.Lease | None = None  # this process's lease, not written yet
        self._unscored = False  # records without a score were loaded (a store made from files)
        self._resolved_key: str | None = None  # the lease's key: the file's resolved path
        self._sweeping = False  # this process's heartbeat recovers dead processes' work (recover_while_open)
        self._init_group_commit()  # call-log rows and session events not yet committed
        self._checkpointer: Checkpointer | None = None  # started by the first write transaction
        self._checkpointer_lock = threading.Lock()
        self._checkpoints_here = False  # the thread could not be started: SQLite's own checkpoints

    # -- opening -------------------------------------------------------------
    @classmethod
    def open(cls, path: Path | str | None = None) -> SQLiteStore:
        """Open (creating and migrating if needed) ``path`` or ``$COUNCIL_HOME/council.db``.

        Sessions and calls left ``running`` by a process that has ended are marked
        ``interrupted`` here, so every command that opens the database recovers them."""
        path = Path(path) if path is not None else ensure_home() / "council.db"
        read_only = False
        try:
            _private_database(path)
        except OSError as exc:
            if not path.is_file():
                raise EnvironmentFailure(f"cannot create the database {path}: {exc.strerror}") from None
            read_only = True  # a read-only file system, or a file we may only read
        conn, refused = connect_checked(path, _connect, read_only=read_only)
        read_only = refused is not None
        db = Database(conn)
        if not read_only:
            _enable_wal(db)
        store = cls(db, path)
        store.read_only = read_only
        store._write_refused = refused
        if read_only:
            # No leases to take or recover: nothing is written.
            if migrations.pending(db):
                store.close()
                raise EnvironmentFailure(f"the database {path} needs an upgrade, but it is read-only")
            return store
        store.migrate()
        store._leased = True
        ownership.hold(store._lease_key())
        store.recover_interrupted()
        return store

    @classmethod
    def memory(cls) -> SQLiteStore:
        store = cls(Database(memory=True))
        store.migrate()
        return store

    def migrate(self) -> None:
        if not migrations.pending(self.db):
            if self.path is not None:  # a database from before the version was stored
                set_schema_version(self.db.conn)
            return
        # Several processes may open a fresh database at once: take the write
        # lock first, then re-check what is pending inside it.
        with self.immediate():
            migrations.apply(self.db)
            set_schema_version(self.db.conn)

    def close(self) -> None:
        self.flush_calls()
        if self._leased:
            self._leased = False
            ownership.let_go(self._lease_key(), self._run_outside_transaction())
        checkpointer, self._checkpointer = self._checkpointer, None
        if checkpointer is not None:
            checkpointer.stop()  # its connection closes first: this one, closing last, checkpoints the rest
        self.db.conn.close()

    def _run_outside_transaction(self) -> ownership.Run | None:
        """This store's connection for one autocommit statement of the lease, if it is free."""
        conn = self.db.conn
        if conn.in_transaction:
            return None
        return lambda sql, params: conn.execute(sql, list(params))

    def _lease_key(self) -> str:
        # Resolved once: every call-log row asks for its owner, and resolving the path is a
        # system call per component (~5 % of a busy server's CPU, docs/benchmarks.md section 20).
        if self._resolved_key is None:
            assert self.path is not None
            self._resolved_key = str(self.path.resolve())
        return self._resolved_key

    @contextmanager
    def immediate(self, *, carry: bool = True) -> Iterator[Database]:
        """A write transaction that takes the lock up front (no deferred-upgrade failures).
        Call-log rows and session events waiting for a group commit go first, in it
        (council.storage.group_commit), unless ``carry`` is False."""
        conn = self.db.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            with self._carry_calls(carry) as carry_rows:
                try:
                    lease = self._lease_due
                    if lease is not None and not lease.written:
                        conn.execute(*lease.upsert())  # before any row it owns: they commit together
                    carry_rows()
                    yield self.db
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                else:
                    conn.execute("COMMIT")
                    self._committed()
                    if lease is not None:
                        lease.written = True
                        self._lease_due = None
        except sqlite3.OperationalError as exc:
            refused = write_refused(exc, self.path)
            if refused is None:
                raise
            raise (self._write_refused or refused) from None

    _write_transaction = immediate

    def _committed(self) -> None:
        """Have the file checkpointed off this thread (council.storage.checkpoints), from the first
        write transaction of a file store on."""
        checkpointer = self._checkpointer
        if checkpointer is None:
            if self.path is None or self.read_only or self._checkpoints_here:
                return
            with self._checkpointer_lock:
                if self._checkpointer is None and not self._checkpoints_here:
                    path = self.path
                    try:
                        self._checkpointer = Checkpointer(lambda: _connect(path))
                    except RuntimeError as exc:  # no thread to be had: the write stands, SQLite checkpoints it
                        log.warning("checkpoints stay with the committing thread", error=str(exc))
                        self._checkpoints_here = True
                        return
                    self.db.conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_CAP_PAGES}")  # this connection only
                checkpointer = self._checkpointer
        checkpointer.committed()

    def _in_transaction(self) -> bool:
        return self.db.conn.in_transaction

    def _write_carried(self, rows: Sequence[dict[str, Any]]) -> bool:
        try:
            self.write_calls(rows)
        except sqlite3.Error as exc:  # as a direct write's failure: the final write records them
            log.warning("could not write the call log", error=str(exc))
            return False
        return True

    # -- ownership -----------------------------------------------------------
    def _owner(self) -> dict[str, Any]:
        """This process's lease, for rows of unfinished work (nothing for in-memory stores)."""
        if not self._leased:
            return {}
        lease = self._process_lease()
        if not lease.written:
            self._lease_due = lease  # written by the next write transaction, with the first rows it owns
        return {"owner": lease.id, "owner_pid": lease.pid, "owner_host": lease.host}

    def _process_lease(self) -> ownership.Lease:
        path = self.path
        assert path is not None
        lease = ownership.process_lease(self._lease_key(), lambda: _connect(path))
        if self._sweeping and lease.sweep is None:
            ownership.sweep_sqlite(lease)
        return lease

    def recover_interrupted(self) -> list[str]:
        """Mark sessions and calls whose owner's lease has expired, or whose process on this
        machine has ended, ``interrupted``, keeping everything they wrote
        (council.storage.ownership). Returns the ids of the sessions marked."""
        if not self._leased:
            return []
        return ownership.recover_interrupted(self, ownership.SQLITE_CLOCK, ownership.own_lease_ids())

    def recover_while_open(self) -> None:
        """Recover dead processes' work at each heartbeat of this process's lease while the file
        is open, on the lease's own connection (servers and workers run for long)."""
        if self._leased:
            self._sweeping = True
            self._process_lease()

    def clock(self) -> float:
        """The host's clock: every process sharing a SQLite file runs on this host."""
        return time.time()

    # -- shared limits ------------------------------------------------------------
    def reserve_rate(self, key: str, increment: float, tolerance: float = 0.0) -> float:
        """Seconds to wait before a call under the budget ``key`` (council.storage.rate_limits)."""
        return reserve_sqlite(self.db.conn, key, increment, tolerance)

    def adjust_rate(self, key: str, delta: float) -> None:
        """Settle a reservation under ``key`` ``delta`` seconds bigger (or smaller, if negative)."""
        adjust_sqlite(self.db.conn, key, delta)

    # -- the call log ---------------------------------------------------------
    def journal(self, session_id: str) -> CallJournal:
        """Writes a run's attempts as they start and finish (``calls.session_id`` = ``session_id``)."""
        return _Journal(self, session_id)

    def write_calls(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert call-log rows (``group_commit.call_row``'s: redacted where they were made), or
        complete the rows already written for them (by ``call_id``). Run inside the caller's
        transaction."""
        # One statement per shape of row. A call's finished row completes its started row; a
        # started row (``ok`` NULL) never overwrites a row already there, so the order they are
        # written in does not matter (group commits on several threads may land a started row
        # after its finished one), and a started row whose finished row is here is left out.
        finished = {row["call_id"] for row in rows if row.get("ok") is not None}
        kept = [row for row in rows if row.get("ok") is not None or row["call_id"] not in finished]
        if self.threadsafe:
            # Several transactions write call rows at once here (PostgreSQL): each writes its rows
            # in one order, their call_id's, so none waits for a row another holds while that one
            # waits for a row it holds (a deadlock: docs/benchmarks.md, section 37). Started and
            # finished rows go in one statement (a started row updates nothing), and a row without
            # an owner (a final write's, a record's) has a NULL one, as it would unwritten: the rows
            # stay one statement, not one each time the kind or the columns change along the order.
            kept.sort(key=lambda row: row["call_id"])
            for columns, same in itertools.groupby(kept, key=_owned_columns):
                self._insert_calls(columns, _complete_call(columns, started_too=True), same)
            return
        shapes: dict[tuple[tuple[str, ...], bool], list[dict[str, Any]]] = {}
        for row in kept:
            shapes.setdefault(_call_shape(row), []).append(row)
        for (columns, started), shaped in shapes.items():
            self._insert_calls(columns, "NOTHING" if started else _complete_call(columns), shaped)

    def _insert_calls(self, columns: tuple[str, ...], on_conflict: str, rows: Iterable[dict[str, Any]]) -> None:
        self.db.conn.executemany(
            f"INSERT INTO calls ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)}) "
            f"ON CONFLICT (call_id) DO {on_conflict}",
            [[row.get(c) for c in columns] for row in rows],
        )

    # -- sessions ------------------------------------------------------------
    def begin_session(
        self,
        session_id: str,
        *,
        council: str,
        question: str | None = None,
        query_hash: str | None = None,
        seed: int | None = None,
        offline: bool = False,
        members: Sequence[str] = (),
        created_at: str | None = None,
        kind: str = "council",
    ) -> None:
        row = {
            "id": session_id,
            "kind": kind,
            "council": council,
            "question": question,
            "query_hash": query_hash,
            "seed": seed,
            "offline": int(offline),
            "members": json.dumps(list(members)),
            "created_at": created_at or utc_now(),
        }
        row = {"status": "running", **self._owner(), **row}
        # Nothing read: one round trip on PostgreSQL. A store written from several threads writes
        # the new row alone, carrying no call-log rows: it then waits on no other transaction (the
        # session starts on whichever thread, beside the write thread's commits of those rows).
        with self._write_transaction(carry=not self.threadsafe):
            self._write_rows("sessions", [row])  # one prepared statement (sqlite-utils' insert: ~2 ×)

    def save_session(
        self, result: Any, records: Sequence[Any], *, keep_text: bool, calls: Sequence[CallRecord]
    ) -> None:
        self._finish_session(
            result.session_id,
            status=result.status,
            **_result_rows(result, keep_text),
            bias_records=[rec.row() for rec in records],
            calls=_call_rows(result.session_id, calls),
        )

    def fail_session(
        self,
        session_id: str,
        *,
        status: str,
        error: str,
        calls: Sequence[CallRecord],
        result: Any | None = None,
        keep_text: bool = True,
    ) -> None:
        rows = _result_rows(result, keep_text) if result is not None else {"result": None}
        self._finish_session(session_id, status=status, error=error, calls=_call_rows(session_id, calls), **rows)

    def _finish_session(
        self,
        session_id: str,
        *,
        status: str,
        result: Any | None,
        error: str | None = None,
        answers: Sequence[dict[str, Any]] = (),
        reviews: Sequence[dict[str, Any]] = (),
        bias_records: Sequence[dict[str, Any]] = (),
        calls: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Write the whole session and its final status in one transaction, every row and the
        result (a ``SessionResult``) redacted field by field (``redaction.redact_document``: no
        secrets, and no private text when transcripts are off; the user's own words kept)."""
        with self._write_transaction():  # nothing read: one round trip on PostgreSQL
            if answers:
                self._write_rows("answers", redact_document(list(answers)), replace=True)
            if reviews:
                self._write_rows("reviews", redact_document(list(reviews)), replace=True)
            if bias_records:
                self._write_session_bias_records(bias_records)
            calls = self.calls_to_record(calls)
            if calls:
                self.write_calls(calls)
            self.db.conn.execute(
                "UPDATE sessions SET status = ?, finished_at = ?, result = ?, error = ? WHERE id = ?",
                [
                    status,
                    utc_now(),
                    # serialized once, for the redaction check and for storing
                    None if result is None else redacted_model_json(result),
                    redact(error) if error else error,
                    session_id,
                ],
            )

    def _write_rows(self, table: str, rows: Sequence[dict[str, Any]], *, replace: bool = False) -> None:
        """Insert ``rows`` (plain values) into ``table`` inside the caller's transaction, one
        prepared statement per shape of row; ``replace``: a row with the same key replaces the
        stored one. (sqlite-utils' ``insert_all`` reads the table's columns and converts every
        value first: ~8 % of a busy server's CPU, docs/benchmarks.md section 20.)"""
        shapes: dict[tuple[str, ...], list[list[Any]]] = {}
        for row in rows:
            columns = tuple(row)
            shapes.setdefault(columns, []).append([row[c] for c in columns])
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        for columns, values in shapes.items():
            marks = ", ".join("?" for _ in columns)
            self.db.conn.executemany(f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({marks})", values)

    def list_sessions(
        self, *, limit: int = 20, since: str | None = None, council: str | None = None, search: str | None = None
    ) -> list[dict[str, Any]]:
        """Newest first. ``search``: text the question contains (any case; literal, never a pattern)."""
        where, params = [], []
        if search:
            where.append(self.dialect.contains("lower(question)", "lower(?)"))
            params.append(search)
        if since:
            where.append("created_at >= ?")
            params.append(parse_since(since))
        if council:
            where.append("council = ?")
            params.append(council)
        sql = "select id, created_at, finished_at, status, kind, council, question, members, error from sessions"
        if where:
            sql += " where " + " and ".join(where)
        sql += " order by created_at desc limit ?"
        params.append(limit)
        return list(self.db.query(sql, params))

    def get_session(self, session_id: str) -> dict[str, Any]:
        """A session by its id, or by a literal prefix of at least ``MIN_ID_PREFIX`` characters
        that only one session has (people copy the short ids the table shows)."""
        rows = list(self.db.query("select * from sessions where id = ?", [session_id]))
        if not rows and len(session_id) >= MIN_ID_PREFIX:
            # A range, not LIKE: the prefix is text, never a pattern ("%" and "_" match only themselves).
            upper = session_id[:-1] + chr(ord(session_id[-1]) + 1) if ord(session_id[-1]) < 0x10FFFF else None
            sql = "select * from sessions where id >= ? and substr(id, 1, ?) = ?"
            params: list[Any] = [session_id, len(session_id), session_id]
            if upper is not None:
                sql += " and id < ?"
                params.append(upper)
            rows = list(self.db.query(sql + " limit 2", params))
        if len(rows) != 1:
            hint = f" (give the id or at least {MIN_ID_PREFIX} characters of it)"
            raise NotFoundError(f"no session with id {session_id!r}{'' if len(session_id) >= MIN_ID_PREFIX else hint}")
        session = rows[0]
        sid = session["id"]
        session["answers"] = list(self.db.query("select * from answers where session_id = ?", [sid]))
        session["reviews"] = list(self.db.query("select * from reviews where session_id = ?", [sid]))
        return session

    def session_calls(self, session_id: str) -> list[dict[str, Any]]:
        """The call log of one session, every attempt, in the order they started. Not the rows'
        ids: a transaction may write several attempts' rows at once, and on PostgreSQL it writes
        them in call-id order (:meth:`write_calls`), so that two never deadlock."""
        rows = self.db.query("select * from calls where session_id = ? order by started_at, id", [session_id])
        return list(rows)

    def swap_setting(self, key: str, value: str) -> str | None:
        """Store ``value`` under ``key`` and return what was stored before (None: nothing)."""
        with self.immediate():
            row = self.db.execute("SELECT value FROM settings WHERE key = ?", [key]).fetchone()
            self.db.execute(
                "INSERT INTO settings (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                [key, value],
            )
        return row[0] if row else None

    def has_query_hashes(self) -> bool:
        """Whether any session or judged pair (its ``prompt_id``, m018) on record carries a query
        hash (made with the salt of the time)."""
        sql = ("SELECT 1 FROM sessions WHERE query_hash IS NOT NULL UNION ALL "
               "SELECT 1 FROM judgment_runs WHERE prompt_id IS NOT NULL LIMIT 1")  # fmt: skip
        return bool(list(self.db.execute(sql)))

    # -- session events ------------------------------------------------------
    def append_events(self, session_id: str, events: Sequence[dict[str, Any]]) -> None:
        """Store a batch of a session's events (council.storage.events) by the call log's group
        commit: every batch of every session in one turn of the event loop in one transaction (a
        server running many sessions would otherwise commit for each of their events)."""
        self.queue_events(session_id, events)

    def _write_pending_events(self, pending: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> None:
        from council.storage.events import append_events

        for session_id, events in pending:
            try:
                append_events(self.db, session_id, events)
            except sqlite3.Error as exc:  # these events are lost, never the session (stored apart)
                log.error("could not store session events", session_id=session_id, error=str(exc))

    def events_after(self, session_id: str, after: int = 0, limit: int = 1000) -> list[tuple[int, str, str]]:
        """(seq, type, JSON) of the session's events numbered above ``after`` (this process's
        events still waiting for their commit included)."""
        if self._pending_events:
            self.flush_calls()
        return self.read_events(session_id, after, limit)

    def read_events(self, session_id: str, after: int = 0, limit: int = 1000) -> list[tuple[int, str, str]]:
        """(seq, type, JSON) of the session's committed events numbered above ``after``."""
        from council.storage.events import events_after

        return events_after(self.db, session_id, after, limit)

    # -- bias records --------------------------------------------------------
    def insert_bias_records(self, records: Iterable[Mapping[str, Any]], *, batch_size: int = 10_000) -> int:
        """Bulk insert, one transaction per call (benchmarks, imports): one prepared INSERT run
        over ``batch_size`` records at a time; the table's CHECK constraint holds the rules."""
        with self.immediate():
            return _write_bias_records(self.db.conn, records, batch_size)

    def _write_session_bias_records(self, records: Sequence[Mapping[str, Any]]) -> None:
        """A session's records, inside its final write's transaction."""
        _write_bias_records(self.db.conn, records, len(records))

    def load_bias_records(
        self, scored: Iterable[Mapping[str, Any]], unscored: Sequence[Mapping[str, Any]] = ()
    ) -> None:
        with self.db.conn:  # commits; a file store's connection autocommits unless a transaction is begun
            if not self.db.conn.in_transaction:
                self.db.conn.execute("BEGIN")
            _write_bias_records(self.db.conn, scored, 10_000)
        self.db.execute(
            f"CREATE TABLE IF NOT EXISTS {SQLITE.unscored_table} "
            "(id INTEGER PRIMARY KEY, session_id, reviewer_id, position, timestamp, council)"
        )
        columns = ("id", "session_id", "reviewer_id", "position", "timestamp", "council")
        self.db.conn.executemany(
            f"INSERT INTO {SQLITE.unscored_table} VALUES (?, ?, ?, ?, ?, ?)",
            [tuple(r[c] for c in columns) for r in unscored],
        )
        self._unscored = True

    def count(self, table: str) -> int:
        return self.db[table].count

    # -- judgments, batches, the leaderboard: the SQLite wording ------------------------
    # (the operations both backends share are in SharedOperations)
    claim_items = queue.claim_sqlite
    claim_within = queue.claim_within_sqlite  # inside a write transaction (judgments.record_and_claim)
    comparisons = count_comparisons
    bias_sums = sum_bias_records

    # -- cost: the SQLite wording (the rest is in SharedOperations) ----------------------
    open_budget = budgets.open_budget
    reserve_budget = budgets.reserve_budget
    cache_reply = call_cache.cache_reply


def _result_rows(result: Any, keep_text: bool) -> dict[str, Any]:
    """A ``SessionResult`` and its ``answers`` and ``reviews`` rows (texts only when
    ``keep_text``): what ``_finish_session`` writes for it."""
    session_id = result.session_id
    answers = [
        {
            "session_id": session_id,
            "member": a.member,
            "model": a.model,
            "text": a.text if keep_text else None,
            "length_chars": a.length_chars,
            "status": a.status,
            "error": a.error,
            "latency_ms": a.latency_ms,
        }
        for a in result.answers
    ]
    reviews = [
        {
            "session_id": session_id,
            "reviewer": r.reviewer,
            "model": r.model,
            "display_order": json.dumps(r.display_order),
            "labels": json.dumps(r.labels),
            "scores": json.dumps(r.scores),
            "ranking": json.dumps(r.ranking),
            "reasoning": json.dumps(r.reasoning) if keep_text else None,
            "valid": int(r.valid),
            "attempts": r.attempts,
            "error": r.error,
        }
        for r in result.reviews
    ]
    return {"result": result, "answers": answers, "reviews": reviews}


def _call_shape(row: dict[str, Any]) -> tuple[tuple[str, ...], bool]:
    """A call-log row's columns, and whether it is a started row (``ok`` NULL)."""
    return _columns_of(tuple(row)), row.get("ok") is None


def _owned_columns(row: dict[str, Any]) -> tuple[str, ...]:
    """A call-log row's columns, ``owner`` among them even where the row has none (NULL)."""
    return _columns_of(tuple(row), owned=True)


@functools.lru_cache(maxsize=64)  # rows come in a few shapes; a busy server writes ~30 a session
def _columns_of(keys: tuple[str, ...], *, owned: bool = False) -> tuple[str, ...]:
    """The call-log columns a row with these keys has, in the table's order (with ``owned``,
    ``owner`` whether it has one or not)."""
    return tuple(c for c in _CALL_COLUMNS if c in keys or (owned and c == "owner"))


@functools.lru_cache(maxsize=64)
def _complete_call(columns: tuple[str, ...], *, started_too: bool = False) -> str:
    """The upsert of a finished call's row: its outcome replaces what is stored, unless that is
    already the same outcome. A final write records its calls again after the call log's group
    commit wrote most of them finished, and an UPDATE that changes nothing still writes a new row
    (on PostgreSQL a new version, with an entry in each of the table's indexes). The comparison
    treats two NULLs as equal, in words both databases take. ``started_too``: the statement also
    takes started rows (``ok`` NULL), which never update a row already there."""
    outcome = [c for c in columns if c in _CALL_OUTCOME]
    same = " AND ".join(f"(calls.{c} = excluded.{c} OR (calls.{c} IS NULL AND excluded.{c} IS NULL))" for c in outcome)
    finished = "excluded.ok IS NOT NULL AND " if started_too else ""
    return f"UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in outcome)} WHERE {finished}({same}) IS NOT TRUE"


def _call_rows(session_id: str, calls: Sequence[CallRecord]) -> list[dict[str, Any]]:
    return [call_row(c, session_id=session_id) for c in calls]


class _Journal:
    """A run's attempts, written as they start (``ok`` NULL: in flight) and as they finish."""

    def __init__(self, store: SQLiteStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id

    def _row(self, record: CallRecord) -> dict[str, Any]:
        return call_row(record, session_id=self.session_id, **self.store._owner())

    def call_started(self, record: CallRecord) -> None:
        self.store.journal_calls([{**self._row(record), "ok": None, "latency_ms": None, "error": None}])

    def call_finished(self, record: CallRecord) -> None:
        self.store.journal_calls([self._row(record)])
