"""The store on PostgreSQL (psycopg 3 + psycopg-pool), selected by ``COUNCIL_DATABASE_URL``.

The same tables, operations and statements as the SQLite store (council.storage.sql_store):
a session row is written ``running`` in its own transaction, everything else of it with
its final status in ONE transaction; the call journal writes a call when it starts and
again when it finishes. What differs is ownership: processes on other machines share the
database, so a process's lease is a row in ``leases`` with an expiry that a heartbeat
thread pushes forward; work whose owner's lease has expired is marked ``interrupted`` by
whichever process opens the store next (the database's clock decides, never the hosts').

psycopg is imported here and in the connection adapter (council.storage.postgres_connection)
only, and these only when a PostgreSQL URL is used, so SQLite users never pay its import.

PostgreSQL's text columns cannot hold U+0000, which SQLite's can. Council refuses it where text
comes in (council.untrusted.inputs) and replaces it in what providers send (council.providers.client), so
neither store is given one; a text that still holds one (a store written by an older council,
copied in) is stored here with U+FFFD in its place, and so is a value a query is given
(council.storage.postgres_connection): one bad value never fails a write or a read.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from council._util.clock import utc_now
from council._util.logs import get_logger
from council.errors import ConfigError, CouncilFailure, StoreRefused, StoreWentAway, TransactionConflict
from council.storage import bias_rows, bias_summaries, ownership, postgres_schema, queue
from council.storage.bias_sums import sum_bias_records
from council.storage.data import BiasQuery, BiasSums, ComparisonData
from council.storage.dialect import POSTGRES
from council.storage.location import display_url
from council.storage.postgres_connection import (
    PooledConnection,
    PostgresConnection,
    Statements,
    pipelined_transaction,
    psycopg_module,
    quote,
    stored_value,
    text_cursor,
)
from council.storage.rate_limits import adjust_postgres, reserve_postgres
from council.storage.sql_store import SQLStore
from council.untrusted.redaction import redact

log = get_logger("council.storage")

CONNECT_TIMEOUT_S = 10
#: How long operations wait for a server found gone to come back (a restart, a failover), counted
#: from when it was found gone: a session finishing meanwhile is written once it is back.
OUTAGE_GRACE_S = 10.0
#: How long a call waits for a connection after that, while the server is still away (see connection());
#: the calls that come within as long after one such wait failed are told at once.
AWAY_TIMEOUT_S = 1.0
#: A pooled connection unused this long is tested (one empty query) before it is handed out: a
#: restart of the server while it sat idle has closed it, unseen. A busy store's are not.
IDLE_CHECK_S = 1.0
#: psycopg_pool tries a failed connection again after 1, 2, 4 ... s, for this long; then it waits
#: until a call needs a connection, which starts a new attempt at once. With its default (5
#: minutes) a server back after a long outage was found only at the next of those attempts: 17 s
#: after it was back, after 40 s away.
RECONNECT_TIMEOUT_S = 3.0


# SQLSTATEs of a server going away or not yet back: admin_shutdown (a restart, fast or smart),
# crash_shutdown, cannot_connect_now (starting up or recovering). Not the rest of class 57: 57014
# is a statement cancelled by its timeout, with the server there.
_SERVER_GOING = frozenset({"57P01", "57P02", "57P03"})

# libpq's words for an option value it cannot use (a malformed URL, not a server problem).
_BAD_VALUE = re.compile(r"invalid (\w+ )*value|invalid connection option|invalid URI|invalid percent-encoded")


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
    psycopg = psycopg_module()
    from psycopg.conninfo import conninfo_to_dict

    try:
        conninfo_to_dict(url)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"COUNCIL_DATABASE_URL: malformed PostgreSQL URL ({_one_line(exc, url)})") from None
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, cursor_factory=text_cursor())
    except psycopg.ProgrammingError as exc:
        raise ConfigError(f"COUNCIL_DATABASE_URL: malformed PostgreSQL URL ({_one_line(exc, url)})") from None
    except psycopg.OperationalError as exc:
        if _BAD_VALUE.search(str(exc)):  # libpq checks option values only when it connects
            raise ConfigError(f"COUNCIL_DATABASE_URL: malformed PostgreSQL URL ({_one_line(exc, url)})") from None
        raise CouncilFailure(
            f"cannot connect to the PostgreSQL store {display_url(url)}: {_one_line(exc, url)}"
        ) from None


def _copy_bias_records(conn: Any, records: Iterable[Mapping[str, Any]], batch_size: int) -> int:
    """``COPY`` the records into ``bias_records`` (booleans as 0/1, as the SQLite store keeps them),
    through a staging table from which the report's summaries of their sessions are then
    computed (council.storage.bias_summaries)."""
    from psycopg.adapt import Dumper

    class _BoolAsInt(Dumper):
        def dump(self, obj: bool) -> bytes:
            return b"1" if obj else b"0"

    written = 0
    it = iter(records)
    given: tuple[str, ...] = ()
    _stage(conn)
    with conn.cursor() as cur:
        cur.adapters.register_dumper(bool, _BoolAsInt)
        while chunk := list(itertools.islice(it, max(1, batch_size))):
            columns, rows = bias_rows.record_rows(chunk)
            if given and columns != given:  # some records carry ids, the earlier ones did not
                _move_staged(conn, given)
            given = columns
            with cur.copy(f"COPY {_STAGING} ({', '.join(map(quote, columns))}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            written += len(rows)
    if given:
        _move_staged(conn, given)
    return written


def _write_staged_rows(conn: Any, records: Sequence[Mapping[str, Any]]) -> None:
    """A few records (a session's), by one INSERT each: COPY cannot run in a pipeline."""
    if not records:
        return
    columns, rows = bias_rows.record_rows(records)
    _stage(conn)
    marks = ", ".join("%s" for _ in columns)
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {_STAGING} ({', '.join(map(quote, columns))}) VALUES ({marks})",
            [tuple(map(stored_value, row)) for row in rows],
        )
    # The last rows staged in the session's transaction: its commit empties the table.
    _move_staged(conn, columns, empty=False)


# This connection's own table (a temporary one): the rows of one write before they are
# stored, so that the summaries are computed from exactly them, whatever other writers commit
# meanwhile. Each commit empties it (in place; a TRUNCATE gives the table a new file and
# catalog row, ~0.45 ms of a session's write, docs/benchmark-history.md section 36).
_STAGING = "bias_records_staged"


def _stage(conn: Any) -> None:
    # Its columns without their constraints (the id may be left for bias_records to number).
    conn.execute(
        f"CREATE TEMP TABLE IF NOT EXISTS {_STAGING} ON COMMIT DELETE ROWS AS SELECT * FROM bias_records WITH NO DATA"
    )


def _move_staged(conn: Any, columns: Sequence[str], *, empty: bool = True) -> None:
    """The staged rows into ``bias_records`` and the summaries; ``empty``: the table emptied
    for the next chunk of the same transaction."""
    names = ", ".join(map(quote, columns))
    conn.execute(f"INSERT INTO bias_records ({names}) SELECT {names} FROM {_STAGING}")
    bias_summaries.fold_staged(conn, _STAGING)
    if empty:
        conn.execute(f"TRUNCATE {_STAGING}")


# Stores not closed by their opener are closed at exit, never by the garbage collector
# (a pool collected in one of its own threads cannot join it).
_OPEN_STORES: set[PostgresStore] = set()


@atexit.register
def _close_open_stores() -> None:
    for store in list(_OPEN_STORES):
        store.close()


class _Staleness:
    """Which pooled connections may have outlived their server: those last known to work before
    it was last found gone, or longer ago than IDLE_CHECK_S (a restart meanwhile, unseen). The
    pool tests those (one empty query) as it hands them out and replaces one that fails; the
    others, every connection of a busy store, are handed out untested (a round trip saved)."""

    def __init__(self) -> None:
        self.worked: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
        self.gone_at = float("-inf")

    def worked_now(self, conn: Any) -> None:
        """The pool's ``configure`` (a new connection) and ``reset`` (one given back, not broken)."""
        self.worked[conn] = time.monotonic()

    def check(self, conn: Any) -> None:
        last = self.worked.get(conn, float("-inf"))
        if last > self.gone_at and time.monotonic() - last < IDLE_CHECK_S:
            return
        from psycopg_pool import ConnectionPool

        ConnectionPool.check_connection(conn)  # raises for a broken one: the pool takes another
        self.worked_now(conn)


class PostgresStore(SQLStore):
    """All reads and writes of a PostgreSQL store go through here."""

    kind = "postgresql"
    dialect = POSTGRES
    #: Operations may run on several threads at once (a connection pool): council.judging.worker
    #: calls them off its event loop.
    threadsafe = True

    #: OUTAGE_GRACE_S, for this store.
    outage_grace_s = OUTAGE_GRACE_S

    def __init__(self, url: str, pool: Any, staleness: _Staleness | None = None) -> None:
        self.url = url
        self.path = None
        self.pool = pool
        self._staleness = staleness or _Staleness()
        self.away_since: float | None = None  # when the server was found gone (no operation has succeeded since)
        self._wait_failed_at: float | None = None  # when a wait for it after the grace last failed
        self._lease: ownership.Lease | None = None
        self._lease_lock = threading.Lock()
        self._sweeping = False  # the lease's heartbeat recovers dead processes' work (recover_while_open)
        self._local = threading.local()
        self._unscored = False  # records without a score are only ever loaded into SQLite
        self._init_group_commit()  # call-log rows not yet committed: written by the next transaction

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

        # The pool's own reconnection warnings would print bare on stderr (logging's last resort)
        # when the server goes away; the operation that fails says it once, in one line.
        logging.getLogger("psycopg").addHandler(logging.NullHandler())

        staleness = _Staleness()
        pool = ConnectionPool(
            url,
            min_size=1,
            max_size=8,
            kwargs={
                "autocommit": True,
                "row_factory": dict_row,
                "connect_timeout": CONNECT_TIMEOUT_S,
                "cursor_factory": text_cursor(),
            },
            open=True,
            name="council",
            # A stopped server fails a waiting call after this long, not the pool's default 30 s.
            timeout=CONNECT_TIMEOUT_S,
            reconnect_timeout=RECONNECT_TIMEOUT_S,
            configure=staleness.worked_now,
            reset=staleness.worked_now,
            check=staleness.check,
        )
        store = cls(url, pool, staleness)
        _OPEN_STORES.add(store)
        store.recover_interrupted()
        return store

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection; the server going away (unreachable, restarted, the pool
        timing out) is one ``CouncilFailure`` line, and the transaction in progress is rolled
        back by the server: nothing half-written. A row or value the database refuses is a
        ``StoreRefused``."""
        psycopg = psycopg_module()
        from psycopg_pool import PoolTimeout

        # Once the server is found gone, the calls made in the next OUTAGE_GRACE_S wait for it to
        # come back (the pool reconnects by itself, and tests the connections it held before it
        # hands them out again, as it does those idle since IDLE_CHECK_S): a restart of a few
        # seconds loses no session. After that a call waits AWAY_TIMEOUT_S, not the whole
        # CONNECT_TIMEOUT_S (a worker meeting a stopped server took 30-60 s to say so, one wait
        # after another), and the calls right behind one whose wait failed are told at once (a
        # server's queued writes were reported one a second).
        wait = self._connection_wait()
        if wait == 0.0:
            raise CouncilFailure(
                f"the PostgreSQL store {display_url(self.url)} failed: the server did not answer a moment ago"
            )
        try:
            with self.pool.connection(timeout=wait) as conn:
                yield conn
            self.away_since = self._wait_failed_at = None
        except (psycopg.IntegrityError, psycopg.DataError) as exc:
            # A row or value the database refused (the data written, not the server failing),
            # found by a statement, a pipeline's sync or the COMMIT: council's error, one line.
            raise StoreRefused(_one_line(exc, self.url)) from exc
        except (psycopg.OperationalError, PoolTimeout) as exc:
            gone = self._gone(exc)
            if gone:
                self._staleness.gone_at = time.monotonic()
                if self.away_since is None:
                    self.away_since = self._staleness.gone_at
                elif wait == AWAY_TIMEOUT_S:
                    self._wait_failed_at = self._staleness.gone_at
            # SQLSTATE class 40, transaction rollback: a deadlock broken, a serialization conflict.
            rolled_back = (getattr(exc, "sqlstate", None) or "").startswith("40")
            failure = TransactionConflict if rolled_back else StoreWentAway if gone else CouncilFailure
            raise failure(f"the PostgreSQL store {display_url(self.url)} failed: {_one_line(exc, self.url)}") from None

    @property
    def away(self) -> bool:
        """The server was found gone and no operation has succeeded since."""
        return self.away_since is not None

    def _connection_wait(self) -> float | None:
        """How long to wait for a pooled connection: the pool's own timeout; while the server is
        away the rest of the outage's grace, AWAY_TIMEOUT_S at least; 0 (not at all) within
        AWAY_TIMEOUT_S of a wait that failed after the grace, unless the pool has a connection
        back at hand."""
        if self.away_since is None:
            return None
        now = time.monotonic()
        failed = self._wait_failed_at
        if failed is not None and now - failed < AWAY_TIMEOUT_S and not self.pool.get_stats().get("pool_available"):
            return 0.0
        return max(AWAY_TIMEOUT_S, self.away_since + self.outage_grace_s - now)

    def _gone(self, exc: Exception) -> bool:
        """Whether ``exc`` says the server is away: a connection that failed or broke (no SQLSTATE:
        a query the server refused, a deadlock or a cancelled statement has one), the server
        shutting down or starting (``_SERVER_GOING``: a restart ends each session with one), or
        a wait for a connection that timed out with none left in the pool (not one that found
        all busy)."""
        if isinstance(exc, psycopg_module().OperationalError):
            sqlstate = getattr(exc, "sqlstate", None)
            return sqlstate is None or sqlstate in _SERVER_GOING
        return self.pool.get_stats().get("pool_size", 0) == 0

    def close(self) -> None:
        try:
            self.flush_calls()
        except CouncilFailure as exc:  # the server is away: the rows are lost with it, as a direct write's
            log.warning("could not write the call log", error=str(exc))
        self._stop_flushing()
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        self.pool.close()
        _OPEN_STORES.discard(self)

    @contextmanager
    def transaction(self) -> Iterator[Any]:
        """One connection in one transaction (committed at the end, rolled back on error);
        nested calls in the same thread join it."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        with self._begin() as conn:
            yield conn

    @contextmanager
    def _begin(self, *, pipelined: bool = False, carry: bool = True) -> Iterator[Any]:
        # Call-log rows and events waiting for a group commit go in it (council.storage.group_commit):
        # the events first, the rows with the transaction's own call rows (``write_calls``), else
        # last. ``pipelined``: BEGIN, the statements and COMMIT go to the server in one pipeline,
        # one round trip (and one more for each read inside, as the bias summaries' check).
        with self.connection() as conn, self._carry_calls(carry) as carried:
            with pipelined_transaction(conn) if pipelined else conn.transaction():
                self._local.conn, self._local.carried = conn, carried
                try:
                    carried.write_events()
                    yield conn
                    carried.write_rows()  # those no write of the transaction's own call rows took
                finally:
                    self._local.conn = self._local.carried = None

    def _write_transaction(self, *, carry: bool = True) -> Any:
        """A write transaction, pipelined (a group commit, a session's start and final write: only
        the final write reads, once)."""
        return self._begin(pipelined=True, carry=carry)

    def _in_transaction(self) -> bool:
        return getattr(self._local, "conn", None) is not None

    @contextmanager
    def immediate(self) -> Iterator[PostgresConnection]:
        """A write transaction, seen as the SQLite store's (council.storage.judgments uses it)."""
        with self.transaction() as conn:
            yield PostgresConnection(conn)

    @property
    def db(self) -> Any:
        """Reads for the shared statement modules: the current transaction's, else a pooled one's."""
        current = getattr(self._local, "conn", None)
        return PostgresConnection(current) if current is not None else PooledConnection(self)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        current = getattr(self._local, "conn", None)
        if current is not None:
            return current.execute(sql, list(params)).fetchall()
        with self.connection() as conn:
            return conn.execute(sql, list(params)).fetchall()

    # -- ownership -----------------------------------------------------------
    def lease(self) -> ownership.Lease:
        """This store's lease (council.storage.ownership), taken on first use."""
        with self._lease_lock:
            if self._lease is None or self._lease.pid != os.getpid():
                self._lease = ownership.Lease(self._run_lease, ownership.POSTGRES_CLOCK)
            if self._sweeping and self._lease.sweep is None:
                self._lease.sweep = self.recover_interrupted
            return self._lease

    def _run_lease(self, sql: str, params: Sequence[Any]) -> None:
        with self.connection() as conn:
            Statements(conn).execute(sql, params)

    def _owner(self) -> dict[str, Any]:
        lease = self.lease()
        return {"owner": lease.id, "owner_pid": lease.pid, "owner_host": lease.host}

    def recover_interrupted(self) -> list[str]:
        """Mark the sessions and calls whose owner's lease has expired (or is gone), or whose
        process on this machine has ended, ``interrupted``, keeping everything they wrote
        (council.storage.ownership)."""
        mine = [self._lease.id] if self._lease is not None else []
        return ownership.recover_interrupted(self, ownership.POSTGRES_CLOCK, mine)

    def recover_while_open(self) -> None:
        """Recover dead processes' work at each heartbeat of this store's lease while it is open
        (servers and workers run for long)."""
        self._sweeping = True
        self.lease()

    def clock(self) -> float:
        """The database's clock (never the hosts'): leases of workers on many machines compare."""
        return float(self._query("SELECT extract(epoch from clock_timestamp()) AS now")[0]["now"])

    # -- shared limits ------------------------------------------------------------
    def reserve_rate(self, key: str, increment: float, tolerance: float = 0.0) -> float:
        """Seconds to wait before a call under the budget ``key`` (council.storage.rate_limits)."""
        with self.connection() as conn:
            return reserve_postgres(conn, key, increment, tolerance)

    def adjust_rate(self, key: str, delta: float) -> None:
        """Settle a reservation under ``key`` ``delta`` seconds bigger (or smaller, if negative)."""
        with self.connection() as conn:
            adjust_postgres(conn, key, delta)

    # -- spend caps (docs/methods.md, "Spend caps") ------------------------------
    # The budget row is locked (FOR UPDATE) for the sum and the reservation: processes on
    # any machine can never together reserve past the cap. A reservation whose owner's lease
    # has expired is moved into the spent amount when the budget is next opened.
    def open_budget(self, key: str, *, cap_usd: float | None, spent_usd: float = 0.0) -> float | None:
        """As ``council.storage.budgets.open_budget``."""
        now = utc_now()
        with self.transaction() as conn:
            row = conn.execute("SELECT cap_usd FROM budgets WHERE key = %s FOR UPDATE", [key]).fetchone()
            lost = conn.execute(
                "DELETE FROM budget_reservations r WHERE key = %s AND owner IS NOT NULL AND"
                f" {ownership.dead('r.owner', ownership.POSTGRES_CLOCK)} RETURNING amount_usd",
                [key],
            ).fetchall()
            if lost:
                conn.execute(
                    "UPDATE budgets SET spent_usd = spent_usd + %s WHERE key = %s",
                    [sum(r["amount_usd"] for r in lost), key],
                )
            if cap_usd is None:
                return None if row is None else float(row["cap_usd"])
            conn.execute(
                "INSERT INTO budgets (key, cap_usd, spent_usd, updated_at) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (key) DO UPDATE SET cap_usd = excluded.cap_usd, updated_at = excluded.updated_at",
                [key, cap_usd, spent_usd, now],
            )
        return cap_usd

    def reserve_budget(self, key: str, amount_usd: float) -> tuple[int | None, float, float]:
        """As ``council.storage.budgets.reserve_budget``, in one round trip: the budget row is
        locked, and the reservation inserted only if it fits, by statements sent together in
        one pipelined transaction. The lock is held while the server runs them, not across four
        round trips, and the call-log rows a transaction of this store carries are not written
        under it (docs/benchmark-history.md, section 40). Read committed: the INSERT's snapshot is taken
        once the lock is held, so it sums every reservation committed before."""
        owner = self._owner()["owner"]
        with self.connection() as conn:
            with pipelined_transaction(conn):
                locked = conn.execute("SELECT cap_usd, spent_usd FROM budgets WHERE key = %s FOR UPDATE", [key])
                made = conn.execute(
                    "INSERT INTO budget_reservations (key, amount_usd, owner, created_at)"
                    " SELECT b.key, %(amount)s, %(owner)s, %(now)s FROM budgets b WHERE b.key = %(key)s"
                    " AND b.spent_usd + (SELECT coalesce(sum(amount_usd), 0) FROM budget_reservations"
                    "  WHERE key = %(key)s) + %(amount)s <= b.cap_usd RETURNING id",
                    {"key": key, "amount": amount_usd, "owner": owner, "now": utc_now()},
                )
            row, reservation = locked.fetchone(), made.fetchone()
        token = None if reservation is None else int(reservation["id"])
        return token, float(row["spent_usd"]), float(row["cap_usd"])

    def settle_budget(self, key: str, reservation: int, actual_usd: float) -> None:
        """As ``council.storage.budgets.settle_budget``: one statement, its own transaction (no
        call-log rows carried)."""
        with self.connection() as conn:
            conn.execute(
                "WITH settled AS (DELETE FROM budget_reservations WHERE id = %(id)s)"
                " UPDATE budgets SET spent_usd = spent_usd + %(actual)s, updated_at = %(now)s WHERE key = %(key)s",
                {"id": reservation, "actual": actual_usd, "now": utc_now(), "key": key},
            )

    # -- the call log ---------------------------------------------------------
    def write_calls(self, rows: Sequence[dict[str, Any]]) -> None:
        """As every store's, with the rows the transaction carries (``_begin``): its call rows are
        written in one pass, in the order of their call ids, as every transaction here writes its
        own. Two transactions that write some of the same call rows (a group commit and a batch's
        record; two records that carry each other's items' rows) then never deadlock: the later
        waits for the earlier's first shared row, holding none the earlier wants."""
        carried = getattr(self._local, "carried", None)
        if carried is not None:
            rows = [*carried.take_rows(), *rows]
        super().write_calls(rows)

    def _write_pending_events(self, pending: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> None:
        """Inside the carrying transaction, under a savepoint: a failed statement aborts a
        PostgreSQL transaction, and events that cannot be stored are lost, never the write that
        carries them. One savepoint for them all; if it fails, one per session, so only the
        session whose events were refused loses them (as on SQLite)."""
        import psycopg

        from council.storage.events import append_events

        conn = self._local.conn
        try:
            with conn.transaction():
                for session_id, events in pending:
                    append_events(self.db, session_id, events)
            return
        except psycopg.OperationalError:
            raise  # the connection is gone: the carrying transaction fails, and its rows wait again
        except psycopg.Error as exc:
            if len(pending) == 1:
                log.error("could not store session events", session_id=pending[0][0], error=str(exc))
                return
        for one in pending:
            self._write_pending_events([one])

    # -- bias records --------------------------------------------------------
    def _write_session_bias_records(self, records: Sequence[Mapping[str, Any]]) -> None:
        """A session's records, inside its final write's transaction."""
        _write_staged_rows(self._local.conn, records)

    def insert_bias_records(self, records: Iterable[Mapping[str, Any]], *, batch_size: int = 10_000) -> int:
        """Bulk insert in one transaction, by ``COPY`` (the CHECK constraint holds the rules)."""
        with self.transaction() as conn:
            return _copy_bias_records(conn, records, batch_size)

    def load_bias_records(
        self, scored: Iterable[Mapping[str, Any]], unscored: Sequence[Mapping[str, Any]] = ()
    ) -> None:
        """Records read from files (council normally loads them into ``memory_store``): the
        scored ones into ``bias_records``, the unscored ones into ``bias_unscored``."""
        with self.transaction() as conn:
            _copy_bias_records(conn, scored, 10_000)
            conn.execute(
                "CREATE TABLE IF NOT EXISTS bias_unscored (id BIGINT PRIMARY KEY, session_id TEXT, "
                'reviewer_id TEXT, position BIGINT, "timestamp" TEXT, council TEXT)'
            )
            columns = ("id", "session_id", "reviewer_id", "position", "timestamp", "council")
            Statements(conn).executemany(
                f"INSERT INTO bias_unscored ({', '.join(map(quote, columns))}) VALUES (?, ?, ?, ?, ?, ?)",
                [[r[c] for c in columns] for r in unscored],
            )
        self._unscored = self._unscored or bool(unscored)

    def bias_sums(self, query: BiasQuery) -> BiasSums:
        """The shared statements (council.storage.bias_sums): PostgreSQL aggregates, in one
        REPEATABLE READ snapshot; their temporary tables go with the transaction."""
        with self.transaction() as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return sum_bias_records(self, query)  # type: ignore[arg-type]

    # -- judgments and batches: the PostgreSQL wording (the rest is in SQLStore) ----------
    claim_items = queue.claim_postgres
    claim_within = queue.claim_within_postgres  # inside a transaction (judgments.record_and_claim)

    def comparisons(
        self,
        *,
        since: str | None = None,
        council: str | None = None,
        sessions: bool = True,
        judgments: bool = True,
    ) -> ComparisonData:
        from council.storage.postgres_comparisons import count_comparisons

        return count_comparisons(self, since=since, council=council, sessions=sessions, judgments=judgments)
