"""Work done beside a stage's calls in a worker thread, begun once the calls are on the wire.

While a process's first calls wait for their replies, it reads LiteLLM's price map (one
``json.loads`` of a 3 MB file, ~20 ms), imports what the rest of the session needs and draws the
agreement test's null distribution. Each holds the interpreter for up to ~20 ms at a time
inside one C call (the JSON parse, an extension module's initialisation), and the event loop,
which still has to connect and write the requests just set off, waits as long: begun together
with the calls, that work made a ``council run``'s first replies 20–40 ms late (docs/benchmarks.md,
section 34). Requests reach a local server within ~5 ms of the loop, so the work first waits
:data:`GRACE_S` (its thread asleep, the interpreter free), or less when it is needed sooner.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

GRACE_S = 0.02
"""How long work begun beside calls waits for them to be written first."""

_T = TypeVar("_T")


def after_grace(job: Callable[[], _T], start: threading.Event | None = None) -> Callable[[], _T]:
    """``job``, for a worker thread: run after :data:`GRACE_S`, or as soon as ``start`` is set."""

    def run() -> _T:
        if start is None:
            time.sleep(GRACE_S)
        else:
            start.wait(GRACE_S)
        return job()

    return run
