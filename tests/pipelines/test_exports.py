"""Exports with a stable shape: the columns people filter on, and long tables (one row per review
score, one per answer) that load into pandas with the same columns and dtypes, full or redacted."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from council import Council
from council.cli.main import cli
from council.exports.sessions import ANSWER_COLUMNS, SCORE_COLUMNS, SESSION_COLUMNS

pd = pytest.importorskip("pandas")

QUESTION = "Which planet has the most moons?"
MEMBERS = ["fake/a", "fake/b", "fake/c", "fake/d"]


async def run_sessions(n: int = 3, members=MEMBERS, **spec):
    council = Council.from_config({"councils": {"default": {"members": members, **spec}}})
    results = [await council.run(f"{QUESTION} ({i})", seed=i) for i in range(n)]
    await council.aclose()
    return results


def export(*args: str) -> str:
    result = CliRunner().invoke(cli, ["export", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


# -- one row per session -----------------------------------------------------------------


async def test_session_csv_carries_the_columns_people_filter_on():
    results = await run_sessions(2)
    rows = {r["session_id"]: r for r in csv_rows(export("--format", "csv"))}
    assert list(next(iter(rows.values()))) == list(SESSION_COLUMNS)
    for result in results:
        row = rows[result.session_id]
        assert int(row["seed"]) == result.seed
        assert row["status"] == "complete" and row["council"] == "default"
        assert row["members"].split() == MEMBERS
        assert row["winner"] == " = ".join(e.member for e in result.consensus.ranking if e.rank == 1)
        assert float(row["kendall_w"]) == pytest.approx(result.consensus.kendall_w)
        assert int(row["prompt_tokens"]) == result.usage.prompt_tokens > 0
        assert int(row["completion_tokens"]) == result.usage.completion_tokens > 0
        assert int(row["total_tokens"]) == result.usage.prompt_tokens + result.usage.completion_tokens
        assert float(row["cost_usd"]) == result.usage.cost_usd
        assert int(row["calls"]) == result.usage.calls
        assert float(row["duration_ms"]) > 0  # the session's real duration, not 0


async def test_kendall_w_is_empty_only_where_it_is_undefined():
    # Two members, self-review excluded: each reviewer ranks one answer, so there is no
    # agreement to measure (null) and the cells are empty, not "None".
    (result,) = await run_sessions(1, members=MEMBERS[:2])
    (row,) = csv_rows(export("--format", "csv"))
    assert result.consensus.kendall_w is None and row["kendall_w"] == "" and row["kendall_w_p_value"] == ""
    # Three members, self-review excluded: each reviewer ranks a different pair, and the three
    # pairs are a balanced incomplete design (docs/methods.md, "Kendall's W"): defined.
    (three,) = await run_sessions(1, members=MEMBERS[:3], self_review="exclude")
    assert three.consensus.agreement.design == "balanced incomplete" and three.consensus.agreement.ballots == 3
    rows = {r["session_id"]: r for r in csv_rows(export("--format", "csv"))}
    assert float(rows[three.session_id]["kendall_w"]) == pytest.approx(three.consensus.kendall_w)
    assert float(rows[three.session_id]["kendall_w_p_value"]) == pytest.approx(three.consensus.kendall_w_p_value)


async def test_a_failed_session_still_has_its_seed_members_tokens_and_duration():
    with pytest.raises(Exception):  # noqa: B017 - the quorum error
        await run_sessions(1, members=["fake/a+fail", "fake/b+fail"])
    (row,) = csv_rows(export("--format", "csv"))
    assert row["status"] == "failed" and row["seed"] == "0"
    assert row["members"].split() == ["fake/a+fail", "fake/b+fail"]
    assert int(row["calls"]) >= 2 and int(row["failed_calls"]) == int(row["calls"])
    assert row["winner"] == "" and float(row["duration_ms"]) >= 0
    assert row["error"]


# -- long tables ------------------------------------------------------------------------------


async def test_scores_table_has_one_row_per_review_score():
    results = await run_sessions(2)
    rows = [json.loads(line) for line in export("--shape", "scores").splitlines()]
    assert all(list(r) == list(SCORE_COLUMNS) for r in rows)
    expected = {
        (res.session_id, rev.reviewer, member, score)
        for res in results
        for rev in res.reviews
        if rev.valid
        for member, score in rev.scores.items()
    }
    assert {(r["session_id"], r["reviewer"], r["member"], r["score"]) for r in rows} == expected
    assert all(isinstance(r["score"], int) and isinstance(r["self_review"], bool) for r in rows)
    one = next(r for r in rows if r["session_id"] == results[0].session_id)
    review = next(rev for rev in results[0].reviews if rev.reviewer == one["reviewer"])
    assert one["position"] == review.display_order.index(one["member"])
    assert one["rank"] == review.ranking.index(one["member"]) + 1
    assert one["reasoning"] == review.reasoning[one["member"]]


async def test_answers_table_has_one_row_per_answer():
    results = await run_sessions(2)
    rows = [json.loads(line) for line in export("--shape", "answers").splitlines()]
    assert all(list(r) == list(ANSWER_COLUMNS) for r in rows)
    assert len(rows) == sum(len(r.answers) for r in results)
    first = results[0]
    mine = {r["member"]: r for r in rows if r["session_id"] == first.session_id}
    winner = first.consensus.order[0]
    assert mine[winner]["consensus_rank"] == 1
    answer = next(a for a in first.answers if a.member == winner)
    assert mine[winner]["text"] == answer.text and mine[winner]["length_chars"] == answer.length_chars


async def test_redacted_long_tables_hold_no_text():
    results = await run_sessions(2)
    for shape in ("scores", "answers", "sessions"):
        for fmt in ("jsonl", "csv"):
            out = export("--shape", shape, "--format", fmt, "--redact")
            assert QUESTION not in out
            for res in results:
                for a in res.answers:
                    assert a.text not in out
                for rev in res.reviews:
                    for reasoning in rev.reasoning.values():
                        assert reasoning not in out


@pytest.mark.parametrize(  # the JSONL session shape is the nested result document, not a table
    "shape, fmt",
    [("sessions", "csv"), ("scores", "csv"), ("scores", "jsonl"), ("answers", "csv"), ("answers", "jsonl")],
)
async def test_pandas_loads_full_and_redacted_with_identical_columns_and_dtypes(tmp_path, shape, fmt):
    await run_sessions(3)
    frames = {}
    for variant in ("full", "redacted"):
        path = tmp_path / f"{variant}.{fmt}"
        args = ["--shape", shape, "--format", fmt, "-o", str(path)] + (["--redact"] if variant == "redacted" else [])
        export(*args)
        frames[variant] = pd.read_csv(path) if fmt == "csv" else pd.read_json(path, lines=True)
    full, redacted = frames["full"], frames["redacted"]
    assert list(full.columns) == list(redacted.columns)
    assert dict(full.dtypes) == dict(redacted.dtypes)
    assert len(full) == len(redacted) > 0
    if shape == "scores":
        assert str(full["score"].dtype) == "int64" and str(full["position"].dtype) == "int64"
        assert str(full["self_review"].dtype) == "bool"


async def test_booleans_are_the_same_type_in_jsonl_and_csv(tmp_path):
    await run_sessions(2, self_review="include")
    for shape, column in (("scores", "self_review"), ("answers", "truncated")):
        as_csv = pd.read_csv(io.StringIO(export("--shape", shape, "--format", "csv")))
        as_jsonl = pd.read_json(io.StringIO(export("--shape", shape)), lines=True)
        assert str(as_csv[column].dtype) == str(as_jsonl[column].dtype) == "bool"
        assert list(as_csv[column]) == list(as_jsonl[column])
    records_csv = tmp_path / "r.csv"
    records_jsonl = tmp_path / "r.jsonl"
    CliRunner().invoke(cli, ["export", "--bias-records", "--format", "csv", "-o", str(records_csv)])
    CliRunner().invoke(cli, ["export", "--bias-records", "-o", str(records_jsonl)])
    a, b = pd.read_csv(records_csv), pd.read_json(records_jsonl, lines=True)
    assert str(a["self_review"].dtype) == str(b["self_review"].dtype) == "bool"


async def test_redacted_document_keeps_the_full_documents_keys():
    await run_sessions(1)
    full = json.loads(export())
    redacted = json.loads(export("--redact"))

    def keys(value, path=""):
        if isinstance(value, dict):
            return {f"{path}.{k}" for k in value} | {p for k, v in value.items() for p in keys(v, f"{path}.{k}")}
        if isinstance(value, list):
            return {p for item in value for p in keys(item, f"{path}[]")}
        return set()

    assert keys(full) == keys(redacted)
    assert all(entry["text"] is None for rev in redacted["reviews"] for entry in rev["reasoning"])


def test_an_unknown_shape_is_a_usage_error():
    result = CliRunner().invoke(cli, ["export", "--shape", "wide"])
    assert result.exit_code == 2 and "Traceback" not in result.output
