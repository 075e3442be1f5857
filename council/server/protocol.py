"""What ``council serve`` does with each part of an OpenAI chat-completions request.

A council is not one model, so some parameters cannot mean what a client intends. Each
one falls in exactly one group (docs/chat-apps/server.md lists them):

* honoured: ``model`` (the council), ``messages``, ``stream``, ``stream_options.include_usage``,
  ``seed`` (the reviewers' shuffles), ``response_format`` (the chairman's synthesis is asked
  for that format, validated and re-asked);
* accepted and ignored: sampling settings (``temperature``, ``top_p``, ``max_tokens``,
  ``stop``, penalties, ``logit_bias``...), which belong to each model in the council's config,
  and bookkeeping (``user``, ``metadata``, ``store``...); also any parameter not named here;
* refused with a 400 naming the parameter: anything whose absence would change what the
  client gets back (tool calls, several choices, log probabilities, audio, predicted
  outputs, web search) when it asks for it. ``tools: []``, ``tool_choice: "none"``,
  ``n: 1``, ``logprobs: false`` and ``modalities: ["text"]`` ask for nothing and pass.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from council.api import JsonFormat
from council.errors import InputError, UsageError


class ProtocolError(Exception):
    """A request part the server cannot honour: becomes a 400 naming ``param``."""

    def __init__(self, param: str, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


# The request's shape, read strictly ("7" is not a seed, "yes" not a boolean): every part the
# server reads is checked here for its JSON type, so a malformed one is a 400 naming it
# (``council.server.body.parse_as``), never an error further in. Parts it does not read are
# allowed and left unchecked (``extra="allow"``).
_STRICT = ConfigDict(extra="allow", strict=True)


class ContentPart(BaseModel):
    """One part of a message's content; only text parts are read (others: :func:`check_messages`)."""

    model_config = _STRICT
    type: str | None = None
    text: str | None = None


def _as_parts(value: Any) -> Any:
    """A string is one text part, as OpenAI reads it; anything but a string, a list or null is
    refused here, where the error can say what the content may be."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if value is not None and not isinstance(value, list):
        raise PydanticCustomError("content_type", "content must be a string or a list of content parts")
    return value


class ChatMessage(BaseModel):
    model_config = _STRICT
    role: str
    content: Annotated[list[ContentPart] | None, BeforeValidator(_as_parts)] = None

    def text(self) -> str:
        """The message's text: its text parts, joined."""
        return "".join(p.text or "" for p in self.content or () if p.type == "text")


class StreamOptions(BaseModel):
    model_config = _STRICT
    include_usage: bool | None = None
    include_progress: bool = True


class JsonSchemaFormat(BaseModel):
    model_config = _STRICT
    name: str = "response"
    schema_: Any = Field(None, alias="schema")
    strict: bool | None = None
    description: str | None = None


class ResponseFormat(BaseModel):
    model_config = _STRICT
    type: str
    json_schema: JsonSchemaFormat | None = None


class ChatCompletionRequest(BaseModel):
    """What the server reads of a request (temperature etc. are accepted and ignored)."""

    model_config = _STRICT
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    seed: int | None = None
    response_format: ResponseFormat | None = None


def _empty(value: Any) -> bool:
    return value is None or value == [] or value == {}


def _not(*allowed: Any) -> Callable[[Any], bool]:
    """True for a value that is none of ``allowed``, compared with its JSON type: ``true`` is
    not ``1`` and ``1.0`` or ``"1"`` is not ``1`` (as Python's ``==`` would have them)."""
    return lambda v: not any(type(v) is type(a) and v == a for a in allowed)


# parameter -> (asks for something we cannot do?, why not)
_REFUSED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "tools": (lambda v: not _empty(v), "tool calling is not supported: a council answers in text"),
    "functions": (lambda v: not _empty(v), "function calling is not supported: a council answers in text"),
    "tool_choice": (lambda v: v not in (None, "none"), "tool calling is not supported: a council answers in text"),
    "function_call": (lambda v: v not in (None, "none"), "function calling is not supported"),
    "n": (_not(None, 1), "only n = 1 is supported: a council writes one synthesis"),
    "logprobs": (_not(None, False), "log probabilities are not available for a council's answer"),
    "top_logprobs": (_not(None, 0), "log probabilities are not available for a council's answer"),
    "audio": (lambda v: v is not None, "audio output is not supported"),
    "modalities": (lambda v: v not in (None, ["text"]), "only text output is supported"),
    "prediction": (lambda v: v is not None, "predicted outputs are not supported"),
    "web_search_options": (lambda v: v is not None, "web search is not supported"),
}

#: Accepted and ignored: each council member's sampling is set in the council's config (the
#: parameter table of docs/chat-apps/server.md lists them; tests/docs/test_docs.py keeps the two equal).
IGNORED = (
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "presence_penalty",
    "frequency_penalty",
    "stop",
    "logit_bias",
    "parallel_tool_calls",
    "reasoning_effort",
    "verbosity",
    "user",
    "metadata",
    "store",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
)

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_parameters(body: Mapping[str, Any]) -> None:
    """Raise ``ProtocolError`` for the first parameter asking for what a council cannot do."""
    for name, (asks, why) in _REFUSED.items():
        if name in body and asks(body[name]):
            raise ProtocolError(name, f"{name}: {why}", "unsupported_parameter")
    if body.get("stream_options") is not None and not body.get("stream"):
        raise ProtocolError("stream_options", "stream_options is only allowed when stream is true")


def include_usage(req: ChatCompletionRequest) -> bool:
    """``stream_options.include_usage``: end the stream with OpenAI's usage chunk."""
    return bool(req.stream_options and req.stream_options.include_usage)


def include_progress(req: ChatCompletionRequest) -> bool:
    """``stream_options.include_progress`` (default true): stage progress as ``reasoning_content``
    deltas (:mod:`council.server.progress`); false: as SSE comment lines clients skip."""
    return req.stream_options is None or req.stream_options.include_progress


def check_messages(messages: Sequence[Any]) -> None:
    """Roles and content parts a council can read; tool turns and non-text parts are refused."""
    for i, message in enumerate(messages):
        if message.role not in _ROLES:
            raise ProtocolError(
                f"messages[{i}].role",
                f"messages[{i}].role: {message.role[:40]!r} is not supported (system, developer, user, assistant)",
                "unsupported_parameter",
            )
        if not _empty((message.model_extra or {}).get("tool_calls")):
            raise ProtocolError(f"messages[{i}].tool_calls", "tool calls are not supported", "unsupported_parameter")
        for part in message.content or ():
            if part.type != "text":
                raise ProtocolError(
                    f"messages[{i}].content",
                    f"messages[{i}].content: only text parts are supported, not {str(part.type)[:40]!r}",
                    "unsupported_parameter",
                )


def history_messages(messages: Sequence[Any]) -> list[dict[str, str]]:
    """Earlier turns as the council reads them (``developer`` is the newer name of ``system``)."""
    return [{"role": _ROLES[m.role], "content": m.text()} for m in messages]


def response_format(value: ResponseFormat | None) -> JsonFormat | None:
    """The client's ``response_format`` as the format the chairman must answer in (None: prose)."""
    if value is None:
        return None
    kind = value.type
    if kind == "text":
        return None
    if kind == "json_object":
        return JsonFormat(None)
    if kind != "json_schema":
        raise ProtocolError(
            "response_format.type",
            f"response_format.type {str(kind)[:40]!r} is not supported (text, json_object or json_schema)",
            "unsupported_parameter",
        )
    spec = value.json_schema
    if spec is None:
        raise ProtocolError("response_format.json_schema", "response_format.json_schema must be an object")
    name = spec.name
    if not _SCHEMA_NAME.match(name):
        raise ProtocolError(
            "response_format.json_schema.name",
            "response_format.json_schema.name must be 1-64 letters, digits, '_' or '-'",
        )
    try:
        return JsonFormat(spec.schema_, name=name)
    except InputError as exc:
        param = "response_format.json_schema.schema"
        raise ProtocolError(param, f"{param}: {exc}") from None


def system_fingerprint(council: Any) -> str:
    """Stands for the backend configuration, as OpenAI's does: the council's models and settings
    (never keys or addresses), so a changed council gets a new fingerprint."""
    from council import __version__

    r = council.resolved
    chairs = [m.model if m else None for m in (r.chairman, r.fallback_chairman)]
    shape = {
        "version": __version__,
        "council": r.name,
        "members": [m.model for m in r.members],
        "reviewers": [m.model for m in r.reviewers],
        "chairs": chairs,
        "scale": list(r.scale),
        "self_review": r.self_review,
    }
    return "fp_" + hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:12]


def check_cors_origin(value: str) -> str:
    """An origin as browsers send it (``scheme://host[:port]``); ``*`` is refused: name each origin."""
    origin = value.strip()
    parts = urlsplit(origin)
    scheme = parts.scheme.lower()
    no_origin = not parts.hostname or parts.path not in ("", "/") or parts.query or "@" in parts.netloc
    if scheme not in ("http", "https") or no_origin:
        raise UsageError(
            f"--cors-origin {value!r} is not an origin like http://localhost:3000 (scheme://host[:port], "
            "no path; '*' is not accepted: name each origin)"
        )
    # Browsers send the origin in lower case; CORS compares it exactly.
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def session_headers(session_id: str, status: str = "running") -> dict[str, str]:
    """The headers every chat completion and session response carries, so a client that drops the
    body's ``council`` field (LangChain's ``ChatOpenAI``) keeps the session: its id, and its status
    when the response was sent (``running`` for a stream, whose last chunk carries the final one)."""
    return {"x-council-session-id": session_id, "x-council-status": status}
