"""A served web app and a headless Chromium for each browser test module of this folder (started
by the first test that asks; skipped where Playwright or Debian's chromium is missing). Per
module, not per session: Playwright's sync API runs an event loop while it is open, which
would break the tests of other folders that run one (asyncio.run) in the same process."""

from __future__ import annotations

import os

import pytest
from web_browser import CHROMIUM, served_app


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
