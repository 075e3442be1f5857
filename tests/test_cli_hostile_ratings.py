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
