"""The bearer token: one middleware in front of every ``/v1`` route and ``/metrics`` (the probes,
``/livez``, ``/readyz`` and ``/health``, and the web app's own files need none; the web app sends
the token with each API call)."""

from __future__ import annotations

import secrets

from starlette.types import ASGIApp, Receive, Scope, Send

from council.server.errors import openai_error

PROTECTED_PREFIX = "/v1/"
PROTECTED_PATHS = frozenset({"/metrics"})


def token_matches(header: str, token: str) -> bool:
    scheme, _, value = header.partition(" ")
    # Compared as bytes: the header's own (Starlette decodes it as Latin-1, which undoes
    # exactly) against the token's UTF-8. compare_digest refuses non-ASCII str.
    sent = value.strip().encode("latin-1")
    expected = token.encode("utf-8", "surrogateescape")
    return scheme.lower() == "bearer" and secrets.compare_digest(sent, expected)


class BearerTokenMiddleware:
    """Answers 401 to any ``/v1`` or ``/metrics`` request without ``Authorization: Bearer TOKEN``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (scope["path"].startswith(PROTECTED_PREFIX) or scope["path"] in PROTECTED_PATHS):
            header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"authorization"), "")
            if not token_matches(header, self.token):
                denied = openai_error(401, "missing or invalid bearer token", code="invalid_api_key")
                await denied(scope, receive, send)
                return
        await self.app(scope, receive, send)
