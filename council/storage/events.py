"""Session events in the store, so any server replica can stream any session.

Rows of ``session_events``: one per event, keyed by (session_id, seq); ``seq`` is the event's own
number (1, 2, 3, … within a session), which the server sends as the SSE event id, so a client
resumes with ``Last-Event-ID``. The server writes them in batches
(:class:`council.server.background.EventBatcher`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from council.clock import utc_now


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
