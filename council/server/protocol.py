"""What ``council serve`` does with each part of an OpenAI chat-completions request.

A council is not one model, so some parameters cannot mean what a client intends. Each
one falls in exactly one group (the README lists them):

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
from typing import Any
from urllib.parse import urlsplit

from council.asking import JsonFormat
from council.errors import InputError, UsageError


class ProtocolError(Exception):
    """A request part the server cannot honour: becomes a 400 naming ``param``."""

    def __init__(self, param: str, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


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

#: Accepted and ignored: each council member's sampling is set in the council's config (README's
#: parameter table lists them; tests/docs/test_docs.py keeps the two equal).
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
    options = body.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise ProtocolError("stream_options", "stream_options must be an object")
        if not body.get("stream"):
            raise ProtocolError("stream_options", "stream_options is only allowed when stream is true")


def include_usage(body: Mapping[str, Any]) -> bool:
    """``stream_options.include_usage``: end the stream with OpenAI's usage chunk."""
    return bool((body.get("stream_options") or {}).get("include_usage"))


def include_progress(body: Mapping[str, Any]) -> bool:
    """``stream_options.include_progress`` (default true): stage progress as ``reasoning_content``
    deltas (:mod:`council.server.progress`); false: as SSE comment lines clients skip."""
    value = (body.get("stream_options") or {}).get("include_progress", True)
    if not isinstance(value, bool):
        raise ProtocolError("stream_options.include_progress", "stream_options.include_progress must be true or false")
    return value


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
        if isinstance(message.content, list):
            for part in message.content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind != "text":
                    raise ProtocolError(
                        f"messages[{i}].content",
                        f"messages[{i}].content: only text parts are supported, not {str(kind)[:40]!r}",
                        "unsupported_parameter",
                    )


def history_messages(messages: Sequence[Any]) -> list[dict[str, str]]:
    """Earlier turns as the council reads them (``developer`` is the newer name of ``system``)."""
    return [{"role": _ROLES[m.role], "content": m.text()} for m in messages]


def response_format(value: Any) -> JsonFormat | None:
    """The client's ``response_format`` as the format the chairman must answer in (None: prose)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ProtocolError("response_format", "response_format must be an object")
    kind = value.get("type")
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
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        raise ProtocolError("response_format.json_schema", "response_format.json_schema must be an object")
    name = spec.get("name", "response")
    if not isinstance(name, str) or not _SCHEMA_NAME.match(name):
        raise ProtocolError(
            "response_format.json_schema.name",
            "response_format.json_schema.name must be 1-64 letters, digits, '_' or '-'",
        )
    try:
        return JsonFormat(spec.get("schema"), name=name)
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
