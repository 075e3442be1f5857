"""Reading a request's JSON body: size-capped, and every malformed body a 4xx."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from council.server.errors import RequestError, openai_error


async def read_json(request: Request, max_bytes: int) -> Any:
    too_large = f"request body larger than {max_bytes} bytes"
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise RequestError(openai_error(413, too_large))
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_bytes:
            raise RequestError(openai_error(413, too_large))
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RequestError(openai_error(400, "the request body is not valid JSON")) from None
    except RecursionError:
        raise RequestError(openai_error(400, "the request body is nested too deeply")) from None
