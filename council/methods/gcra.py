"""The arithmetic of a shared rate budget: the generic cell rate algorithm (GCRA), weighted
(docs/methods.md, "Shared rate budget").

A budget keeps one number, the theoretical arrival time ``tat`` (seconds). A reservation of
``increment`` seconds made at ``now`` moves it to ``max(tat, now) + increment`` and may start
``tolerance`` seconds before the old ``tat``. For ``rpm`` one call is ``60 / rpm`` seconds
with a burst of ``b`` calls; for ``tpm`` a call of ``n`` tokens is ``n × 60 / tpm`` seconds
and the bucket holds one minute of tokens, so a call waits for its turn, never fails, unless
it alone is larger than ``tpm``. Settling a call at its real size moves ``tat`` by the
difference; the bucket never holds more than its capacity (``tat`` never falls behind ``now``).
"""

from __future__ import annotations


def take(tat: float | None, now: float, increment: float) -> float:
    """The new ``tat`` after a reservation of ``increment`` seconds at ``now``."""
    return max(now if tat is None else tat, now) + increment


def wait_after(new_tat: float, now: float, increment: float, tolerance: float) -> float:
    """Seconds until the reservation that moved ``tat`` to ``new_tat`` may start."""
    return max(0.0, new_tat - increment - tolerance - now)


def adjust(tat: float | None, now: float, delta: float) -> float:
    """The new ``tat`` after a reservation is settled ``delta`` seconds bigger (a debt) or
    smaller (a refund, never beyond a full bucket)."""
    return max(now, max(now if tat is None else tat, now) + delta)


def call_slot(rpm: int, burst: int) -> tuple[float, float]:
    """``(increment, tolerance)`` of one call under ``rpm`` with bursts of ``burst`` calls."""
    increment = 60.0 / rpm
    return increment, (max(burst, 1) - 1) * increment


def token_slot(tokens: int, tpm: int) -> tuple[float, float]:
    """``(increment, tolerance)`` of a call of ``tokens`` under ``tpm``: the bucket holds one
    minute's tokens, so the call may start once its tokens fit in it. ``ValueError`` when they
    never can (``tokens > tpm``)."""
    if tokens > tpm:
        raise ValueError(f"{tokens} tokens are more than a budget of {tpm} a minute")
    per_token = 60.0 / tpm
    return tokens * per_token, (tpm - tokens) * per_token


def most_in_window(starts: list[float], sizes: list[float], window: float) -> float:
    """The largest total size of the starts in any half-open window of ``window`` seconds
    (what a budget's promise bounds: ``window / T + burst``). ``starts`` sorted."""
    best, total, left = 0.0, 0.0, 0
    for right, start in enumerate(starts):
        total += sizes[right]
        while start - starts[left] >= window:
            total -= sizes[left]
            left += 1
        best = max(best, total)
    return best
