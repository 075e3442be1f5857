"""The request guard on any Host, Origin and Content-Type a client can send: it answers (the app,
a 403 or a 415 in OpenAI's shape) and never raises."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from council.server.guard import RequestGuardMiddleware

latin1 = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=60)
hosts = st.one_of(latin1, st.sampled_from(["localhost", "[::1]:80", "127.0.0.1:8000", "[::1", "x:99999", ":", "[]"]))
origins = st.one_of(st.none(), latin1, st.sampled_from(["null", "http://127.0.0.1:8000", "http://[::1", "http://x:0"]))


async def ok_app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def call(guard, headers: list[tuple[bytes, bytes]], method: str = "POST") -> int:
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": "/v1/models", "headers": headers, "query_string": b""}
    asyncio.run(guard(scope, receive, send))
    return sent[0]["status"]


@given(host=hosts, origin=origins, content_type=latin1)
def test_any_header_gets_an_answer(host, origin, content_type):
    guard = RequestGuardMiddleware(ok_app, bound_host="127.0.0.1", cors_origins=["http://localhost:3000"])
    headers = [(b"host", host.encode("latin-1")), (b"content-type", content_type.encode("latin-1"))]
    headers.append((b"content-length", b"2"))
    if origin is not None:
        headers.append((b"origin", origin.encode("latin-1")))
    assert call(guard, headers) in (200, 403, 415)


def test_the_rules_on_examples():
    guard = RequestGuardMiddleware(ok_app, bound_host="127.0.0.1", allowed_hosts=["proxy.example"])
    json_body = [(b"content-type", b"application/json"), (b"content-length", b"2")]
    assert call(guard, [(b"host", b"proxy.example."), *json_body]) == 200
    assert call(guard, [(b"host", b"10.0.0.5:80"), *json_body]) == 403  # an address this server is not bound to
    wildcard = RequestGuardMiddleware(ok_app, bound_host="0.0.0.0")
    assert call(wildcard, [(b"host", b"10.0.0.5:80"), *json_body]) == 200
    assert call(wildcard, [(b"host", b"evil.example"), *json_body]) == 403
    same = [(b"host", b"localhost:8000"), (b"origin", b"http://LOCALHOST:8000"), *json_body]
    assert call(guard, same) == 200
    assert call(guard, [(b"host", b"localhost:8000"), (b"origin", b"http://localhost:8001"), *json_body]) == 403
    # Either scheme: behind a TLS proxy the page is https://NAME and the Host header NAME.
    assert call(guard, [(b"host", b"proxy.example"), (b"origin", b"https://proxy.example"), *json_body]) == 200
    assert call(guard, [(b"host", b"proxy.example"), (b"origin", b"https://proxy.example:8443"), *json_body]) == 403
    length = (b"content-length", b"2")
    assert call(guard, [(b"host", b"localhost"), (b"content-type", b"application/problem+json"), length]) == 200
    assert call(guard, [(b"host", b"localhost"), (b"content-type", b"application/jsonx"), length]) == 415
    assert call(guard, [(b"host", b"localhost")], method="POST") == 200  # no body: nothing to declare


def test_a_bug_is_a_500_in_openai_shape_without_details(monkeypatch, tmp_path):
    from conftest import write_config
    from starlette.testclient import TestClient

    from council.config import load_config
    from council.server import state
    from council.server.app import create_app

    def broken(self, name):
        raise RuntimeError("internal detail /secret/path")

    monkeypatch.setattr(state.CouncilServer, "fingerprint", broken)
    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}}, chairman="a")
    app = create_app(load_config(str(cfg)))
    body = {"model": "default", "messages": [{"role": "user", "content": "hi"}]}
    with TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False) as client:
        r = client.post("/v1/chat/completions", json=body)
    assert r.status_code == 500
    error = r.json()["error"]
    assert error["type"] == "server_error" and "/secret/path" not in r.text and "RuntimeError" not in r.text
