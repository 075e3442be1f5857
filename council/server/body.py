"""Reading a request's JSON body: size-capped, and every malformed body a 4xx."""

from __future__ import annotations

import json
import math
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from council.errors import InputError
from council.untrusted.inputs import check_json_text
from council.server.errors import RequestError, openai_error

MAX_INT_DIGITS = 100
"""Longer integers mean nothing to any parameter; Python would refuse above 4300 digits anyway."""


class _BadNumber(ValueError):
    pass


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _BadNumber(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _BadNumber(f"the number {text[:40]} is out of range")
    return value


def _constant(name: str) -> float:
    raise _BadNumber(f"{name} is not a JSON number")


async def read_json(request: Request, max_bytes: int) -> Any:
    too_large = f"request body larger than {max_bytes} bytes"
    length = request.headers.get("content-length")
    # h11 lets only ASCII digits through; str.isdigit() alone would pass "²", which int() refuses.
    if length is not None and length.isascii() and length.isdigit() and (len(length) > 18 or int(length) > max_bytes):
        raise RequestError(openai_error(413, too_large))
    body = b""
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_bytes:
                raise RequestError(openai_error(413, too_large))
    except ClientDisconnect:  # hung up, or too slow (council.server.connections): no one to answer
        raise RequestError(Response(status_code=499)) from None
    try:
        value = json.loads(body, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except _BadNumber as exc:
        raise RequestError(openai_error(400, f"the request body holds a number out of range: {exc}")) from None
    except (ValueError, UnicodeDecodeError):  # JSONDecodeError is a ValueError
        raise RequestError(openai_error(400, "the request body is not valid JSON")) from None
    except RecursionError:
        raise RequestError(openai_error(400, "the request body is nested too deeply")) from None
    if b"\\u0000" in body:  # JSON holds U+0000 only as this escape: every string looked at only then
        try:
            check_json_text(value, "a string in the request body")
        except InputError as exc:
            raise RequestError(openai_error(400, str(exc))) from None
    return value


Parsed = TypeVar("Parsed", bound=BaseModel)


def parse_as(model: type[Parsed], body: Any) -> Parsed:
    """``body`` as ``model``, or a ``RequestError`` (400) naming the first problem and where, as
    OpenAI names a parameter (``messages[0].content[1].text``), in the message and in ``param``."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".")
        raise RequestError(
            openai_error(400, f"invalid request: {where or 'body'}: {first['msg']}", "invalid_request_error",
                         param=where or None)  # fmt: skip
        ) from None
