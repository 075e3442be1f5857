"""Importing a library without the optional packages it would load, in one thread only.

Some libraries import an optional package only to support it (sqlite-utils: numpy and pandas;
structlog: rich), and that import is most of their start-up cost. :func:`refused` keeps those
packages from them while they are imported: the packages' imports raise ``ImportError`` in the
importing thread, as if they were not installed. It used to be done by putting ``None`` in
``sys.modules``, which every thread sees: another thread importing the package meanwhile (a
session's statistics beside its calls, a progress bar) failed. An import finder can tell threads
apart; every other thread's imports, and any later import, go on as usual.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _RefusedInThisThread:
    """An import finder that refuses ``names`` (and their submodules) to the thread that made
    it, and leaves every other import, and every other thread's, to the next finders."""

    def __init__(self, names: tuple[str, ...], why: str) -> None:
        self.names, self.why = names, why
        self.thread = threading.get_ident()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if threading.get_ident() == self.thread and name.partition(".")[0] in self.names:
            raise ImportError(f"{name} is left out of {self.why}")
        return None


@contextmanager
def refused(*names: str, why: str) -> Iterator[None]:
    """Within the block, this thread's imports of ``names`` raise ``ImportError``; a package
    already imported is not refused (it costs nothing more, and its importers expect it)."""
    missing = tuple(name for name in names if name not in sys.modules)
    if not missing:
        yield
        return
    finder = _RefusedInThisThread(missing, why)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
