"""Model backends behind one contract, and the one way council asks a model for anything.

- ``base``: the request/response contract every backend implements (``ModelAPI``).
- ``client``: ``ModelClient``, the one path every call takes (limits, retries, usage, cache, cap).
- ``asking``: a structured reply turned into a validated object (``JsonFormat``, ``ask_valid``).
- ``json_schema``: reading the JSON Schemas sent to models (references, integer bounds).
- ``registry``: which backend serves a model string.
- ``openai_compatible``, ``http_client``: the native OpenAI-compatible transport.
- ``litellm_api``: every other provider, through LiteLLM (imported lazily).
- ``local``, ``local_weights``, ``grammar``: the embedded offline default on llama.cpp.
- ``fake``: scripted replies for tests and the mock.
- ``provider_batch``: provider batch APIs (OpenAI, Anthropic) for ``council batch``.
- ``prices``, ``rate_budget``: what a call costs and how fast calls may go.

Heavy SDKs are imported lazily.
"""

from council.providers.base import ChatRequest, ChatResponse, ModelAPI

__all__ = ["ChatRequest", "ChatResponse", "ModelAPI"]
