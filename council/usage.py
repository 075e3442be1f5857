"""The call log and its totals, shared by council sessions and judgments.

Every attempt at a model call, failed or cancelled ones included, becomes one
``CallRecord``; ``Usage`` sums a list of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pydantic import BaseModel


class CallRecord(BaseModel):
    stage: str
    member: str
    model: str
    started_at: str
    latency_ms: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    attempt: int = 1
    ok: bool = True
    error: str | None = None


CallSink = Callable[[CallRecord], None]


class Usage(BaseModel):
    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    """None when any call's price was unknown (the sum would be a guess)."""

    @classmethod
    def of(cls, calls: Iterable[CallRecord]) -> Usage:
        """Totals over every attempt in the call log, failed ones included."""
        calls = list(calls)
        costs = [c.cost_usd for c in calls if c.ok]
        return cls(
            calls=len(calls),
            failed_calls=sum(1 for c in calls if not c.ok),
            prompt_tokens=sum(c.prompt_tokens for c in calls),
            completion_tokens=sum(c.completion_tokens for c in calls),
            cost_usd=None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 8),
        )
