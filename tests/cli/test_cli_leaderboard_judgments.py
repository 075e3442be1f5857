"""``council leaderboard --judgments FILE`` (SPEC, third round: "Ratings from elsewhere and
controlled ratings"): files instead of the store, bad input as one line and exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import invoke_cli


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _games(n=60):
    """x beats y two times in three; z loses to both; lengths and markdown counts on every line."""
    rows = []
    for i in range(n):
        rows.append(
            {
                "model_a": "y",
                "model_b": "x",
                "winner": "B" if i % 3 else "A",
                "prompt_id": f"p{i % 20}",
                "length_a": 400 + i,
                "length_b": 900 + 7 * i,
                "markdown_a": {"headers": 0, "lists": i % 4, "bold": 1},
                "markdown_b": {"headers": i % 2, "lists": 3, "bold": i % 3},
            }
        )
        rows.append(
            {
                "model_a": "z",
                "model_b": "x",
                "preference": 0.9,
                "prompt_id": f"p{i % 20}",
                "length_a": 300 + i % 50,
                "length_b": 800 + (i * 37) % 500,
                "markdown_a": {"headers": 0, "lists": 0, "bold": 0},
                "markdown_b": {"headers": 1, "lists": i % 5, "bold": 2},
            }
        )
        rows.append(
            {
                "model_a": "z",
                "model_b": "y",
                "winner": "TIE" if i % 2 else "B",
                "prompt_id": f"p{i % 20}",
                "length_a": 500,
                "length_b": 450 + i,
                "markdown_a": {"headers": 0, "lists": 1, "bold": 0},
                "markdown_b": {"headers": 0, "lists": i % 3, "bold": 0},
            }
        )
    return rows


def test_json_shape_and_win_rates(tmp_path):
    path = _write(tmp_path / "j.jsonl", _games())
    res = invoke_cli("leaderboard", "--judgments", str(path), "--baseline", "z", "--bootstrap", "20", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["method"] == "bradley-terry" and out["control"] == [] and out["coefficients"] == {}
    models = {m["model"]: m for m in out["models"]}
    assert [m["model"] for m in out["models"]] == ["x", "y", "z"]
    for m in out["models"]:
        assert {"model", "rating", "ci", "comparisons", "win_rate", "baseline_win_rate", "lc_win_rate", "lc_method",
                "lc_reason", "identified", "not_identified"} <= set(m)  # fmt: skip
    assert models["x"]["baseline_win_rate"] == pytest.approx(90.0)  # preference 0.9 every game
    assert models["y"]["baseline_win_rate"] == pytest.approx(75.0)  # half wins, half ties
    assert models["z"]["baseline_win_rate"] == 50.0
    assert models["x"]["win_rate"] == pytest.approx((40 + 54) / 120)  # round-two meaning: all its games
    assert models["x"]["lc_win_rate"] is not None and out["baseline"] == "z"
    assert out["judgments"] == 180 and out["files"] == [str(path)]


def test_control_reports_coefficients_with_intervals(tmp_path):
    path = _write(tmp_path / "j.jsonl", _games())
    res = invoke_cli(
        "leaderboard", "--judgments", str(path), "--control", "length,markdown", "--bootstrap", "10", "--json"
    )
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["control"] == ["length", "markdown"]
    assert set(out["coefficients"]) == {"length", "headers", "lists", "bold"}
    for c in out["coefficients"].values():
        assert c["ci"][0] < c["estimate"] < c["ci"][1]
    assert all(m["ci"] is not None for m in out["models"])
    # The style-free ratings are ranked again after the refit: best first, ranks 1, 2, ... in that order.
    ratings = [m["rating"] for m in out["models"]]
    assert ratings == sorted(ratings, reverse=True)
    assert [m["rank"].rstrip("=") for m in out["models"]] == [str(i) for i in range(1, len(ratings) + 1)]
    text = invoke_cli("leaderboard", "--judgments", str(path), "--control", "length", "--bootstrap", "0")
    assert text.exit_code == 0 and "length: " in text.stdout and "Style held equal" in text.stdout


def test_files_are_repeatable_and_add_up(tmp_path):
    rows = _games(30)
    one = _write(tmp_path / "a.jsonl", rows[:45])
    two = _write(tmp_path / "b.jsonl", rows[45:])
    both = _write(tmp_path / "all.jsonl", rows)
    split = invoke_cli("leaderboard", "--judgments", str(one), "--judgments", str(two), "--bootstrap", "0", "--json")
    whole = invoke_cli("leaderboard", "--judgments", str(both), "--bootstrap", "0", "--json")
    assert json.loads(split.stdout)["models"] == json.loads(whole.stdout)["models"]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"model_a": "x", "model_b": "y"}', 'exactly one of "winner"'),
        ('{"model_a": "x", "model_b": "y", "winner": "A", "preference": 0.2}', 'exactly one of "winner"'),
        ('{"model_a": "x", "model_b": "y", "winner": "a"}', "winner"),
        ('{"model_a": "x", "model_b": "y", "preference": 1.5}', "preference"),
        ('{"model_a": "x", "model_b": "y", "preference": true}', "preference"),
        ('{"model_a": "x", "model_b": "x", "winner": "A"}', "the same model"),
        ('{"model_a": "", "model_b": "y", "winner": "A"}', "model_a"),
        ('{"model_a": "x", "model_b": "y", "winner": "A", "length_a": -3}', "length_a"),
        ('{"model_a": "x", "model_b": "y", "winner": "A", "markdown_a": {"headers": 1}}', "markdown_a"),
    ],
)
def test_a_bad_line_is_one_line_with_its_number_and_exit_2(tmp_path, line, reason):
    path = tmp_path / "j.jsonl"
    path.write_text('{"model_a": "x", "model_b": "y", "winner": "A"}\n\n' + line + "\n", encoding="utf-8")
    res = invoke_cli("leaderboard", "--judgments", str(path))
    assert res.exit_code == 2
    assert len(res.error_lines) == 1 and f"{path}:3:" in res.stderr and reason in res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--control", "length,colour"], "--control takes"),
        (["--control", ""], "--control takes"),
        (["--baseline", "nobody"], "no judgment names this model"),
        (["--source", "sessions"], "--source"),
        (["--council", "c"], "--council"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path, extra, message):
    path = _write(tmp_path / "j.jsonl", _games(5))
    res = invoke_cli("leaderboard", "--judgments", str(path), *extra)
    assert res.exit_code == 2 and len(res.error_lines) == 1 and message in res.stderr, res.stderr


def test_the_judgments_format_needs_judgment_files():
    res = invoke_cli("leaderboard", "--judgments-format", "alpaca_eval")
    assert res.exit_code == 2 and "need(s) --judgments" in res.stderr


def test_missing_styles_and_files(tmp_path):
    path = _write(tmp_path / "j.jsonl", [{"model_a": "x", "model_b": "y", "winner": "A"}] * 3)
    res = invoke_cli("leaderboard", "--judgments", str(path), "--control", "length")
    assert res.exit_code == 2 and "needs length_a and length_b on every judgment; 3 of 3" in res.stderr
    res = invoke_cli("leaderboard", "--judgments", str(tmp_path / "absent.jsonl"))
    assert res.exit_code == 2 and "not found" in res.stderr
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe{}")
    res = invoke_cli("leaderboard", "--judgments", str(tmp_path / "bin.jsonl"))
    assert res.exit_code == 2 and "not UTF-8" in res.stderr
    res = invoke_cli("leaderboard", "--judgments", str(path), "--baseline", "y", "--json")
    assert res.exit_code == 0
    out = json.loads(res.stdout)
    assert {m["model"]: m["lc_win_rate"] for m in out["models"]}["x"] is None
    assert any("lc_win_rate needs length_a" in n for n in out["notes"])


def test_without_prompt_ids_the_difficulty_term_is_left_out_and_said(tmp_path):
    rows = [{k: v for k, v in r.items() if k != "prompt_id"} for r in _games(30)]
    path = _write(tmp_path / "j.jsonl", rows)
    out = json.loads(invoke_cli("leaderboard", "--judgments", str(path), "--baseline", "z", "--json").stdout)
    assert any("no prompt_id" in n for n in out["notes"])
    # here x is always longer than z and y always shorter: null, each with its reason
    assert all((m["lc_win_rate"] is None) == (m["lc_reason"] is not None) for m in out["models"])


def test_alpaca_eval_annotations(tmp_path):
    items = [
        {
            "generator_1": "base",
            "generator_2": "m",
            "preference": p,
            "instruction": f"q{i}",
            "output_1": "short answer",
            "output_2": "# Long\n\n- a much longer **answer** " * (1 + i % 3),
        }
        for i, p in enumerate([2.0, 1.0, 1.5, 0, 1.75, None, 2.0, 1.25])
    ]
    path = tmp_path / "annotations.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    res = invoke_cli(
        "leaderboard",
        "--judgments",
        str(path),
        "--judgments-format",
        "alpaca_eval",
        "--baseline",
        "base",
        "--control",
        "length,markdown",
        "--bootstrap",
        "0",
        "--json",
    )
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    m = {r["model"]: r for r in out["models"]}["m"]
    assert m["baseline_win_rate"] == pytest.approx(100 * (1 + 0 + 0.5 + 0.5 + 0.75 + 1 + 0.25) / 7)
    assert any("without a preference (not judged), left out: 1" in n for n in out["notes"])
    items[2]["preference"] = 3
    path.write_text(json.dumps(items), encoding="utf-8")
    res = invoke_cli("leaderboard", "--judgments", str(path), "--judgments-format", "alpaca_eval")
    assert res.exit_code == 2 and "item 3: preference must be a number from 1 to 2" in res.stderr
    path.write_text("{}", encoding="utf-8")
    res = invoke_cli("leaderboard", "--judgments", str(path), "--judgments-format", "alpaca_eval")
    assert res.exit_code == 2 and "is a JSON list" in res.stderr


def test_an_empty_file_says_so(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n", encoding="utf-8")
    res = invoke_cli("leaderboard", "--judgments", str(path), "--json")
    assert res.exit_code == 0
    out = json.loads(res.stdout)
    assert out["models"] == [] and out["notes"] == [f"No pairwise comparisons between two models in {path}."]


def test_model_names_with_escapes_are_shown_not_obeyed(tmp_path):
    name = "x\x1b[31mred\u202e"
    path = _write(tmp_path / "j.jsonl", [{"model_a": name, "model_b": "y", "winner": "A"}] * 2)
    res = invoke_cli("leaderboard", "--judgments", str(path), "--baseline", name, "--bootstrap", "0")
    assert res.exit_code == 0
    assert "\x1b" not in res.stdout and "\u202e" not in res.stdout
    assert "x\\x1b[31mred\\u202e" in res.stdout


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.sampled_from(["A", "B", "TIE", "x", "y"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.sampled_from(["headers", "lists", "bold", "other"]), st.integers(-2, 3), max_size=4),
)
_keys = st.sampled_from(
    ["model_a", "model_b", "winner", "preference", "prompt_id", "length_a", "length_b", "markdown_a", "markdown_b"]
)


@settings(max_examples=80, deadline=None)
@given(changes=st.lists(st.dictionaries(_keys, _values, max_size=3), min_size=1, max_size=4))
def test_any_line_loads_or_is_one_clear_error(tmp_path_factory, changes):
    """Valid judgments with a few fields replaced by anything JSON can hold: a board, or one line."""
    from council.errors import InputError
    from council.leaderboard.judged import judged_leaderboard

    base = _games(2)
    lines = [{**base[i % len(base)], **change} for i, change in enumerate(changes)] + base
    path = tmp_path_factory.mktemp("h") / "j.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    try:
        board = judged_leaderboard([path], control=["length", "markdown"], baseline="x", bootstrap=0)
    except InputError as exc:
        assert "\n" not in str(exc)
        assert str(exc).startswith(f"{path}:") or str(exc).startswith("--control")
    else:
        assert all(np.isfinite(m.rating) for m in board.models)
        assert all(m.baseline_win_rate is None or 0 <= m.baseline_win_rate <= 100 for m in board.models)


def test_baseline_win_rates_from_the_database(council_home):
    from council.storage import SQLiteStore
    from tests.methods.test_leaderboard import add_judgment

    store = SQLiteStore.open()
    for i, (a, b, winner) in enumerate([("x", "base", "A"), ("x", "base", "TIE"), ("base", "x", "A"), ("y", "x", "B")]):
        add_judgment(store, f"r{i}", a, b, winner)
    store.close()
    res = invoke_cli("leaderboard", "--baseline", "base", "--bootstrap", "0", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    rates = {m["model"]: (m["baseline_win_rate"], m["lc_win_rate"]) for m in out["models"]}
    assert rates == {"x": (pytest.approx(100 * 1.5 / 3), None), "base": (50.0, None), "y": (None, None)}
    assert out["baseline"] == "base"
    assert any("lc_win_rate needs judged pairs against the baseline with their answers' lengths: none on record "
               "(3 recorded before" in n for n in out["notes"]), out["notes"]  # fmt: skip
    res = invoke_cli("leaderboard", "--baseline", "nobody")
    assert res.exit_code == 2 and "no comparison names this model" in res.stderr


def test_a_style_that_never_varies_is_not_estimable_not_a_huge_interval(tmp_path):
    rows = _games(40)
    for r in rows:
        r["markdown_a"]["headers"] = r["markdown_b"]["headers"] = 0  # no answer has a header
    path = _write(tmp_path / "j.jsonl", rows)
    res = invoke_cli("leaderboard", "--judgments", str(path), "--control", "length,markdown", "--json")
    assert res.exit_code == 0, res.stderr
    coef = json.loads(res.stdout)["coefficients"]
    assert coef["headers"] == {"estimate": None, "ci": None, "standard_error": None, "ci_method": "wald",
                               "not_estimable": "not estimable: constant (every judgment has the same headers "
                               "difference)", "identified": False}  # fmt: skip
    assert all(abs(c["ci"][1] - c["ci"][0]) < 10 for k, c in coef.items() if k != "headers")
    text = invoke_cli("leaderboard", "--judgments", str(path), "--control", "length,markdown").stdout
    assert "headers: not estimable: constant" in " ".join(text.split())
    assert "95% Wald CI" in text and all(c["ci_method"] == "wald" for c in coef.values())


def test_separated_judgments_say_what_is_not_identified_in_json_and_words(tmp_path):
    """Issue 61, finding 2: only x and y compared, x's answer 2.5–3.5× longer and x always winning.
    The length coefficient printed +122.892 (+122.892 to +122.892); now it is null, identified
    false, with the reason, and both ratings are flagged."""
    rng = np.random.default_rng(2)
    rows = []
    for i in range(80):
        base = int(rng.integers(300, 900))
        long = int(base * rng.uniform(2.5, 3.5))
        x_is_b = i % 2 == 0
        rows.append({"model_a": "y" if x_is_b else "x", "model_b": "x" if x_is_b else "y",
                     "winner": "B" if x_is_b else "A", "length_a": base if x_is_b else long,
                     "length_b": long if x_is_b else base})  # fmt: skip
    path = _write(tmp_path / "j.jsonl", rows)
    res = invoke_cli("leaderboard", "--judgments", str(path), "--control", "length", "--bootstrap", "20", "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    length = out["coefficients"]["length"]
    assert (length["estimate"], length["ci"], length["standard_error"], length["identified"]) == (
        None, None, None, False)  # fmt: skip
    assert "separated" in length["not_estimable"]
    for m in out["models"]:
        assert m["identified"] is False and "not identified" in m["not_identified"]
    assert any("not identified by the judgments" in n for n in out["notes"])
    text = " ".join(invoke_cli("leaderboard", "--judgments", str(path), "--control", "length").stdout.split())
    assert "length: not identified: the judgments are separated" in text
    assert "* x: rating not identified" in text and "122" not in text


def test_a_length_controlled_rate_the_games_cannot_determine_is_null_with_the_reason(tmp_path):
    """Issue 61, finding 1: one model against the baseline, always about three times longer: its
    own games cannot tell quality from length and no other model's give the length effect."""
    rng = np.random.default_rng(3)
    rows = []
    for i in range(120):
        base = int(rng.integers(300, 900))
        long = int(base * rng.uniform(2.8, 3.2))
        rows.append({"model_a": "base", "model_b": "long", "winner": "B" if rng.random() < 0.75 else "A",
                     "prompt_id": f"p{i}", "length_a": base, "length_b": long})  # fmt: skip
    path = _write(tmp_path / "j.jsonl", rows)
    out = json.loads(invoke_cli("leaderboard", "--judgments", str(path), "--baseline", "base", "--json").stdout)
    long = {m["model"]: m for m in out["models"]}["long"]
    assert long["lc_win_rate"] is None and long["lc_method"] is None
    assert "always longer" in long["lc_reason"] and "no other model" in long["lc_reason"]
    assert long["baseline_win_rate"] > 60
    assert any("lc_win_rate not determined by the games" in n for n in out["notes"])
    text = " ".join(invoke_cli("leaderboard", "--judgments", str(path), "--baseline", "base").stdout.split())
    assert "LC long: its answers are always longer than the baseline's" in text


def test_a_judgments_file_as_large_as_a_batch_file_is_read(tmp_path):
    """``export --judged-pairs`` writes ~340 bytes a pair: the 10 MB cap of a question file refused
    what it wrote for 30,000 pairs. A judgments file holds many judgments, as a batch file holds
    many items, and has the batch file's cap."""
    from council.untrusted.inputs import MAX_INPUT_BYTES

    line = {"run_id": "r", "created_at": "2026-01-01T00:00:00.000000+00:00", "model_a": "y", "model_b": "x",
            "winner": "B", "length_a": 400, "length_b": 900, "markdown_a": {"headers": 0, "lists": 1, "bold": 1},
            "markdown_b": {"headers": 1, "lists": 3, "bold": 0}, "prompt_id": "0" * 64}  # fmt: skip
    rows = [dict(line, run_id=f"run-{i:08d}", winner="BA"[i % 3 == 0]) for i in range(MAX_INPUT_BYTES // 330 + 500)]
    path = _write(tmp_path / "big.jsonl", rows)
    assert path.stat().st_size > MAX_INPUT_BYTES
    res = invoke_cli("leaderboard", "--judgments", str(path), "--bootstrap", "0", "--json")
    assert res.exit_code == 0, res.stderr
    board = json.loads(res.stdout)
    assert {m["model"]: m["comparisons"] for m in board["models"]} == {"x": len(rows), "y": len(rows)}


def test_more_judgments_than_a_rating_holds_is_one_line_and_exit_2(tmp_path, monkeypatch):
    """The files' size is capped, and so is their count of judgments (each held in memory)."""
    from council.leaderboard import judgment_files

    monkeypatch.setattr(judgment_files, "MAX_JUDGMENTS", 100)
    first, second = _write(tmp_path / "a.jsonl", _games(30)), _write(tmp_path / "b.jsonl", _games(30))
    assert invoke_cli("leaderboard", "--judgments", str(first), "--bootstrap", "0").exit_code == 0  # 90 judgments
    res = invoke_cli("leaderboard", "--judgments", str(first), "--judgments", str(second), "--bootstrap", "0")
    assert res.exit_code == 2 and res.error_lines == [
        f"error: {second}: more than 100 judgments in the files; rate at most that many"
    ]
