"""``council mcp``: the council as Model Context Protocol tools (a front-end, like ``cli`` and ``server``).

- ``server``: the tools, over stdio, on the official SDK (imported only when serving).
"""

from __future__ import annotations

from council._util.lazy_exports import lazy_exports

_EXPORTS = {"serve": "council.mcp.server"}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
