"""One rate budget shared by every process of a store: GCRA in one row per key
(docs/methods.md, "Shared rate budget").

The generic cell rate algorithm keeps, per key, the theoretical arrival time ``tat`` (epoch
seconds). A reservation of ``increment`` seconds (one call: 60 / rpm) made at ``now`` may
start at ``max(now, tat - tolerance)`` and moves ``tat`` to ``max(tat, now) + increment``;
``tolerance`` (``(burst - 1) × increment``) lets ``burst`` calls start at once. A call waits
for its turn, it is never refused. The read and the write are one statement on PostgreSQL
(its clock decides, so hosts' clocks do not matter) and one ``BEGIN IMMEDIATE`` transaction
on SQLite (one machine, one clock).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

_POSTGRES_RESERVE = """
WITH c AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS now)
INSERT INTO rate_limits AS r (key, tat) SELECT %(key)s, c.now + %(inc)s FROM c
ON CONFLICT (key) DO UPDATE SET tat = greatest(r.tat, (SELECT now FROM c)) + %(inc)s
RETURNING tat, (SELECT now FROM c) AS now
"""


def wait_after(new_tat: float, now: float, increment: float, tolerance: float) -> float:
    """Seconds until the reservation that moved ``tat`` to ``new_tat`` may start."""
    return max(0.0, new_tat - increment - tolerance - now)


def reserve_postgres(conn: Any, key: str, increment: float, tolerance: float) -> float:
    """Reserve on a psycopg autocommit connection (the statement is its own transaction)."""
    row = conn.execute(_POSTGRES_RESERVE, {"key": key, "inc": increment}).fetchone()
    tat, now = (row["tat"], row["now"]) if isinstance(row, dict) else row
    return wait_after(tat, now, increment, tolerance)


def reserve_sqlite(conn: sqlite3.Connection, key: str, increment: float, tolerance: float) -> float:
    """Reserve on a SQLite connection in autocommit mode (``isolation_level=None``)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        now = time.time()
        row = conn.execute("SELECT tat FROM rate_limits WHERE key = ?", [key]).fetchone()
        new_tat = max(row[0] if row else now, now) + increment
        conn.execute(
            "INSERT INTO rate_limits (key, tat) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET tat = excluded.tat",
            [key, new_tat],
        )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return wait_after(new_tat, now, increment, tolerance)
