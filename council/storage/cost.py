"""The store behind the cost contracts, over :class:`Store` operations (so every backend
serves them): a batch's spend-cap ledger (``council.accounting.budget.Ledger``), the call cache's
replies (``council.accounting.call_cache.ReplyStore``) and the journal of provider batch rounds
(``council.providers.provider_batch.BatchJournal``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from council.accounting.call_cache import CACHE_VERSION
from council.storage.protocol import Store


def batch_key(batch_id: str) -> str:
    """The budget key of a batch."""
    return f"batch:{batch_id}"


class StoreLedger:
    """``council.accounting.budget.Ledger`` over the store's budget ``key`` (docs/methods.md, "Spend caps")."""

    def __init__(self, store: Store, key: str) -> None:
        self.store = store
        self.key = key

    def reserve(self, amount: float) -> tuple[Any, float, float]:
        return self.store.reserve_budget(self.key, amount)

    def settle(self, token: Any, actual: float) -> None:
        self.store.settle_budget(self.key, token, actual)

    def shrink(self, token: Any, amount: float) -> None:
        self.store.shrink_budget(self.key, token, amount)

    def totals(self) -> tuple[float, float]:
        return self.store.budget_totals(self.key)


class StoreReplies:
    """``council.accounting.call_cache.ReplyStore`` over the store (docs/methods.md, "Call cache")."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def threadsafe(self) -> bool:
        """The store's (council.providers.client asks it off the event loop then)."""
        return self.store.threadsafe

    def get(self, key: str) -> Mapping[str, Any] | None:
        return self.store.cached_reply(key, CACHE_VERSION)

    def put(self, key: str, entry: Mapping[str, Any]) -> None:
        self.store.cache_reply(key, CACHE_VERSION, entry)


class StoreBatchJournal:
    """``council.providers.provider_batch.BatchJournal`` for one batch, in the store."""

    def __init__(self, store: Store, batch_id: str) -> None:
        self.store = store
        self.batch_id = batch_id

    def intent(self, token: str, provider: str, custom_ids: Sequence[str]) -> None:
        self.store.round_intent(self.batch_id, token, provider, custom_ids)

    def submitted(self, token: str, provider_batch_id: str) -> None:
        self.store.round_submitted(token, provider_batch_id)

    def progress(self, token: str, status: str, done: int, failed: int) -> None:
        self.store.round_progress(token, status, done, failed)

    def rounds_holding(self, custom_ids: Sequence[str]) -> list[Mapping[str, Any]]:
        return list(self.store.rounds_holding(self.batch_id, custom_ids))
