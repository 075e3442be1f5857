"""Costs a float cannot hold never reach a reply, the store or the terminal: a price of inf or nan is
refused in the config (one line), and any backend's non-finite cost counts as unknown (None)."""

from __future__ import annotations

import math

import pytest
from conftest import invoke_cli, write_config

from council.providers.base import ChatResponse
from council.accounting.usage import CallRecord, Usage


@pytest.mark.parametrize("cost", [math.inf, -math.inf, math.nan])
def test_a_backends_non_finite_cost_is_an_unknown_cost(cost):
    assert ChatResponse(text="x", cost_usd=cost).cost_usd is None


def test_a_total_too_large_for_a_float_is_unknown_not_inf():
    calls = [CallRecord(stage="a", member=m, model="m", started_at="t", latency_ms=1, cost_usd=1e308) for m in "xy"]
    assert all(c.cost_usd == 1e308 for c in calls)
    assert Usage.of(calls).cost_usd is None


@pytest.mark.parametrize("price", ["inf", "nan", "-inf", "1e400"])
@pytest.mark.parametrize("key", ["input_cost_per_token", "output_cost_per_token"])
def test_a_non_finite_price_in_the_config_is_one_line_exit_2(tmp_path, price, key):
    cfg = write_config(tmp_path / "c.toml", {"a": {"model": "fake/a"}, "b": {"model": "fake/b"}}, chairman="a")
    cfg.write_text(cfg.read_text().replace("[models.a]\n", f"[models.a]\n{key} = {price}\n"))
    result = invoke_cli("run", "--config", str(cfg), "What is 2 + 2?")
    assert result.exit_code == 2 and len(result.error_lines) == 1, result.stderr
    assert key in result.error_lines[0] and "nan" not in result.stdout.lower()
