"""Session events in the store, so any server replica can stream any session.

Rows of ``session_events``: one per event, keyed by (session_id, seq); ``seq`` is the event's own
number (1, 2, 3, … within a session), which the server sends as the SSE event id, so a client
resumes with ``Last-Event-ID``. Written in batches (``EventBatcher``): the chairman's tokens
arrive many a second, and one transaction per token would cost more than the token.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from council.clock import utc_now

#: Event types after which a session sends nothing more.
FINAL_TYPES = frozenset({"session_finished"})


def append_events(db: Any, session_id: str, events: Sequence[dict[str, Any]]) -> None:
    """Insert events (dicts with ``seq`` and ``type``) inside the caller's transaction; an event
    already stored (same seq) is kept, so a retried batch writes nothing twice."""
    db.conn.executemany(
        "INSERT INTO session_events (session_id, seq, type, at, data) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (session_id, seq) DO NOTHING",
        [
            (session_id, e["seq"], e["type"], e.get("at") or utc_now(), json.dumps(e, ensure_ascii=False))
            for e in events
        ],
    )


def events_after(db: Any, session_id: str, after: int = 0, limit: int = 1000) -> list[tuple[int, str, str]]:
    """(seq, type, JSON text) of the session's events numbered above ``after``, in order."""
    rows = db.conn.execute(
        "SELECT seq, type, data FROM session_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (session_id, after, limit),
    )
    return list(rows)


class EventBatcher:
    """Collects one session's events and writes them ``interval`` seconds apart at most, or at
    once for any event but a synthesis delta (a stage, an answer, a review show up at once)."""

    def __init__(self, write: Callable[[list[dict[str, Any]]], None], *, interval: float = 0.05) -> None:
        self._write = write
        self.interval = interval
        self._pending: list[dict[str, Any]] = []
        self._oldest = 0.0

    def add(self, event: dict[str, Any]) -> None:
        if not self._pending:
            self._oldest = time.monotonic()
        self._pending.append(event)
        if event.get("type") != "synthesis_delta" or time.monotonic() - self._oldest >= self.interval:
            self.flush()

    def due(self) -> bool:
        """Whether buffered deltas have waited ``interval`` (a timer calls ``flush`` then)."""
        return bool(self._pending) and time.monotonic() - self._oldest >= self.interval

    def flush(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            self._write(batch)
