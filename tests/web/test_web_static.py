"""The web app's files hold to their promises without a browser: nothing from elsewhere (no CDN,
works offline), no way to insert markup (text only), no inline script or style (the CSP forbids
them), shipped in the package, and sent with the security headers."""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from council.server.web import CSP, web_routes

WEB = files("council") / "web"
NAMES = ("index.html", "app.js", "app.css")


@pytest.mark.parametrize("name", NAMES)
def test_nothing_is_loaded_from_elsewhere(name):
    text = (WEB / name).read_text(encoding="utf-8")
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", text, re.IGNORECASE), "an external URL"
    assert "@import" not in text


def test_the_script_never_inserts_markup_or_evaluates_text():
    script = (WEB / "app.js").read_text(encoding="utf-8")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                 "setAttribute(\"on", ".src =", "javascript:"):  # fmt: skip
        assert sink not in script, sink


def test_the_page_has_no_inline_script_or_style():
    page = (WEB / "index.html").read_text(encoding="utf-8")
    assert re.findall(r"<script\b[^>]*>", page) == ['<script src="/static/app.js" defer>']
    assert "<style" not in page and " style=" not in page and not re.search(r"\son[a-z]+=", page)


def test_the_files_ship_in_the_package_data():
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    assert {"web/*.html", "web/*.js", "web/*.css"} <= set(pyproject["tool"]["setuptools"]["package-data"]["council"])


def test_every_file_is_sent_with_the_content_security_policy():
    from starlette.applications import Starlette

    client = TestClient(Starlette(routes=web_routes()))
    for path, kind in (("/", "text/html"), ("/static/app.js", "text/javascript"), ("/static/app.css", "text/css")):
        reply = client.get(path)
        assert reply.status_code == 200 and reply.headers["content-type"].startswith(kind)
        assert reply.headers["content-security-policy"] == CSP
        assert reply.headers["x-content-type-options"] == "nosniff"
    assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP and "frame-ancestors 'none'" in CSP
    assert client.get("/static/../pyproject.toml").status_code == 404
