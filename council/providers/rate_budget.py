"""A model's rate budgets (``rpm``, ``tpm``) kept in this process, for a council without a
store: the same GCRA as the store's shared budgets (council.storage.rate_limits), on this
process's monotonic clock."""

from __future__ import annotations

import time

from council.methods import gcra


class ProcessRates:
    """``reserve_rate`` / ``adjust_rate`` as a store has them, for one process."""

    def __init__(self) -> None:
        self._tat: dict[str, float] = {}

    def reserve_rate(self, key: str, increment: float, tolerance: float = 0.0) -> float:
        now = time.monotonic()
        tat = self._tat[key] = gcra.take(self._tat.get(key), now, increment)
        return gcra.wait_after(tat, now, increment, tolerance)

    def adjust_rate(self, key: str, delta: float) -> None:
        if key in self._tat:
            self._tat[key] = gcra.adjust(self._tat[key], time.monotonic(), delta)
