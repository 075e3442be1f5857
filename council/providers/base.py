"""The provider contract: one request type, one response type, one async method.

Every backend (LiteLLM, the in-process fake, the local llama.cpp models) implements
``ModelAPI.generate``. Retries, pacing, deadlines and the call log live in
``council.providers.client.ModelClient``, never in a backend.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field


class ChatRequest(BaseModel):
    """One chat completion request, independent of the backend."""

    model_config = ConfigDict(frozen=True)

    messages: list[dict[str, str]]
    """OpenAI-style messages: ``{"role": "system"|"user"|"assistant", "content": str}``."""
    json_schema: dict[str, Any] | None = None
    """When set, the reply must be one JSON object matching this JSON Schema."""
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


@runtime_checkable
class ModelAPI(Protocol):
    """A backend: turns a ChatRequest into a ChatResponse or raises ProviderError."""

    async def generate(self, request: ChatRequest) -> ChatResponse: ...

    async def aclose(self) -> None: ...
