"""The web app in a real headless Chromium (Debian's, driven by Playwright): the served app, a
tab opened on it with its token typed, a question asked, and an accessibility audit with
axe-core (vendored in tests/web/vendor, injected into the page by the DevTools protocol, which
the page's Content-Security-Policy does not govern)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mock_server import start_mock_server
from serve_helpers import council_serve

CHROMIUM = os.environ.get("COUNCIL_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
TOKEN = "web-t0ken"
AUTH = {"authorization": f"Bearer {TOKEN}"}
AXE = Path(__file__).resolve().parent / "web" / "vendor" / "axe.min.js"
MEMBERS = ("alpha", "beta", "gamma")


def app_config(mock_url: str) -> str:
    """Two councils: ``default`` (the configured default, three plain members), and ``attack``
    (first in the alphabet), whose members and chairman quote what they were asked (``+quote``):
    a hostile question comes back as their answers and synthesis."""
    lines = ["[councils.default]", 'members = ["alpha", "beta", "gamma"]', 'chairman = "alpha"',
             "[councils.attack]", 'members = ["qa", "qb"]', 'reviewers = ["alpha", "beta"]', 'chairman = "qa"']
    for alias in MEMBERS:
        lines += [f"[models.{alias}]", f'model = "openai/mock-{alias}"', f'api_base = "{mock_url}"']
    for alias in ("qa", "qb"):
        lines += [f"[models.{alias}]", f'model = "openai/mock-{alias}+quote"', f'api_base = "{mock_url}"']
    return "\n".join(lines) + "\n"


@contextmanager
def served_app(root: Path, **mock: Any) -> Iterator[str]:
    """``council serve --token`` over the mock LLM server, its home ``root/home`` and its config
    ``root/council.toml``; yields its base URL."""
    home = root / "home"
    home.mkdir()
    with start_mock_server(**mock) as server:
        config = root / "council.toml"
        config.write_text(app_config(server.base_url))
        with council_serve(config, home, "--token", TOKEN) as (base, _):
            yield base


def open_app(browser: Any, base: str, width: int = 1280, height: int = 900, **context: Any) -> Any:
    """A fresh tab on the app, the token typed once into its form (the API answered 401); the
    page's script errors collected in ``page.problems``."""
    page = browser.new_page(viewport={"width": width, "height": height}, **context)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" and "401" not in m.text else None)
    page.goto(base + "/")
    page.wait_for_selector("#token-form:not([hidden])")
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#ask-council option", state="attached")
    page.problems = problems
    return page


def ask(page: Any, question: str, council: str | None = None) -> None:
    if council is not None:
        page.select_option("#ask-council", council)
    page.fill("#ask-question", question)
    page.click("#ask-submit")
    page.wait_for_selector("#session")


def session_id_of(page: Any) -> str:
    return page.url.rsplit("/", 1)[1]


def axe_violations(page: Any) -> list[str]:
    """The serious and critical violations axe-core finds on the page as it is now, one line each."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text(encoding="utf-8"))
    return page.evaluate(
        """async () => {
          const result = await axe.run(document, { resultTypes: ["violations"] });
          return result.violations.filter((v) => v.impact === "serious" || v.impact === "critical")
            .map((v) => v.id + " (" + v.impact + "): " + v.help + " at " + v.nodes.slice(0, 4)
              .map((n) => n.target.join(" ") + " [" + (n.failureSummary || "").replace(/\\s+/g, " ") + "]")
              .join("; "));
        }"""
    )


def words(text: str | None) -> str:
    """Text with its white space collapsed (markdown's paragraphs and line breaks aside) and
    without the markdown marks a rendered page does not show (headings, emphasis, list bullets)."""
    text = re.sub(r"^\s*(#{1,6}|[-*+])\s+", "", text or "", flags=re.M)
    return " ".join(text.replace("**", "").split())


# -- fixtures, loaded as a plugin by tests/conftest.py. Per module, not per session: Playwright's
# sync API runs an event loop while it is open, which would break the tests of
# other folders that run one (asyncio.run) in the same process.

@pytest.fixture(scope="module")
def served_root(tmp_path_factory):
    """Where the served app keeps its home (``home``) and its config (``council.toml``)."""
    return tmp_path_factory.mktemp("web")


@pytest.fixture(scope="module")
def served(served_root):
    with served_app(served_root, latency=0.01, stream_interval=0.02) as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()
