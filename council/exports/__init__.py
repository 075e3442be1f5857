"""Session exports, their row shapes and their published JSON Schemas.

- ``sessions``: session exports shaped in one place (``council export``, ``council sessions list``).
- ``shapes``: every export line as a pydantic model (the source of docs/schemas/).
- ``rows``: the flat tables' columns, light enough to load without the session machinery.
- ``wording``: a session's result in words (what went wrong, the reviewers' agreement), for every front-end.
"""

from __future__ import annotations

from council._util.lazy_exports import lazy_exports

_EXPORTS = {
    "SHAPES": "council.exports.sessions",
    "export_sessions": "council.exports.sessions",
    "session_listing": "council.exports.sessions",
    "stored_result": "council.exports.sessions",
    "problems": "council.exports.wording",
    "w_text": "council.exports.wording",
    "without_prefix": "council.exports.wording",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
