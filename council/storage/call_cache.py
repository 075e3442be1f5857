"""The call cache's entries in the store (docs/methods.md, "Call cache"); every process using
the store shares them. An entry of another version, or one that does not decode, is never
returned: the next reply to that request replaces it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from council._util.clock import to_utc_iso, utc_now

if TYPE_CHECKING:
    from council.storage.connection import Backend


def cached_reply(store: Backend, key: str, version: int) -> dict[str, Any] | None:
    """The entry of ``key`` written under ``version``, or None (absent, another version, unreadable)."""
    row = store.db.execute("SELECT version, reply FROM call_cache WHERE key = ?", [key]).fetchone()
    if row is None or row[0] != version:
        return None
    try:
        entry = json.loads(row[1])
    except (TypeError, ValueError):
        return None
    return entry if isinstance(entry, dict) else None


def cache_reply(store: Backend, key: str, version: int, entry: Mapping[str, Any]) -> None:
    """Write (or replace) the entry of ``key`` under ``version``."""
    cost = entry.get("cost_usd")
    with store.immediate() as db:
        db.execute(
            "INSERT INTO call_cache (key, version, model, reply, cost_usd, created_at) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (key) DO UPDATE SET version = excluded.version, model = excluded.model,"
            " reply = excluded.reply, cost_usd = excluded.cost_usd, created_at = excluded.created_at",
            [key, version, entry.get("model"), json.dumps(dict(entry), ensure_ascii=False),
             cost if isinstance(cost, int | float) else None, utc_now()],
        )  # fmt: skip


def cache_stats(store: Backend) -> dict[str, Any]:
    """Entries kept (per model), their size, and the calls answered from them and what they saved."""
    entries, size, oldest, newest = store.db.execute(
        "SELECT count(*), coalesce(sum(length(reply)), 0), min(created_at), max(created_at) FROM call_cache"
    ).fetchone()
    hits, saved, unknown = store.db.execute(
        "SELECT count(*), coalesce(sum(saved_usd), 0), count(*) - count(saved_usd) FROM calls WHERE cached = 1"
    ).fetchone()
    models = {
        model: count
        for model, count in store.db.execute(
            "SELECT coalesce(model, ?), count(*) FROM call_cache GROUP BY model ORDER BY count(*) DESC, model", ["?"]
        )
    }
    return {
        "entries": entries,
        "bytes": size,
        "oldest": oldest,
        "newest": newest,
        "models": models,
        "cached_calls": hits,
        "saved_usd": None if unknown else round(saved, 8),
    }


def clear_cache(store: Backend, *, older_than_days: float | None = None) -> int:
    """Delete every entry, or those written more than ``older_than_days`` ago; how many."""
    with store.immediate() as db:
        if older_than_days is None:
            return int(db.execute("DELETE FROM call_cache").rowcount)
        cutoff = to_utc_iso(datetime.now(UTC) - timedelta(days=older_than_days))
        return int(db.execute("DELETE FROM call_cache WHERE created_at < ?", [cutoff]).rowcount)


def batch_cache_savings(store: Backend, batch_id: str) -> tuple[int, float | None]:
    """Calls of a batch's recorded items answered from the cache, and what they saved."""
    count, saved, unknown = store.db.execute(
        "SELECT count(*), coalesce(sum(c.saved_usd), 0), count(*) - count(c.saved_usd)"
        " FROM calls c JOIN batch_items b ON c.session_id = b.run_id WHERE b.batch_id = ? AND c.cached = 1",
        [batch_id],
    ).fetchone()
    return int(count), None if unknown else round(float(saved), 8)
