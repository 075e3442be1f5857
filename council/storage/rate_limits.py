"""One rate budget shared by every process of a store: GCRA in one row per key
(docs/methods.md, "Shared rate budget"; the arithmetic is council.methods.gcra).

A row holds a budget's theoretical arrival time ``tat`` (epoch seconds). A reservation of
``increment`` seconds (a call: 60 / rpm; a call of n tokens: n × 60 / tpm) moves it forward
and says how long to wait; a settlement moves it by the difference between a call's reserved
and real size. A call waits for its turn, it is never refused. Each read and write is one
statement on PostgreSQL (its clock decides, so hosts' clocks do not matter) and one ``BEGIN
IMMEDIATE`` transaction on SQLite (one machine, one clock).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from council.methods import gcra

_POSTGRES_RESERVE = """
WITH c AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS now)
INSERT INTO rate_limits AS r (key, tat) SELECT %(key)s, c.now + %(inc)s FROM c
ON CONFLICT (key) DO UPDATE SET tat = greatest(r.tat, (SELECT now FROM c)) + %(inc)s
RETURNING tat, (SELECT now FROM c) AS now
"""

# gcra.adjust in SQL: greatest(now, greatest(tat, now) + delta).
_POSTGRES_ADJUST = """
WITH c AS (SELECT extract(epoch FROM clock_timestamp())::float8 AS now)
UPDATE rate_limits SET tat = greatest(c.now, greatest(tat, c.now) + %(delta)s) FROM c WHERE key = %(key)s
"""


def reserve_postgres(conn: Any, key: str, increment: float, tolerance: float) -> float:
    """Reserve on a psycopg autocommit connection (the statement is its own transaction)."""
    row = conn.execute(_POSTGRES_RESERVE, {"key": key, "inc": increment}).fetchone()
    tat, now = (row["tat"], row["now"]) if isinstance(row, dict) else row
    return gcra.wait_after(tat, now, increment, tolerance)


def adjust_postgres(conn: Any, key: str, delta: float) -> None:
    conn.execute(_POSTGRES_ADJUST, {"key": key, "delta": delta})


def _update_sqlite(conn: sqlite3.Connection, key: str, step: Any) -> tuple[float, float]:
    """``tat = step(tat, now)`` in one ``BEGIN IMMEDIATE`` transaction (``tat`` None: no row
    yet; a step returning None writes nothing); (new tat, now)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        now = time.time()
        row = conn.execute("SELECT tat FROM rate_limits WHERE key = ?", [key]).fetchone()
        new_tat = step(row[0] if row else None, now)
        if new_tat is not None:
            conn.execute(
                "INSERT INTO rate_limits (key, tat) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET tat = excluded.tat",
                [key, new_tat],
            )
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return new_tat, now


def reserve_sqlite(conn: sqlite3.Connection, key: str, increment: float, tolerance: float) -> float:
    """Reserve on a SQLite connection in autocommit mode (``isolation_level=None``)."""
    new_tat, now = _update_sqlite(conn, key, lambda tat, now: gcra.take(tat, now, increment))
    return gcra.wait_after(new_tat, now, increment, tolerance)


def adjust_sqlite(conn: sqlite3.Connection, key: str, delta: float) -> None:
    # A key never reserved has nothing to settle (as PostgreSQL's UPDATE finds no row).
    _update_sqlite(conn, key, lambda tat, now: None if tat is None else gcra.adjust(tat, now, delta))
