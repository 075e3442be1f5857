"""Which backend serves a model string. Each backend imports its heavy SDK only when used.

- ``fake/NAME[+behaviour]``: the in-process fake (tests, demos; no network)
- ``local/NAME``: a small local model run by llama.cpp (the offline default)
- anything else: LiteLLM (``openai/…``, ``anthropic/…``, ``ollama/…``, OpenAI-compatible
  servers through ``api_base``)
"""

from __future__ import annotations

from council.config import ResolvedModel
from council.providers.base import ModelAPI


def make_api(resolved: ResolvedModel) -> ModelAPI:
    model = resolved.model
    if model.startswith("fake/"):
        from council.providers.fake import FakeAPI

        return FakeAPI(model)
    if model.startswith("local/"):
        from council.providers.local import LocalLlamaAPI

        return LocalLlamaAPI(model.removeprefix("local/"))
    from council.providers.litellm_api import LiteLLMAPI

    spec = resolved.spec
    return LiteLLMAPI(
        model,
        api_base=spec.api_base,
        api_key=resolved.api_key.get_secret_value() if resolved.api_key else None,
        timeout=spec.timeout,
        input_cost_per_token=spec.input_cost_per_token,
        output_cost_per_token=spec.output_cost_per_token,
    )


def is_offline_model(model: str) -> bool:
    return model.startswith(("fake/", "local/"))
