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

import itertools
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from council._util.home import ensure_home
from council._util.logs import get_logger
from council.errors import EnvironmentFailure, UsageError
from council.storage import bias_rows, budgets, ownership, queue
from council.storage.bias_summary_rows import write_summaries
from council.storage.bias_sums import sum_bias_records
from council.storage.checkpoints import WAL_CAP_PAGES, Checkpointer
from council.storage.comparisons import count_comparisons
from council.storage.dialect import SQLITE
from council.storage.migrations import migrations
from council.storage.opening import connect_checked, set_schema_version, write_refused
from council.storage.rate_limits import adjust_sqlite, reserve_sqlite
from council.storage.sql_store import SQLStore
from council.storage.sqlite import Database

log = get_logger("council.storage")
BUSY_TIMEOUT_S = 60.0


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


class SQLiteStore(SQLStore):
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
        # system call per component (~5 % of a busy server's CPU, docs/benchmark-history.md section 20).
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

    def _write_pending_events(self, pending: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> None:
        from council.storage.events import append_events

        for session_id, events in pending:
            try:
                append_events(self.db, session_id, events)
            except sqlite3.Error as exc:  # these events are lost, never the session (stored apart)
                log.error("could not store session events", session_id=session_id, error=str(exc))

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

    # -- judgments, batches, the leaderboard: the SQLite wording ------------------------
    # (the operations both backends share are in SQLStore)
    claim_items = queue.claim_sqlite
    claim_within = queue.claim_within_sqlite  # inside a write transaction (judgments.record_and_claim)
    comparisons = count_comparisons
    bias_sums = sum_bias_records

    # -- cost: the SQLite wording (the rest is in SQLStore) ------------------------------
    open_budget = budgets.open_budget
    reserve_budget = budgets.reserve_budget
