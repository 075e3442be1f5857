"""``--max-cost`` and ``[budget] max_cost_usd`` on run, compare, grade and batch: bad caps are one
line and exit 2, a reached cap stops cleanly (exit 1, "budget reached: $X of $Y"), a session
stopped by it is ``partial`` with that reason, and a batch keeps its cap and resumes."""

from __future__ import annotations

import json
import re

import pytest
from conftest import db_rows, invoke_cli, write_config

PRICE = {"input_cost_per_token": 1e-5, "output_cost_per_token": 3e-5, "max_tokens": 400}
BUDGET_LINE = re.compile(r"^error: budget reached: \$(\d+\.\d+) of \$(\d+\.\d+)$")


@pytest.fixture
def config(tmp_path):
    return write_config(
        tmp_path / "c.toml",
        {name: {"model": f"fake/{name}", **PRICE} for name in ("a", "b", "c")},
        chairman="a",
    )


def budget_line(stderr: str) -> tuple[float, float]:
    match = BUDGET_LINE.match(stderr.strip().splitlines()[-1])
    assert match, stderr
    return float(match.group(1)), float(match.group(2))


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "1e999", "ten"])
def test_run_refuses_a_bad_cap_in_one_line_before_anything_is_written(config, council_home, bad):
    result = invoke_cli("run", "What is 2+2?", "--config", str(config), "--max-cost", bad)
    assert result.exit_code == 2
    assert len(result.error_lines) == 1
    assert "--max-cost" in result.stderr
    assert not (council_home / "council.db").exists()


@pytest.mark.parametrize("command", ["compare", "grade", "batch"])
def test_judging_commands_refuse_a_bad_cap(tmp_path, config, command):
    (tmp_path / "r.txt").write_text("an answer")
    (tmp_path / "items.jsonl").write_text(json.dumps({"id": "1", "prompt": "p", "a": "x", "b": "y"}) + "\n")
    args = {
        "compare": ["compare", "--prompt", "p", "--a", str(tmp_path / "r.txt"), "--b", str(tmp_path / "r.txt")],
        "grade": ["grade", "--prompt", "p", "--response", str(tmp_path / "r.txt")],
        "batch": ["batch", str(tmp_path / "items.jsonl")],
    }[command]
    result = invoke_cli(*args, "--judge", "a", "--config", str(config), "--max-cost", "-0.5")
    assert result.exit_code == 2
    assert len(result.error_lines) == 1


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_bad_cap_in_the_config_is_a_config_error(tmp_path, config, value):
    config.write_text(config.read_text() + f"\n[budget]\nmax_cost_usd = {value}\n")
    result = invoke_cli("run", "What is 2+2?", "--config", str(config))
    assert result.exit_code == 2
    assert "max_cost_usd" in result.stderr


def test_a_cap_that_suffices_changes_nothing(config):
    result = invoke_cli("run", "What is 2+2?", "--config", str(config), "--max-cost", "5", "--json")
    assert result.exit_code == 0, result.stderr
    session = json.loads(result.stdout)
    assert session["status"] == "complete"
    assert 0 < session["usage"]["cost_usd"] <= 5


def test_run_stops_at_the_cap_partial_with_the_reason_and_exit_1(config, council_home):
    result = invoke_cli("run", "What is 2+2?", "--config", str(config), "--max-cost", "0.05", "--json")
    assert result.exit_code == 1
    spent, cap = budget_line(result.stderr)
    assert cap == 0.05 and 0 < spent <= cap
    session = json.loads(result.stdout)
    assert session["status"] == "partial"
    assert any(r.startswith("budget reached: $") for r in session["partial_reasons"])
    assert session["usage"]["cost_usd"] <= 0.05
    [(status,)] = db_rows(council_home, "select status from sessions")
    assert status == "partial"


def test_run_stopped_before_a_quorum_is_recorded_partial_with_the_reason(config, council_home):
    result = invoke_cli("run", "What is 2+2?", "--config", str(config), "--max-cost", "0.004")
    assert result.exit_code == 1
    spent, cap = budget_line(result.stderr)
    assert spent <= cap
    [(status, error)] = db_rows(council_home, "select status, error from sessions")
    assert status == "partial"
    assert error.startswith("budget reached: $")


def test_the_config_budget_applies_and_the_flag_overrides_it(config):
    config.write_text(config.read_text() + "\n[budget]\nmax_cost_usd = 0.004\n")
    stopped = invoke_cli("run", "What is 2+2?", "--config", str(config))
    assert stopped.exit_code == 1
    assert budget_line(stopped.stderr)[1] == 0.004
    assert invoke_cli("run", "What is 2+2?", "--config", str(config), "--max-cost", "5").exit_code == 0


def test_an_unpriced_model_under_a_cap_is_refused_in_one_line(tmp_path, council_home):
    config = write_config(
        tmp_path / "c.toml",
        {"a": {"model": "openai/not-a-real-model", "api_base": "http://127.0.0.1:9/v1", "max_tokens": 10}},
    )
    result = invoke_cli("run", "hi", "--config", str(config), "--max-cost", "1")
    assert result.exit_code == 2
    assert len(result.error_lines) == 1
    assert "no known price" in result.stderr
    assert not (council_home / "council.db").exists()  # refused before anything is written


def test_compare_stops_at_the_cap(tmp_path, config):
    (tmp_path / "a.txt").write_text("Paris is the capital of France.")
    (tmp_path / "b.txt").write_text("It is Lyon.")
    args = ["compare", "--prompt", "Capital of France?", "--a", str(tmp_path / "a.txt"), "--b", str(tmp_path / "b.txt")]
    ok = invoke_cli(*args, "--judge", "a", "--config", str(config), "--max-cost", "1")
    assert ok.exit_code == 0, ok.stderr
    stopped = invoke_cli(*args, "--judge", "a", "--config", str(config), "--max-cost", "0.03")
    assert stopped.exit_code == 1
    spent, cap = budget_line(stopped.stderr)
    assert spent <= cap == 0.03


def write_pairs(path, n):
    lines = [
        json.dumps({"id": f"p{i}", "prompt": f"Question {i}?", "a": f"answer {i}", "b": f"other {i}"}) for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_batch_keeps_its_cap_counts_every_run_and_resumes_with_a_new_one(tmp_path, config, council_home):
    items = write_pairs(tmp_path / "pairs.jsonl", 12)
    common = ["batch", str(items), "--judge", "a", "--config", str(config), "--batch-id", "b1", "--concurrency", "4"]
    first = invoke_cli(*common, "--max-cost", "0.2")
    assert first.exit_code == 1
    spent1, cap1 = budget_line(first.stderr)
    assert cap1 == 0.2 and spent1 <= cap1
    done1 = db_rows(council_home, "select count(*) from batch_items where batch_id = 'b1' and status = 'ok'")[0][0]
    assert 0 < done1 < 12

    # Resumed without a cap: the stored one still holds, and nothing more fits.
    again = invoke_cli(*common, "--resume")
    assert again.exit_code == 1
    spent2, cap2 = budget_line(again.stderr)
    assert cap2 == 0.2 and spent1 <= spent2 <= 0.2

    # A new cap replaces it; the batch finishes, and everything it spent stays within it.
    final = invoke_cli(*common, "--resume", "--max-cost", "10", "--json")
    assert final.exit_code == 0, final.stderr
    summary = json.loads(final.stdout)
    assert summary["finished"] == 12 and summary["budget_reached"] is False
    assert summary["max_cost_usd"] == 10
    [(all_calls,)] = db_rows(council_home, "select coalesce(sum(cost_usd), 0) from calls where ok = 1")
    assert summary["spent_usd"] >= all_calls - 1e-9  # every run of the batch counted
    assert db_rows(council_home, "select count(*) from batch_items where batch_id = 'b1'") == [(12,)]


@pytest.mark.parametrize("bad", ["0", "-1", "nan", "inf", "ten"])
def test_worker_refuses_a_bad_cap_in_one_line_before_claiming(tmp_path, config, council_home, bad):
    items = write_pairs(tmp_path / "pairs.jsonl", 3)
    queued = invoke_cli("batch", str(items), "--judge", "a", "--config", str(config), "--enqueue", "--batch-id", "w")
    assert queued.exit_code == 0, queued.stderr
    result = invoke_cli("worker", "--batch-id", "w", "--config", str(config), "--max-cost", bad)
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "--max-cost" in result.stderr
    assert db_rows(council_home, "select count(*) from batch_queue where state = 'queued'") == [(3,)]


def test_worker_max_cost_needs_the_batch_it_caps(config):
    result = invoke_cli("worker", "--config", str(config), "--max-cost", "1")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --max-cost needs --batch-id: a cap is kept with one batch"


def test_worker_max_cost_replaces_the_stored_cap_and_stops_at_it(tmp_path, config, council_home):
    items = write_pairs(tmp_path / "pairs.jsonl", 12)
    queued = invoke_cli("batch", str(items), "--judge", "a", "--config", str(config), "--enqueue", "--batch-id", "w",
                        "--max-cost", "10")  # fmt: skip
    assert queued.exit_code == 0, queued.stderr
    stopped = invoke_cli("worker", "--batch-id", "w", "--config", str(config), "--max-cost", "0.2")
    assert stopped.exit_code == 1
    spent, cap = budget_line(stopped.stderr)
    assert cap == 0.2 and spent <= cap
    done = db_rows(council_home, "select count(*) from batch_queue where state = 'done'")[0][0]
    assert 0 < done < 12
    assert db_rows(council_home, "select count(*) from batch_queue where state = 'queued'") == [(12 - done,)]
    finished = invoke_cli("worker", "--batch-id", "w", "--config", str(config), "--max-cost", "10")
    assert finished.exit_code == 0, finished.stderr
    assert db_rows(council_home, "select count(*) from batch_queue where state = 'done'") == [(12,)]
