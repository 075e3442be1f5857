"""The provider contract: one request type, one response type, one async method.

Every backend (LiteLLM, the in-process fake, the local llama.cpp models) implements
``ModelAPI.generate``. A backend that can stream also has ``stream(request, on_delta)``
(``StreamingAPI``): the same call, handing each piece of text to ``on_delta`` as it arrives.
Retries, pacing, deadlines and the call log live in
``council.providers.client.ModelClient``, never in a backend.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, field_validator

from council.accounting.usage import known_cost


def _schema_as_given(value: Any) -> dict[str, Any] | None:
    if value is None or (isinstance(value, dict) and all(isinstance(key, str) for key in value)):
        return value
    raise ValueError("json_schema must be a JSON Schema object (a dict with text keys) or None")


class ChatRequest(BaseModel):
    """One chat completion request, independent of the backend."""

    model_config = ConfigDict(frozen=True)

    messages: list[dict[str, str]]
    """OpenAI-style messages: ``{"role": "system"|"user"|"assistant", "content": str}``."""
    json_schema: Annotated[dict[str, Any] | None, PlainValidator(_schema_as_given)] = None
    """When set, the reply must be one JSON object matching this JSON Schema. Kept as the object
    given, not copied: a transport encodes one schema object once (council.providers.openai_compatible)."""
    json_mode: bool = False
    """Without a schema: the reply must be one JSON object, any shape (OpenAI's ``json_object``)."""
    schema_name: str | None = None
    """A short name for the schema (``response_format.json_schema.name``)."""
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None


class ChatResponse(BaseModel):
    """What a backend returns: the text and its accounting."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    """None when the price of the model is unknown (never guessed)."""
    provider_model: str | None = Field(default=None, description="model name the backend reported")
    usage_untrusted: bool = False
    """The usage block could not be read (``council.accounting.usage.reported_usage``): ``ModelClient``
    settles the call at its worst case."""

    @field_validator("cost_usd")
    @classmethod
    def _known_cost(cls, cost: float | None) -> float | None:
        return known_cost(cost)  # every backend's cost passes here


# What every backend calls an HTTP error (the OpenAI SDK's names, with LiteLLM's for 408/502-504),
# so an error reads the same whichever transport carried the call.
_STATUS_NAMES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    408: "Timeout",
    409: "ConflictError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
    504: "Timeout",
}


def error_name(status: int | None) -> str:
    """The name a ProviderError message starts with: by HTTP status, or a connection error."""
    if status is None:
        return "APIConnectionError"
    return _STATUS_NAMES.get(status) or ("InternalServerError" if status >= 500 else "APIError")


def retryable_status(status: int | None) -> bool:
    """Whether a retry can help an HTTP error: 408, 409, 425, 429 and every 5xx (the same rule on
    every transport; timeouts and connection errors, which have no status, are retryable too)."""
    return status is not None and (status in (408, 409, 425, 429) or 500 <= status <= 599)


@runtime_checkable
class ModelAPI(Protocol):
    """A backend: turns a ChatRequest into a ChatResponse or raises ProviderError."""

    async def generate(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class StreamingAPI(Protocol):
    """A backend that can also stream: ``on_delta`` gets each piece of the reply's text as it
    arrives; the whole reply (text and usage) is returned as from ``generate``."""

    async def stream(self, request: ChatRequest, on_delta: Callable[[str], None]) -> ChatResponse: ...
