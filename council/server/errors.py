"""Every error the server sends, in OpenAI's shape (``{"error": {message, type, param, code}}``)."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from council.errors import CouncilError, NotFoundError, PromptTooLarge, UsageError

#: A failed council would fail again and bill again: OpenAI's SDKs (and LangChain, LiteLLM,
#: ``llm``) read this header before their default retries.
NO_RETRY = {"x-should-retry": "false"}


def openai_error(
    status: int,
    message: str,
    type_: str = "invalid_request_error",
    code: str | None = None,
    *,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    # A message may quote the client's input, unpaired surrogates included: never a 500 for that.
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def error_for(exc: CouncilError) -> JSONResponse:
    if isinstance(exc, PromptTooLarge):
        # As OpenAI answers a prompt over a model's context: a 400 its SDKs never retry, whose
        # code clients (LangChain, LiteLLM) read as "shorten the messages or use another model".
        return openai_error(400, str(exc), "invalid_request_error", "context_length_exceeded", param="messages",
                            headers=NO_RETRY)  # fmt: skip
    if isinstance(exc, NotFoundError):
        return openai_error(404, str(exc), "invalid_request_error", "not_found")
    if isinstance(exc, UsageError):
        return openai_error(400, str(exc), "invalid_request_error")
    return openai_error(502, str(exc), "council_error", "council_failed", headers=NO_RETRY)


class RequestError(Exception):
    """Raised while reading a request: ``response`` is the 4xx to send instead."""

    def __init__(self, response: Response) -> None:
        self.response = response


async def server_error(request: Request, exc: Exception) -> Response:
    """A bug: OpenAI's shape, no details (the server's log has the traceback)."""
    return openai_error(500, "internal server error (the server's log has the details)", "server_error")


async def http_error(request: Request, exc: Exception) -> Response:
    """Unknown routes and wrong methods answer in OpenAI's error shape, as every other error."""
    assert isinstance(exc, HTTPException)
    where = f"{request.method} {request.url.path[:200]}"
    if exc.status_code == 404:
        message, code = f"Invalid URL ({where})", "not_found"
    elif exc.status_code == 405:
        message, code = f"Method not allowed ({where})", "method_not_allowed"
    else:
        message, code = str(exc.detail), None
    return openai_error(exc.status_code, message, "invalid_request_error", code, headers=exc.headers)
