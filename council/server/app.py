"""``council serve``: an OpenAI-compatible chat-completions server over councils.

``model`` = a council name. The chairman's answer comes back as an ordinary
completion; the council's details (session id, status, ranking, flags) ride in an
extra ``council`` field that OpenAI clients ignore. With ``stream: true`` the answer
arrives as OpenAI SSE chunks, preceded by SSE comment lines (``: stage review``) that
report progress and that clients skip.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from council.config import LoadedConfig
from council.errors import CouncilError, CouncilFailure, NotFoundError, UsageError
from council.session.results import SessionResult

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


def openai_error(status: int, message: str, type_: str, code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": type_, "param": None, "code": code}}, status_code=status)


def _error_for(exc: CouncilError) -> JSONResponse:
    if isinstance(exc, NotFoundError):
        return openai_error(404, str(exc), "invalid_request_error", "not_found")
    if isinstance(exc, UsageError):
        return openai_error(400, str(exc), "invalid_request_error")
    return openai_error(502, str(exc), "council_error", "council_failed")


class CouncilServer:
    """Holds one ``Council`` per council name, sharing model clients and the store."""

    def __init__(self, loaded: LoadedConfig, *, token: str | None = None, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        from council.storage import Store

        self.loaded = loaded
        self.token = token
        self.max_body_bytes = max_body_bytes
        self.store = Store.open()
        self.clients: dict[str, Any] = {}  # shared across councils: one limit per model alias
        self.councils: dict[str, Any] = {}

    def council(self, name: str) -> Any:
        if name not in self.loaded.config.councils:
            known = ", ".join(sorted(self.loaded.config.councils))
            raise NotFoundError(f"the model {name!r} does not exist; councils served: {known}")
        if name not in self.councils:
            from council.api import Council

            self.councils[name] = Council(self.loaded, council=name, store=self.store, client_pool=self.clients)
        return self.councils[name]

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
        return scheme.lower() == "bearer" and secrets.compare_digest(value.strip(), self.token)

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


class _HTTPError(Exception):
    def __init__(self, response: Response) -> None:
        self.response = response


def _completion_payload(result: SessionResult, completion_id: str, created: int) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": result.council,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer_text(result)}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": result.usage.prompt_tokens,
            "completion_tokens": result.usage.completion_tokens,
            "total_tokens": result.usage.prompt_tokens + result.usage.completion_tokens,
        },
        "council": council_details(result),
    }


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


def create_app(loaded: LoadedConfig, *, token: str | None = None, max_body_bytes: int = MAX_BODY_BYTES) -> Starlette:
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
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "council"} for name in sorted(loaded.config.councils)]
        return JSONResponse({"object": "list", "data": data})

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
            council = server().council(req.model)
        except _HTTPError as exc:
            return exc.response  # type: ignore[return-value]
        except CouncilError as exc:
            return _error_for(exc)
        *earlier, last = req.messages
        if last.role != "user" or not last.text().strip():
            return openai_error(400, "the last message must be a non-empty user message", "invalid_request_error")
        history = [{"role": m.role, "content": m.text()} for m in earlier if m.role in ("system", "user", "assistant")]
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if req.stream:
            return StreamingResponse(
                _stream(council, last.text(), history, req.seed, completion_id, created),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
            )
        try:
            result = await council.run(last.text(), history=history, seed=req.seed)
        except CouncilError as exc:
            return _error_for(exc)
        return JSONResponse(_completion_payload(result, completion_id, created))

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
                server().store.db,
                since=q.get("since"),
                reviewers=q.getlist("reviewer"),
                council=q.get("council"),
            )
        except CouncilError as exc:
            return _error_for(exc)
        return JSONResponse(json.loads(report.model_dump_json()))

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state["server"] = CouncilServer(loaded, token=token, max_body_bytes=max_body_bytes)
        try:
            yield
        finally:
            await state["server"].aclose()

    from contextlib import asynccontextmanager

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", list_models),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/sessions/{session_id}", get_session),
            Route("/v1/bias-report", get_bias_report),
        ],
        lifespan=asynccontextmanager(lifespan),
    )


async def _stream(
    council: Any, question: str, history: list[dict[str, str]], seed: int | None, completion_id: str, created: int
) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None, extra: dict[str, Any] | None = None) -> bytes:
        payload: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": council.name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if extra:
            payload.update(extra)
        return f"data: {json.dumps(payload)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    try:
        result = None
        async for item in council.stream(question, history=history, seed=seed):
            if isinstance(item, SessionResult):
                result = item
            else:
                yield f": {item.kind} {item.stage} {item.member or ''}\n\n".encode()
    except CouncilError as exc:
        error = {"error": {"message": str(exc), "type": "council_error", "param": None, "code": "council_failed"}}
        yield f"data: {json.dumps(error)}\n\n".encode()
        yield b"data: [DONE]\n\n"
        return
    assert result is not None
    text = answer_text(result)
    step = 400  # a few chunks, so clients render progressively
    for i in range(0, len(text), step):
        yield chunk({"content": text[i : i + step]})
    yield chunk({}, finish="stop", extra={"council": council_details(result)})
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
