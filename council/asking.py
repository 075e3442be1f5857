"""Asking a model for structured output until it validates.

Peer reviews and judge passes share this loop: send the request with the JSON schema,
validate the reply against the pydantic model, and on invalid output re-ask (the bad reply
echoed back, then a message saying what was wrong) a bounded number of times. A provider
failure (after the client's own retries) ends the loop at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from pydantic import BaseModel

from council.errors import ProviderError
from council.providers.base import ChatRequest
from council.providers.client import CallSink, ModelClient
from council.validation import validate_output

MAX_REPLY_ECHO = 4000  # characters of an invalid reply sent back with the re-request

log = structlog.get_logger("council.asking")


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
        parsed, problem = validate_output(model, response.text)
        if parsed is not None:
            return Reply(parsed=parsed, attempts=attempt)
        log.info("invalid output", model=client.id, stage=stage, attempt=attempt, problem=problem)
        echo = {"role": "assistant", "content": response.text[:MAX_REPLY_ECHO]}
        messages = [*messages, echo, retry_message(problem or "invalid output")]
    return Reply(attempts=max_attempts, problem=f"invalid output after {max_attempts} attempts: {problem}")
