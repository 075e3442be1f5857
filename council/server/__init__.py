"""``council serve`` (:mod:`.app`). The defaults of the operator's settings live here, where the
command's options read them without importing the server."""

MAX_SESSIONS = 256
"""Sessions one server process runs at once (:mod:`.limits`)."""
READ_TIMEOUT_SECONDS = 10
"""How long a request may take to arrive whole (:mod:`.connections`)."""
