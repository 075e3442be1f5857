"""What calls cost and what they may cost: spend caps, the call log's usage and the call cache.

- ``budget``: hard spend caps, resolved in one place (``cap_in_force``) for every entry point.
- ``usage``: the call log and its totals; a provider's usage numbers are checked here before use.
- ``call_cache``: the call cache's contract (the key of a request, where replies are kept).
"""

from __future__ import annotations

from council._util.lazy_exports import lazy_exports

_EXPORTS = {
    "Budget": "council.accounting.budget",
    "BudgetReached": "council.accounting.budget",
    "cap_in_force": "council.accounting.budget",
    "CallCache": "council.accounting.call_cache",
    "Usage": "council.accounting.usage",
    "CallLog": "council.accounting.usage",
    "CallRecord": "council.accounting.usage",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
