"""The one hook through which something outside the library counts its work (the server's and
the worker's ``/metrics``, the worker's log lines, traces): an observer registered with
:func:`observe` is told of each provider call's attempt as it ends (every ``CallLog`` tells it,
cached and failed attempts too), of each call a spend cap refuses, of each wait for a rate budget
(``rpm``/``tpm``), and of a queue worker's claims and finished items. The library imports no
metrics package; with no observer registered (no server running) each notice is a loop over an
empty tuple."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from council.accounting.usage import CallRecord


class Observer:
    """What an observer may be told; each notice ignored unless overridden. Only ids, counts,
    statuses and durations: never a prompt, a reply or a secret."""

    def call_finished(self, record: CallRecord) -> None:
        """A provider call's attempt ended (``record``: its model, tokens, cost, outcome)."""

    def spend_refused(self) -> None:
        """A spend cap refused to start a call."""

    def rate_waited(self, model: str, seconds: float) -> None:
        """A call of ``model`` (its model string, as a ``CallRecord``'s) waited ``seconds`` for its rate budget."""

    def items_claimed(self, batch_ids: list[str]) -> None:
        """A queue worker claimed items (one batch id per item, in claim order)."""

    def item_finished(self, batch_id: str, item_id: str, status: str, seconds: float) -> None:
        """A queue worker is done with an item: ``judged``, ``failed``, ``dropped`` (another worker
        recorded it first), ``stopped`` (a spend cap cut it short: back in the queue) or ``error``
        (the worker stopped mid-item: back in the queue when its lease passes)."""


_observers: tuple[Observer, ...] = ()


def observe(observer: Observer) -> Callable[[], None]:
    """Register ``observer`` for this process; the function that removes it again."""
    global _observers
    _observers = (*_observers, observer)

    def remove() -> None:
        global _observers
        _observers = tuple(o for o in _observers if o is not observer)

    return remove


def call_finished(record: CallRecord) -> None:
    for observer in _observers:
        observer.call_finished(record)


def spend_refused() -> None:
    for observer in _observers:
        observer.spend_refused()


def rate_waited(model: str, seconds: float) -> None:
    for observer in _observers:
        observer.rate_waited(model, seconds)


def items_claimed(batch_ids: list[str]) -> None:
    for observer in _observers:
        observer.items_claimed(batch_ids)


def item_finished(batch_id: str, item_id: str, status: str, seconds: float) -> None:
    for observer in _observers:
        observer.item_finished(batch_id, item_id, status, seconds)
