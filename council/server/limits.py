"""How many sessions one server process runs at once (``council serve --max-sessions``).

Chat completions, streamed or not, and sessions started with ``POST /v1/sessions`` count alike,
from the moment a valid request is accepted until the session ends, however it ends (a stream the
client leaves, a cancelled background session). One more is refused before anything runs: a 429 in
OpenAI's shape with ``retry-after``, which OpenAI's SDKs wait out and retry, rather than accepted
into an ever longer queue of sessions that all wait on the same models and the same event loop.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from council.server import MAX_SESSIONS
from council.server.errors import RequestError, openai_error

RETRY_AFTER_SECONDS = 1


class SessionLimit:
    """Places for ``limit`` sessions; the server's event loop is the only one to take and give them
    back, so a count is all it needs."""

    def __init__(self, limit: int = MAX_SESSIONS) -> None:
        self.limit = limit
        self.running = 0

    def take(self) -> None:
        """A place for one session, or a ``RequestError`` holding the 429."""
        if self.running >= self.limit:
            raise RequestError(too_many_sessions(self.limit))
        self.running += 1

    def give_back(self) -> None:
        self.running -= 1

    def until_sent(self, response: ASGIApp) -> HeldUntilSent:
        """``response``, giving its session's place back once it has been sent or abandoned."""
        return HeldUntilSent(response, self.give_back)


class HeldUntilSent:
    """An ASGI response that calls ``release`` when its sending ends, whichever way: a stream holds
    its session for as long as it runs, and a client that leaves cancels it here too."""

    def __init__(self, response: ASGIApp, release: Callable[[], None]) -> None:
        self.response = response
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.response(scope, receive, send)
        finally:
            self.release()


def too_many_sessions(limit: int) -> JSONResponse:
    return openai_error(
        429,
        f"this server is running as many sessions as it takes at once ({limit}, --max-sessions); retry shortly",
        "requests",
        "rate_limit_exceeded",
        headers={"retry-after": str(RETRY_AFTER_SECONDS)},
    )
