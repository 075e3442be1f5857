"""Style control and the length-controlled win rate on council's own judged pairs (SPEC, third
round: "Ratings from elsewhere and controlled ratings"): a judged pair keeps its answers'
lengths and markdown counts, so ``council leaderboard --control`` and ``--baseline`` work on
the store and give the numbers of the same pairs exported as a judgments file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import invoke_cli
from jsonschema import Draft202012Validator

from council.leaderboard.judgment_files import JudgedPairLine

MODELS = ("fake/x", "fake/y", "fake/z")
ROOT = Path(__file__).resolve().parents[2]


def _answer(model: str, i: int) -> str:
    """x writes long formatted answers, y medium plain ones, z short ones."""
    if model == "fake/x":
        return f"# Answer {i}\n\n" + "".join(f"- **point {k}** about {i}\n" for k in range(i % 4 + 1)) + "x" * (40 * i)
    if model == "fake/y":
        return f"A plain answer to question {i}, " + "y" * (15 * i)
    return f"Short {i}."


def _batch(tmp_path, n: int = 24):
    rows = []
    for i in range(n):
        a, b = [(MODELS[0], MODELS[1]), (MODELS[1], MODELS[2]), (MODELS[2], MODELS[0])][i % 3]
        if i % 2:
            a, b = b, a
        rows.append({"id": f"p{i}", "prompt": f"Question {i}?", "a": _answer(a, i), "b": _answer(b, i),
                     "model_a": a, "model_b": b})  # fmt: skip
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    res = invoke_cli("batch", str(path), "--judge", "fake/j1", "--judge", "fake/j2", "-o", str(tmp_path / "out.jsonl"))
    assert res.exit_code == 0, res.stderr
    return rows


def _export(tmp_path):
    target = tmp_path / "judged.jsonl"
    res = invoke_cli("export", "--judged-pairs", "-o", str(target))
    assert res.exit_code == 0, res.stderr
    return target


def _board(*args: str) -> dict:
    res = invoke_cli("leaderboard", *args, "--bootstrap", "30", "--json")
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)


def _numbers(board: dict) -> dict:
    return {k: board[k] for k in ("control", "coefficients", "models", "baseline", "judgments", "comparisons")}


@pytest.mark.parametrize("extra", [["--control", "length,markdown"], ["--control", "length", "--baseline", "fake/z"],
                                   ["--baseline", "fake/y"]])  # fmt: skip
def test_the_store_gives_the_numbers_of_its_exported_judgments(tmp_path, council_home, url_store, extra):
    """On both backends (``url_store`` sets COUNCIL_DATABASE_URL for the commands)."""
    _batch(tmp_path)
    assert len(list(url_store.judged_pairs())) == 24  # the commands used the backend's store
    exported = _export(tmp_path)
    lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 24 and all(line["length_a"] and line["markdown_b"] is not None for line in lines)
    stored = _board("--source", "judgments", *extra)
    from_file = _board("--judgments", str(exported), *extra)
    assert _numbers(stored) == _numbers(from_file)
    # x writes longer than y, y than z, always: against either baseline no model's own games tell
    # quality from length, and none has another model's slope to borrow: null, with the reason
    baseline = extra[extra.index("--baseline") + 1] if "--baseline" in extra else None
    for m in stored["models"]:
        if baseline is None or m["model"] == baseline:
            assert m["lc_reason"] is None
        else:
            assert m["lc_win_rate"] is None and "than the baseline's" in m["lc_reason"], m
    if "--control" in extra:
        assert stored["coefficients"]["length"]["estimate"] != 0


def test_lengths_are_those_of_the_answers_judged(tmp_path, council_home):
    rows = _batch(tmp_path, 6)
    raw = _export(tmp_path).read_text(encoding="utf-8").splitlines()
    assert all(line == JudgedPairLine.model_validate_json(line).model_dump_json() for line in raw)  # its own form
    lines = [json.loads(line) for line in raw]
    assert sorted((line["length_a"], line["length_b"]) for line in lines) == sorted(
        (len(r["a"]), len(r["b"])) for r in rows
    )
    assert set(lines[0]) == {"run_id", "created_at", "model_a", "model_b", "winner", "length_a", "length_b",
                             "markdown_a", "markdown_b", "prompt_id"}  # fmt: skip
    assert all(line["prompt_id"] is None for line in lines)  # queries are not hashed here
    schema = json.loads((ROOT / "docs/schemas/export-judged-pairs.schema.json").read_text(encoding="utf-8"))
    for line in lines:
        Draft202012Validator(schema).validate(line)


def test_old_pairs_without_counts_are_left_out_and_counted_never_zero(tmp_path, council_home):
    _batch(tmp_path)
    db = sqlite3.connect(council_home / "council.db")
    with db:  # two pairs recorded before council kept lengths
        ids = [r[0] for r in db.execute("SELECT id FROM judgment_runs WHERE kind = 'compare' AND 'fake/z' IN "
                                        "(model_a, model_b) ORDER BY id LIMIT 2")]
        db.executemany("UPDATE judgment_runs SET length_a = NULL, length_b = NULL, headers_a = NULL, lists_a = NULL,"
                       " bold_a = NULL, headers_b = NULL, lists_b = NULL, bold_b = NULL WHERE id = ?",
                       [(i,) for i in ids])  # fmt: skip
    db.close()
    exported = [json.loads(line) for line in _export(tmp_path).read_text(encoding="utf-8").splitlines()]
    assert sum(line["length_a"] is None and line["markdown_a"] is None for line in exported) == 2
    stored = _board("--source", "judgments", "--control", "length,markdown", "--baseline", "fake/z")
    assert any("2 judged pairs" in n and "left out" in n for n in stored["notes"]), stored["notes"]
    assert stored["judgments"] == 22
    kept = tmp_path / "kept.jsonl"
    kept.write_text("".join(json.dumps(line) + "\n" for line in exported if line["length_a"] is not None))
    assert _numbers(stored) == _numbers(_board("--judgments", str(kept), "--control", "length,markdown",
                                               "--baseline", "fake/z"))  # fmt: skip
    # the plain ratings keep every pair; only the length-controlled rate leaves the two out
    plain = _board("--source", "judgments", "--baseline", "fake/z")
    assert plain["judgments"] == 24 and any("left out" in n for n in plain["notes"]), plain["notes"]


def test_control_on_the_store_rates_judged_pairs_and_says_sessions_are_left_out(tmp_path, council_home):
    _batch(tmp_path, 9)
    board = _board("--control", "length")
    assert board["source"] == "judgments" and board["judgments"] == 9
    assert any("sessions" in n and "left out" in n for n in board["notes"])
    res = invoke_cli("leaderboard", "--control", "length", "--source", "sessions")
    assert res.exit_code == 2 and len(res.error_lines) == 1 and "--control" in res.stderr
    res = invoke_cli("leaderboard", "--control", "length", "--council", "c")
    assert res.exit_code == 2 and len(res.error_lines) == 1


def test_an_empty_store_with_control_says_there_is_nothing(council_home):
    res = invoke_cli("leaderboard", "--control", "length,markdown", "--json")
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["models"] == []
    res = invoke_cli("export", "--judged-pairs", "--format", "csv")
    assert res.exit_code == 2 and len(res.error_lines) == 1


def test_a_long_model_name_on_record_is_rated_not_a_traceback(tmp_path, council_home):
    long = "fake/" + "w" * 600
    rows = [{"id": f"l{i}", "prompt": "Q?", "a": "# A\n- one" * (i + 1), "b": "b" * (5 * i + 1),
             "model_a": (long, "fake/x")[i % 2], "model_b": ("fake/x", long)[i % 2]} for i in range(8)]  # fmt: skip
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert invoke_cli("batch", str(path), "--judge", "fake/j", "-o", str(tmp_path / "o.jsonl")).exit_code == 0
    board = _board("--control", "length", "--baseline", "fake/x")
    assert {m["model"] for m in board["models"]} == {long, "fake/x"}


def test_lc_against_a_baseline_says_why_it_is_missing_for_sessions_only(tmp_path, council_home):
    import asyncio

    from council import Council

    async def session():
        council = Council.from_config({"councils": {"default": {"members": list(MODELS)}}})
        try:
            await council.run("Which is the largest moon of Saturn?", seed=3)
        finally:
            await council.aclose()

    asyncio.run(session())
    _batch(tmp_path, 6)
    for extra in (["--source", "sessions"], ["--council", "default"]):
        res = invoke_cli("leaderboard", "--baseline", "fake/z", "--json", "--bootstrap", "0", *extra)
        assert res.exit_code == 0, res.stderr
        out = json.loads(res.stdout)
        assert len(out["models"]) == 3 and all(m["lc_win_rate"] in (None, 50.0) for m in out["models"])
        assert any("--source sessions and --council leave out" in n for n in out["notes"]), out["notes"]


def test_with_hashed_queries_the_stored_lc_win_rate_has_instruction_difficulty(
    tmp_path, council_home, url_store, monkeypatch
):
    """Judged pairs carry the salted hash of their prompt as prompt_id (m018): the stored
    --baseline gives the numbers of the exported file, both with instruction difficulty."""
    monkeypatch.setenv("COUNCIL_HASH_QUERIES", "1")
    _batch(tmp_path)
    exported = _export(tmp_path)
    lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert all(len(line["prompt_id"]) == 64 for line in lines) and len({line["prompt_id"] for line in lines}) == 24
    stored = _board("--source", "judgments", "--baseline", "fake/z")
    from_file = _board("--judgments", str(exported), "--baseline", "fake/z")
    assert _numbers(stored) == _numbers(from_file)
    assert not any("prompt_id" in n for n in stored["notes"]), stored["notes"]
    # Each prompt was judged for one pair only: its difficulty would be that pair's own outcome
    # (issue 61, finding 1), so no other model's game gives it one, and the note says so.
    assert any("16 of 16 judgments against the baseline have no other model's game" in n
               for n in stored["notes"]), stored["notes"]  # fmt: skip
    without = tmp_path / "without.jsonl"
    without.write_text("".join(json.dumps({**line, "prompt_id": None}) + "\n" for line in lines))
    plain = _board("--judgments", str(without), "--baseline", "fake/z")
    assert [m["lc_reason"] for m in plain["models"]] == [m["lc_reason"] for m in stored["models"]]


def test_pairs_without_a_prompt_id_are_counted_in_the_note(tmp_path, council_home, monkeypatch):
    monkeypatch.setenv("COUNCIL_HASH_QUERIES", "1")
    _batch(tmp_path)
    db = sqlite3.connect(council_home / "council.db")
    with db:  # three pairs against the baseline recorded before prompt ids were kept
        db.execute("UPDATE judgment_runs SET prompt_id = NULL WHERE id IN (SELECT id FROM judgment_runs WHERE "
                   "kind = 'compare' AND 'fake/z' IN (model_a, model_b) ORDER BY id LIMIT 3)")  # fmt: skip
    db.close()
    stored = _board("--source", "judgments", "--baseline", "fake/z")
    assert any("3 of 16" in n and "prompt_id" in n for n in stored["notes"]), stored["notes"]


def test_a_salt_file_it_cannot_use_stops_the_batch_before_judging_with_one_line(tmp_path, council_home, monkeypatch):
    monkeypatch.setenv("COUNCIL_HASH_QUERIES", "1")
    monkeypatch.setenv("COUNCIL_SALT_FILE", str(tmp_path / "missing-salt"))
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"id": "o", "prompt": "Q?", "a": "a", "b": "b", "model_a": "fake/x",
                                "model_b": "fake/y"}) + "\n")  # fmt: skip
    res = invoke_cli("batch", str(path), "--judge", "fake/j")
    errors = [line for line in res.error_lines if line.startswith("error:")]
    assert res.exit_code == 2 and len(errors) == 1 and "COUNCIL_SALT_FILE" in errors[0], res.stderr
    assert "Traceback" not in res.stderr
    db = sqlite3.connect(council_home / "council.db")
    assert db.execute("SELECT count(*) FROM calls").fetchone() == (0,)  # stopped before any judge was asked
    db.close()
    monkeypatch.delenv("COUNCIL_SALT_FILE")
    res = invoke_cli("batch", str(path), "--judge", "fake/j", "--resume")  # the queued item is judged now
    assert res.exit_code == 0, res.stderr
    assert len(_board("--source", "judgments")["models"]) == 2
