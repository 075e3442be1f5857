"""The native OpenAI-compatible backend: shared connections, request bodies, reply and error
parsing, prices, and keeping the key out of sight."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest
import structlog
from mock_server import start_mock_server
from pydantic_core import to_json

from council import Council
from council.config import load_config, resolve_model
from council.config.endpoints import native_endpoint
from council.errors import ProviderError
from council.providers import prices
from council.providers.base import ChatRequest
from council.providers.openai_compatible import SESSIONS, OpenAICompatibleAPI, provider_message

SCHEMA = {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"]}
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def mock():
    with start_mock_server(latency=0.0) as server:
        yield server


def api(model: str, api_base: str | None = None, **kwargs) -> OpenAICompatibleAPI:
    return OpenAICompatibleAPI(model, native_endpoint(model, api_base), **kwargs)


def reference_price_map() -> dict:
    [location] = find_spec("litellm").submodule_search_locations
    return json.loads((Path(location) / "model_prices_and_context_window_backup.json").read_text())


# -- connections ------------------------------------------------------------------------
async def test_models_on_one_server_share_one_session_closed_with_the_last_of_them(mock):
    models = [f"openai/mock-{n}" for n in ("a", "b", "c")]
    config = {
        "councils": {"default": {"members": ["a", "b", "c"]}},
        "models": {n: {"model": m, "api_base": mock.base_url} for n, m in zip("abc", models, strict=True)},
    }
    council = Council.from_config(config, store=False)
    result = await council.run("Why is the sky blue?", seed=1)
    assert result.status == "complete"
    sessions = {id(client.api._session) for client in council.clients.values()}
    assert len(sessions) == 1 and SESSIONS.open_sessions() == 1
    first = council.clients["a"]
    await first.aclose()
    assert SESSIONS.open_sessions() == 1  # b and c still use it
    assert not council.clients["b"].api._session.closed
    await council.aclose()
    assert SESSIONS.open_sessions() == 0


async def test_different_servers_get_different_sessions(mock):
    with start_mock_server() as other:
        one, two = api("openai/mock-a", mock.base_url), api("openai/mock-b", other.base_url)
        await one.generate(ChatRequest(messages=MESSAGES))
        await two.generate(ChatRequest(messages=MESSAGES))
        assert one._session is not two._session and SESSIONS.open_sessions() == 2
        await one.aclose()
        await two.aclose()
    assert SESSIONS.open_sessions() == 0


def test_run_sync_works_again_in_a_new_event_loop(mock):
    config = {
        "councils": {"default": {"members": ["a", "b"]}},
        "models": {n: {"model": f"openai/mock-{n}", "api_base": mock.base_url} for n in "ab"},
    }
    council = Council.from_config(config, store=False)
    assert council.run_sync("First?", seed=1).status == "complete"
    assert council.run_sync("Second?", seed=2).status == "complete"  # a session bound to the first loop would fail


async def test_keep_alive_reuses_connections(mock, tmp_path):
    model = api("openai/mock-a", mock.base_url)
    for _ in range(5):
        await model.generate(ChatRequest(messages=MESSAGES))
    connector = model._session.connector
    assert sum(len(c) for c in connector._conns.values()) == 1  # one idle keep-alive connection, reused
    await model.aclose()


# -- request bodies ------------------------------------------------------------------
def test_body_of_a_plain_request_to_a_local_server():
    body = api("openai/mock", "http://127.0.0.1:1/v1").body(
        ChatRequest(messages=MESSAGES, max_tokens=50, temperature=0.2, seed=7)
    )
    assert body == {"model": "mock", "messages": MESSAGES, "max_tokens": 50, "temperature": 0.2, "seed": 7}


def test_structured_request_carries_the_json_schema():
    body = api("openai/mock", "http://127.0.0.1:1/v1").body(
        ChatRequest(messages=MESSAGES, json_schema=SCHEMA, schema_name="verdict")
    )
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "schema": SCHEMA, "strict": False},
    }


@pytest.mark.parametrize(
    "request_",
    [
        ChatRequest(messages=MESSAGES),
        ChatRequest(messages=MESSAGES, json_mode=True, max_tokens=5),
        ChatRequest(messages=MESSAGES, json_schema=SCHEMA, schema_name="verdict", max_tokens=50, seed=7),
        ChatRequest(messages=MESSAGES, json_schema=SCHEMA, temperature=0.0),  # no name: "reply"
        ChatRequest(
            messages=[{"role": "user", "content": 'é "\\ \u2028 😀 </script>'}],
            json_schema={"type": "object", "description": 'naïve "quoted" \u2028', "properties": {}},
            schema_name='a "name" ü',
        ),
    ],
)
@pytest.mark.parametrize("model", ["openai/mock", "openai/gpt-4o", "mistral/mistral-large-latest"])
def test_the_encoded_body_is_the_body_as_json_byte_for_byte(request_, model):
    endpoint = api(model, "http://127.0.0.1:1/v1" if model == "openai/mock" else None)
    assert endpoint.encoded_body(request_) == to_json(endpoint.body(request_))
    assert json.loads(endpoint.encoded_body(request_)) == endpoint.body(request_)


def test_a_schema_object_is_encoded_once_and_a_changed_copy_afresh(monkeypatch):
    import council.providers.openai_compatible as native

    encoded = []
    monkeypatch.setattr(native, "to_json", lambda value: encoded.append(value) or to_json(value))
    endpoint = api("openai/mock", "http://127.0.0.1:1/v1")
    schema = {"type": "object", "properties": {"score": {"type": "integer"}}}
    requests = [ChatRequest(messages=MESSAGES, json_schema=schema, seed=n) for n in range(3)]
    assert all(r.json_schema is schema for r in requests)  # kept as given, not copied
    bodies = [endpoint.encoded_body(r) for r in requests]
    assert sum(value is schema for value in encoded) == 1
    changed = {**schema, "required": ["score"]}
    sent = json.loads(endpoint.encoded_body(ChatRequest(messages=MESSAGES, json_schema=changed)))
    assert sent["response_format"]["json_schema"]["schema"] == changed
    assert [json.loads(b)["seed"] for b in bodies] == [0, 1, 2]


def test_a_schema_that_is_not_an_object_is_refused():
    for bad in ([SCHEMA], "schema", {1: "x"}):
        with pytest.raises(ValueError, match="json_schema must be a JSON Schema object"):
            ChatRequest(messages=MESSAGES, json_schema=bad)


def test_a_json_object_request_asks_for_any_json_object():
    # A client's response_format json_object reaches the chairman as json_mode without a schema.
    body = api("openai/mock", "http://127.0.0.1:1/v1").body(ChatRequest(messages=MESSAGES, json_mode=True))
    assert body["response_format"] == {"type": "json_object"}


def test_api_openai_com_gets_max_completion_tokens_and_mistral_gets_random_seed():
    request = ChatRequest(messages=MESSAGES, max_tokens=10, seed=3)
    assert api("openai/gpt-4o").body(request)["max_completion_tokens"] == 10
    mistral = api("mistral/mistral-large-latest").body(request)
    assert mistral["random_seed"] == 3 and "seed" not in mistral and mistral["max_tokens"] == 10


def test_structured_output_only_where_the_provider_supports_it():
    request = ChatRequest(messages=MESSAGES, json_schema=SCHEMA, schema_name="verdict")
    assert "response_format" not in api("deepseek/deepseek-chat").body(request)  # json_object only: prompt + parse
    table = reference_price_map()
    supported = next(
        k.removeprefix("groq/") for k, v in table.items()
        if k.startswith("groq/") and v.get("supports_response_schema") is True
    )
    assert "response_format" in api(f"groq/{supported}").body(request)
    assert "response_format" not in api("groq/no-such-model-anywhere").body(request)


# -- replies and errors ----------------------------------------------------------------
@pytest.mark.parametrize(
    "body, expected",
    [
        (b'{"error": {"message": "Rate limit reached for gpt-4o", "type": "rate"}}', "Rate limit reached for gpt-4o"),
        (b'{"error": "model not loaded"}', "model not loaded"),
        (b'{"detail": "Not Found"}', "Not Found"),
        (b'{"message": "upstream   overloaded\\n try later"}', "upstream overloaded try later"),
        (b'{"detail": [{"loc": ["body"], "msg": "bad"}]}', '[{"loc": ["body"], "msg": "bad"}]'),
        (b"plain text failure", "plain text failure"),
        (b"<html><body>502 Bad Gateway</body></html>", "Bad Gateway"),
        (b"", "Bad Gateway"),
    ],
)
def test_provider_message_from_error_bodies(body, expected):
    assert provider_message(body, "Bad Gateway") == expected


def test_an_error_inside_a_200_reply_is_raised_with_its_status():
    # OpenRouter reports some upstream failures as HTTP 200 with an error body.
    raw = json.dumps({"error": {"message": "Provider returned error", "code": 502}}).encode()
    with pytest.raises(ProviderError) as caught:
        api("openrouter/x/y")._response(raw)
    assert str(caught.value) == "openrouter/x/y: BadGatewayError: Provider returned error (HTTP 502)"
    assert caught.value.retryable


def test_a_reply_that_is_not_json_is_a_clean_error():
    with pytest.raises(ProviderError, match=r"APIError: the reply is not JSON: '<html>oops'"):
        api("openai/mock", "http://127.0.0.1:1/v1")._response(b"<html>oops")


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_that_is_not_utf8_says_so(stream):
    raw = b'{"choices": [{"message": {"content": "caf' + b"\xe9" + b'"}}]}'
    client = api("openai/mock", "http://127.0.0.1:1/v1")
    expected = r"APIError: (the reply|a streamed chunk) is not valid UTF-8 \(byte 0xe9 at position 41\)"
    with pytest.raises(ProviderError, match=expected):
        client._chunk(raw) if stream else client._response(raw)


@pytest.mark.parametrize(
    ("raw", "byte", "position"),
    [
        (b'\xff\xfe{"choices": []}', "0xff", 0),  # json.loads(bytes) would read it as UTF-16: "not JSON"
        (b'{\x00"choices": "caf\xe9"}', "0xe9", 17),  # a NUL byte: read as UTF-16, the wrong byte named
        (b'\x00{"choices": "caf\xe9"}', "0xe9", 17),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_bytes_that_are_not_utf8_are_named_whatever_encoding_they_resemble(raw, byte, position, stream):
    client = api("openai/mock", "http://127.0.0.1:1/v1")
    expected = rf"APIError: (the reply|a streamed chunk) is not valid UTF-8 \(byte {byte} at position {position}\)"
    with pytest.raises(ProviderError, match=expected):
        client._chunk(raw) if stream else client._response(raw)


@pytest.mark.parametrize("stream", [False, True])
def test_an_unpaired_surrogate_escape_in_a_reply_is_not_valid_text(stream):
    # Valid UTF-8 bytes, but "\ud800" decodes to half a character: nothing can store or show it.
    raw = b'{"choices": [{"message": {"content": "caf\\ud800"}, "delta": {"content": "caf\\ud800"}}]}'
    client = api("openai/mock", "http://127.0.0.1:1/v1")
    expected = r"APIError: (the reply|a streamed chunk) is not valid UTF-8 text \(an unpaired surrogate escape"
    with pytest.raises(ProviderError, match=expected):
        client._chunk(raw) if stream else client._response(raw)


def test_a_paired_surrogate_escape_and_a_utf8_bom_are_fine():
    raw = b'\xef\xbb\xbf{"choices": [{"message": {"content": "smile \\ud83d\\ude00"}}]}'
    assert api("openai/mock", "http://127.0.0.1:1/v1")._response(raw).text == "smile \U0001f600"


def test_usage_and_cached_tokens_from_the_reply_price_the_call():
    raw = json.dumps(
        {
            "model": "gpt-4o-2024-08-06",
            "choices": [{"message": {"role": "assistant", "content": "hello"}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 400}},
        }
    ).encode()
    response = api("openai/gpt-4o")._response(raw)
    entry = reference_price_map()["gpt-4o"]
    expected = (
        600 * entry["input_cost_per_token"] + 400 * entry["cache_read_input_token_cost"]
        + 20 * entry["output_cost_per_token"]
    )
    assert (response.text, response.prompt_tokens, response.completion_tokens) == ("hello", 1000, 20)
    assert response.cost_usd == pytest.approx(expected, rel=1e-12)
    assert response.provider_model == "gpt-4o-2024-08-06"


def test_a_null_content_is_an_empty_text_not_a_crash():
    raw = b'{"choices": [{"message": {"role": "assistant", "content": null, "refusal": "no"}}]}'
    response = api("openai/mock", "http://127.0.0.1:1/v1")._response(raw)
    assert (response.text, response.prompt_tokens, response.cost_usd) == ("", 0, None)


# -- prices ----------------------------------------------------------------------------
def test_prompt_size_tiers_price_every_token_at_the_tier_rate():
    entry = reference_price_map()["gemini/gemini-2.5-pro"]
    price = prices.mapped_price("gemini", "gemini-2.5-pro")
    small = price.cost(200_000, 1_000)
    large = price.cost(200_001, 1_000)
    assert small == pytest.approx(200_000 * entry["input_cost_per_token"] + 1_000 * entry["output_cost_per_token"])
    assert large == pytest.approx(
        200_001 * entry["input_cost_per_token_above_200k_tokens"]
        + 1_000 * entry["output_cost_per_token_above_200k_tokens"]
    )


def test_unknown_or_non_token_prices_are_none():
    assert prices.mapped_price("openai", "no-such-model") is None
    table = reference_price_map()
    per_second = next(k for k, v in table.items() if "input_cost_per_second" in v and "/" in k)
    provider, model = per_second.split("/", 1)
    assert prices.mapped_price(provider, model) is None


def test_configured_prices_win_over_the_map():
    model = api("openai/gpt-4o", input_cost_per_token=1.0, output_cost_per_token=2.0)
    assert model.cost(3, 4) == 11.0


def test_the_price_map_is_read_without_importing_litellm():
    code = (
        "import sys\n"
        "from council.providers import prices\n"
        "p = prices.mapped_price('openai', 'gpt-4o')\n"
        "print(p is not None and p.base.input > 0, 'litellm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False"]


# -- the key stays out of sight ---------------------------------------------------------
async def test_the_key_is_sent_but_never_shown(tmp_path):
    secret = "sk-test-0123456789abcdef"
    with start_mock_server(require_key="another-key") as server:
        env = {"MOCK_KEY": secret}
        loaded = load_config({"models": {"m": {"model": "openai/mock-a", "api_base": server.base_url,
                                               "api_key_env": "MOCK_KEY", "retries": 0}}})
        resolved = resolve_model("m", loaded.config, env, "test")
        from council.providers.client import ModelClient
        from council.providers.registry import make_api

        model = make_api(resolved)
        client = ModelClient(resolved, model)
        records: list = []
        with structlog.testing.capture_logs() as logs:
            with pytest.raises(ProviderError) as caught:
                await client.complete(ChatRequest(messages=MESSAGES), stage="answer", sink=records.append)
        await client.aclose()
    shown = " ".join([str(caught.value), repr(model), repr(resolved), json.dumps(logs, default=str)])
    shown += " ".join(r.model_dump_json() for r in records)
    assert "AuthenticationError" in str(caught.value)  # the key reached the server, and was refused
    assert secret not in shown


def test_aclose_without_a_running_loop_call_is_harmless():
    model = api("openai/mock", "http://127.0.0.1:1/v1")
    asyncio.run(model.aclose())  # never used: nothing to close


# -- proxies ----------------------------------------------------------------------------
async def test_the_environments_proxy_carries_the_calls_unless_no_proxy_names_the_host(mock, monkeypatch):
    # The mock server stands in for the proxy: the host below does not exist, so any HTTP
    # reply (its router answers the proxy-form request with 404) proves the call went via it.
    base = "http://council-proxy-test.invalid/v1"
    monkeypatch.setenv("HTTP_PROXY", mock.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    via_proxy = api("openai/mock-a", base)
    with pytest.raises(ProviderError) as caught:
        await via_proxy.generate(ChatRequest(messages=MESSAGES))
    await via_proxy.aclose()
    assert caught.value.status_code == 404
    monkeypatch.setenv("NO_PROXY", "council-proxy-test.invalid")
    direct = api("openai/mock-a", base)
    with pytest.raises(ProviderError) as caught:
        await direct.generate(ChatRequest(messages=MESSAGES))
    await direct.aclose()
    assert caught.value.status_code is None and "APIConnectionError" in str(caught.value)


# -- cancellation ---------------------------------------------------------------------
async def test_a_call_cancelled_in_the_turn_its_timeout_fires_ends_cancelled_not_retried():
    """A session's deadline may cancel a call in the very turn of the loop its own timeout fires
    (a busy loop runs every timer that is due at once): the call ends cancelled. Taken for a
    timeout, it was retried and answered after its session had ended, which the session's record
    did not hold (the fault soak's "answer lost")."""
    import time

    from council.config import ModelSpec, ResolvedModel
    from council.providers.client import ModelClient

    received = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # the request arrived; no reply ever comes
        received.set()
        await reader.read()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    spec = ModelSpec(model="openai/silent", api_base=f"http://127.0.0.1:{port}/v1", timeout=0.5, retries=1)
    client = ModelClient(ResolvedModel(id="s", spec=spec), api(spec.model, spec.api_base, timeout=spec.timeout))
    calls = []
    call = asyncio.ensure_future(client.complete(ChatRequest(messages=MESSAGES), stage="answer", sink=calls.append))
    try:
        await received.wait()
        loop = asyncio.get_running_loop()
        loop.call_at(loop.time() + spec.timeout, call.cancel)  # the deadline, due just after the call's timers
        time.sleep(spec.timeout + 0.1)  # the loop is held: the call's timers and the deadline all fire in one turn
        with pytest.raises(asyncio.CancelledError):
            await call
    finally:
        await client.aclose()
        server.close()
    assert [(c.attempt, c.error) for c in calls] == [(1, "cancelled")]
