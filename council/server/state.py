"""What one running server holds: a ``Council`` per council name, the model clients they share, the store."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from council.api import LoadedConfig
from council.errors import NotFoundError
from council.server import MAX_SESSIONS, protocol
from council.server.background import LiveSessions
from council.server.limits import SessionLimit

if TYPE_CHECKING:
    from council.server.metrics import ServerMetrics


class CouncilServer:
    """Holds one ``Council`` per council name, sharing model clients and the store."""

    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        max_body_bytes: int,
        max_sessions: int = MAX_SESSIONS,
        metrics: ServerMetrics | None = None,
    ) -> None:
        from council.api import open_store

        self.loaded = loaded
        self.max_body_bytes = max_body_bytes
        self.store = open_store()
        # A dead process's (another replica's) sessions are marked interrupted while this server
        # runs, not at the next command: its streams and pages end.
        self.store.recover_while_open()
        self.clients: dict[str, Any] = {}  # shared across councils: one limit per model alias
        self.councils: dict[str, Any] = {}
        self.fingerprints: dict[str, str] = {}
        self.started = int(time.time())  # the models' ``created``: when this server loaded them
        self.sessions = SessionLimit(max_sessions)  # every session this process runs, of any route
        self.metrics = metrics
        self.live = LiveSessions(self.store, self.sessions, metrics)  # sessions started with POST /v1/sessions
        self.ping: asyncio.Future[None] | None = None  # the readiness probe's query (.probes)

    def council(self, name: str) -> Any:
        if name not in self.loaded.config.councils:
            known = ", ".join(sorted(self.loaded.config.councils))
            raise NotFoundError(f"the model {name!r} does not exist; councils served: {known}")
        if name not in self.councils:
            from council.api import Council

            self.councils[name] = Council(self.loaded, council=name, store=self.store, client_pool=self.clients)
        return self.councils[name]

    def fingerprint(self, name: str) -> str:
        if name not in self.fingerprints:
            self.fingerprints[name] = protocol.system_fingerprint(self.council(name))
        return self.fingerprints[name]

    async def aclose(self) -> None:
        await self.live.aclose()
        for client in self.clients.values():
            await client.aclose()
        self.store.close()


def server_of(request: Request) -> CouncilServer:
    """The running server (set by the app's lifespan)."""
    return request.app.state.council_server  # type: ignore[no-any-return]
