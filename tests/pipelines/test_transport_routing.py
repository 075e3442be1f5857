"""Which transport serves a model, where it goes, with which key, and the config errors."""

from __future__ import annotations

import pytest
from conftest import invoke_cli, write_config

from council.config import load_config, resolve_model
from council.config.endpoints import OPENAI_PROTOCOL, native_endpoint, transport_of
from council.errors import ConfigError
from council.providers.registry import make_api, needs_litellm


@pytest.mark.parametrize(
    "model, api_base, transport, expected",
    [
        ("openai/gpt-4o", None, None, "native"),
        ("openrouter/anthropic/claude-3.5-sonnet", None, None, "native"),
        ("groq/llama-3.1-8b-instant", None, None, "native"),
        ("together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo", None, None, "native"),
        ("deepseek/deepseek-chat", None, None, "native"),
        ("mistral/mistral-large-latest", None, None, "native"),
        ("ollama/llama3", None, None, "native"),
        ("hosted_vllm/Qwen/Qwen2.5-7B-Instruct", "http://gpu:8000/v1", None, "native"),
        ("lm_studio/qwen2.5", None, None, "native"),
        ("llamafile/any", None, None, "native"),
        # A model named the way its server names it (no provider prefix) on a configured server.
        ("Qwen/Qwen2.5-7B-Instruct", "http://gpu:8000/v1", None, "native"),
        ("llama3", "http://127.0.0.1:8080/v1", None, "native"),
        # Other protocols stay on LiteLLM, with or without an api_base.
        ("anthropic/claude-3-5-sonnet", None, None, "litellm"),
        ("anthropic/claude-3-5-sonnet", "https://proxy.example/anthropic", None, "litellm"),
        ("gemini/gemini-1.5-pro", None, None, "litellm"),
        ("bedrock/anthropic.claude-v2", None, None, "litellm"),
        ("vertex_ai/gemini-pro", None, None, "litellm"),
        ("azure/my-deployment", "https://x.openai.azure.com", None, "litellm"),
        # A prefix we do not know, with no server given: LiteLLM may know it.
        ("somecloud/model-x", None, None, "litellm"),
        # The per-model switch.
        ("openai/gpt-4o", None, "litellm", "litellm"),
        ("openai/mock", "http://127.0.0.1:1/v1", "litellm", "litellm"),
        ("somecloud/model-x", "http://127.0.0.1:1/v1", "native", "native"),
        ("fake/alpha", None, None, "fake"),
        ("local/smollm2", None, None, "local"),
    ],
)
def test_transport_of(model, api_base, transport, expected):
    assert transport_of(model, api_base, transport) == expected


@pytest.mark.parametrize(
    "model, api_base, base_url, wire",
    [
        ("openai/gpt-4o", None, "https://api.openai.com/v1", "gpt-4o"),
        ("openrouter/anthropic/claude-3.5-sonnet", None, "https://openrouter.ai/api/v1", "anthropic/claude-3.5-sonnet"),
        ("groq/llama-3.1-8b-instant", None, "https://api.groq.com/openai/v1", "llama-3.1-8b-instant"),
        ("deepseek/deepseek-chat", None, "https://api.deepseek.com/v1", "deepseek-chat"),
        ("ollama/llama3", None, "http://localhost:11434/v1", "llama3"),
        # LiteLLM's Ollama base URL is the host; its OpenAI endpoint is under /v1.
        ("ollama/llama3", "http://box:11434", "http://box:11434/v1", "llama3"),
        ("ollama/llama3", "http://box:11434/v1/", "http://box:11434/v1", "llama3"),
        ("openai/mock-alpha", "http://127.0.0.1:9/v1/", "http://127.0.0.1:9/v1", "mock-alpha"),
        ("Qwen/Qwen2.5-7B-Instruct", "http://gpu:8000/v1", "http://gpu:8000/v1", "Qwen/Qwen2.5-7B-Instruct"),
        ("lm_studio/qwen2.5", None, "http://localhost:1234/v1", "qwen2.5"),
    ],
)
def test_native_endpoint_base_url_and_model_name(model, api_base, base_url, wire):
    endpoint = native_endpoint(model, api_base)
    assert (endpoint.base_url, endpoint.wire_model) == (base_url, wire)


def test_every_openai_protocol_provider_has_an_absolute_base_url():
    for name, provider in OPENAI_PROTOCOL.items():
        assert provider.base_url.startswith(("https://", "http://localhost", "http://127.0.0.1")), name
        assert not provider.base_url.endswith("/"), name


@pytest.mark.parametrize(
    "spec, problem",
    [
        ({"model": "anthropic/claude-3-5-sonnet", "transport": "native"}, "'anthropic' does not speak the OpenAI"),
        ({"model": "gemini/gemini-pro", "transport": "native", "api_base": "http://x/v1"}, "'gemini' does not speak"),
        ({"model": "somecloud/model-x", "transport": "native"}, "names no known OpenAI-compatible provider"),
    ],
)
def test_native_for_a_provider_that_cannot_speak_it_is_a_one_line_config_error(spec, problem):
    with pytest.raises(ConfigError) as caught:
        load_config({"models": {"judge": spec}})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("config: models.judge: transport = \"native\" but ")
    assert problem in message


@pytest.mark.parametrize("model", ["fake/alpha", "local/smollm2"])
def test_transport_is_refused_for_in_process_models(model):
    with pytest.raises(ConfigError, match=r"models\.judge: transport does not apply to (fake|local)/ models"):
        load_config({"models": {"judge": {"model": model, "transport": "native"}}})


def test_an_unknown_transport_value_is_rejected():
    with pytest.raises(ConfigError, match=r"models\.judge\.transport"):
        load_config({"models": {"judge": {"model": "openai/gpt-4o", "transport": "grpc"}}})


def test_cli_reports_the_transport_error_in_one_line_with_exit_2(tmp_path):
    models = {"claude": {"model": "anthropic/claude-3-5-sonnet", "transport": "native"}}
    config = write_config(tmp_path / "c.toml", models)
    result = invoke_cli("run", "Why?", "--config", str(config))
    assert result.exit_code == 2
    assert len(result.error_lines) == 1
    assert "models.claude: transport = \"native\" but 'anthropic' does not speak the OpenAI protocol" in result.stderr


# -- keys ---------------------------------------------------------------------------
def resolved(spec: dict, env: dict[str, str]):
    return resolve_model("m", load_config({"models": {"m": spec}}).config, env, "test")


def test_a_native_provider_takes_its_usual_key_variable_when_none_is_configured():
    env = {"OPENROUTER_API_KEY": "or-key", "OPENAI_API_KEY": "oa-key"}
    assert resolved({"model": "openrouter/x/y"}, env).api_key.get_secret_value() == "or-key"
    assert resolved({"model": "openai/gpt-4o"}, env).api_key.get_secret_value() == "oa-key"
    assert resolved({"model": "groq/llama3"}, env).api_key is None  # not set: no key, no error


def test_api_key_env_wins_over_the_usual_variable():
    env = {"OPENAI_API_KEY": "oa-key", "MY_KEY": "mine"}
    assert resolved({"model": "openai/gpt-4o", "api_key_env": "MY_KEY"}, env).api_key.get_secret_value() == "mine"


def test_a_providers_key_is_never_sent_to_another_server():
    # openai/... on someone else's server (a proxy, vLLM): OPENAI_API_KEY stays home.
    env = {"OPENAI_API_KEY": "oa-key"}
    assert resolved({"model": "openai/gpt-4o", "api_base": "http://127.0.0.1:8000/v1"}, env).api_key is None
    # ... unless the api_base is the provider's own URL.
    same = resolved({"model": "openai/gpt-4o", "api_base": "https://api.openai.com/v1/"}, env)
    assert same.api_key.get_secret_value() == "oa-key"


def test_litellm_models_leave_the_usual_key_variables_to_litellm():
    env = {"OPENAI_API_KEY": "oa-key"}
    assert resolved({"model": "openai/gpt-4o", "transport": "litellm"}, env).api_key is None


# -- the registry -----------------------------------------------------------------------
def test_the_registry_builds_the_backend_the_transport_names():
    env: dict[str, str] = {}
    native = make_api(resolved({"model": "openai/mock", "api_base": "http://127.0.0.1:1/v1"}, env))
    litellm = make_api(resolved({"model": "anthropic/claude-3-5-sonnet"}, env))
    fake = make_api(resolved({"model": "fake/alpha"}, env))
    assert [type(a).__name__ for a in (native, litellm, fake)] == ["OpenAICompatibleAPI", "LiteLLMAPI", "FakeAPI"]


def test_needs_litellm_only_when_a_model_goes_through_it():
    env: dict[str, str] = {}
    native = resolved({"model": "openai/mock", "api_base": "http://127.0.0.1:1/v1"}, env)
    fake = resolved({"model": "fake/alpha"}, env)
    claude = resolved({"model": "anthropic/claude-3-5-sonnet"}, env)
    assert not needs_litellm([native, fake])
    assert needs_litellm([native, claude])
