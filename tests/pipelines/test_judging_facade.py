"""The judging facade (council.judging.facade, re-exported by council.api and council): judges set
up once, privacy settings passed explicitly, and every exception a judging caller can meet exported."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys

import pytest

import council
import council.api
import council.errors
from council import BudgetReached, UsageError, judge_panel, judging_config

PROMPT = "Why is the sky blue?"
A = "Rayleigh scattering: shorter wavelengths scatter more in the air."
B = "Because the sea reflects on it."


def config(**privacy: bool) -> dict:
    cfg: dict = {"councils": {"default": {"members": ["fake/m"], "chairman": "fake/m"}}}
    if privacy:
        cfg["privacy"] = privacy
    return cfg


def test_every_error_a_caller_can_meet_is_exported_from_council_and_errors():
    from council.accounting.budget import BudgetReached as old_path

    assert old_path is council.errors.BudgetReached is BudgetReached  # the old import path still works
    errors = {n for n, v in vars(council.errors).items() if inspect.isclass(v) and issubclass(v, Exception)}
    assert errors <= set(council.errors.__all__) and errors <= set(council.__all__)
    assert issubclass(BudgetReached, council.errors.ProviderError) and BudgetReached(1.5, 2).exit_code == 1


def test_the_api_re_exports_the_facade_and_importing_it_loads_no_judging():
    from council.judging import facade

    assert set(council.api.JUDGING) == set(facade.__all__)
    assert all(getattr(council.api, n) is getattr(facade, n) is getattr(council, n) for n in facade.__all__)
    probe = "import sys, council.api; print(sorted(m for m in sys.modules if m.startswith('council.judging')))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_a_panel_judges_under_the_privacy_settings_of_the_config_it_is_given(council_home, monkeypatch):
    # The user's own config says keep everything; the config handed to the facade says keep no
    # judge words: the handed one is the one that counts.
    (council_home / "council.toml").write_text("[privacy]\nstore_transcripts = true\n")
    monkeypatch.setenv("COUNCIL_CONFIG", str(council_home / "council.toml"))
    given = judging_config(config(store_transcripts=False))
    assert given.privacy.store_transcripts is False

    with judge_panel(given, ["fake/judge"], in_store=True) as panel:
        outcome = asyncio.run(panel.run(lambda p: p.compare(PROMPT, A, B)))
        stored = panel.store.judgment_run(outcome.run_id)
    assert outcome.success and outcome.judges[0].result.overall_reasoning  # the caller still sees the words
    assert '"overall_reasoning": "' not in json.dumps(stored["result"])


def test_a_panel_capped_per_call_says_when_the_cap_stopped_it():
    priced = {"model": "fake/judge", "input_cost_per_token": 1.0, "output_cost_per_token": 1.0, "max_tokens": 100}
    cfg = {**config(), "models": {"j": priced}}
    with judge_panel(cfg, ["j"], max_cost="0.5") as panel:
        outcome = asyncio.run(panel.run(lambda p: p.grade(PROMPT, A)))
    assert not outcome.success
    with pytest.raises(BudgetReached, match="budget reached"):
        panel.raise_if_capped()


def test_a_judge_that_cannot_be_capped_is_refused_before_any_call():
    unpriced = {**config(), "models": {"x": {"model": "openai/no-such-model-anywhere", "max_tokens": 10}}}
    with pytest.raises(UsageError, match="no known price"), judge_panel(unpriced, ["x"], max_cost=1):
        pass
