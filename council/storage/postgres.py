"""The store on PostgreSQL (psycopg 3 + psycopg-pool), selected by ``COUNCIL_DATABASE_URL``.

The same tables and the same behaviour as the SQLite store (``council.storage.store``):
a session row is written ``running`` in its own transaction, everything else of it with
its final status in ONE transaction; the call journal writes a call when it starts and
again when it finishes. What differs is ownership: processes on other machines share the
database, so a process's lease is a row in ``leases`` with an expiry that a heartbeat
thread pushes forward; work whose owner's lease has expired is marked ``interrupted`` by
whichever process opens the store next (the database's clock decides, never the hosts').

psycopg is imported here only, and this module only when a PostgreSQL URL is used, so
SQLite users never pay its import (~110 ms).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import socket
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from council.clock import parse_since, utc_now
from council.errors import CouncilFailure, ConfigError, NotFoundError, PrerequisiteError, UsageError
from council.redaction import redact, redact_data
from council.storage import postgres_schema
from council.storage.location import display_url
from council.storage.rate_limits import reserve_postgres
from council.usage import CallJournal, CallRecord

#: A lease outlives its last heartbeat by this long; heartbeats come every third of it.
LEASE_SECONDS = 30.0
CONNECT_TIMEOUT_S = 10
MIN_ID_PREFIX = 8
_CALL_COLUMNS = ("call_id", "session_id", "owner", "stage", "member", "model", "started_at", "latency_ms",
                 "prompt_tokens", "completion_tokens", "cost_usd", "attempt", "ok", "error")  # fmt: skip
_CALL_OUTCOME = frozenset({"latency_ms", "prompt_tokens", "completion_tokens", "cost_usd", "ok", "error"})


# libpq's words for an option value it cannot use (a malformed URL, not a server problem).
_BAD_VALUE = re.compile(r"invalid (\w+ )*value|invalid connection option|invalid URI|invalid percent-encoded")


def _psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise PrerequisiteError(
            "COUNCIL_DATABASE_URL names PostgreSQL but psycopg is not installed "
            "(pip install 'council-orchestrator[postgres]')"
        ) from None
    return psycopg


def _one_line(text: str, url: str) -> str:
    """libpq's message on one line, with no secret from the URL in it."""
    from urllib.parse import unquote, urlsplit

    line = " ".join(str(text).split())
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    for secret in filter(None, {password, unquote(password) if password else None}):
        line = line.replace(secret, "***")
    return redact(line)


def connect(url: str) -> Any:
    """A checked autocommit connection: a malformed URL is a ``ConfigError`` (exit 2), a server
    that cannot be reached or refuses the login a ``CouncilFailure`` (exit 1)."""
    psycopg = _psycopg()
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"COUNCIL_DATABASE_URL: malformed PostgreSQL URL ({_one_line(exc, url)})") from None
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"COUNCIL_DATABASE_URL: malformed PostgreSQL URL ({_one_line(exc, url)})") from None
    except psycopg.OperationalError as exc:
        if _BAD_VALUE.search(str(exc)):  # libpq checks option values only when it connects
            raise ConfigError(f"COUNCIL_DATABASE_URL: malformed PostgreSQL URL ({_one_line(exc, url)})") from None
        raise CouncilFailure(
            f"cannot connect to the PostgreSQL store {display_url(url)}: {_one_line(exc, url)}"
        ) from None


def _value(value: Any) -> Any:
    # What the SQLite store keeps for these types: lists and dicts as JSON text, booleans as 0/1.
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=repr, ensure_ascii=False)
    return value


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def insert_rows(
    conn: Any, table: str, rows: Sequence[dict[str, Any]], *, upsert_on: Sequence[str] = ()
) -> None:
    """INSERTs grouped by column set; ``upsert_on``: replace the row with that key (sqlite-utils'
    ``replace=True``)."""
    groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for row in rows:
        groups.setdefault(tuple(row), []).append(tuple(_value(v) for v in row.values()))
    for columns, values in groups.items():
        sql = (
            f"INSERT INTO {_quote(table)} ({', '.join(map(_quote, columns))}) "
            f"VALUES ({', '.join('%s' for _ in columns)})"
        )
        if upsert_on:
            updates = ", ".join(f"{_quote(c)} = excluded.{_quote(c)}" for c in columns if c not in upsert_on)
            sql += f" ON CONFLICT ({', '.join(map(_quote, upsert_on))}) DO " + (
                f"UPDATE SET {updates}" if updates else "NOTHING"
            )
        with conn.cursor() as cur:
            cur.executemany(sql, values)


class _Lease:
    """This process's lease row, renewed by a daemon thread until the process ends."""

    def __init__(self, store: PostgresStore) -> None:
        self.id = uuid.uuid4().hex
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self._store = store
        self._stop = threading.Event()
        self.renew()
        self._thread = threading.Thread(target=self._beat, name="council-lease", daemon=True)
        self._thread.start()
        atexit.register(self.release)

    def renew(self) -> None:
        with self._store.pool.connection() as conn:
            conn.execute(
                "INSERT INTO leases (id, pid, host, expires_at) VALUES (%s, %s, %s, now() + make_interval(secs => %s))"
                " ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at",
                [self.id, self.pid, self.host, LEASE_SECONDS],
            )

    def _beat(self) -> None:
        while not self._stop.wait(LEASE_SECONDS / 3):
            try:
                self.renew()
            except Exception:  # the database is away: the next beat tries again
                pass

    def release(self) -> None:
        """A clean exit: the lease ends now (its unfinished work is then found at once)."""
        self._stop.set()
        try:
            with self._store.pool.connection() as conn:
                conn.execute("DELETE FROM leases WHERE id = %s", [self.id])
        except Exception:
            pass


class PostgresStore:
    """All reads and writes of a PostgreSQL store go through here."""

    kind = "postgresql"

    def __init__(self, url: str, pool: Any) -> None:
        self.url = url
        self.path = None
        self.pool = pool
        self._lease: _Lease | None = None
        self._lease_lock = threading.Lock()

    # -- opening -------------------------------------------------------------
    @classmethod
    def open(cls, url: str) -> PostgresStore:
        """Connect (one clear line if that fails), migrate under the advisory lock, recover
        the work of processes whose lease has expired."""
        conn = connect(url)
        try:
            if postgres_schema.pending(conn):
                postgres_schema.migrate(conn)
        finally:
            conn.close()
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        pool = ConnectionPool(
            url,
            min_size=1,
            max_size=8,
            kwargs={"autocommit": True, "row_factory": dict_row, "connect_timeout": CONNECT_TIMEOUT_S},
            open=True,
            name="council",
        )
        store = cls(url, pool)
        store.recover_interrupted()
        return store

    def close(self) -> None:
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        self.pool.close()

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One connection in one transaction (committed at the end, rolled back on error)."""
        with self.pool.connection() as conn, conn.transaction():
            yield conn

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        with self.pool.connection() as conn:
            return conn.execute(sql, list(params)).fetchall()

    # -- ownership -----------------------------------------------------------
    def lease(self) -> _Lease:
        with self._lease_lock:
            if self._lease is None or self._lease.pid != os.getpid():
                self._lease = _Lease(self)
            return self._lease

    def _owner(self) -> dict[str, Any]:
        lease = self.lease()
        return {"owner": lease.id, "owner_pid": lease.pid, "owner_host": lease.host}

    def recover_interrupted(self) -> list[str]:
        """Mark the sessions and calls whose owner's lease has expired (or is gone)
        ``interrupted``, keeping everything they wrote. Returns the sessions marked."""
        mine = self._lease.id if self._lease is not None else ""
        dead = """owner IS NOT NULL AND owner <> %(mine)s
                  AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.id = owner AND l.expires_at > now())"""
        with self.transaction() as conn:
            sessions = conn.execute(
                "UPDATE sessions SET status = 'interrupted', finished_at = %(now)s, error = 'interrupted: the process'"
                " || ' running it (pid ' || coalesce(owner_pid::text, '?') || ' on ' || coalesce(owner_host, '?')"
                f" || ') ended before it finished' WHERE status = 'running' AND {dead} RETURNING id",
                {"now": utc_now(), "mine": mine},
            ).fetchall()
            conn.execute(
                "UPDATE calls SET ok = 0, error = 'interrupted: the process ended while this call was in flight'"
                f" WHERE ok IS NULL AND {dead}",
                {"mine": mine},
            )
            conn.execute("DELETE FROM leases WHERE expires_at < now() - interval '1 day'")
        return sorted(row["id"] for row in sessions)

    @contextmanager
    def batch_lock(self, batch_id: str) -> Iterator[None]:
        """Run the batch as its only runner, on any machine: a session-level advisory lock,
        held by one connection for the run (the server frees it when that process dies)."""
        with self.pool.connection() as conn:
            key = "batch:" + batch_id
            got = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0)) AS ok", [key]).fetchone()
            if not got["ok"]:
                raise UsageError(f"batch {batch_id} is being run by another process; wait for it to finish")
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", [key])

    # -- shared limits ------------------------------------------------------------
    def reserve_rate(self, key: str, increment: float, tolerance: float = 0.0) -> float:
        """Seconds to wait before a call under the budget ``key`` (council.storage.rate_limits)."""
        with self.pool.connection() as conn:
            return reserve_postgres(conn, key, increment, tolerance)

    # -- the call log ---------------------------------------------------------
    def journal(self, session_id: str) -> CallJournal:
        return _Journal(self, session_id)

    def write_calls(self, rows: Sequence[dict[str, Any]], conn: Any | None = None) -> None:
        """Insert call-log rows, or complete the rows already written for them (by ``call_id``)."""
        if conn is None:
            with self.transaction() as own:
                self.write_calls(rows, own)
            return
        for row in rows:
            row = {**row, "error": redact(row["error"]) if row.get("error") else row.get("error")}
            columns = [c for c in _CALL_COLUMNS if c in row]
            updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c in _CALL_OUTCOME)
            conn.execute(
                f"INSERT INTO calls ({', '.join(columns)}) VALUES ({', '.join('%s' for _ in columns)}) "
                f"ON CONFLICT (call_id) DO UPDATE SET {updates}",
                [_value(row[c]) for c in columns],
            )

    # -- sessions ------------------------------------------------------------
    def begin_session(self, row: dict[str, Any]) -> None:
        row = {"status": "running", "created_at": utc_now(), **self._owner(), **row}
        with self.transaction() as conn:
            insert_rows(conn, "sessions", [row])

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
        """The whole session and its final status in one transaction (as the SQLite store)."""
        with self.transaction() as conn:
            if answers:
                insert_rows(conn, "answers", _redacted(answers, "error"), upsert_on=postgres_schema.PRIMARY_KEYS["answers"])
            if reviews:
                insert_rows(conn, "reviews", _redacted(reviews, "error"), upsert_on=postgres_schema.PRIMARY_KEYS["reviews"])
            if bias_records:
                insert_rows(conn, "bias_records", list(bias_records))
            if calls:
                self.write_calls(calls, conn)
            conn.execute(
                "UPDATE sessions SET status = %s, finished_at = %s, result = %s, error = %s WHERE id = %s",
                [
                    status,
                    utc_now(),
                    json.dumps(redact_data(result)) if result is not None else None,
                    redact(error) if error else error,
                    session_id,
                ],
            )

    def list_sessions(
        self, *, limit: int = 20, since: str | None = None, council: str | None = None
    ) -> list[dict[str, Any]]:
        where, params = [], []
        if since:
            where.append("created_at >= %s")
            params.append(parse_since(since))
        if council:
            where.append("council = %s")
            params.append(council)
        sql = "SELECT id, created_at, finished_at, status, kind, council, question, members, error FROM sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        return self._query(sql + " ORDER BY created_at DESC LIMIT %s", [*params, limit])

    def get_session(self, session_id: str) -> dict[str, Any]:
        """By id, or by a literal prefix of at least ``MIN_ID_PREFIX`` characters one session has."""
        if "\x00" in session_id:
            raise NotFoundError(f"no session with id {session_id!r}")
        rows = self._query("SELECT * FROM sessions WHERE id = %s", [session_id])
        if not rows and len(session_id) >= MIN_ID_PREFIX:
            # left(): the prefix is text, never a LIKE pattern.
            rows = self._query(
                "SELECT * FROM sessions WHERE left(id, %s) = %s LIMIT 2", [len(session_id), session_id]
            )
        if len(rows) != 1:
            hint = f" (give the id or at least {MIN_ID_PREFIX} characters of it)"
            raise NotFoundError(f"no session with id {session_id!r}{'' if len(session_id) >= MIN_ID_PREFIX else hint}")
        session = rows[0]
        sid = session["id"]
        # The order SQLite returns them in (its primary-key index).
        session["answers"] = self._query("SELECT * FROM answers WHERE session_id = %s ORDER BY member", [sid])
        session["reviews"] = self._query("SELECT * FROM reviews WHERE session_id = %s ORDER BY reviewer", [sid])
        return session

    def session_calls(self, session_id: str) -> list[dict[str, Any]]:
        return self._query("SELECT * FROM calls WHERE session_id = %s ORDER BY id", [session_id])

    def iter_sessions(self, *, since: str | None = None) -> Iterator[dict[str, Any]]:
        sql = "SELECT * FROM sessions"
        params: list[Any] = []
        if since:
            sql += " WHERE created_at >= %s"
            params.append(parse_since(since))
        yield from self._query(sql + " ORDER BY created_at", params)

    def has_query_hashes(self) -> bool:
        return bool(self._query("SELECT 1 FROM sessions WHERE query_hash IS NOT NULL LIMIT 1"))

    # -- bias records --------------------------------------------------------
    def insert_bias_records(self, records: Iterable[dict[str, Any]], *, batch_size: int = 10_000) -> int:
        """Bulk insert, one transaction per call."""
        rows = list(records)
        with self.transaction() as conn:
            for start in range(0, len(rows), batch_size):
                insert_rows(conn, "bias_records", rows[start : start + batch_size])
        return len(rows)

    def count(self, table: str) -> int:
        return int(self._query(f"SELECT count(*) AS n FROM {_quote(table)}")[0]["n"])


def _redacted(rows: Sequence[dict[str, Any]], *fields: str) -> list[dict[str, Any]]:
    return [{**row, **{f: redact(row[f]) for f in fields if row.get(f)}} for row in rows]


class _Journal:
    """A run's attempts, written as they start (``ok`` NULL: in flight) and as they finish."""

    def __init__(self, store: PostgresStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id

    def _row(self, record: CallRecord) -> dict[str, Any]:
        owner = self.store._owner()
        return {"session_id": self.session_id, "owner": owner["owner"], **record.model_dump()}

    def call_started(self, record: CallRecord) -> None:
        self.store.write_calls([{**self._row(record), "ok": None, "latency_ms": None, "error": None}])

    def call_finished(self, record: CallRecord) -> None:
        self.store.write_calls([self._row(record)])
