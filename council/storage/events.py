"""Session events in the store, so any server replica can stream any session.

Rows of ``session_events``: one per event, keyed by (session_id, seq); ``seq`` is the event's own
number (1, 2, 3, … within a session), which the server sends as the SSE event id, so a client
resumes with ``Last-Event-ID``. The server writes them in batches
(:class:`council.server.background.EventBatcher`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic_core import to_json

from council._util.clock import utc_now


def append_events(db: Any, session_id: str, events: Sequence[dict[str, Any]]) -> None:
    """Insert events (dicts with ``seq`` and ``type``) inside the caller's transaction; an event
    already stored (same seq) is kept, so a retried batch writes nothing twice. The text is
    pydantic-core's compact JSON of the dict: for an event's ``model_dump(mode="json")`` the text
    its model's ``model_dump_json`` writes (numbers finite), quicker than the standard
    library's ``json.dumps`` for the events a busy server writes
    (``benchmarks/bench_serve_sessions.py``). No secret is cut here: what a
    model or a provider wrote lost its secrets where it entered (``council.providers.client``),
    and the process that writes a session's events is the one that made its calls."""
    db.conn.executemany(
        "INSERT INTO session_events (session_id, seq, type, at, data) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (session_id, seq) DO NOTHING",
        [(session_id, e["seq"], e["type"], e.get("at") or utc_now(), to_json(e).decode()) for e in events],
    )


def events_after(db: Any, session_id: str, after: int = 0, limit: int = 1000) -> list[tuple[int, str, str]]:
    """(seq, type, JSON text) of the session's events numbered above ``after``, in order."""
    rows = db.conn.execute(
        "SELECT seq, type, data FROM session_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (session_id, after, limit),
    )
    return list(rows)
