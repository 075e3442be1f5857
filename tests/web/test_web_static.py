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
    assert re.findall(r"<script\b[^>]*>", page) == [
        '<script src="/static/vendor/marked.umd.js" defer>',
        '<script src="/static/vendor/purify.min.js" defer>',
        '<script src="/static/app.js" defer>',
    ]
    assert "<style" not in page and " style=" not in page and not re.search(r"\son[a-z]+=", page)


def test_the_files_ship_in_the_package_data():
    import tomllib

    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    assert {"web/*.html", "web/*.js", "web/*.css", "web/vendor/*"} <= set(
        pyproject["tool"]["setuptools"]["package-data"]["council"]
    )


# The vendored libraries, as npm published them (``npm pack NAME@VERSION``), with their licences.
VENDORED = {
    "marked.umd.js": ("marked v18.3.0", "f8c7f128939415995e2219e8a84bec42fab27f5980d22e361339e6901da5eadf"),
    "purify.min.js": ("DOMPurify 3.5.0", "f69a46022ab1f53e969c8ebbca98172c8995785a9b3be72ea4a12d25b1a1bf67"),
}


@pytest.mark.parametrize("name", sorted(VENDORED))
def test_the_vendored_libraries_are_the_pinned_releases_with_their_licences(name):
    import hashlib

    banner, digest = VENDORED[name]
    data = (WEB / "vendor" / name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == digest and banner in data[:400].decode()
    licences = [f.name for f in (WEB / "vendor").iterdir() if ".LICENSE" in f.name]
    assert any(f.startswith(name.split(".")[0].replace("purify", "dompurify")) for f in licences), licences
    readme = (WEB / "vendor" / "README.md").read_text(encoding="utf-8")
    assert banner.rsplit(" ", 1)[1].lstrip("v") in readme


def test_every_file_is_sent_with_the_content_security_policy():
    from starlette.applications import Starlette

    client = TestClient(Starlette(routes=web_routes()))
    for path, kind in (("/", "text/html"), ("/static/app.js", "text/javascript"), ("/static/app.css", "text/css"),
                       ("/static/report.css", "text/css"), ("/static/vendor/marked.umd.js", "text/javascript"),
                       ("/static/vendor/purify.min.js", "text/javascript")):  # fmt: skip
        reply = client.get(path)
        assert reply.status_code == 200 and reply.headers["content-type"].startswith(kind)
        assert reply.headers["content-security-policy"] == CSP
        assert reply.headers["x-content-type-options"] == "nosniff"
    assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP and "frame-ancestors 'none'" in CSP
    assert client.get("/static/../pyproject.toml").status_code == 404
    assert client.get("/static/vendor/marked.LICENSE").status_code == 404  # only what the page loads


def test_the_report_style_sheet_is_the_cli_reports_own_scoped_to_the_report_views():
    from starlette.applications import Starlette

    from council._util.html_parts import PAGE_CSS

    css = TestClient(Starlette(routes=web_routes())).get("/static/report.css").text
    assert css.startswith("@scope (.report) {") and PAGE_CSS in css
