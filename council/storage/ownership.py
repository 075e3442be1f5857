"""Who is running what, so that a crash never leaves work ``running`` forever: leases.

Each process that writes sessions or calls holds a lease, a row in ``leases`` (id, pid, host,
``expires_at``) that a heartbeat thread pushes forward every third of its length. Rows of
unfinished work carry the lease id (``owner``). Work whose owner's lease has expired, or is
gone, belongs to a process that ended (``kill -9`` included) or could not renew for a whole
lease: whichever process looks next marks it ``interrupted``. The rule is the same SQL on both
backends (:func:`recover_interrupted`); only the clock differs — the database's on PostgreSQL
(hosts' clocks never compare), the host's on SQLite (every process sharing the file runs on
it). A clean exit deletes its lease, so its unfinished work is found at once.

Pids are only recorded for people: they are reused, and differ between containers sharing
a database. A batch is shared by its workers through the queue (council.storage.queue).
"""

from __future__ import annotations

import atexit
import math
import os
import socket
import threading
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from council.clock import utc_now
from council.errors import ConfigError

#: A lease outlives its last heartbeat by this long (``COUNCIL_LEASE_SECONDS`` changes it).
LEASE_SECONDS = 30.0
#: Leases this long expired are deleted (their work was recovered long before).
STALE_SECONDS = 86_400

Run = Callable[[str, Sequence[Any]], None]


@dataclass(frozen=True)
class Clock:
    """A backend's SQL for now and for ``?`` seconds from now, comparable with ``expires_at``."""

    now: str
    later: str
    stale: str


SQLITE_CLOCK = Clock(
    now="((julianday('now') - 2440587.5) * 86400.0)",
    later="((julianday('now') - 2440587.5) * 86400.0 + ?)",
    stale=f"((julianday('now') - 2440587.5) * 86400.0 - {STALE_SECONDS})",
)
POSTGRES_CLOCK = Clock(
    now="now()",
    later="now() + make_interval(secs => ?)",
    stale=f"now() - make_interval(secs => {STALE_SECONDS})",
)


def lease_seconds() -> float:
    """How long a lease lasts: ``COUNCIL_LEASE_SECONDS`` (0.5 to 86400), else 30."""
    raw = os.environ.get("COUNCIL_LEASE_SECONDS", "").strip()
    if not raw:
        return LEASE_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (0.5 <= value <= 86_400):
        raise ConfigError(f"COUNCIL_LEASE_SECONDS must be a number of seconds from 0.5 to 86400, got {raw!r}")
    return value


class Lease:
    """A process's lease, renewed by a daemon thread until it is released (at exit at the latest).

    ``run`` executes one statement in its own transaction, from any thread. ``write_now=False``:
    the caller writes the lease (:meth:`upsert`) in its first transaction that needs it, and
    sets ``written``; the heartbeat writes it in any case."""

    def __init__(self, run: Run, clock: Clock, seconds: float | None = None, *, write_now: bool = True) -> None:
        self.seconds = lease_seconds() if seconds is None else seconds
        self.id = uuid.uuid4().hex
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self.written = False
        self._run, self._clock = run, clock
        self._stop = threading.Event()
        self._lock = threading.Lock()  # a beat never rewrites a lease its release has deleted
        if write_now:
            self.renew()
        self._thread = threading.Thread(target=self._beat, name="council-lease", daemon=True)
        self._thread.start()
        atexit.register(self.release)

    def upsert(self) -> tuple[str, list[Any]]:
        """The statement that writes (or renews) the lease, with its parameters."""
        return (
            f"INSERT INTO leases (id, pid, host, expires_at) VALUES (?, ?, ?, {self._clock.later})"
            " ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at",
            [self.id, self.pid, self.host, self.seconds],
        )

    def renew(self) -> None:
        self._run(*self.upsert())
        self.written = True

    def _beat(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            with self._lock:
                if self._stop.is_set():
                    return
                try:
                    self.renew()
                except Exception:  # the database is away or busy: the next beat tries again
                    pass

    def release(self, run: Run | None = None) -> None:
        """A clean end: the lease is deleted (its unfinished work is then found at once);
        ``run``: a connection the caller has open, else the lease's own."""
        if self._stop.is_set():
            return
        self._stop.set()
        with self._lock:
            try:
                if self.written:
                    stale = self._clock.stale
                    (run or self._run)(f"DELETE FROM leases WHERE id = ? OR expires_at < {stale}", [self.id])
            except Exception:
                pass
            close = getattr(self._run, "close", None)
            if close is not None:
                close()


def dead(column: str, clock: Clock) -> str:
    """SQL: the owner in ``column`` holds no live lease (no lease, or an expired one)."""
    return f"NOT EXISTS (SELECT 1 FROM leases l WHERE l.id = {column} AND l.expires_at > {clock.now})"


def recover_interrupted(store: Any, clock: Clock, mine: Collection[str]) -> list[str]:
    """Mark sessions and calls whose owner's lease has expired (or is gone) ``interrupted``,
    keeping everything they wrote; never this process's own (``mine``). Returns the sessions
    marked. One read when there is nothing to recover (every command that opens the store)."""
    owners = store.db.execute(
        "SELECT DISTINCT w.owner FROM (SELECT owner FROM sessions WHERE status = 'running'"
        " UNION SELECT owner FROM calls WHERE ok IS NULL) w"
        f" WHERE w.owner IS NOT NULL AND {dead('w.owner', clock)}"
    ).fetchall()
    gone = sorted({row[0] for row in owners} - set(mine))
    if not gone:
        return []
    marks = ", ".join("?" for _ in gone)
    # Checked again under the write lock: a lease renewed in between keeps its work.
    with store.immediate() as db:
        sessions = db.execute(
            "UPDATE sessions SET status = 'interrupted', finished_at = ?, error = 'interrupted: the process'"
            " || ' running it (pid ' || coalesce(CAST(owner_pid AS TEXT), ?) || ' on ' || coalesce(owner_host, ?)"
            " || ') ended before it finished'"
            f" WHERE status = 'running' AND owner IN ({marks}) AND {dead('sessions.owner', clock)} RETURNING id",
            [utc_now(), "?", "?", *gone],
        ).fetchall()
        db.execute(
            "UPDATE calls SET ok = 0, error = 'interrupted: the process ended while this call was in flight'"
            f" WHERE ok IS NULL AND owner IN ({marks}) AND {dead('calls.owner', clock)}",
            gone,
        )
        db.execute(f"DELETE FROM leases WHERE expires_at < {clock.stale}")
    return sorted(row[0] for row in sessions)


# -- SQLite: one lease per process and database file, while a store holds it open ----------

_process_leases: dict[tuple[int, str], Lease] = {}
_holders: dict[tuple[int, str], int] = {}
_former_ids: set[tuple[int, str]] = set()  # this process's released leases: its own work still
_registry_lock = threading.Lock()


def hold(database: str) -> None:
    """A store of this process has ``database`` open."""
    key = (os.getpid(), database)
    with _registry_lock:
        _holders[key] = _holders.get(key, 0) + 1


def let_go(database: str, run: Run | None = None) -> None:
    """A store of this process closed ``database``: the last one ends the lease (its work,
    which no store of this process can finish now, is then found by others at once)."""
    key = (os.getpid(), database)
    with _registry_lock:
        _holders[key] = _holders.get(key, 1) - 1
        if _holders[key] > 0:
            return
        del _holders[key]
        lease = _process_leases.pop(key, None)
    if lease is not None:
        _former_ids.add((lease.pid, lease.id))
        lease.release(run)


def process_lease(database: str, connect: Callable[[], Any]) -> Lease:
    """This process's lease on the SQLite file ``database``, taken on first use. The store
    writes it in its first transaction that records work under it (no extra transaction on a
    command's path); the heartbeat runs on a connection of its own (``connect``, opened at its
    first beat), so it never shares the store's."""
    key = (os.getpid(), database)
    with _registry_lock:
        lease = _process_leases.get(key)
        if lease is None:
            lease = _process_leases[key] = Lease(_OwnConnection(connect), SQLITE_CLOCK, write_now=False)
        return lease


def own_lease_ids() -> set[str]:
    """This process's leases, live or released (never taken for a dead process's)."""
    pid = os.getpid()
    live = {lease.id for (p, _), lease in _process_leases.items() if p == pid}
    return live | {lease_id for p, lease_id in _former_ids if p == pid}


class _OwnConnection:
    """Runs a lease's statements on a connection of its own, from any thread."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect, self._conn, self._lock = connect, None, threading.Lock()

    def __call__(self, sql: str, params: Sequence[Any]) -> None:
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()
            self._conn.execute(sql, list(params))  # autocommit: the statement is its own transaction

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
