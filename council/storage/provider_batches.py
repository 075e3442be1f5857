"""The journal of provider batch rounds (docs/methods.md, "Provider batches"): one row per
round submitted to a provider's batch API, written before the submit."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from council._util.clock import utc_now

if TYPE_CHECKING:
    from council.storage.connection import Backend


def round_intent(store: Backend, batch_id: str, token: str, provider: str, custom_ids: Sequence[str]) -> None:
    """Journal a round of ``batch_id`` (``submitting``) before it is sent."""
    now = utc_now()
    with store.immediate() as db:
        db.execute(
            "INSERT INTO provider_batches (token, batch_id, provider, status, requests, done, failed, custom_ids,"
            " created_at, updated_at) VALUES (?, ?, ?, 'submitting', ?, 0, 0, ?, ?, ?)",
            [token, batch_id, provider, len(custom_ids), json.dumps(list(custom_ids)), now, now],
        )


def round_submitted(store: Backend, token: str, provider_batch_id: str) -> None:
    """The provider accepted the round: its id there (a status already past ``submitted`` stays)."""
    with store.immediate() as db:
        db.execute(
            "UPDATE provider_batches SET provider_batch_id = ?, status = coalesce(nullif(status, 'submitting'),"
            " 'submitted'), updated_at = ? WHERE token = ?",
            [provider_batch_id, utc_now(), token],
        )


def round_progress(store: Backend, token: str, status: str, done: int, failed: int) -> None:
    """A poll of the round: its provider status and counts."""
    with store.immediate() as db:
        db.execute(
            "UPDATE provider_batches SET status = ?, done = ?, failed = ?, updated_at = ? WHERE token = ?",
            [status, done, failed, utc_now(), token],
        )


def rounds_holding(store: Backend, batch_id: str, custom_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Rounds of ``batch_id`` not failed or cancelled that hold any of ``custom_ids``, newest first."""
    wanted = set(custom_ids)
    rows = store.db.execute(
        "SELECT token, provider_batch_id, status, custom_ids FROM provider_batches"
        " WHERE batch_id = ? AND status NOT IN ('failed', 'cancelled') ORDER BY created_at DESC",
        [batch_id],
    ).fetchall()
    found = []
    for token, provider_id, status, ids in rows:
        held = json.loads(ids)
        if wanted & set(held):
            found.append({"token": token, "provider_batch_id": provider_id, "status": status, "custom_ids": held})
    return found


#: A round's statuses once its provider has finished it (OpenAI's, and Anthropic's ``ended``).
ENDED = ("completed", "expired", "failed", "cancelled", "ended")


def provider_batches(store: Backend, batch_id: str) -> list[dict[str, Any]]:
    """The rounds of a batch, oldest first: ``id, provider, status, requests, done, failed``,
    ``submitted_at`` (when it was journaled to be sent; None when the provider never got it)
    and ``collected_at`` (the poll that saw it end, after which its lines are read; None while
    it runs)."""
    rows = store.db.execute(
        "SELECT provider_batch_id, provider, status, requests, done, failed, created_at, updated_at"
        " FROM provider_batches WHERE batch_id = ? ORDER BY created_at",
        [batch_id],
    ).fetchall()
    keys = ("id", "provider", "status", "requests", "done", "failed")
    found = []
    for row in rows:
        entry = dict(zip(keys, row[:6], strict=True))
        entry["submitted_at"] = row[6] if entry["id"] is not None else None
        entry["collected_at"] = row[7] if entry["status"] in ENDED else None
        found.append(entry)
    return found
