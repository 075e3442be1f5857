"""``POST /v1/chat/completions``: a council answers as one chat model.

The chairman's answer comes back as an ordinary completion; the council's details
(session id, status, ranking, flags) ride in an extra ``council`` field that OpenAI
clients ignore. With ``stream: true`` the chairman's answer arrives as OpenAI SSE chunks as it
is written, preceded by the council's progress as ``reasoning_content`` deltas
(:mod:`council.server.progress`).
Which request parameters are honoured, ignored or refused: :mod:`council.server.protocol`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from council.api import JsonFormat, SessionResult, check_request, partial_line_of
from council.errors import CouncilError, CouncilFailure
from council.server import protocol
from council.server.background import EventLog
from council.server.body import parse_as, read_json
from council.server.errors import RequestError, error_for, openai_error
from council.server.limits import HeldUntilSent
from council.server.progress import progress_line
from council.server.protocol import session_headers
from council.server.state import server_of


@dataclass(frozen=True)
class _Reply:
    """What every part of one completion shares."""

    id: str
    created: int
    """Unix time the request arrived."""
    model: str
    system_fingerprint: str
    include_usage: bool = False


def _usage(result: SessionResult) -> dict[str, int]:
    """The council's totals: every member, review and synthesis call of the session."""
    return {
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "total_tokens": result.usage.prompt_tokens + result.usage.completion_tokens,
    }


def _completion_payload(result: SessionResult, reply: _Reply) -> dict[str, Any]:
    return {
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "system_fingerprint": reply.system_fingerprint,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": answer_text(result)}, "finish_reason": "stop"}
        ],
        "usage": _usage(result),
        "council": council_details(result),
    }


def _format_failure(result: SessionResult) -> CouncilFailure | None:
    """A session that cannot answer in the requested format: the fallback prose is no answer."""
    if result.synthesis.status == "ok":
        return None
    why = result.synthesis.error or "no synthesis"
    return CouncilFailure(f"the council's answer did not match response_format: {why} (session {result.session_id})")


def answer_text(result: SessionResult) -> str:
    """The text a user reads (``SessionResult.answer``): a client shows only the text, so a partial
    council's says so in its first line, and without a synthesis it is the top-ranked member's."""
    return result.answer or ""


def council_details(result: SessionResult) -> dict[str, Any]:
    return {
        "session_id": result.session_id,
        "status": result.status,
        "ranking": [e.model_dump() for e in result.consensus.ranking] if result.consensus else [],
        "kendall_w": result.consensus.kendall_w if result.consensus else None,
        "kendall_w_p_value": result.consensus.kendall_w_p_value if result.consensus else None,
        "chairman": result.synthesis.chairman,
        "flags": result.flags,
        "failures": [f.model_dump() for f in result.failures],
        "partial_reasons": result.partial_reasons,
        "cost_usd": result.usage.cost_usd,
        "offline_default": result.offline_default,
        "partial_line": partial_line_of(result),
        # As the session API's synthesis.structure: the labels the chairman saw mapped to members.
        "synthesis_structure": structure.model_dump() if (structure := result.synthesis.structure) else None,
    }


async def chat_completions(request: Request) -> Response | HeldUntilSent:
    server = server_of(request)
    try:
        body = await read_json(request, server.max_body_bytes)
        req = parse_as(protocol.ChatCompletionRequest, body)
        protocol.check_parameters(body)
        protocol.check_messages(req.messages)
        fmt = protocol.response_format(req.response_format)
        progress = protocol.include_progress(req)
        council = server.council(req.model)
    except RequestError as exc:
        return exc.response
    except protocol.ProtocolError as exc:
        return openai_error(400, str(exc), "invalid_request_error", exc.code, param=exc.param)
    except CouncilError as exc:
        return error_for(exc)
    *earlier, last = req.messages
    if last.role != "user" or not last.text().strip():
        return openai_error(400, "the last message must be a non-empty user message", "invalid_request_error")
    history = protocol.history_messages(earlier)
    try:  # checked before a stream starts: a bad request is a 400, not an error inside a 200
        question, _ = check_request(last.text(), seed=req.seed, history=history)
        server.sessions.take()  # one place under --max-sessions, or a 429
    except CouncilError as exc:
        return error_for(exc)
    except RequestError as exc:
        return exc.response
    reply = _Reply(
        id=f"chatcmpl-{uuid.uuid4().hex}",
        created=int(time.time()),
        model=council.name,
        system_fingerprint=server.fingerprint(req.model),
        include_usage=protocol.include_usage(req),
    )
    try:
        response = await _answer(request, council, req, question, history, fmt, reply, progress)
    except BaseException:
        server.sessions.give_back()
        raise
    return server.sessions.until_sent(response)  # a stream holds its place while it runs


async def _answer(
    request: Request,
    council: Any,
    req: protocol.ChatCompletionRequest,
    question: str,
    history: list[dict[str, str]],
    fmt: JsonFormat | None,
    reply: _Reply,
    progress: bool,
) -> Response:
    """The session run for a valid request: a stream, a completion or its error."""
    server = server_of(request)
    last = req.messages[-1]
    # So the web app, on any replica, can watch this session too.
    events = EventLog(server.store, metrics=server.metrics)
    if req.stream:
        source = council
        if council.too_large(question, history):
            # No quorum of members can take it: the session fails at once, before any call. Run
            # it before the stream starts, so the client gets the 400 (and the session is kept).
            source, failure = await _run_first(council, question, history, req.seed, fmt, events)
            if failure is not None:
                return failure
        items = source.stream(last.text(), history=history, seed=req.seed, synthesis_format=fmt)
        try:  # its first event (before any call) names the session, for the headers
            first = await anext(items)
        except CouncilError as exc:
            events.close()
            return error_for(exc)
        return StreamingResponse(
            _stream(_after(first, items), fmt, reply, progress, events),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no", **session_headers(first.session_id)},
        )
    try:
        result = await _unless_disconnected(
            request,
            council.run(last.text(), history=history, seed=req.seed, synthesis_format=fmt, on_event=events.add),
        )
        if result is not None and fmt is not None and (failure := _format_failure(result)) is not None:
            raise failure
    except CouncilError as exc:
        return error_for(exc)
    finally:
        events.close()
    if result is None:  # the client hung up: the session was cancelled and recorded interrupted
        return Response(status_code=499)
    return JSONResponse(_completion_payload(result, reply), headers=session_headers(result.session_id, result.status))


class _Replay:
    """A session already run, streamed again as ``Council.stream`` would have: its events, then
    its result."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    async def stream(self, *_: Any, **__: Any) -> AsyncIterator[Any]:
        for item in self.items:
            yield item


async def _run_first(
    council: Any,
    question: str,
    history: list[dict[str, str]],
    seed: int | None,
    fmt: JsonFormat | None,
    events: EventLog,
) -> tuple[Any, Response | None]:
    """Run a session to its end before a stream starts: a ``_Replay`` of it, or the error response."""
    items: list[Any] = []
    try:
        async for item in council.stream(question, history=history, seed=seed, synthesis_format=fmt):
            items.append(item)
    except CouncilError as exc:
        for item in items:
            events.add(item)
        events.close()
        return None, error_for(exc)
    return _Replay(items), None


async def _unless_disconnected(request: Request, work: Any) -> Any:
    """``await work``, unless the client disconnects first: then the work is cancelled (a
    session records itself interrupted) and None is returned. Streaming responses get the
    same from Starlette, which cancels the stream when the client goes."""
    task = asyncio.ensure_future(work)

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
    if task.cancelled() or not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return None
    return task.result()


def _sse(payload: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def _chunk_of(reply: _Reply, choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": reply.id,
        "object": "chat.completion.chunk",
        "created": reply.created,
        "model": reply.model,
        "system_fingerprint": reply.system_fingerprint,
        "choices": choices,
    }


def _chunk(
    reply: _Reply, delta: dict[str, Any], finish: str | None = None, extra: dict[str, Any] | None = None
) -> bytes:
    payload = _chunk_of(reply, [{"index": 0, "delta": delta, "finish_reason": finish}])
    if reply.include_usage:
        payload["usage"] = None  # as OpenAI: null on every chunk but the last
    if extra:
        payload.update(extra)
    return _sse(payload)


def _failed(exc: CouncilError) -> list[bytes]:
    error = {"error": {"message": str(exc), "type": "council_error", "param": None, "code": "council_failed"}}
    return [_sse(error), b"data: [DONE]\n\n"]


async def _after(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    yield first
    async for item in rest:
        yield item


async def _stream(
    items: AsyncIterator[Any],
    fmt: JsonFormat | None,
    reply: _Reply,
    progress: bool = True,
    events: EventLog | None = None,
) -> AsyncIterator[bytes]:
    """The answer as the chairman writes it (with ``response_format``: once validated, which is
    when the runner hands it over); stage progress before it as ``reasoning_content``
    (:mod:`council.server.progress`). A notice that comes once the answer has started (the
    chairman broke off; the fallback writes) is one line of the answer's text."""
    yield _chunk(reply, {"role": "assistant", "content": ""})
    answering = False  # the answer's text has started
    try:
        result = None
        async for item in items:
            if isinstance(item, SessionResult):
                result = item
                continue
            if events is not None:
                events.add(item)
            answering = answering or item.type == "synthesis_delta"
            part = _event_chunk(item, reply, progress=progress, answering=answering)
            if part is not None:
                yield part
    except CouncilError as exc:
        for part in _failed(exc):
            yield part
        return
    finally:
        if events is not None:
            events.close()
    assert result is not None
    for part in _closing_chunks(result, fmt, reply, answering=answering):
        yield part


def _event_chunk(item: Any, reply: _Reply, *, progress: bool, answering: bool) -> bytes | None:
    """One event of the session as the stream sends it: the answer's text, a notice inside it,
    a progress line before it, or a comment; None once the answer has started."""
    if item.type == "synthesis_delta":
        return _chunk(reply, {"content": item.text})
    if item.type == "notice" and answering:
        return _chunk(reply, {"content": f"\n\n[{' '.join(item.text.split())}]\n\n"})
    if answering:
        return None  # no "thinking" after the answer has started: clients would misplace it
    if progress and (line := progress_line(item)) is not None:
        return _chunk(reply, {"reasoning_content": line + "\n"})
    return f": {item.type}\n\n".encode()


def _closing_chunks(result: SessionResult, fmt: JsonFormat | None, reply: _Reply, *, answering: bool) -> list[bytes]:
    """What follows the session's events: the answer if none was streamed, the council's details
    with the finish, the usage chunk if asked for, then [DONE] (or the format's failure)."""
    if fmt is not None and (failure := _format_failure(result)) is not None:
        return _failed(failure)
    parts = []
    if not answering or result.synthesis.status != "ok":
        # No synthesis: the top-ranked member's answer, after answer_text's one-line notice.
        parts.append(_chunk(reply, {"content": ("\n\n" if answering else "") + answer_text(result)}))
    parts.append(_chunk(reply, {}, finish="stop", extra={"council": council_details(result)}))
    if reply.include_usage:
        # OpenAI's usage chunk: no choices, the totals; here the whole council's.
        parts.append(_sse({**_chunk_of(reply, []), "usage": _usage(result)}))
    parts.append(b"data: [DONE]\n\n")
    return parts
