"""A package's public names, each imported from its module when first asked for.

Packages export this way so that importing one (or one of its modules) loads only what is used:
``council --help`` and a run's first call do not wait for models they never touch.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str], *, keep: bool = False) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps each name to its module, or to
    ``"module:attribute"`` where the package exports it under another name. ``keep``: a name once
    imported becomes the package's own attribute, so that a front-end importing it inside a
    request handler finds it as fast as any other (as an import at first use would)."""

    def __getattr__(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = target.partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        if keep:
            setattr(sys.modules[package], name, value)
        return value

    return __getattr__
