"""The one hook through which something outside the library counts its work (the server's
``/metrics``): an observer registered with :func:`observe` is told of each provider call's
attempt as it ends (every ``CallLog`` tells it, cached and failed attempts too) and of each call
a spend cap refuses. The library imports no metrics package; with no observer registered (no
server running) each notice is a loop over an empty tuple."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from council.accounting.usage import CallRecord


class Observer(Protocol):
    def call_finished(self, record: CallRecord) -> None: ...

    def spend_refused(self) -> None: ...


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
