"""The call log and its totals, shared by council sessions and judgments.

Every attempt at a model call, failed or cancelled ones included, becomes one
``CallRecord``; ``Usage`` sums a list of them. A ``CallLog`` collects a run's records and,
with a journal (the store), writes each attempt when it starts and again when it ends,
so a call in flight when the process dies is still on record (it may have been billed).
The store commits these rows by group, at the end of the event loop's turn or with its next
write, whichever comes first (``Store.journal_calls``).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from pydantic import BaseModel, Field

from council._util.logs import get_logger
from council.accounting import observers

log = get_logger("council.usage")


def known_cost(cost: float | None) -> float | None:
    """A cost that is not a finite number (an inf or nan price, an overflowing sum) is unknown."""
    return cost if cost is None or math.isfinite(cost) else None


def reported_usage(
    usage: Any, prompt: str = "prompt_tokens", completion: str = "completion_tokens"
) -> tuple[int, int, bool]:
    """A provider's usage block (a JSON object) as ``(prompt tokens, completion tokens, trusted)``:
    every backend reads its counts here. A count is an integer of at least 0; anything else (a
    string, a bool, a negative, fractional or non-finite number, a list), or a block that is not an
    object, cannot be trusted: it reads as 0 with ``trusted`` False, and the call is settled at its
    worst case (``ModelClient``; docs/methods.md, "Spend caps"). An absent block or count is 0, as
    from a server that reports none."""
    if usage is None:
        return 0, 0, True
    if not isinstance(usage, Mapping):
        return 0, 0, False
    values = usage.get(prompt), usage.get(completion)
    counts = [token_count(value) for value in values]
    trusted = all(count is not None or value is None for count, value in zip(counts, values, strict=True))
    return counts[0] or 0, counts[1] or 0, trusted


def token_count(value: Any) -> int | None:
    """A reported token count: an int of at least 0 (a float with an integral value too); None for
    anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value.is_integer():
        return int(value)
    return None


class CallRecord(BaseModel):
    call_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    """One attempt's identity: its started and finished records share it."""
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
    cached: bool = False
    """Answered from the call cache: nothing was sent, nothing paid (``cost_usd`` 0)."""
    saved_usd: float | None = None
    """For a cached call: what the reply cost when it was made (None: unknown)."""
    usage_untrusted: bool = False
    """The usage the provider reported could not be trusted (unreadable, or more than the call could
    take): the tokens are the call's bounds and the cost its worst case (docs/methods.md, "Spend caps")."""

    def row(self) -> dict[str, Any]:
        """The fields as a new dict, equal to ``model_dump()``: every field is a plain value, and
        each call's row is taken three times (started, finished, and with its run's result)."""
        return dict(self.__dict__)


CallSink = Callable[[CallRecord], None]
"""Receives each finished attempt. A sink with a ``started(record)`` method (a ``CallLog``)
is also told of each attempt as it is sent."""


class CallJournal(Protocol):
    """Where attempts are written as they start and as they finish (the store)."""

    def call_started(self, record: CallRecord) -> None: ...

    def call_finished(self, record: CallRecord) -> None: ...


class CallLog:
    """One run's call log: the finished attempts in ``records``; each attempt also goes to
    the journal when it starts and when it ends, and finished ones to ``then``."""

    def __init__(self, journal: CallJournal | None = None, then: CallSink | None = None) -> None:
        self.records: list[CallRecord] = []
        self.journal = journal
        self.then = then

    def started(self, record: CallRecord) -> None:
        self._write("call_started", record)
        forward = getattr(self.then, "started", None)
        if forward is not None:
            forward(record)

    def __call__(self, record: CallRecord) -> None:
        self.records.append(record)
        self._write("call_finished", record)
        if not isinstance(self.then, CallLog):  # the last log of a chain tells the observers: once an attempt
            observers.call_finished(record)
        if self.then is not None:
            self.then(record)

    def _write(self, method: str, record: CallRecord) -> None:
        if self.journal is None:
            return
        try:
            getattr(self.journal, method)(record)
        except Exception as exc:  # the final write records the call anyway; the call goes on
            log.warning("could not write the call log", call_id=record.call_id, error=str(exc))

    def __iter__(self) -> Iterator[CallRecord]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)


class Usage(BaseModel):
    calls: int = 0
    failed_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    """None when any call's price was unknown (the sum would be a guess)."""
    cached_calls: int = 0
    """Calls answered from the call cache (counted in ``calls``, at cost 0)."""
    saved_usd: float | None = 0.0
    """What the cached calls cost when they were made (None: some price unknown)."""

    @classmethod
    def of(cls, calls: Iterable[CallRecord]) -> Usage:
        """Totals over every attempt in the call log, failed ones included."""
        calls = list(calls)
        costs = [c.cost_usd for c in calls if c.ok]
        total = None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 8)
        return cls(
            calls=len(calls),
            failed_calls=sum(1 for c in calls if not c.ok),
            prompt_tokens=sum(c.prompt_tokens for c in calls),
            completion_tokens=sum(c.completion_tokens for c in calls),
            cost_usd=known_cost(total),
            cached_calls=len(saved := [c.saved_usd for c in calls if c.cached]),
            saved_usd=None if any(c is None for c in saved) else known_cost(round(sum(c for c in saved if c), 8)),
        )
