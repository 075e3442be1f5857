"""The store operations both backends run with the same statements, bound once.

``SQLiteStore`` and ``PostgresStore`` inherit these; each store defines only the operations it
words for its own database (``open_budget``, ``reserve_budget``, ``cache_reply`` and
``claim_items`` differ between them), and a definition in the store takes precedence."""

from __future__ import annotations

from council.storage import budgets, call_cache
from council.storage import provider_batches as rounds


class SharedOperations:
    """A mixin of the statement modules' operations (their first argument is the store)."""

    # -- cost: spend caps, the call cache, provider batch rounds -------------------------
    batch_spent = budgets.batch_spent
    settle_budget = budgets.settle_budget
    budget_totals = budgets.budget_totals
    cached_reply = call_cache.cached_reply
    cache_stats = call_cache.cache_stats
    clear_cache = call_cache.clear_cache
    batch_cache_savings = call_cache.batch_cache_savings
    round_intent = rounds.round_intent
    round_submitted = rounds.round_submitted
    round_progress = rounds.round_progress
    rounds_holding = rounds.rounds_holding
    provider_batches = rounds.provider_batches
