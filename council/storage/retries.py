"""Write transactions the database rolled back to break a deadlock, run again.

On PostgreSQL two transactions that write some of the same rows in opposite orders deadlock, and
the server rolls one of them back (``TransactionConflict``): a batch worker's record of the items
that finished in a turn, and the call log's group commit holding some of the same call rows, did
so under load, and the worker stopped with the store "not answering"
(``benchmarks/bench_bare_client.py`` on PostgreSQL). Nothing of a rolled-back transaction was
written, and the rows it carried wait again, so running it again as it was is safe. SQLite, one
writer at a time, never raises it.

Those deadlocks are now prevented where they were seen: every transaction writes its call rows in
one pass, in the order of their ids (``PostgresStore.write_calls``: three such transactions once
deadlocked in a cycle past these retries). The retries stay for any other pair of
writes that may yet meet in opposite orders.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from council._util.logs import get_logger
from council.errors import TransactionConflict

ATTEMPTS = 3
"""Runs of one transaction in all; a conflict on the last is raised."""

_T = TypeVar("_T")

log = get_logger("council.storage")


def retried(transaction: Callable[[], _T]) -> _T:
    """``transaction()``, run again when the database rolled it back to break a deadlock."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return transaction()
        except TransactionConflict as exc:
            if attempt == ATTEMPTS:
                raise
            log.info("write transaction rolled back by a deadlock; running it again", attempt=attempt, error=str(exc))
    raise AssertionError("unreachable")
