"""Structured output: the one layer that turns a model's reply into a validated object.

Peer reviews and judge passes share it: send the request with the JSON schema, validate
the reply against the pydantic model, and on invalid output re-ask (the bad reply echoed
back, then a message saying what was wrong) a bounded number of times. A provider
failure (after the client's own retries) ends the loop at once.

Parsing repairs *syntax* only (code fences, prose around the JSON, trailing commas);
values are then validated strictly by the pydantic model. Nothing is coerced: an
invalid value is re-requested and, in the end, recorded as invalid.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from council.errors import ProviderError
from council.logs import get_logger
from council.providers.base import ChatRequest
from council.providers.client import ModelClient
from council.redaction import keeps_text, redact
from council.usage import CallSink

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_json_text(text: str) -> str | None:
    """The JSON object inside a reply: fenced block first, else the outermost braces."""
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    start = text.find("{")
    end = text.rfind("}")
    if start == -1 or end <= start:
        return None
    return text[start : end + 1]


def parse_json_object(text: str) -> dict[str, Any]:
    """Parse a JSON object from model output, repairing syntax if needed.

    Raises ValueError with a short reason when there is no JSON object.
    """
    candidate = extract_json_text(text)
    if candidate is None:
        raise ValueError("the reply contains no JSON object")
    try:
        value = json.loads(candidate)
    except json.JSONDecodeError:
        import json_repair  # syntax repair only; loaded on the rare path that needs it

        value = json_repair.loads(candidate)
    if not isinstance(value, dict) or not value:
        raise ValueError("the reply is not a usable JSON object")
    return value


def describe_validation_error(exc: ValidationError, limit: int = 5, *, quote_values: bool = True) -> str:
    """A compact, model-readable list of what is wrong (fed back in re-requests).

    ``quote_values=False`` keeps each reason but not the offending value, which may quote the
    question or an answer (what is stored when transcripts are off)."""
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        msg = err["msg"].removeprefix("Value error, ")
        got = err.get("input")
        quotable = quote_values and got is not None and not isinstance(got, dict | list)
        shown = f" (got {json.dumps(got)[:40]})" if quotable else ""
        parts.append(f"{loc}: {msg}{shown}")
    extra = len(exc.errors()) - limit
    if extra > 0:
        parts.append(f"... and {extra} more")
    return "; ".join(parts)


def _check_output(model: type[T], text: str) -> tuple[T | None, ValidationError | str | None]:
    try:
        data = parse_json_object(text)
    except ValueError as exc:
        return None, str(exc)
    try:
        # Validate from JSON text so strict ints reject 3.5 and "7" as they would on the wire.
        return model.model_validate_json(json.dumps(data)), None
    except ValidationError as exc:
        return None, exc


def _describe(problem: ValidationError | str, *, quote_values: bool = True) -> str:
    if isinstance(problem, ValidationError):
        return describe_validation_error(problem, quote_values=quote_values)
    return problem


def validate_output(model: type[T], text: str, *, quote_values: bool = True) -> tuple[T | None, str | None]:
    """``(instance, None)`` when valid, else ``(None, reason)``."""
    parsed, problem = _check_output(model, text)
    return parsed, None if problem is None else _describe(problem, quote_values=quote_values)


MAX_REPLY_ECHO = 4000  # characters of an invalid reply sent back with the re-request

log = get_logger("council.asking")


@dataclass
class Reply:
    parsed: Any = None
    """The validated model instance, or None."""
    attempts: int = 0
    problem: str | None = None
    """"invalid output after N attempts: <why the last reply was invalid>", or None."""
    error: ProviderError | None = None
    """The provider failure that ended the loop, if one did."""


async def ask_valid(
    client: ModelClient,
    messages: list[dict[str, str]],
    model: type[BaseModel],
    *,
    schema: dict[str, Any],
    schema_name: str,
    retry_message: Callable[[str], dict[str, str]],
    stage: str,
    seed: int,
    max_attempts: int,
    sink: CallSink,
) -> Reply:
    """Ask until the reply validates against ``model``; ``retry_message(problem)`` is the
    follow-up that re-requests."""
    problem = None
    for attempt in range(1, max_attempts + 1):
        request = ChatRequest(
            messages=messages, json_schema=schema, schema_name=schema_name, seed=seed, **client.defaults()
        )
        try:
            response = await client.complete(request, stage=stage, sink=sink)
        except ProviderError as exc:
            return Reply(attempts=attempt, error=exc)
        parsed, invalid = _check_output(model, response.text)
        if parsed is not None:
            return Reply(parsed=parsed, attempts=attempt)
        assert invalid is not None
        # The model is told everything; what is kept (result, database, log) leaves out the
        # offending values when transcripts are off, as they may quote the question or answers.
        problem = redact(
            _describe(invalid, quote_values=keeps_text()),
            private=[*(m.get("content") for m in messages), response.text],
        )
        log.info("invalid output", model=client.id, stage=stage, attempt=attempt, problem=problem)
        echo = {"role": "assistant", "content": response.text[:MAX_REPLY_ECHO]}
        messages = [*messages, echo, retry_message(_describe(invalid))]
    return Reply(attempts=max_attempts, problem=f"invalid output after {max_attempts} attempts: {problem}")
