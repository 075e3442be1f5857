"""``--cache``/``--refresh``/``[cache] enabled`` on the commands, across real processes, and
``council cache stats | clear``."""

from __future__ import annotations

import json

import pytest
from conftest import council_process, db_rows, invoke_cli, write_config

PRICE = {"input_cost_per_token": 1e-5, "output_cost_per_token": 3e-5, "max_tokens": 400}


@pytest.fixture
def config(tmp_path):
    return write_config(
        tmp_path / "c.toml", {name: {"model": f"fake/{name}", **PRICE} for name in ("a", "b", "c")}, chairman="a"
    )


def test_a_second_process_is_answered_from_the_cache_and_says_what_it_saved(config, council_home):
    args = ["run", "What is 2+2?", "--config", str(config), "--seed", "7", "--cache", "--json"]
    first = council_process(*args, home=council_home)
    assert first.returncode == 0, first.stderr
    second = council_process(*args, home=council_home)
    assert second.returncode == 0, second.stderr
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    assert two["synthesis"]["text"] == one["synthesis"]["text"]
    assert two["usage"]["cached_calls"] == two["usage"]["calls"] == 7
    assert two["usage"]["cost_usd"] == 0.0
    assert two["usage"]["saved_usd"] == pytest.approx(one["usage"]["cost_usd"])
    assert db_rows(council_home, "select count(*) from calls where cached = 1") == [(7,)]
    assert db_rows(council_home, "select count(*) from calls where cached = 1 and cost_usd != 0") == [(0,)]
    assert b"temperature > 0" in second.stderr  # the opt-in says what it means for sampled answers


def test_without_the_flag_nothing_is_cached(config, council_home):
    assert invoke_cli("run", "What is 2+2?", "--config", str(config), "--seed", "1").exit_code == 0
    assert db_rows(council_home, "select count(*) from call_cache") == [(0,)]


def test_the_config_turns_it_on_and_refresh_asks_again(config, council_home):
    config.write_text(config.read_text() + "\n[cache]\nenabled = true\n")
    args = ["run", "What is 2+2?", "--config", str(config), "--seed", "3", "--json"]
    assert invoke_cli(*args).exit_code == 0
    cached = json.loads(invoke_cli(*args).stdout)
    assert cached["usage"]["cached_calls"] == 7
    refreshed = json.loads(invoke_cli(*args, "--refresh").stdout)
    assert refreshed["usage"]["cached_calls"] == 0 and refreshed["usage"]["cost_usd"] > 0
    assert db_rows(council_home, "select count(*) from call_cache") == [(7,)]  # replaced, not added


def test_cache_with_transcripts_off_is_refused_in_one_line(config, council_home):
    result = invoke_cli(
        "run", "What is 2+2?", "--config", str(config), "--cache", env={"COUNCIL_STORE_TRANSCRIPTS": "0"}
    )
    assert result.exit_code == 2
    assert len(result.error_lines) == 1 and "transcripts are off" in result.stderr
    assert not (council_home / "council.db").exists()  # refused before anything is opened


def test_compare_from_the_cache(tmp_path, config):
    (tmp_path / "a.txt").write_text("Paris.")
    (tmp_path / "b.txt").write_text("Lyon.")
    args = ["compare", "--prompt", "Capital of France?", "--a", str(tmp_path / "a.txt"), "--b", str(tmp_path / "b.txt")]
    args += ["--judge", "a", "--config", str(config), "--cache", "--json"]
    first = json.loads(invoke_cli(*args).stdout)
    second = json.loads(invoke_cli(*args).stdout)
    assert second["winner"] == first["winner"]
    assert second["usage"]["cached_calls"] == second["calls"] == 2 and second["usage"]["cost_usd"] == 0


def test_a_rerun_batch_is_free_and_the_summary_says_so(tmp_path, config):
    items = tmp_path / "pairs.jsonl"
    items.write_text(
        "".join(json.dumps({"id": str(i), "prompt": f"q{i}", "a": "x", "b": f"y{i}"}) + "\n" for i in range(4))
    )
    args = ["batch", str(items), "--judge", "a", "--config", str(config), "--cache", "--json"]
    first = json.loads(invoke_cli(*args, "--batch-id", "one").stdout)
    second = json.loads(invoke_cli(*args, "--batch-id", "two").stdout)
    assert second["cached_calls"] == second["calls"] == 8
    assert second["cost_usd"] == 0.0 and second["saved_usd"] == pytest.approx(first["cost_usd"])


def test_cache_stats_and_clear(config):
    invoke_cli("run", "What is 2+2?", "--config", str(config), "--seed", "5", "--cache")
    invoke_cli("run", "What is 2+2?", "--config", str(config), "--seed", "5", "--cache")
    stats = json.loads(invoke_cli("cache", "stats", "--json").stdout)
    assert stats["entries"] == 7 and stats["cached_calls"] == 7 and stats["saved_usd"] > 0
    assert set(stats["models"]) == {"fake/a", "fake/b", "fake/c"}
    assert "7 calls answered from the cache" in invoke_cli("cache", "stats").stdout
    kept = invoke_cli("cache", "clear", "--older-than", "1")
    assert kept.exit_code == 0 and "removed 0 cache entries" in kept.stderr
    gone = invoke_cli("cache", "clear")
    assert "removed 7 cache entries" in gone.stderr
    assert json.loads(invoke_cli("cache", "stats", "--json").stdout)["entries"] == 0


@pytest.mark.parametrize("bad", ["-1", "nan", "inf", "soon"])
def test_clear_refuses_a_bad_age(bad):
    result = invoke_cli("cache", "clear", "--older-than", bad)
    assert result.exit_code == 2 and len(result.error_lines) == 1


async def test_the_python_api_takes_a_cap_and_the_cache(config, council_home):
    from council import Council
    from council.accounting.budget import BudgetReached
    from council.errors import UsageError

    async with Council.from_config(str(config), cache=True) as council:
        first = await council.run("What is 2+2?", seed=2)
    async with Council.from_config(str(config), cache=True) as council:
        again = await council.run("What is 2+2?", seed=2)
    assert again.usage.cached_calls == 7 and again.synthesis.text == first.synthesis.text
    async with Council.from_config(str(config), max_cost=0.004) as council:
        with pytest.raises(BudgetReached):
            await council.run("What else?", seed=3)
        spent, cap = council.accounting.budget.totals()
        assert spent <= cap == 0.004
    with pytest.raises(UsageError, match="transcripts are off"):
        Council.from_config(str(config), cache=True, env={"COUNCIL_STORE_TRANSCRIPTS": "0"})
