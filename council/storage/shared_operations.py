"""The store operations both backends run with the same statements, bound once.

``SQLiteStore`` and ``PostgresStore`` inherit these; each store defines only the operations it
words for its own database (``open_budget``, ``reserve_budget``, ``cache_reply``,
``claim_items``, ``comparisons``, ``bias_sums``, ...), and a definition in the store takes precedence."""

from __future__ import annotations

from council.storage import budgets, call_cache, judgments, pages, queue
from council.storage import provider_batches as rounds


class SharedOperations:
    """A mixin of the statement modules' operations (their first argument is the store)."""

    # -- cost: spend caps, the call cache, provider batch rounds -------------------------
    batch_spent = budgets.batch_spent
    settle_budget = budgets.settle_budget
    shrink_budget = budgets.shrink_budget
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

    # -- judgments and batches, the batch queue's claims ---------------------------------
    save_judgment = judgments.save_judgment
    record_and_claim = judgments.record_and_claim
    runs_recorded = judgments.runs_recorded
    judged_pairs = judgments.judged_pairs
    iter_sessions = pages.iter_sessions  # the exports
    bias_record_rows = pages.bias_record_rows
    judgment_run = judgments.get_run
    judgment_passes = judgments.run_passes
    position_audit = judgments.position_audit
    open_batch = judgments.open_batch
    batch_exists = judgments.batch_exists
    find_batch = judgments.find_batch
    reconcile_batch_items = judgments.reconcile_batch_items
    batch_item_status = judgments.batch_item_status
    batch_rows = judgments.batch_rows
    enqueue_batch = queue.enqueue_batch
    renew_claims = queue.renew_claims
    release_claims = queue.release_claims
    claims_of = queue.claims_of
    batch_spec = queue.batch_spec
    batch_status = queue.queue_status
