"""How long a client may take to send a request: ``council serve --read-timeout``.

uvicorn closes a kept-alive connection left idle after a response (``timeout_keep_alive``), but
sets no limit on a request being received: a connection that sends part of its headers, or of
its body, a byte now and then, is held for as long as the client likes (slowloris). Opening one
needs no token, and a few hundred of them used up the process's file descriptors, so that even
``/health`` failed. Here each request must arrive whole, its headers and its body, within
``read_timeout`` seconds of its first byte (or of the connection opening), or the connection is
closed. Responses are not limited: once a request has arrived, a streamed completion or a
session's event stream lasts as long as it needs.

The protocol is uvicorn's own HTTP/1.1 one (h11) with this one deadline added; the
``ServeConfig`` carries the number to every server process (``--workers`` pickles it to each).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from council.server import READ_TIMEOUT_SECONDS

_RECEIVING = (h11.IDLE, h11.SEND_BODY)  # the client's side, while a request is on its way


class ServeConfig(uvicorn.Config):
    """uvicorn's config, with the read timeout and the protocol that keeps it."""

    def __init__(self, app: Any, *, read_timeout: float = READ_TIMEOUT_SECONDS, **options: Any) -> None:
        super().__init__(app, http=ReadTimeoutProtocol, **options)
        self.read_timeout = read_timeout


class ReadTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request has not arrived whole in time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read_timeout: float = getattr(self.config, "read_timeout", READ_TIMEOUT_SECONDS)
        self._read_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._unwatch()
        super().connection_lost(exc)

    def _watch(self) -> None:
        """Set the deadline when a request starts (not again for each of its bytes: a client
        trickling them must not push it back); drop it once the request has arrived."""
        if self.conn.their_state not in _RECEIVING:
            self._unwatch()
        elif self._read_deadline is None and not self.transport.is_closing():
            self._read_deadline = self.loop.call_later(self.read_timeout, self._too_slow)

    def _unwatch(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _too_slow(self) -> None:
        self._read_deadline = None
        if self.conn.their_state in _RECEIVING and not self.transport.is_closing():
            # An app reading the body sees the client gone (council.server.body); no reply can be
            # sent to half a request line.
            self.transport.close()
