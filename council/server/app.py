"""``council serve``: an OpenAI-compatible chat-completions server over councils.

``model`` = a council name. The chairman's answer comes back as an ordinary
completion; the council's details (session id, status, ranking, flags) ride in an
extra ``council`` field that OpenAI clients ignore. With ``stream: true`` the answer
arrives as OpenAI SSE chunks, preceded by SSE comment lines (``: stage review``) that
report progress and that clients skip. Which request parameters are honoured, ignored
or refused: :mod:`council.server.protocol`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from council.asking import JsonFormat
from council.config import LoadedConfig
from council.errors import CouncilError, CouncilFailure, NotFoundError, UsageError
from council.redaction import register_secret
from council.server import protocol
from council.session.results import SessionResult
from council.session.runner import check_request

MAX_BODY_BYTES = 1_000_000


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):  # OpenAI content parts: keep the text ones
            return "".join(p.get("text", "") for p in self.content if p.get("type") == "text")
        return self.content or ""


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature etc. are accepted and ignored
    model: str
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    seed: int | None = None


def openai_error(
    status: int,
    message: str,
    type_: str,
    code: str | None = None,
    *,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    # A message may quote the client's input, unpaired surrogates included: never a 500 for that.
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def _error_for(exc: CouncilError) -> JSONResponse:
    if isinstance(exc, NotFoundError):
        return openai_error(404, str(exc), "invalid_request_error", "not_found")
    if isinstance(exc, UsageError):
        return openai_error(400, str(exc), "invalid_request_error")
    return openai_error(502, str(exc), "council_error", "council_failed")


class CouncilServer:
    """Holds one ``Council`` per council name, sharing model clients and the store."""

    def __init__(self, loaded: LoadedConfig, *, token: str | None = None, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        from council.storage import open_store

        self.loaded = loaded
        self.token = token
        register_secret(token)
        self.max_body_bytes = max_body_bytes
        self.store = open_store()
        self.clients: dict[str, Any] = {}  # shared across councils: one limit per model alias
        self.councils: dict[str, Any] = {}
        self.fingerprints: dict[str, str] = {}
        self.started = int(time.time())  # the models' ``created``: when this server loaded them

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
        for client in self.clients.values():
            await client.aclose()
        self.store.close()

    # -- helpers ----------------------------------------------------------------
    def authorised(self, request: Request) -> bool:
        if not self.token:
            return True
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        # Compared as bytes: the header's own (Starlette decodes it as Latin-1, which undoes
        # exactly) against the token's UTF-8. compare_digest refuses non-ASCII str.
        sent = value.strip().encode("latin-1")
        expected = self.token.encode("utf-8", "surrogateescape")
        return scheme.lower() == "bearer" and secrets.compare_digest(sent, expected)

    async def read_json(self, request: Request) -> Any:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            raise _HTTPError(openai_error(413, f"request body larger than {self.max_body_bytes} bytes", "invalid_request_error"))
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body_bytes:
                raise _HTTPError(openai_error(413, f"request body larger than {self.max_body_bytes} bytes", "invalid_request_error"))
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise _HTTPError(openai_error(400, "the request body is not valid JSON", "invalid_request_error")) from None
        except RecursionError:
            raise _HTTPError(
                openai_error(400, "the request body is nested too deeply", "invalid_request_error")
            ) from None


class _HTTPError(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


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
    """The chairman's answer; without one, the top-ranked member answer (the status says partial)."""
    if result.synthesis.text:
        return result.synthesis.text
    by_member = {a.member: a.text for a in result.answers if a.text}
    order = result.consensus.order if result.consensus else list(by_member)
    return next((by_member[m] for m in order if m in by_member), "")


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
    }


def create_app(
    loaded: LoadedConfig,
    *,
    token: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    cors_origins: Sequence[str] = (),
) -> Starlette:
    """``cors_origins``: browser origins allowed to call the server (none by default)."""
    state: dict[str, CouncilServer] = {}

    def server() -> CouncilServer:
        return state["server"]

    async def guard(request: Request) -> JSONResponse | None:
        if not server().authorised(request):
            return openai_error(401, "missing or invalid bearer token", "invalid_request_error", "invalid_api_key")
        return None

    async def list_models(request: Request) -> Response:
        if (denied := await guard(request)) is not None:
            return denied
        data = [_model_object(name, server().started) for name in sorted(loaded.config.councils)]
        return JSONResponse({"object": "list", "data": data})

    async def get_model(request: Request) -> Response:
        if (denied := await guard(request)) is not None:
            return denied
        name = request.path_params["model_id"]
        if name not in loaded.config.councils:
            message = f"The model {name[:200]!r} does not exist"
            return openai_error(404, message, "invalid_request_error", "model_not_found", param="model")
        return JSONResponse(_model_object(name, server().started))

    async def chat_completions(request: Request) -> Response:
        if (denied := await guard(request)) is not None:
            return denied
        try:
            body = await server().read_json(request)
            try:
                req = ChatCompletionRequest.model_validate(body)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                return openai_error(400, f"invalid request: {where}: {first['msg']}", "invalid_request_error")
            protocol.check_parameters(body)
            protocol.check_messages(req.messages)
            fmt = protocol.response_format(body.get("response_format"))
            council = server().council(req.model)
        except _HTTPError as exc:
            return exc.response  # type: ignore[return-value]
        except protocol.ProtocolError as exc:
            return openai_error(400, str(exc), "invalid_request_error", exc.code, param=exc.param)
        except CouncilError as exc:
            return _error_for(exc)
        *earlier, last = req.messages
        if last.role != "user" or not last.text().strip():
            return openai_error(400, "the last message must be a non-empty user message", "invalid_request_error")
        history = protocol.history_messages(earlier)
        try:  # checked before a stream starts: a bad request is a 400, not an error inside a 200
            check_request(last.text(), seed=req.seed, history=history)
        except CouncilError as exc:
            return _error_for(exc)
        reply = _Reply(
            id=f"chatcmpl-{uuid.uuid4().hex}",
            created=int(time.time()),
            model=council.name,
            system_fingerprint=server().fingerprint(req.model),
            include_usage=protocol.include_usage(body),
        )
        if req.stream:
            return StreamingResponse(
                _stream(council, last.text(), history, req.seed, fmt, reply),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            )
        try:
            result = await _unless_disconnected(
                request, council.run(last.text(), history=history, seed=req.seed, synthesis_format=fmt)
            )
            if result is not None and fmt is not None and (failure := _format_failure(result)) is not None:
                raise failure
        except CouncilError as exc:
            return _error_for(exc)
        if result is None:  # the client hung up: the session was cancelled and recorded interrupted
            return Response(status_code=499)
        return JSONResponse(_completion_payload(result, reply))

    async def get_session(request: Request) -> Response:
        if (denied := await guard(request)) is not None:
            return denied
        try:
            row = server().store.get_session(request.path_params["session_id"])
        except NotFoundError as exc:
            return openai_error(404, str(exc), "invalid_request_error", "not_found")
        result = json.loads(row["result"]) if row.get("result") else None
        return JSONResponse(
            result or {"session_id": row["id"], "status": row["status"], "error": row["error"], "created_at": row["created_at"]}
        )

    async def get_bias_report(request: Request) -> Response:
        if (denied := await guard(request)) is not None:
            return denied
        from council.bias.report import bias_report

        q = request.query_params
        try:
            report = bias_report(
                server().store,
                since=q.get("since"),
                reviewers=q.getlist("reviewer"),
                council=q.get("council"),
            )
        except CouncilError as exc:
            return _error_for(exc)
        return JSONResponse(json.loads(report.model_dump_json()))

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def http_error(request: Request, exc: Exception) -> Response:
        # Unknown routes and wrong methods answer in OpenAI's error shape, as every other error.
        assert isinstance(exc, HTTPException)
        where = f"{request.method} {request.url.path[:200]}"
        if exc.status_code == 404:
            message, code = f"Invalid URL ({where})", "not_found"
        elif exc.status_code == 405:
            message, code = f"Method not allowed ({where})", "method_not_allowed"
        else:
            message, code = str(exc.detail), None
        return openai_error(exc.status_code, message, "invalid_request_error", code, headers=exc.headers)

    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state["server"] = CouncilServer(loaded, token=token, max_body_bytes=max_body_bytes)
        try:
            yield
        finally:
            await state["server"].aclose()

    from contextlib import asynccontextmanager

    from starlette.middleware.cors import CORSMiddleware

    middleware = []
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["*"],
                max_age=600,
            )
        )
    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", list_models),
            Route("/v1/models/{model_id:path}", get_model),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/sessions/{session_id}", get_session),
            Route("/v1/bias-report", get_bias_report),
        ],
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
        lifespan=asynccontextmanager(lifespan),
    )


def _model_object(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "council"}


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


async def _stream(
    council: Any,
    question: str,
    history: list[dict[str, str]],
    seed: int | None,
    fmt: JsonFormat | None,
    reply: _Reply,
) -> AsyncIterator[bytes]:
    def event(payload: dict[str, Any]) -> bytes:
        return f"data: {json.dumps(payload)}\n\n".encode()

    def chunk(delta: dict[str, Any], finish: str | None = None, extra: dict[str, Any] | None = None) -> bytes:
        payload: dict[str, Any] = {
            "id": reply.id,
            "object": "chat.completion.chunk",
            "created": reply.created,
            "model": reply.model,
            "system_fingerprint": reply.system_fingerprint,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if reply.include_usage:
            payload["usage"] = None  # as OpenAI: null on every chunk but the last
        if extra:
            payload.update(extra)
        return event(payload)

    def failed(exc: CouncilError) -> list[bytes]:
        error = {"error": {"message": str(exc), "type": "council_error", "param": None, "code": "council_failed"}}
        return [event(error), b"data: [DONE]\n\n"]

    yield chunk({"role": "assistant", "content": ""})
    try:
        result = None
        async for item in council.stream(question, history=history, seed=seed, synthesis_format=fmt):
            if isinstance(item, SessionResult):
                result = item
            else:
                yield f": {item.kind} {item.stage} {item.member or ''}\n\n".encode()
    except CouncilError as exc:
        for part in failed(exc):
            yield part
        return
    assert result is not None
    if fmt is not None and (failure := _format_failure(result)) is not None:
        for part in failed(failure):
            yield part
        return
    text = answer_text(result)
    step = 400  # a few chunks, so clients render progressively
    for i in range(0, len(text), step):
        yield chunk({"content": text[i : i + step]})
    yield chunk({}, finish="stop", extra={"council": council_details(result)})
    if reply.include_usage:
        # OpenAI's usage chunk: no choices, the totals; here the whole council's.
        yield event(
            {
                "id": reply.id,
                "object": "chat.completion.chunk",
                "created": reply.created,
                "model": reply.model,
                "system_fingerprint": reply.system_fingerprint,
                "choices": [],
                "usage": _usage(result),
            }
        )
    yield b"data: [DONE]\n\n"


def is_loopback(host: str) -> bool:
    import ipaddress

    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


__all__ = ["CouncilFailure", "create_app", "is_loopback"]
