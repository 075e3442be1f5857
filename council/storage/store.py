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

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from council.clock import utc_now
from council.errors import NotFoundError
from council.home import ensure_home
from council.storage.migrations import migrations
from council.storage.sqlite import Database

BUSY_TIMEOUT_S = 60.0


def _connect(path: Path | str) -> sqlite3.Connection:
    # isolation_level=None: we issue BEGIN ourselves (sqlite-utils' atomic()
    # nests as savepoints inside our BEGIN IMMEDIATE).
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA synchronous = NORMAL")  # safe with WAL: durable at checkpoint, never corrupt
    return conn


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


def _column_value(value: Any) -> Any:
    # What sqlite-utils stores for these types (lists and dicts as JSON text).
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=repr, ensure_ascii=False)
    return value


def insert_rows(conn: sqlite3.Connection, table: str, rows: Sequence[dict[str, Any]]) -> None:
    """Plain INSERTs into an existing table, one statement per set of columns.

    sqlite-utils' ``insert`` re-reads the table's schema on every call (several PRAGMA queries),
    which made up most of a judged batch item's write; rows written often go through here.
    """
    groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for row in rows:
        groups.setdefault(tuple(row), []).append(tuple(_column_value(v) for v in row.values()))
    for columns, values in groups.items():
        names = ", ".join('"' + c.replace('"', '""') + '"' for c in columns)
        quoted = '"' + table.replace('"', '""') + '"'
        conn.executemany(f"INSERT INTO {quoted} ({names}) VALUES ({', '.join('?' * len(columns))})", values)


class Store:
    """All reads and writes of council.db go through here."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- opening -------------------------------------------------------------
    @classmethod
    def open(cls, path: Path | str | None = None) -> Store:
        """Open (creating and migrating if needed) ``path`` or ``$COUNCIL_HOME/council.db``."""
        if path is None:
            path = ensure_home() / "council.db"
        db = Database(_connect(path))
        _enable_wal(db)
        store = cls(db)
        store.migrate()
        return store

    @classmethod
    def memory(cls) -> Store:
        store = cls(Database(memory=True))
        store.migrate()
        return store

    def migrate(self) -> None:
        if not migrations.pending(self.db):
            return
        # Several processes may open a fresh database at once: take the write
        # lock first, then re-check what is pending inside it.
        with self.immediate():
            migrations.apply(self.db)

    def close(self) -> None:
        self.db.conn.close()

    @contextmanager
    def immediate(self) -> Iterator[Database]:
        """A write transaction that takes the lock up front (no deferred-upgrade failures)."""
        conn = self.db.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        else:
            conn.execute("COMMIT")

    # -- sessions ------------------------------------------------------------
    def begin_session(self, row: dict[str, Any]) -> None:
        row = {"status": "running", "created_at": utc_now(), **row}
        with self.immediate():
            self.db["sessions"].insert(row)

    def finish_session(
        self,
        session_id: str,
        *,
        status: str,
        result: dict[str, Any] | None,
        error: str | None = None,
        answers: Sequence[dict[str, Any]] = (),
        reviews: Sequence[dict[str, Any]] = (),
        bias_records: Sequence[dict[str, Any]] = (),
        calls: Sequence[dict[str, Any]] = (),
    ) -> None:
        """Write the whole session and its final status in one transaction."""
        with self.immediate():
            if answers:
                self.db["answers"].insert_all(answers, replace=True)
            if reviews:
                self.db["reviews"].insert_all(reviews, replace=True)
            if bias_records:
                self.db["bias_records"].insert_all(bias_records)
            if calls:
                self.db["calls"].insert_all(calls)
            self.db["sessions"].update(
                session_id,
                {
                    "status": status,
                    "finished_at": utc_now(),
                    "result": json.dumps(result) if result is not None else None,
                    "error": error,
                },
            )

    def list_sessions(
        self, *, limit: int = 20, since: str | None = None, council: str | None = None
    ) -> list[dict[str, Any]]:
        where, params = [], []
        if since:
            where.append("created_at >= ?")
            params.append(since)
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
        rows = list(self.db.query("select * from sessions where id = ?", [session_id]))
        if not rows:
            # Allow an unambiguous id prefix, as people copy short ids from the table.
            rows = list(
                self.db.query("select * from sessions where id like ? limit 2", [session_id + "%"])
            )
            if len(rows) != 1:
                raise NotFoundError(f"no session with id {session_id!r}")
        session = rows[0]
        sid = session["id"]
        session["answers"] = list(self.db.query("select * from answers where session_id = ?", [sid]))
        session["reviews"] = list(self.db.query("select * from reviews where session_id = ?", [sid]))
        return session

    def iter_sessions(self, *, since: str | None = None) -> Iterator[dict[str, Any]]:
        sql = "select * from sessions"
        params: list[Any] = []
        if since:
            sql += " where created_at >= ?"
            params.append(since)
        yield from self.db.query(sql + " order by created_at", params)

    # -- bias records --------------------------------------------------------
    def insert_bias_records(self, records: Iterable[dict[str, Any]], *, batch_size: int = 10_000) -> int:
        """Bulk insert in batches, one transaction per call (benchmarks, imports)."""
        with self.immediate():
            before = self.db["bias_records"].count
            self.db["bias_records"].insert_all(records, batch_size=batch_size)
            return self.db["bias_records"].count - before

    def count(self, table: str) -> int:
        return self.db[table].count
