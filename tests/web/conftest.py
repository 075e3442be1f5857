"""One served web app and one headless Chromium for the browser tests of this folder (started by
the first test that asks; skipped where Playwright or Debian's chromium is missing)."""

from __future__ import annotations

import os

import pytest
from web_browser import CHROMIUM, served_app


@pytest.fixture(scope="session")
def served_root(tmp_path_factory):
    """Where the served app keeps its home (``home``) and its config (``council.toml``)."""
    return tmp_path_factory.mktemp("web")


@pytest.fixture(scope="session")
def served(served_root):
    with served_app(served_root, latency=0.01, stream_interval=0.02) as base:
        yield base


@pytest.fixture(scope="session")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()
