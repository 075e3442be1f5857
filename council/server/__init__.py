"""``council serve`` (:mod:`.app`). The defaults of the operator's settings live here, where the
command's options read them without importing the server; the names ``council serve`` starts the
server with are imported when first asked for.
"""

from council._util.lazy_exports import lazy_exports

MAX_SESSIONS = 256
"""Sessions one server process runs at once (:mod:`.limits`)."""
READ_TIMEOUT_SECONDS = 10
"""How long a request may take to arrive whole (:mod:`.connections`)."""

_EXPORTS = {
    "create_app": "council.server.app",
    "is_loopback": "council.server.app",
    "check_allowed_host": "council.server.guard",
    "check_cors_origin": "council.server.protocol",
    "ServeConfig": "council.server.connections",
    "ServerMetrics": "council.server.metrics",
    "serve_metrics": "council.server.metrics",
}

__all__ = ["MAX_SESSIONS", "READ_TIMEOUT_SECONDS", *sorted(_EXPORTS)]

__getattr__ = lazy_exports(__name__, _EXPORTS)
