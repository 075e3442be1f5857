"""The web app shows a session's deliberation rounds, live and stored (issue 59), in a real headless Chromium."""

from __future__ import annotations

import httpx
import pytest
from mock_server import start_mock_server
from serve_helpers import council_serve
from web_browser import AUTH, TOKEN, ask, open_app, words

pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("web-rounds")
    home = root / "home"
    home.mkdir()
    with start_mock_server(latency=0.01) as mock:
        config = root / "council.toml"
        lines = ["[councils.default]", 'members = ["alpha", "beta", "gamma"]', 'chairman = "alpha"',
                 'deliberation = "always"']  # fmt: skip
        for alias, model in (("alpha", "mock-alpha"), ("beta", "mock-beta"), ("gamma", "mock-gamma+adopt")):
            lines += [f"[models.{alias}]", f'model = "openai/{model}"', f'api_base = "{mock.base_url}"']
        config.write_text("\n".join(lines) + "\n")
        with council_serve(config, home, "--token", TOKEN) as (base, _):
            yield base


def test_the_rounds_are_shown_live_and_from_the_stored_session(served, browser):
    page = open_app(browser, served)
    ask(page, "Why is the sky blue?")
    page.wait_for_selector("#status.complete")
    session_id = page.url.rsplit("/", 1)[1]
    stored = httpx.get(f"{served}/v1/sessions/{session_id}", headers=AUTH).json()
    [told] = stored["deliberation"]["rounds"]
    for view in ("live", "stored"):
        if view == "stored":
            page.reload()
            page.wait_for_selector("#status.complete")
        assert page.locator("#deliberation .round").count() == 1
        assert page.locator("#deliberation tbody tr").count() == 3
        heading = page.text_content("#deliberation h3")
        assert heading.startswith("Round 1") and "always" in heading
        gamma = page.locator("#deliberation tr.capitulation").text_content()
        assert "gamma" in gamma and told["members"][2]["adopted_from"] in gamma and "capitulation" in gamma
        # the answers and reviews shown are the last round's
        page.click(".tab[data-member=gamma]")
        final = {a["member"]: a["text"] for a in stored["answers"]}
        assert words(page.text_content("#answer-panel .answer-text")) == words(final["gamma"])
        assert page.locator(".review").count() == 3
    assert page.problems == []
    page.close()
