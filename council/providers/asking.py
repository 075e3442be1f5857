"""Structured output: the one layer that turns a model's reply into a validated object.

Peer reviews, judge passes and a synthesis in a caller's format share it: send the
request with the JSON schema, validate the reply against the pydantic model (or, for a
format a client described in JSON Schema, against that schema: :class:`JsonFormat`),
and on invalid output re-ask (the bad reply echoed
back, then a message saying what was wrong) a bounded number of times. A provider
failure (after the client's own retries) ends the loop at once.

Parsing repairs *syntax* only (code fences, prose around the JSON, trailing commas);
values are then validated strictly by the pydantic model. Nothing is coerced: an
invalid value is re-requested and, in the end, recorded as invalid.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from council._util.logs import get_logger
from council.accounting.usage import CallSink
from council.errors import InputError, ProviderError
from council.providers.base import ChatRequest
from council.providers.client import ModelClient
from council.untrusted.redaction import keeps_text, redact

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_json_text(text: str) -> str | None:
    """The JSON object inside a reply: a reply that opens with ``{`` is the object itself (its
    strings may quote fenced code: a chairman's markdown answer); else a fenced block first,
    else the outermost braces."""
    fenced = None if text.lstrip().startswith("{") else _FENCE.search(text)
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
    return _parse_json_object(text)[0]


def _parse_json_object(text: str) -> tuple[dict[str, Any], str | None]:
    """:func:`parse_json_object`, and the JSON text it was read from as is (None when repaired)."""
    candidate = extract_json_text(text)
    if candidate is None:
        raise ValueError("the reply contains no JSON object")
    verbatim: str | None = candidate
    try:
        value = json.loads(candidate, parse_constant=_refuse_constant)
    except json.JSONDecodeError:
        bad = invalid_numbers(candidate)
        if bad:
            shown = ", ".join(bad[:3])
            raise ValueError(f"invalid JSON numbers ({shown}): write plain numbers such as 3 or 0.5") from None
        import json_repair  # syntax repair only; loaded on the rare path that needs it

        value = json_repair.loads(candidate)
        verbatim = None
    if not isinstance(value, dict) or not value:
        raise ValueError("the reply is not a usable JSON object")
    return value, verbatim


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_STRUCTURAL = frozenset('{}[]:,"')
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_LIKE = re.compile(r"[-+]?(?:[0-9.]|nan\b|inf)", re.IGNORECASE)


def invalid_numbers(text: str) -> list[str]:
    """Bare tokens outside strings that look like numbers but are not JSON numbers
    (``03``, ``+4``, ``.5``, ``NaN``, ``Infinity``).

    Repair may fix quoting and commas, never a number: a repaired ``03`` would become the
    score 3 that the judge never validly wrote."""
    bad: list[str] = []
    token: list[str] = []
    in_string = escaped = False

    def flush() -> None:
        word = "".join(token).strip()
        token.clear()
        if word and _NUMBER_LIKE.match(word) and not _JSON_NUMBER.fullmatch(word):
            bad.append(word[:20])

    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch in _STRUCTURAL or ch.isspace():
            flush()
            in_string = ch == '"'
        else:
            token.append(ch)
    flush()
    return bad


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


class JsonFormat:
    """Structured output described by a JSON Schema instead of a pydantic model: a client's
    ``response_format``. ``schema=None`` asks for any JSON object (OpenAI's ``json_object``).

    The schema is checked when the format is made (a bad one is the caller's
    ``InputError``, before any call): it must be a valid JSON Schema for an object, with
    local ``$ref``s only (nothing is fetched) and without regular-expression keywords
    (``pattern``, ``patternProperties``), which a hostile schema could use to stall the
    validator on a model's reply.
    """

    def __init__(self, schema: dict[str, Any] | None, *, name: str = "response") -> None:
        import jsonschema

        self.schema = schema
        self.name = name
        self._validator: Any = None
        if schema is None:
            return
        if not isinstance(schema, dict):
            raise InputError("the schema must be a JSON object describing an object")
        try:
            _refuse_unsafe_keywords(schema, schema)
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            cls.check_schema(schema)
        except jsonschema.SchemaError as exc:
            where = "/".join(str(p) for p in exc.path)
            raise InputError(f"not a valid JSON Schema{f' at {where}' if where else ''}: {exc.message}") from None
        except RecursionError:
            raise InputError("the schema is nested too deeply") from None
        if schema.get("type", "object") != "object":
            raise InputError(f"the schema must describe an object (its type is {schema.get('type')!r})")
        self._validator = cls(schema, registry=_offline_registry())

    def instruction(self) -> str:
        """What the prompt tells the model about the format (the schema neutralised as untrusted text)."""
        if self.schema is None:
            return "Reply with one JSON object only, no prose around it."
        from council.untrusted.slots import neutralise

        dumped = neutralise(json.dumps(self.schema, ensure_ascii=False, separators=(",", ":")))
        return f"Reply with one JSON object only, no prose around it, that matches this JSON schema: {dumped}"

    def check(self, text: str) -> tuple[Any, Invalid | None]:
        try:
            value = parse_json_object(text)
        except ValueError as exc:
            return None, Invalid(str(exc))
        if self._validator is None:
            return value, None
        import referencing.exceptions

        try:
            errors = sorted(self._validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path])
        except RecursionError:
            return None, Invalid("the reply is nested too deeply to check")
        except referencing.exceptions.Unresolvable as exc:  # checked when made; never a traceback
            return None, Invalid(f"the schema has a reference that does not resolve: {str(exc)[:80]}")
        if not errors:
            return value, None

        def describe(quote_values: bool) -> str:
            parts = []
            for e in errors[:5]:
                where = ".".join(str(p) for p in e.absolute_path) or "(root)"
                # jsonschema's message quotes the offending value; the rule it broke does not.
                why = e.message[:200] if quote_values else f"fails {e.validator} {json.dumps(e.validator_value)[:80]}"
                parts.append(f"{where}: {why}")
            if len(errors) > 5:
                parts.append(f"... and {len(errors) - 5} more")
            return "; ".join(parts)

        return None, Invalid(describe(True), describe(False))


_UNSAFE_KEYWORDS = ("pattern", "patternProperties")
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose values are data, and those that map names (which may look like keywords) to schemas.
_LITERALS = frozenset({"enum", "const", "default", "examples", "required", "description", "title"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs", "definitions"})


@functools.cache
def _offline_registry() -> Any:
    """The only registry the validator resolves references in: a schema is never fetched from the
    network or a file, whatever its $ref, $dynamicRef, $id or $schema say (jsonschema's default
    still retrieves unknown URLs)."""
    import referencing
    import referencing.exceptions

    def refuse(uri: str) -> Any:
        raise referencing.exceptions.NoSuchResource(ref=uri)

    return referencing.Registry(retrieve=refuse)  # type: ignore[call-arg]


def _refuse_unsafe_keywords(node: Any, root: dict[str, Any]) -> None:
    """Walk every sub-schema (not property names or literal data) for refused keywords and
    references that do not resolve inside the schema itself."""
    from council.providers.json_schema import resolve_pointer

    if isinstance(node, list):
        for item in node:
            _refuse_unsafe_keywords(item, root)
        return
    if not isinstance(node, dict):
        return
    for keyword in _UNSAFE_KEYWORDS:
        if keyword in node:
            raise InputError(f"the schema uses {keyword!r}: regular-expression keywords are not supported")
    for keyword in _REFERENCES:
        ref = node.get(keyword)
        if not isinstance(ref, str):
            continue
        if ref != "#" and not ref.startswith("#/"):
            raise InputError(
                f"the schema's {keyword} {ref[:80]!r} is not a reference inside the schema: only '#/...' "
                "references are supported (nothing is ever fetched)"
            )
        try:
            resolve_pointer(root, ref)
        except ValueError:
            why = f"the schema's {keyword} reference {ref[:80]!r} does not resolve inside the schema"
            raise InputError(why) from None
    for key, value in node.items():
        if key in _LITERALS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            for sub in value.values():
                _refuse_unsafe_keywords(sub, root)
        else:
            _refuse_unsafe_keywords(value, root)


@dataclass(frozen=True)
class Invalid:
    """Why a reply is invalid: told in full to the model, and without the offending values
    (which may quote the question or an answer) where it is kept with transcripts off."""

    full: str
    without_values: str | None = None

    def describe(self, *, quote_values: bool = True) -> str:
        return self.full if quote_values or self.without_values is None else self.without_values


def check_output(model: type[T] | JsonFormat, text: str) -> tuple[Any, Invalid | None]:
    """``(instance, None)`` when ``text`` is valid output, else ``(None, why)``."""
    if "\\u0000" in text:  # U+0000 written as JSON: U+FFFD, as a raw one is (council.providers.client.provider_text)
        text = _NUL_ESCAPE.sub(r"\1\\ufffd", text)
    if isinstance(model, JsonFormat):
        return model.check(text)
    candidate = extract_json_text(text)
    if candidate is not None and _CONSTANT.search(candidate) is None:
        # The common case, decoded once: the reply's JSON validated as it is. Anything else (no
        # JSON, a repair needed, NaN or Infinity, an invalid value, no field given) goes on below,
        # which decides as before and says why (tests/pipelines/test_asking_decode_once.py).
        try:
            parsed = model.model_validate_json(candidate)
        except ValidationError:
            parsed = None
        if parsed is not None and parsed.model_fields_set:
            return parsed, None
    try:
        data, verbatim = _parse_json_object(text)
    except ValueError as exc:
        return None, Invalid(str(exc))
    if verbatim is not None:
        # Validate from JSON text so strict ints reject 3.5 and "7" as they would on the wire: the
        # reply's own text, as it parsed (not encoded again and decoded once more). Text the
        # validator's parser refuses (a lone surrogate escape) takes the encoded path below, so
        # the reason given is the same (tests/pipelines/test_asking_decode_once.py).
        try:
            return model.model_validate_json(verbatim), None
        except ValidationError as exc:
            if not any(e["type"] == "json_invalid" for e in exc.errors()):
                return None, Invalid(describe_validation_error(exc), describe_validation_error(exc, quote_values=False))
    try:
        return model.model_validate_json(json.dumps(data)), None
    except ValidationError as exc:
        return None, Invalid(describe_validation_error(exc), describe_validation_error(exc, quote_values=False))


#: ``\u0000`` in JSON: after an even number of backslashes (none, or escaped ones).
_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")
#: JSON's missing constants, refused as numbers (:func:`parse_json_object`) but read by the validator.
_CONSTANT = re.compile(r"NaN|Infinity")


def validate_output(model: type[T] | JsonFormat, text: str, *, quote_values: bool = True) -> tuple[Any, str | None]:
    """``(instance, None)`` when valid, else ``(None, reason)``."""
    parsed, invalid = check_output(model, text)
    return parsed, None if invalid is None else invalid.describe(quote_values=quote_values)


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
    model: type[BaseModel] | JsonFormat,
    *,
    schema: dict[str, Any] | None,
    schema_name: str,
    retry_message: Callable[[str], dict[str, str]],
    stage: str,
    seed: int,
    max_attempts: int,
    sink: CallSink,
    stream: Callable[[int], Callable[[str], None] | None] | None = None,
) -> Reply:
    """Ask until the reply validates against ``model``; ``retry_message(problem)`` is the
    follow-up that re-requests. ``schema=None`` asks the backend for any JSON object.
    ``stream(attempt)``: where that attempt's reply text goes as it arrives (None: nowhere)."""
    problem = None
    for attempt in range(1, max_attempts + 1):
        request = ChatRequest(
            messages=messages,
            json_schema=schema,
            json_mode=schema is None,
            schema_name=schema_name,
            seed=seed,
            **client.defaults(),
        )
        try:
            # Only a reply that validates is kept in (or taken from) the call cache.
            response = await client.complete(
                request,
                stage=stage,
                sink=sink,
                on_delta=stream(attempt) if stream is not None else None,
                accept=lambda r: check_output(model, r.text)[0] is not None,
            )
        except ProviderError as exc:
            return Reply(attempts=attempt, error=exc)
        parsed, invalid = check_output(model, response.text)
        if parsed is not None:
            return Reply(parsed=parsed, attempts=attempt)
        assert invalid is not None
        # The model is told everything; what is kept (result, database, log) leaves out the
        # offending values when transcripts are off, as they may quote the question or answers.
        problem = redact(
            invalid.describe(quote_values=keeps_text()),
            private=[*(m.get("content") for m in messages), response.text],
        )
        log.info("invalid output", model=client.id, stage=stage, attempt=attempt, problem=problem)
        echo = {"role": "assistant", "content": response.text[:MAX_REPLY_ECHO]}
        messages = [*messages, echo, retry_message(invalid.describe())]
    return Reply(attempts=max_attempts, problem=f"invalid output after {max_attempts} attempts: {problem}")
