"""`council serve` as a hostile web page, a hostile client and a careless operator would meet it.

A real server (``--port 0``) in front of the mock LLM; the mock's request log shows whether a
refused request reached a model (it must not: refused means nothing billed).
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading

import httpx
import pytest
from conftest import write_config
from mock_server import start_mock_server
from serve_helpers import council_serve

pytestmark = pytest.mark.slow  # real server processes

QUESTION = "What is the capital of France?"
CORS_ORIGIN = "http://localhost:3000"


def chat(content: object = QUESTION, **extra: object) -> dict:
    return {"model": "default", "messages": [{"role": "user", "content": content}], **extra}


def assert_openai_error(response: httpx.Response, status: int, fragment: str = "") -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}, error
    assert fragment.lower() in error["message"].lower(), error
    assert "\n" not in error["message"] and "Traceback" not in error["message"], error
    return error


@pytest.fixture(scope="module")
def mock(tmp_path_factory):
    log = tmp_path_factory.mktemp("mock") / "requests.jsonl"
    with start_mock_server(log_requests=str(log)) as server:
        yield server


def council_config(path, mock, **models_extra):
    models = {m: {"model": f"openai/mock-{m}", "api_base": mock.base_url, "retries": 0} for m in ("a", "b")}
    for alias, extra in models_extra.items():
        models[alias] = {**models[alias], **extra}
    return write_config(path, models, chairman="a")


@pytest.fixture(scope="module")
def served(tmp_path_factory, mock):
    home = tmp_path_factory.mktemp("home")
    cfg = council_config(home / "c.toml", mock)
    extra = ("--cors-origin", "HTTP://LOCALHOST:3000", "--allowed-host", "council.internal")
    with council_serve(cfg, home, *extra) as (base, _):
        yield base


def billed(mock) -> int:
    return len(mock.logged_requests())


# -- drive-by browsers ------------------------------------------------------------------------


def test_a_simple_text_plain_request_is_refused_before_any_model_is_called(served, mock):
    before = billed(mock)
    r = httpx.post(served + "/v1/chat/completions", content=json.dumps(chat()), headers={"content-type": "text/plain"})
    assert_openai_error(r, 415, "application/json")
    form = httpx.post(served + "/v1/chat/completions", data={"model": "default"})  # a form post
    assert_openai_error(form, 415)
    none = httpx.post(served + "/v1/chat/completions", content=json.dumps(chat()), headers={"content-type": ""})
    assert_openai_error(none, 415)
    assert billed(mock) == before


def test_json_with_a_charset_is_accepted(served):
    r = httpx.post(
        served + "/v1/chat/completions",
        content=json.dumps(chat()).encode(),
        headers={"content-type": "Application/JSON; charset=utf-8"},
        timeout=60,
    )
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "origin", ["https://evil.example", "null", "http://localhost:3001", "http://127.0.0.1.evil.example"]
)
def test_a_foreign_origin_is_refused_on_every_route(served, mock, origin):
    before = billed(mock)
    post = httpx.post(served + "/v1/chat/completions", json=chat(), headers={"origin": origin})
    assert_openai_error(post, 403, "origin")
    get = httpx.get(served + "/v1/models", headers={"origin": origin})
    assert_openai_error(get, 403, "origin")
    assert billed(mock) == before


def test_the_same_origin_and_a_cors_origin_in_any_case_are_allowed(served):
    port = served.rsplit(":", 1)[1]
    for origin in (
        f"http://127.0.0.1:{port}",
        f"HTTP://127.0.0.1:{port}",
        "http://localhost:3000",
        "http://LocalHost:3000",
    ):
        r = httpx.get(served + "/v1/models", headers={"origin": origin})
        assert r.status_code == 200, (origin, r.text)
    # --cors-origin was given in upper case; the browser sends lower case: it matches.
    r = httpx.get(served + "/v1/models", headers={"origin": CORS_ORIGIN})
    assert r.headers.get("access-control-allow-origin") == CORS_ORIGIN
    pre = httpx.options(
        served + "/v1/chat/completions",
        headers={"origin": CORS_ORIGIN, "access-control-request-method": "POST",
                 "access-control-request-headers": "authorization, content-type"},
    )  # fmt: skip
    assert pre.status_code == 200 and pre.headers.get("access-control-allow-origin") == CORS_ORIGIN


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "localhost.evil.example", "127.0.0.1.nip.io"])
def test_dns_rebinding_host_headers_are_refused(served, mock, host):
    before = billed(mock)
    get = httpx.get(served + "/v1/models", headers={"host": host})
    assert_openai_error(get, 403, "host")
    post = httpx.post(served + "/v1/chat/completions", json=chat(), headers={"host": host})
    assert_openai_error(post, 403, "--allowed-host")
    assert billed(mock) == before


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:8000", "127.0.0.1", "[::1]:80", "council.internal:443"])
def test_loopback_names_and_allowed_hosts_are_served(served, host):
    r = httpx.get(served + "/v1/models", headers={"host": host})
    assert r.status_code == 200, r.text


def test_every_4xx_is_in_openai_shape(served):
    for r in (
        httpx.get(served + "/nope"),
        httpx.delete(served + "/v1/models"),
        httpx.post(served + "/v1/chat/completions", content=b"{", headers={"content-type": "application/json"}),
        httpx.get(served + "/v1/sessions/nope"),
    ):
        assert 400 <= r.status_code < 500
        assert set(r.json()["error"]) >= {"message", "type", "param", "code"}


# -- numbers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "default", "messages": [{"role": "user", "content": "hi"}], "seed": ' + b"9" * 5000 + b"}",
        b'{"model": "default", "messages": [{"role": "user", "content": "hi"}], "metadata": {"x": ['
        + b"1" * 5000
        + b"]}}",
        b'{"model": "default", "messages": [{"role": "user", "content": "hi"}], "temperature": 1e999}',
        b'{"model": "default", "messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
    ],
    ids=["5000-digit seed", "5000-digit nested", "float overflow", "NaN"],
)
def test_numbers_json_cannot_hold_are_a_400(served, mock, body):
    before = billed(mock)
    r = httpx.post(served + "/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert_openai_error(r, 400, "number")
    assert billed(mock) == before


# -- response_format schemas never fetch anything ---------------------------------------------


class _Counting(http.server.BaseHTTPRequestHandler):
    gets = 0

    def do_GET(self):  # noqa: N802
        type(self).gets += 1
        body = json.dumps({"$id": "x", "type": "string", "description": "SECRET-FETCHED-CONTENT"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def counting_server():
    _Counting.gets = 0
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Counting
    finally:
        server.shutdown()
        server.server_close()


def schema_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}


@pytest.mark.parametrize("keyword", ["$ref", "$dynamicRef"])
def test_a_schema_reference_to_a_url_is_a_400_and_never_fetched(served, mock, counting_server, keyword):
    url, handler = counting_server
    before = billed(mock)
    schema = {"type": "object", "properties": {"a": {keyword: f"{url}/schema.json"}}, "required": ["a"]}
    r = httpx.post(served + "/v1/chat/completions", json=chat(response_format=schema_format(schema)), timeout=60)
    error = assert_openai_error(r, 400, "reference")
    assert "SECRET-FETCHED-CONTENT" not in r.text and error["param"] == "response_format.json_schema.schema"
    assert handler.gets == 0 and billed(mock) == before


def test_a_schema_id_pointing_at_a_url_fetches_nothing(served, counting_server):
    url, handler = counting_server
    schema = {"$id": f"{url}/root.json", "type": "object", "properties": {"a": {"$ref": "other.json"}}}
    r = httpx.post(served + "/v1/chat/completions", json=chat(response_format=schema_format(schema)), timeout=60)
    assert_openai_error(r, 400, "reference")
    assert handler.gets == 0


@pytest.mark.parametrize("ref", ["#nope", "#/$defs/missing", "#/properties/%ZZ"])
def test_a_dangling_local_reference_is_a_400(served, mock, ref):
    before = billed(mock)
    schema = {"type": "object", "properties": {"a": {"$ref": ref}}, "$defs": {"b": {"type": "string"}}}
    r = httpx.post(served + "/v1/chat/completions", json=chat(response_format=schema_format(schema)), timeout=60)
    assert_openai_error(r, 400, "reference")
    assert billed(mock) == before


def test_local_references_still_work(served):
    schema = {
        "type": "object",
        "properties": {"city": {"$ref": "#/$defs/name"}, "other": {"$dynamicRef": "#/$defs/n"}},
        "$defs": {"name": {"type": "string"}, "n": {"type": "string"}},
        "required": ["city"],
    }
    r = httpx.post(served + "/v1/chat/completions", json=chat(response_format=schema_format(schema)), timeout=60)
    assert r.status_code == 200, r.text
    assert isinstance(json.loads(r.json()["choices"][0]["message"]["content"])["city"], str)


# -- the operator's flags ----------------------------------------------------------------------


def start(config, home, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "council", "serve", "--config", str(config), "--port", "0", *extra],
        env={**os.environ, "COUNCIL_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("token", ["", "   ", "\t", " s3cret"])
def test_an_empty_or_whitespace_token_is_refused_at_start(tmp_path, council_home, mock, token):
    proc = start(council_config(tmp_path / "c.toml", mock), council_home, "--token", token)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "--token" in lines[0], proc.stderr


def test_an_allowed_host_that_is_no_host_name_is_refused_at_start(tmp_path, council_home, mock):
    proc = start(council_config(tmp_path / "c.toml", mock), council_home, "--allowed-host", "http://x/")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "--allowed-host" in lines[0], proc.stderr


# -- failed and partial councils -------------------------------------------------------------


def test_a_failed_council_is_a_502_that_clients_do_not_retry(tmp_path, council_home, mock):
    models = {m: {"model": f"openai/mock-{m}+fail", "api_base": mock.base_url, "retries": 0} for m in ("a", "b")}
    cfg = write_config(tmp_path / "c.toml", models, chairman="a")
    with council_serve(cfg, council_home) as (base, _):
        r = httpx.post(base + "/v1/chat/completions", json=chat(), timeout=60)
    assert_openai_error(r, 502)
    assert r.headers["x-should-retry"] == "false"


def test_a_partial_reply_says_so_in_the_text(tmp_path, council_home, mock):
    models = {
        "a": {"model": "openai/mock-a", "api_base": mock.base_url, "retries": 0},
        "b": {"model": "openai/mock-b", "api_base": mock.base_url, "retries": 0},
        "chair": {"model": "openai/mock-c+fail", "api_base": mock.base_url, "retries": 0},
    }
    cfg = write_config(tmp_path / "c.toml", models, members=["a", "b"], chairman="chair")
    with council_serve(cfg, council_home) as (base, _):
        r = httpx.post(base + "/v1/chat/completions", json=chat(), timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["council"]["status"] == "partial"
    first_line = body["choices"][0]["message"]["content"].splitlines()[0]
    assert "partial" in first_line.lower() and "chairman" in first_line.lower(), first_line


# -- prices a float cannot hold ------------------------------------------------------------


@pytest.mark.parametrize("price", ["inf", "nan", "-inf"])
def test_a_non_finite_price_is_refused_at_start_in_one_line(tmp_path, council_home, mock, price):
    cfg = tmp_path / "c.toml"
    council_config(cfg, mock)
    cfg.write_text(cfg.read_text() + "")
    text = cfg.read_text().replace("[models.a]\n", f"[models.a]\ninput_cost_per_token = {price}\n")
    cfg.write_text(text)
    proc = start(cfg, council_home)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "input_cost_per_token" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_stored_session_with_a_non_finite_cost_is_served_with_null(tmp_path, council_home, mock):
    import sqlite3

    cfg = council_config(tmp_path / "c.toml", mock)
    with council_serve(cfg, council_home) as (base, _):
        reply = httpx.post(base + "/v1/chat/completions", json=chat(), timeout=60)
        session_id = reply.json()["council"]["session_id"]
        # What an older version stored for a price of inf: Python's json writes Infinity and NaN.
        db = sqlite3.connect(council_home / "council.db", timeout=30)
        with db:
            (stored,) = db.execute("SELECT result FROM sessions WHERE id = ?", (session_id,)).fetchone()
            result = json.loads(stored)
            result["usage"]["cost_usd"] = float("inf")
            result["answers"][0]["cost_usd"] = float("nan")
            db.execute("UPDATE sessions SET result = ? WHERE id = ?", (json.dumps(result), session_id))
        db.close()
        got = httpx.get(f"{base}/v1/sessions/{session_id}")
    assert got.status_code == 200, got.text
    assert got.json()["usage"]["cost_usd"] is None and got.json()["session_id"] == session_id
