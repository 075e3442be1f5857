"""Sessions started over HTTP, and every session's events served from the store.

``POST /v1/sessions {"council", "question", "seed"?, "history"?}`` starts a session in the server's
background and answers ``{"session_id"}`` as soon as the session exists (202); one known to fail
at once, too large for a quorum of members' ``tpm``, gets the chat route's 400. Its events
(:mod:`council.session.events`), like those of every session the server runs (chat completions
too), are written to the store in batches (:mod:`council.server.background`), and
``GET /v1/sessions/{id}/events`` streams them as SSE from the store, polling it, so any replica
sharing the store can serve a session another one runs. Each event's SSE ``id`` is its
``seq``; a client resumes with ``Last-Event-ID`` (or ``?after=N``). The stream ends after
``session_finished``; a stored session with no events (run by the CLI) gets one
``session_finished`` built from its row.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from council._util.background import asking_store
from council.api import MAX_SEED, check_request, session_listing
from council.errors import CouncilError, NotFoundError
from council.server.body import parse_as, read_json
from council.server.errors import RequestError, error_for, openai_error
from council.server.protocol import session_headers
from council.server.state import server_of
from council.untrusted.inputs import whole_number

POLL_SECONDS = 0.05  # how often a stream looks for new events in the store
STATUS_EVERY = 20  # polls between looks at the session's status (has it ended elsewhere?)
KEEPALIVE_SECONDS = 15.0
MAX_LIST = 500
MAX_SEQ = 2**63 - 1  # an event's seq is a 64-bit integer in the store
FINAL_TYPES = frozenset({"session_finished"})  # after it, a session sends nothing more


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    role: Literal["system", "user", "assistant"]
    content: str


class StartSession(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # "seed": "7" is a 400, never coerced
    council: str = Field(min_length=1)
    question: str
    seed: int | None = Field(None, ge=0, le=MAX_SEED)
    history: list[Turn] = []  # the conversation's earlier turns (a follow-up question), as the chat route's messages


async def start_session(request: Request) -> Response:
    server = server_of(request)
    try:
        req = parse_as(StartSession, await read_json(request, server.max_body_bytes))
        council = server.council(req.council)
        history = [turn.model_dump() for turn in req.history]
        question, _ = check_request(req.question, seed=req.seed, history=history)
        # One no quorum of members can take fails at once: the caller gets that 400, as from the chat route.
        too_large = council.too_large(question, history)
        session_id = await server.live.start(council, question, req.seed, history=history, to_end=too_large)
    except RequestError as exc:
        return exc.response
    except CouncilError as exc:  # refused before it began (the session's reason, as a 4xx/502)
        return error_for(exc)
    location = f"/v1/sessions/{session_id}"
    headers = {"location": location, **session_headers(session_id)}
    return JSONResponse({"session_id": session_id}, status_code=202, headers=headers)


def _resume_point(request: Request) -> int:
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    return whole_number(raw, "Last-Event-ID (or after)", 0, MAX_SEQ)


async def session_events(request: Request) -> Response:
    store = server_of(request).store
    try:
        after = _resume_point(request)
        row = await asking_store(store, store.get_session, request.path_params["session_id"])
    except NotFoundError as exc:
        return openai_error(404, str(exc), "invalid_request_error", "not_found")
    except CouncilError as exc:
        return error_for(exc)
    return StreamingResponse(
        _events(store, row["id"], after),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )


async def _events(store: Any, session_id: str, after: int) -> AsyncIterator[bytes]:
    cursor, polls, quiet = after, 0, 0.0
    yield b"retry: 1000\n\n"  # an EventSource reconnects after 1 s (with Last-Event-ID)
    while True:
        rows = await _events_after(store, session_id, cursor)
        for seq, kind, data in rows:
            yield f"id: {seq}\nevent: {kind}\ndata: {data}\n\n".encode()
            cursor = seq
            if kind in FINAL_TYPES:
                return
        if rows:
            quiet = 0.0
            continue
        polls += 1
        # Caught up: has the session ended (a reconnect after its last event, a session the CLI
        # ran)? Asked at once, then every STATUS_EVERY polls while it runs.
        if polls % STATUS_EVERY == 1:
            row = await asking_store(store, store.get_session, session_id)
            if row["status"] != "running" and not await _events_after(store, session_id, cursor, 1):
                yield _finished_from_row(row)  # run without events (the CLI), or ended unrecorded
                return
        await asyncio.sleep(POLL_SECONDS)
        quiet += POLL_SECONDS
        if quiet >= KEEPALIVE_SECONDS:
            quiet = 0.0
            yield b": keep-alive\n\n"


async def _events_after(store: Any, session_id: str, after: int, limit: int = 1000) -> list[Any]:
    """The session's events after ``after``; on PostgreSQL read in a worker thread (``asking_store``):
    this process's events still to be committed are committed first, in the store's write thread,
    behind the session writes queued there, and the event loop does not wait."""
    return await asking_store(store, store.events_after, session_id, after, limit)


def _finished_from_row(row: dict[str, Any]) -> bytes:
    result = json.loads(row["result"]) if row.get("result") else {}
    status = row["status"] if row["status"] in ("complete", "partial", "failed", "interrupted") else "failed"
    event = {
        "type": "session_finished",
        "seq": 0,
        "session_id": row["id"],
        "at": row.get("finished_at") or "",
        "status": status,
        "duration_ms": result.get("duration_ms") or 0.0,
        "partial_reasons": result.get("partial_reasons") or [],
        "error": row.get("error"),
    }
    return f"event: session_finished\ndata: {json.dumps(event)}\n\n".encode()


async def list_sessions(request: Request) -> Response:
    q = request.query_params
    try:
        limit = whole_number(q.get("limit", "20"), "limit", 1, MAX_LIST)
        store = server_of(request).store
        rows = await asking_store(store, store.list_sessions, limit=limit, since=q.get("since"),
                                council=q.get("council"), search=q.get("q") or None)  # fmt: skip
    except CouncilError as exc:
        return error_for(exc)
    return JSONResponse([session_listing(r) for r in rows])
