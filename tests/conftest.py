"""Every test runs offline in its own COUNCIL_HOME, with instant retry waits."""

from __future__ import annotations

import pytest

_ENV_TO_CLEAR = (
    "COUNCIL_CONFIG",
    "COUNCIL_HASH_QUERIES",
    "COUNCIL_STORE_TRANSCRIPTS",
    "COUNCIL_LOG_LEVEL",
    "COUNCIL_LOG_FILE",
    "COUNCIL_DEBUG",
)


@pytest.fixture(autouse=True)
def council_home(tmp_path, monkeypatch):
    home = tmp_path / "council-home"
    home.mkdir()
    monkeypatch.setenv("COUNCIL_HOME", str(home))
    for name in _ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    # No test may reach the internet through LiteLLM's cost-map fetch.
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return home


@pytest.fixture(autouse=True)
def fast_retry_waits(monkeypatch):
    from council.providers import client

    monkeypatch.setattr(client, "DEFAULT_RETRY", client.RetryPolicy(initial_wait=0.0, max_wait=0.0, jitter=0.0))
