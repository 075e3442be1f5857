"""A SQLite file's checkpoints in a thread of their own, off the thread that commits.

In WAL mode SQLite copies the log back into the database file (a checkpoint) in the commit that
takes the log past 1,000 pages, on the connection that commits; with ``synchronous = NORMAL``
that checkpoint is where the file is synced. A store's commits run on the event loop, so each
checkpoint stalled every call in flight (a batch, ``benchmarks/bench_batch.py``, and bulk writes
of bias records, ``benchmarks/bench_bias_report.py``, were slower for it). Once a store commits
its first write transaction, its connection checkpoints only past :data:`WAL_CAP_PAGES` and this
thread does it on a connection of its own: ``PASSIVE``, which never waits for a writer or a
reader and never blocks one, at most every ``interval`` seconds while commits come in. The
sqlite3 module releases the GIL while SQLite works, so the copy and the syncs run on another
core. When the store closes, the thread stops and the last connection to close checkpoints what
is left, as SQLite always does; a process killed meanwhile leaves a log that the next
connection replays, as ever. Where no thread can be started, the store keeps SQLite's own
checkpoints (the write that committed stands).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable

from council._util.logs import get_logger

log = get_logger("council.storage")

INTERVAL_S = 0.25
#: The store's own connection still checkpoints past this many pages of log (64 MB at SQLite's
#: 4 KB pages, against its default of 1,000): the log starts over only after a checkpoint has
#: copied all of it, which a writer that never pauses may never let this thread finish, so the
#: log would grow without bound. The thread has copied most of it by then: that checkpoint is short.
WAL_CAP_PAGES = 16_000


class Checkpointer:
    """Checkpoints the file that ``connect`` opens, in a daemon thread, after commits are noted."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], *, interval: float = INTERVAL_S) -> None:
        self._connect = connect
        self.interval = interval
        self._committed = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="council-checkpoint", daemon=True)
        self._thread.start()
        self.checkpoints = 0  # how many have run (tests and benchmarks read it)

    def committed(self) -> None:
        """A write transaction committed: checkpoint soon."""
        if not self._committed.is_set():  # most commits find it set: no lock taken
            self._committed.set()

    def stop(self) -> None:
        """End the thread (after the checkpoint it may be running) and close its connection; the
        store's own connection, closed after, checkpoints what is left."""
        self._stopping.set()
        self._committed.set()
        self._thread.join()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._committed.wait()
                if self._stopping.is_set():
                    return
                self._committed.clear()
                try:
                    if conn is None:
                        conn = self._connect()
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                except sqlite3.Error as exc:  # the commits go on; the log grows until one succeeds
                    log.warning("could not checkpoint the database", error=str(exc))
                self._stopping.wait(self.interval)
        finally:
            if conn is not None:
                conn.close()
