"""The journal of provider batch rounds (docs/methods.md, "Provider batches"): one row per
round submitted to a provider's batch API, written before the submit."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from council.clock import utc_now
from council.storage.store import Store


class StoreBatchJournal:
    """``council.providers.provider_batch.BatchJournal`` for one batch, in the store."""

    def __init__(self, store: Store, batch_id: str) -> None:
        self.store = store
        self.batch_id = batch_id

    def intent(self, token: str, provider: str, custom_ids: Sequence[str]) -> None:
        now = utc_now()
        with self.store.immediate() as db:
            db.execute(
                "INSERT INTO provider_batches (token, batch_id, provider, status, requests, done, failed, custom_ids,"
                " created_at, updated_at) VALUES (?, ?, ?, 'submitting', ?, 0, 0, ?, ?, ?)",
                [token, self.batch_id, provider, len(custom_ids), json.dumps(list(custom_ids)), now, now],
            )

    def submitted(self, token: str, provider_batch_id: str) -> None:
        with self.store.immediate() as db:
            db.execute(
                "UPDATE provider_batches SET provider_batch_id = ?, status = coalesce(nullif(status, 'submitting'),"
                " 'submitted'), updated_at = ? WHERE token = ?",
                [provider_batch_id, utc_now(), token],
            )

    def progress(self, token: str, status: str, done: int, failed: int) -> None:
        with self.store.immediate() as db:
            db.execute(
                "UPDATE provider_batches SET status = ?, done = ?, failed = ?, updated_at = ? WHERE token = ?",
                [status, done, failed, utc_now(), token],
            )

    def rounds_holding(self, custom_ids: Sequence[str]) -> list[Mapping[str, Any]]:
        wanted = set(custom_ids)
        rows = self.store.db.execute(
            "SELECT token, provider_batch_id, status, custom_ids FROM provider_batches"
            " WHERE batch_id = ? AND status NOT IN ('failed', 'cancelled') ORDER BY created_at DESC",
            [self.batch_id],
        ).fetchall()
        found = []
        for token, provider_id, status, ids in rows:
            held = json.loads(ids)
            if wanted & set(held):
                found.append({"token": token, "provider_batch_id": provider_id, "status": status, "custom_ids": held})
        return found


def provider_batches(store: Store, batch_id: str) -> list[dict[str, Any]]:
    """The rounds of a batch: ``id, provider, status, requests, done, failed`` (oldest first)."""
    rows = store.db.execute(
        "SELECT provider_batch_id, provider, status, requests, done, failed FROM provider_batches"
        " WHERE batch_id = ? ORDER BY created_at",
        [batch_id],
    ).fetchall()
    keys = ("id", "provider", "status", "requests", "done", "failed")
    return [dict(zip(keys, row, strict=True)) for row in rows]
