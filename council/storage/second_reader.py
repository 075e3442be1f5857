"""A second read-only connection to a SQLite file, reading the same snapshot as the first.

The bias report's two passes over the rows (per review, per answer) are independent, so on a
SQLite file they run at once on two connections, each on a core
(``benchmarks/bench_report_scan.py``). Python's sqlite3 has no snapshot API, so sameness is
checked instead: ``PRAGMA data_version`` changes when any other connection commits, so if the
second connection reads the same value before the first one's snapshot begins and after its own
has begun, nothing was committed in between and both see one state. Otherwise (or if the file
cannot be opened a second time) there is no second reader and the caller reads sequentially.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

BUSY_TIMEOUT_S = 60.0


def open_in_snapshot(path: Path, begin_first: Callable[[], None]) -> sqlite3.Connection | None:
    """A read-only connection whose open read transaction sees what the first connection's does;
    ``begin_first`` starts the first connection's snapshot (its first read in a transaction) and
    is called exactly once, whatever is returned."""
    try:
        second = sqlite3.connect(
            Path(path).resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None, check_same_thread=False,
            timeout=BUSY_TIMEOUT_S,
        )  # fmt: skip
    except sqlite3.Error:
        begin_first()
        return None
    try:
        try:
            before = second.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            before = None
        begin_first()
        if before is not None:
            second.execute("BEGIN")
            second.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()  # its snapshot begins here
            if second.execute("PRAGMA data_version").fetchone()[0] == before:
                return second
    except sqlite3.Error:
        pass
    second.close()
    return None


class Background:
    """``work(connection)`` run in a thread on the second connection, which it closes after."""

    def __init__(self, connection: sqlite3.Connection, work: Callable[[sqlite3.Connection], Any]) -> None:
        self._result: Any = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._result = work(connection)
            except BaseException as exc:  # handed to result()
                self._error = exc
            finally:
                connection.close()

        self._thread = threading.Thread(target=run, name="council-second-reader", daemon=True)
        self._thread.start()

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result
