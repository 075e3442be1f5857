"""Where a model string is served, and over which transport.

Pure data and decisions, no I/O: which providers speak the OpenAI chat-completions protocol
(their default base URL, the environment variables that hold their key, their small
differences), and which are reached through LiteLLM. ``transport_of`` decides, for one
``[models.X]`` entry:

- ``fake/…`` and ``local/…``: the in-process backends;
- ``transport = "litellm"``: LiteLLM, whatever the model;
- otherwise native (our own OpenAI-compatible client) for the providers in ``OPENAI_PROTOCOL``
  (``openai/…``, ``openrouter/…``, ``groq/…``, ``ollama/…``, ``hosted_vllm/…``, …) and for a model
  with an ``api_base`` whose prefix is not a provider known to speak another protocol
  (``Qwen/Qwen2.5-7B-Instruct`` on a vLLM server, a bare ``llama3`` on llama.cpp);
- LiteLLM for the rest (``anthropic/…``, ``gemini/…``, ``bedrock/…``, ``vertex_ai/…``, and any
  prefix we do not know without an ``api_base``).

``transport = "native"`` for a provider that speaks another protocol is a configuration error.
Base URLs and key variables are those LiteLLM uses for the same prefixes, so a model string
reaches the same place either way.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

Transport = Literal["fake", "local", "native", "litellm"]
StructuredOutput = Literal["json_schema", "by_model", "none"]


@dataclass(frozen=True)
class OpenAIProtocolProvider:
    base_url: str
    key_env: tuple[str, ...] = ()
    """Environment variables that may hold the key, first set wins; read only for ``base_url``."""
    structured: StructuredOutput = "json_schema"
    """``json_schema``: send ``response_format`` json_schema; ``by_model``: only for models LiteLLM's
    price map says support it; ``none``: the prompt carries the schema (the reply is validated either way)."""
    seed_param: str = "seed"
    max_tokens_param: str = "max_tokens"
    add_v1: bool = False
    """A configured ``api_base`` without a ``/v1`` path gets one (Ollama's native base URL is the host)."""


_P = OpenAIProtocolProvider
OPENAI_PROTOCOL: dict[str, OpenAIProtocolProvider] = {
    # api.openai.com's reasoning models refuse max_tokens; other servers may not know the newer name.
    "openai": _P("https://api.openai.com/v1", ("OPENAI_API_KEY",), max_tokens_param="max_completion_tokens"),
    "openrouter": _P("https://openrouter.ai/api/v1", ("OPENROUTER_API_KEY", "OR_API_KEY")),
    "groq": _P("https://api.groq.com/openai/v1", ("GROQ_API_KEY",), "by_model"),
    "together_ai": _P(
        "https://api.together.xyz/v1", ("TOGETHER_API_KEY", "TOGETHER_AI_API_KEY", "TOGETHERAI_API_KEY"), "by_model"
    ),
    # DeepSeek's API offers json_object mode only, no JSON schema.
    "deepseek": _P("https://api.deepseek.com/v1", ("DEEPSEEK_API_KEY",), "none"),
    "mistral": _P("https://api.mistral.ai/v1", ("MISTRAL_API_KEY",), seed_param="random_seed"),
    "xai": _P("https://api.x.ai/v1", ("XAI_API_KEY",)),
    "fireworks_ai": _P(
        "https://api.fireworks.ai/inference/v1", ("FIREWORKS_API_KEY", "FIREWORKS_AI_API_KEY"), "by_model"
    ),
    "deepinfra": _P("https://api.deepinfra.com/v1/openai", ("DEEPINFRA_API_KEY",), "by_model"),
    "perplexity": _P("https://api.perplexity.ai", ("PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY")),
    "cerebras": _P("https://api.cerebras.ai/v1", ("CEREBRAS_API_KEY",), "by_model"),
    "nvidia_nim": _P("https://integrate.api.nvidia.com/v1", ("NVIDIA_NIM_API_KEY",), "by_model"),
    "sambanova": _P("https://api.sambanova.ai/v1", ("SAMBANOVA_API_KEY",), "by_model"),
    "nebius": _P("https://api.studio.nebius.ai/v1", ("NEBIUS_API_KEY",), "by_model"),
    # Local servers: their OpenAI-compatible endpoints, no key needed.
    "ollama": _P("http://localhost:11434/v1", ("OLLAMA_API_KEY",), add_v1=True),
    "ollama_chat": _P("http://localhost:11434/v1", ("OLLAMA_API_KEY",), add_v1=True),
    "hosted_vllm": _P("http://localhost:8000/v1", ("HOSTED_VLLM_API_KEY",)),
    "vllm": _P("http://localhost:8000/v1", ("HOSTED_VLLM_API_KEY",)),
    "lm_studio": _P("http://localhost:1234/v1", ("LM_STUDIO_API_KEY",)),
    "llamafile": _P("http://127.0.0.1:8080/v1", ("LLAMAFILE_API_KEY",)),
}

# Providers LiteLLM reaches over their own protocols: never native, even with an api_base.
OTHER_PROTOCOL = frozenset(
    {
        "anthropic", "azure", "azure_ai", "azure_text", "bedrock", "bedrock_converse", "sagemaker", "sagemaker_chat",
        "vertex_ai", "vertex_ai_beta", "gemini", "palm", "cohere", "cohere_chat", "huggingface", "replicate",
        "watsonx", "watsonx_text", "ai21", "ai21_chat", "nlp_cloud", "aleph_alpha", "petals", "baseten",
        "cloudflare", "predibase", "clarifai", "databricks", "snowflake", "oci", "triton", "text-completion-openai",
        "text-completion-codestral", "github_copilot", "chatgpt", "codestral", "friendliai", "maritalk",
        "custom", "custom_openai", "litellm_proxy", "dashscope", "volcengine", "zai", "moonshot",
    }
)  # fmt: skip

# Every provider prefix LiteLLM 1.106.2 (pinned) routes: its provider enum and its JSON-configured
# OpenAI-like providers. Kept here so that reading a config never imports LiteLLM; a test holds
# it equal to LiteLLM's own lists.
LITELLM_PROVIDERS = frozenset(
    {
        "a2a", "a2a_agent", "abliteration", "ai21", "ai21_chat", "aihubmix", "aiml", "aiohttp_openai",
        "amazon_nova", "anthropic", "anthropic_text", "apertis", "assemblyai", "auto_router", "aws_polly",
        "aws_textract", "azure", "azure_ai", "azure_speech", "azure_text", "baseten", "bedrock", "bedrock_mantle",
        "black_forest_labs", "bytez", "cerebras", "charity_engine", "chatgpt", "chutes", "clarifai", "cloudflare",
        "codestral", "cognition", "cohere", "cohere_chat", "cometapi", "compactifai", "cortecs", "crusoe", "cursor",
        "custom", "custom_openai", "darkbloom", "dashscope", "databricks", "datarobot", "deepgram", "deepinfra",
        "deepseek", "docker_model_runner", "dotprompt", "edenai", "elevenlabs", "empiriolabs", "empower", "fal_ai",
        "featherless_ai", "fireworks_ai", "friendliai", "galadriel", "gdc", "gemini", "gigachat", "github",
        "github_copilot", "gmi", "gradient_ai", "groq", "helicone", "heroku", "hosted_vllm", "huggingface",
        "humanloop", "hyperbolic", "inception", "infinity", "jina_ai", "lambda_ai", "langflow", "langfuse",
        "langgraph", "lemonade", "libertai", "litellm_agent", "litellm_proxy", "llamafile", "llamagate",
        "lm_studio", "manus", "maritalk", "meta", "meta_llama", "milvus", "minimax", "mistral", "modelscope",
        "mongodb", "moonshot", "morph", "nadir", "nano-gpt", "nebius", "neosantara", "nlp_cloud", "novita",
        "nscale", "nvidia_nim", "nvidia_riva", "oci", "ollama", "ollama_chat", "oobabooga", "openai", "openai_like",
        "openrouter", "ovhcloud", "parasail", "perplexity", "petals", "pg_vector", "pinstripes", "poe", "predibase",
        "prism", "publicai", "qwen_ai_platform", "qwencloud", "ragflow", "recraft", "reducto", "reka", "replicate",
        "runwayml", "s3_vectors", "sagemaker", "sagemaker_chat", "sagemaker_nova", "sail", "sambanova", "sap",
        "sarvam", "scaleway", "scx-ai", "snowflake", "soniox", "stability", "strands_decider", "synthetic",
        "tencent", "tensormesh", "text-completion-codestral", "text-completion-inception", "text-completion-openai",
        "together_ai", "topaz", "transcribe", "triton", "typesafe", "v0", "valkey", "veniceai", "vercel_ai_gateway",
        "vertex_ai", "vertex_ai_beta", "vllm", "volcengine", "voyage", "wandb", "watsonx", "watsonx_text", "xai",
        "xiaomi_mimo", "xinference", "zai",
    }
)  # fmt: skip

#: What a model string may start with when no ``api_base`` is given.
KNOWN_PREFIXES = frozenset({"fake", "local", *OPENAI_PROTOCOL, *LITELLM_PROVIDERS})


def provider_of(model: str) -> str | None:
    """``openrouter/anthropic/claude`` → ``openrouter``; a bare ``llama3`` → None."""
    head, sep, _ = model.partition("/")
    return head if sep else None


def transport_of(model: str, api_base: str | None, transport: str | None) -> Transport:
    """Which backend serves this model (see the module docstring). Raises ValueError with the
    reason when ``transport = "native"`` cannot be honoured."""
    if model.startswith(("fake/", "local/")):
        if transport is not None:
            raise ValueError(f"transport does not apply to {model.split('/')[0]}/ models; remove it")
        return "fake" if model.startswith("fake/") else "local"
    if transport == "litellm":
        return "litellm"
    provider = provider_of(model)
    if provider in OTHER_PROTOCOL:
        if transport == "native":
            raise ValueError(
                f'transport = "native" but {provider!r} does not speak the OpenAI protocol; use transport = "litellm"'
            )
        return "litellm"
    if provider in OPENAI_PROTOCOL or api_base:
        return "native"
    if transport == "native":
        raise ValueError(
            f'transport = "native" but {model!r} names no known OpenAI-compatible provider; set api_base'
        )
    return "litellm"


def unservable(model: str, api_base: str | None) -> str | None:
    """Why no backend can serve this model string, with the likely fix; None when one can.

    Without an ``api_base`` the string must start with a provider (LiteLLM's or ours), else the
    first call would fail with LiteLLM's "LLM Provider NOT provided" or a missing key. The
    suggestion (read only on this path): a bare name's provider in LiteLLM's model map, or the
    provider a misspelt prefix is closest to."""
    if api_base:  # a server of one's own: the name is sent as written
        return None
    provider, sep, rest = model.partition("/")
    if sep and provider in KNOWN_PREFIXES:
        return None
    server = "a model on an OpenAI-compatible server needs api_base"
    if not sep:
        fix = bare_model_fix(model)
        how = f"did you mean {fix!r}?" if fix else "write it as provider/model (e.g. openai/NAME, anthropic/NAME)"
        return f"model {model!r} names no provider: {how} ({server})"
    close = _closest(provider.lower(), KNOWN_PREFIXES)
    how = f"did you mean {close[0] + '/' + rest!r}?" if close else "see https://docs.litellm.ai/docs/providers"
    return f"unknown provider {provider!r} in model {model!r}: {how} ({server})"


def bare_model_fix(model: str) -> str | None:
    """``gpt-4o`` → ``openai/gpt-4o``: the provider LiteLLM's model map files the name (or the
    closest name) under."""
    from council.config.model_map import price_map

    table = price_map()
    bare = [name for name in table if "/" not in name]
    for name in (model, *_closest(model, bare)):
        entry = table.get(name)
        provider = entry.get("litellm_provider") if isinstance(entry, dict) else None
        if isinstance(provider, str) and provider in KNOWN_PREFIXES:
            return f"{provider}/{name}"
    return None


def _closest(name: str, choices: Iterable[str]) -> list[str]:
    """The choice ``name`` most likely misspells, if any (long names are no one's typo, and
    comparing them would take a while)."""
    return difflib.get_close_matches(name, choices, n=1, cutoff=0.8) if len(name) <= 100 else []


@dataclass(frozen=True)
class NativeEndpoint:
    provider: str
    """The price-map provider: the prefix, or ``openai`` for a model named without a known one."""
    base_url: str
    wire_model: str
    """The model name the server is sent (the provider prefix removed)."""
    key_env: tuple[str, ...]
    """Variables to read the key from when none is configured (only for the provider's own URL)."""
    settings: OpenAIProtocolProvider


def native_endpoint(model: str, api_base: str | None) -> NativeEndpoint:
    """Base URL, model name on the wire and key variables of a model on the native transport."""
    provider = provider_of(model)
    settings = OPENAI_PROTOCOL.get(provider or "")
    if settings is None:  # an unknown prefix (or none) on a configured server: send the name as written
        assert api_base, "transport_of routes such a model to LiteLLM"
        settings = OpenAIProtocolProvider(api_base.rstrip("/"))
        return NativeEndpoint("openai", api_base.rstrip("/"), model, (), settings)
    wire = model.split("/", 1)[1]
    if api_base is None or api_base.rstrip("/") == settings.base_url:
        return NativeEndpoint(provider or "openai", settings.base_url, wire, settings.key_env, settings)
    base = api_base.rstrip("/")
    if settings.add_v1 and not base.endswith("/v1"):
        base += "/v1"
    # Someone else's server (a proxy, a local server): the provider's key is not sent there, and
    # max_tokens is the name every OpenAI-compatible server knows.
    elsewhere = replace(settings, base_url=base, max_tokens_param="max_tokens")
    return NativeEndpoint(provider or "openai", base, wire, (), elsewhere)


def default_api_key(model: str, api_base: str | None, env: Mapping[str, str]) -> str | None:
    """The key a native model uses when ``api_key_env`` is not set: the provider's usual variable,
    read only when the model goes to that provider's own URL (a key is never sent elsewhere)."""
    endpoint = native_endpoint(model, api_base)
    for name in endpoint.key_env:
        if env.get(name):
            return env[name]
    return None
