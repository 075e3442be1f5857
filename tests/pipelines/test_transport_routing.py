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


# -- model strings no backend can serve: refused when the config is read --------------------
@pytest.mark.parametrize(
    "model, fix",
    [
        ("gpt-4o", "did you mean 'openai/gpt-4o'?"),  # a bare name LiteLLM's model map files under openai
        ("claude-sonnet-4-5", "did you mean 'anthropic/claude-sonnet-4-5'?"),
        ("opneai/gpt-4o-mini", "did you mean 'openai/gpt-4o-mini'?"),
        ("anthropc/claude-3-5-sonnet", "did you mean 'anthropic/claude-3-5-sonnet'?"),
        ("OpenAI/gpt-4o", "did you mean 'openai/gpt-4o'?"),
        ("gemni/gemini-1.5-pro", "did you mean 'gemini/gemini-1.5-pro'?"),
        ("somecloud/model-x", "api_base"),  # nothing close: how to name one, or a server of one's own
        ("my-own-model", "api_base"),
    ],
)
def test_a_model_string_no_provider_serves_is_refused_with_the_likely_fix(model, fix):
    with pytest.raises(ConfigError) as caught:
        load_config({"models": {"judge": {"model": model}}})
    message = str(caught.value)
    assert "\n" not in message and message.startswith("config: models.judge: ") and repr(model) in message
    assert fix in message


@pytest.mark.parametrize(
    "spec",
    [
        {"model": "Qwen/Qwen2.5-7B-Instruct", "api_base": "http://gpu:8000/v1"},  # named as its server names it
        {"model": "llama3", "api_base": "http://127.0.0.1:8080/v1"},
        {"model": "opneai/x", "api_base": "http://127.0.0.1:8080/v1", "transport": "native"},
        {"model": "local/smollm2"},
        {"model": "fake/anything+echo"},
        {"model": "ollama/llama3"},
        {"model": "vllm/x"},
    ],
)
def test_models_on_a_server_of_their_own_and_offline_models_still_load(spec):
    load_config({"models": {"m": spec}})


def test_every_provider_litellm_knows_still_loads():
    # The prefixes are a list kept in the code (LiteLLM is not imported to read a config); it
    # must be LiteLLM's own: its enum of providers and its JSON-configured OpenAI-like ones.
    from council.config.endpoints import LITELLM_PROVIDERS
    from council.providers.litellm_api import import_litellm

    litellm = import_litellm()
    from litellm.llms.openai_like.json_loader import JSONProviderRegistry

    theirs = {str(getattr(p, "value", p)) for p in litellm.provider_list} | set(JSONProviderRegistry.list_providers())
    assert set(LITELLM_PROVIDERS) == theirs
    load_config({"models": {p.replace("-", "_"): {"model": f"{p}/some-model"} for p in sorted(theirs)}})
    for prefix in OPENAI_PROTOCOL:
        load_config({"models": {"m": {"model": f"{prefix}/some-model"}}})


def test_a_model_string_used_directly_is_checked_too(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[councils.default]\nmembers = ["fake/a", "opneai/gpt-4o-mini"]\n', encoding="utf-8")
    result = invoke_cli("run", "Why?", "--config", str(config))
    assert result.exit_code == 2 and len(result.error_lines) == 1, result.stderr
    assert "councils.default.members: unknown provider 'opneai'" in result.stderr
    assert "did you mean 'openai/gpt-4o-mini'?" in result.stderr
    for judge, fix in (("opneai/gpt-4o-mini", "'openai/gpt-4o-mini'"), ("gpt-4o", "'openai/gpt-4o'")):
        for command in ("compare", "grade"):
            texts = ["--a", str(config), "--b", str(config)] if command == "compare" else ["--response", str(config)]
            result = invoke_cli(command, "--prompt", "Why?", *texts, "--judge", judge)
            assert result.exit_code == 2 and len(result.error_lines) == 1, result.stderr
            assert f"did you mean {fix}?" in result.stderr, result.stderr


def test_the_check_does_not_import_litellm(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from council.config import load_config\n"
        "from council.errors import ConfigError\n"
        "load_config({'models': {'a': {'model': 'anthropic/claude-3-5-sonnet'}, 'b': {'model': 'crusoe/x'}}})\n"
        "for bad in ('gpt-4o', 'opneai/gpt-4o-mini'):\n"
        "    try:\n"
        "        load_config({'models': {'m': {'model': bad}}})\n"
        "    except ConfigError as exc:\n"
        "        print(exc)\n"
        "print('litellm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-1] == "False" and "'openai/gpt-4o'" in out[0] and "'openai/gpt-4o-mini'" in out[1]


def test_a_batchs_stored_judge_is_checked_by_the_worker_in_one_line():
    # A batch stored before this check (or by hand) names a judge no provider serves.
    from council.config import ConfigFile
    from council.judging.batch_items import BatchSettings
    from council.judging.worker import BatchSpec, JudgeSpec, judges_from_spec

    judge = JudgeSpec(id="opneai/gpt-4o-mini", spec={"model": "opneai/gpt-4o-mini"})
    spec = BatchSpec(settings=BatchSettings(judges=[judge.id]), judges=[judge], rubrics={})
    with pytest.raises(ConfigError) as caught:
        judges_from_spec(spec, ConfigFile(), env={})
    assert "\n" not in str(caught.value) and "did you mean 'openai/gpt-4o-mini'?" in str(caught.value)
