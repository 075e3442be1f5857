"""`council leaderboard --judgments` on small, degenerate files, through the real CLI."""

from __future__ import annotations

import json

from conftest import invoke_cli

FLAT = {"headers": 0, "lists": 0, "bold": 0}


def line(a: str, b: str, winner: str, la: int, lb: int, ma: dict, mb: dict) -> str:
    return json.dumps({"model_a": a, "model_b": b, "winner": winner, "length_a": la, "length_b": lb,
                       "markdown_a": ma, "markdown_b": mb}) + "\n"  # fmt: skip


def test_style_controlled_intervals_on_a_handful_of_games_are_never_zero_width(tmp_path, council_home):
    # Four games and more style covariates than the data can separate from the models: the
    # bootstrap alone collapses to (1000, 1000) for every model.
    path = tmp_path / "few.jsonl"
    path.write_text(
        line("x", "y", "A", 10, 20, {"headers": 1, "lists": 0, "bold": 2}, {"headers": 0, "lists": 3, "bold": 0})
        + line("y", "z", "B", 5, 50, FLAT, {"headers": 2, "lists": 1, "bold": 1})
        + line("x", "z", "TIE", 15, 25, FLAT, FLAT)
        + line("z", "x", "A", 30, 10, FLAT, FLAT)
    )
    result = invoke_cli("leaderboard", "--judgments", str(path), "--control", "length,markdown", "--json")
    assert result.exit_code == 0, result.stderr
    models = json.loads(result.stdout)["models"]
    assert len(models) == 3
    for m in models:
        low, high = m["ci"]
        assert high - low > 50, m  # a handful of games cannot pin a rating to a point
        assert low <= m["rating"] <= high, m


def chain(tmp_path, n_models: int):
    path = tmp_path / f"chain{n_models}.jsonl"
    path.write_text("".join(json.dumps({"model_a": f"m{i}", "model_b": f"m{i + 1}", "winner": "A"}) + "\n"
                            for i in range(n_models - 1)))  # fmt: skip
    return path


def test_a_small_file_naming_thousands_of_models_is_one_line_not_gigabytes(tmp_path, council_home):
    # 20,000 models in a 1 MB file: a 20,000 × 20,000 win matrix (3 GB) per bootstrap round.
    result = invoke_cli("leaderboard", "--judgments", str(chain(tmp_path, 20_000)), "--bootstrap", "0")
    assert result.exit_code == 2, result.stderr[-500:]
    [line] = [x for x in result.stderr.splitlines() if x.strip()]
    assert "20000 models" in line and "at most" in line


def test_many_models_with_many_rounds_say_which_to_lower(tmp_path, council_home):
    path = chain(tmp_path, 600)
    result = invoke_cli("leaderboard", "--judgments", str(path), "--bootstrap", "200")
    assert result.exit_code == 2
    assert "--bootstrap" in result.stderr and "600 models" in result.stderr
    fewer = invoke_cli("leaderboard", "--judgments", str(path), "--bootstrap", "0", "--json")
    assert fewer.exit_code == 0, fewer.stderr
    assert len(json.loads(fewer.stdout)["models"]) == 600
