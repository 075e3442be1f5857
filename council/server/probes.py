"""The probes an orchestrator asks: ``GET /livez`` (the process answers), ``GET /readyz`` (the
store answers a trivial query within ``READY_TIMEOUT_S``: 200, else 503 with the reason in one
line) and ``GET /health`` (kept as it was: 200 while the process answers, as ``/livez``). None
needs the bearer token (:mod:`.auth`): they say nothing about the data."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from council._util.background import asking_store
from council.server.state import server_of

READY_TIMEOUT_S = 2.0


async def livez(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    server = server_of(request)
    if server.ping is not None and not server.ping.done():
        # The last probe's query still waits (a stopped database): one waits at most, never a pile.
        return _not_ready(f"the store did not answer within {READY_TIMEOUT_S:g} s")
    server.ping = asyncio.ensure_future(asking_store(server.store, server.store.ping))
    try:
        await asyncio.wait_for(asyncio.shield(server.ping), READY_TIMEOUT_S)
    except TimeoutError:
        return _not_ready(f"the store did not answer within {READY_TIMEOUT_S:g} s")
    except Exception as exc:
        return _not_ready(f"the store failed: {' '.join(str(exc).split())}"[:500])
    return JSONResponse({"status": "ready"})


def _not_ready(reason: str) -> Response:
    return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)
