"""Turn a model's text into a validated object, or a clear reason why not.

Parsing repairs *syntax* only (code fences, prose around the JSON, trailing commas);
values are then validated strictly by the pydantic model. Nothing is coerced: an
invalid value is re-requested by the caller and, in the end, recorded as invalid.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

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


def describe_validation_error(exc: ValidationError, limit: int = 5) -> str:
    """A compact, model-readable list of what is wrong (fed back in re-requests)."""
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        msg = err["msg"].removeprefix("Value error, ")
        got = err.get("input")
        shown = f" (got {json.dumps(got)[:40]})" if got is not None and not isinstance(got, dict | list) else ""
        parts.append(f"{loc}: {msg}{shown}")
    extra = len(exc.errors()) - limit
    if extra > 0:
        parts.append(f"... and {extra} more")
    return "; ".join(parts)


def validate_output(model: type[T], text: str) -> tuple[T | None, str | None]:
    """``(instance, None)`` when valid, else ``(None, reason)``."""
    try:
        data = parse_json_object(text)
    except ValueError as exc:
        return None, str(exc)
    try:
        # Validate from JSON text so strict ints reject 3.5 and "7" as they would on the wire.
        return model.model_validate_json(json.dumps(data)), None
    except ValidationError as exc:
        return None, describe_validation_error(exc)
