"""A caller's W3C trace context (``traceparent``, ``tracestate``) continued by the sessions its
request starts (:func:`council._util.tracing.continue_trace`). Installed only when traces are
made: off, no request pays for it."""

from __future__ import annotations

from typing import Any

from council._util import tracing

_NAMES = {b"traceparent": "traceparent", b"tracestate": "tracestate"}


class TraceContextMiddleware:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier: dict[str, list[str]] = {}
        for name, value in scope["headers"]:
            if name in _NAMES:
                carrier.setdefault(_NAMES[name], []).append(value.decode("latin-1"))
        # Set for every request, none or not: a request never runs under another's context.
        token = tracing.continue_trace(carrier)
        try:
            await self.app(scope, receive, send)
        finally:
            tracing.end_continuing(token)
