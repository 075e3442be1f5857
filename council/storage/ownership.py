"""Who is running what, so that a crash never leaves work ``running`` forever: leases.

Each process that writes sessions or calls holds a lease, a row in ``leases`` (id, pid, host,
``expires_at``) that a heartbeat thread pushes forward every third of its length. Rows of
unfinished work carry the lease id (``owner``). Work whose owner's lease has expired, or is
gone, belongs to a process that ended (``kill -9`` included) or could not renew for a whole
lease: whichever process looks next marks it ``interrupted``. The rule is the same SQL on both
backends (:func:`recover_interrupted`); only the clock differs — the database's on PostgreSQL
(hosts' clocks never compare), the host's on SQLite (every process sharing the file runs on
it). A clean exit deletes its lease, so its unfinished work is found at once.

A process killed on this machine is found at once too, not a lease later: a lease records where
its pid means something (:func:`this_machine`: the kernel's boot and the pid and time namespaces,
so a container that shares the database, even under the same host name, never judges another's
pids) and when its process started (pids are reused: a pid that now names a process started at
another time is not the lease's process). A lease of this machine whose process is gone is
dead whatever its expiry. Where that cannot be told (not Linux, an unreadable ``/proc``), the
lease's expiry alone decides.

Long-running processes (``council serve``, ``council worker``) look at each heartbeat
(:attr:`Lease.sweep`), so their dead peers' work does not stay ``running`` until the next
command. A batch is shared by its workers through the queue (council.storage.queue).
"""

from __future__ import annotations

import atexit
import math
import os
import socket
import threading
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from council._util.clock import utc_now
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


@cache
def this_machine() -> str | None:
    """Where a pid names the same process for every process that reads it: this kernel's boot
    and this process's pid and time namespaces (a process's start time is read through the
    latter); None where that cannot be told. Read once: a process never changes namespaces."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        pids = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    try:
        times = os.readlink("/proc/self/ns/time")
    except OSError:  # a kernel without time namespaces: one clock for all
        times = "time:-"
    return f"{boot} {pids} {times}" if boot else None


def _stat(pid: int) -> tuple[bytes, int] | None:
    """Process ``pid``'s state and start time (clock ticks after boot), or None if unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        state, *fields = stat.rsplit(b")", 1)[1].split()  # after the name, which may hold anything
        return state, int(fields[18])
    except (OSError, ValueError, IndexError):
        return None


def process_started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), or None: unreadable."""
    found = _stat(pid)
    return None if found is None else found[1]


def ended(pid: Any, started: Any) -> bool:
    """Whether the process ``pid`` of this machine that started at ``started`` has certainly
    ended (a zombie has). Unsure (hidden from this process, another user's) is alive."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0 or not isinstance(started, int):
        return False
    try:
        os.kill(pid, 0)  # signal 0: is there such a process (nothing is sent)
    except ProcessLookupError:
        return True
    except OSError:  # there is, another user's (PermissionError)
        pass
    found = _stat(pid)
    if found is None:  # hidden from us (hidepid), or gone this instant: the next look tells
        return False
    state, now = found
    return state in (b"Z", b"X") or now != started  # a pid reused by a process started since


class Lease:
    """A process's lease, renewed by a daemon thread until it is released (at exit at the latest).

    ``run`` executes one statement in its own transaction, from any thread. ``write_now=False``:
    the caller writes the lease (:meth:`upsert`) in its first transaction that needs it, and
    sets ``written``; the heartbeat writes it in any case. ``sweep``, when set, runs after each
    beat: a long-running process recovers dead processes' work (:func:`recover_interrupted`)."""

    def __init__(self, run: Run, clock: Clock, seconds: float | None = None, *, write_now: bool = True) -> None:
        self.seconds = lease_seconds() if seconds is None else seconds
        self.id = uuid.uuid4().hex
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self.machine = this_machine()
        self.started = process_started(self.pid) if self.machine is not None else None
        self.written = False
        self.sweep: Callable[[], object] | None = None
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
            "INSERT INTO leases (id, pid, host, machine, started, expires_at)"
            f" VALUES (?, ?, ?, ?, ?, {self._clock.later})"
            " ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at",
            [self.id, self.pid, self.host, self.machine, self.started, self.seconds],
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
                    if self.sweep is not None:
                        self.sweep()
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
    """Mark sessions and calls whose owner's lease has expired (or is gone), or whose owner was
    a process of this machine that has ended, ``interrupted``, keeping everything they wrote;
    never this process's own (``mine``). Returns the sessions marked. One read when there is
    nothing to recover (every command that opens the store, a server's every heartbeat).
    ``store``: ``db`` for reads, ``immediate()`` for a write transaction."""
    # The owners of unfinished work with no live lease, and those whose live lease is this
    # machine's (lease id set): their process is asked after.
    owners = store.db.execute(
        "SELECT w.owner, l.id, l.pid, l.started FROM (SELECT owner FROM sessions WHERE status = 'running'"
        " UNION SELECT owner FROM calls WHERE ok IS NULL) w"
        f" LEFT JOIN leases l ON l.id = w.owner AND l.expires_at > {clock.now}"
        " WHERE w.owner IS NOT NULL AND (l.id IS NULL OR l.machine = ?)",
        [this_machine()],
    ).fetchall()
    mine = set(mine)
    ended_leases = sorted(row[1] for row in owners if row[1] is not None and row[0] not in mine and ended(*row[2:]))
    gone = sorted({row[0] for row in owners if row[1] is None or row[1] in ended_leases} - mine)
    if not gone:
        return []
    marks = ", ".join("?" for _ in gone)
    # Checked again under the write lock: a lease renewed in between keeps its work.
    with store.immediate() as db:
        if ended_leases:  # their processes have ended: the leases go, and their work is found below
            db.execute(f"DELETE FROM leases WHERE id IN ({', '.join('?' for _ in ended_leases)})", ended_leases)
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


def sweep_sqlite(lease: Lease) -> None:
    """Have ``lease``'s heartbeat recover dead processes' work of its SQLite file, on the lease's
    own connection (never a store's, which its thread uses)."""
    own = lease._run
    assert isinstance(own, _OwnConnection)
    lease.sweep = lambda: recover_interrupted(own, SQLITE_CLOCK, own_lease_ids())


class _OwnConnection:
    """Runs a lease's statements on a connection of its own, from any thread; the heartbeat's
    recovery reads (``db``) and writes (``immediate``) there too."""

    def __init__(self, connect: Callable[[], Any]) -> None:
        self._connect, self._conn, self._lock = connect, None, threading.Lock()

    def __call__(self, sql: str, params: Sequence[Any]) -> None:
        with self._lock:
            self._open().execute(sql, list(params))  # autocommit: the statement is its own transaction

    def _open(self) -> Any:
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    @property
    def db(self) -> Any:
        with self._lock:
            return self._open()

    @contextmanager
    def immediate(self) -> Iterator[Any]:
        with self._lock:
            conn = self._open()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
