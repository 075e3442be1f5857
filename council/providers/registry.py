"""Which backend serves a model. Each backend imports its heavy dependencies only when used.

- ``fake/NAME[+behaviour]``: the in-process fake (tests, demos; no network)
- ``local/NAME``: a small local model run by llama.cpp (the offline default)
- native: OpenAI-compatible servers and providers (``openai/…``, ``openrouter/…``, ``groq/…``,
  ``ollama/…``, any model with an ``api_base``…) through our own aiohttp client
- LiteLLM: everything else (``anthropic/…``, ``gemini/…``, ``bedrock/…``…), or any model with
  ``transport = "litellm"``; LiteLLM is imported only when such a model is built

The decision is ``ResolvedModel.transport`` (``council.config.endpoints.transport_of``).
"""

from __future__ import annotations

from collections.abc import Iterable

from council.config import ResolvedModel
from council.providers.base import ModelAPI


def make_api(resolved: ResolvedModel) -> ModelAPI:
    model = resolved.model
    transport = resolved.transport
    spec = resolved.spec
    api_key = resolved.api_key.get_secret_value() if resolved.api_key else None
    if transport == "fake":
        from council.providers.fake import FakeAPI
        from council.providers.prices import configured_price

        return FakeAPI(model, price=configured_price(spec.input_cost_per_token, spec.output_cost_per_token))
    if transport == "local":
        from council.providers.local import LocalLlamaAPI

        return LocalLlamaAPI(model.removeprefix("local/"))
    if transport == "native":
        from council.config.endpoints import native_endpoint
        from council.providers.openai_compatible import OpenAICompatibleAPI

        return OpenAICompatibleAPI(
            model,
            native_endpoint(model, spec.api_base),
            api_key=api_key,
            timeout=spec.timeout,
            input_cost_per_token=spec.input_cost_per_token,
            output_cost_per_token=spec.output_cost_per_token,
        )
    from council.providers.litellm_api import LiteLLMAPI

    return LiteLLMAPI(
        model,
        api_base=spec.api_base,
        api_key=api_key,
        timeout=spec.timeout,
        input_cost_per_token=spec.input_cost_per_token,
        output_cost_per_token=spec.output_cost_per_token,
    )


def needs_litellm(models: Iterable[ResolvedModel]) -> bool:
    """Whether any of these models is served through LiteLLM (so LiteLLM must be imported)."""
    return any(m.transport == "litellm" for m in models)
