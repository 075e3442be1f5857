"""`council export`: sessions (JSONL/CSV, redacted) and bias records that re-import to the same report."""

from __future__ import annotations

import csv
import io
import json

from click.testing import CliRunner

from council import Council
from council.cli.main import cli

QUESTION = "How many moons does Mars have?"


async def run_sessions(n: int = 3):
    council = Council.from_config({"councils": {"default": {"members": ["fake/a", "fake/b", "fake/c"]}}})
    results = [await council.run(f"{QUESTION} ({i})", seed=i) for i in range(n)]
    await council.aclose()
    return results


def invoke(*args: str):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result


async def test_jsonl_full_and_redacted():
    results = await run_sessions()
    full = [
        json.loads(line) for line in invoke("export", "--format", "jsonl").stdout.splitlines() if line.startswith("{")
    ]
    assert {d["session_id"] for d in full} == {r.session_id for r in results}
    assert any(QUESTION in (d["question"] or "") for d in full)
    redacted_out = invoke("export", "--redact").stdout
    assert QUESTION not in redacted_out
    for r in results:
        for a in r.answers:
            assert a.text not in redacted_out
        assert r.synthesis.text not in redacted_out
    docs = [json.loads(line) for line in redacted_out.splitlines() if line.startswith("{")]
    assert all(d["question"] is None and d["consensus"]["ranking"] for d in docs)


async def test_csv_has_one_row_per_session(tmp_path):
    results = await run_sessions(2)
    out = tmp_path / "s.csv"
    invoke("export", "--format", "csv", "--redact", "--output", str(out))
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 2
    assert {r["session_id"] for r in rows} == {r.session_id for r in results}
    assert all(r["question"] == "[redacted]" and r["winner"] for r in rows)


async def test_bias_records_round_trip_gives_the_same_report(tmp_path):
    await run_sessions(4)
    records = tmp_path / "records.jsonl"
    invoke("export", "--bias-records", "--output", str(records))
    lines = records.read_text().splitlines()
    assert len(lines) == 4 * 3 * 2  # 3 reviewers x 2 answers each (self-review excluded) x 4 sessions
    assert QUESTION not in records.read_text()
    from_db = json.loads(invoke("bias-report", "--json").stdout)
    from_file = json.loads(invoke("bias-report", "--json", "--records", str(records)).stdout)
    for key in (
        "reviewers",
        "length_correlation",
        "length_correlation_ci",
        "sample_size",
        "confidence_level",
        "position_bias",
        "self_preference",
    ):
        assert from_db[key] == from_file[key], key


async def test_each_session_line_is_its_model_json_whether_or_not_a_secret_was_cut(monkeypatch):
    """A stored result written before its key was known still holds the key: the export cuts
    it. Either way a line is ``SessionLine``'s own JSON, keys in its order, one form for all."""
    import sqlite3

    from council.untrusted import redaction
    from council.exports.shapes import SessionLine
    from council._util.home import council_home

    results = await run_sessions(2)
    secret = "k-5e8d2c7a9f1b3e6d4a0c"
    conn = sqlite3.connect(council_home() / "council.db")
    (text,) = conn.execute("SELECT result FROM sessions WHERE id = ?", (results[0].session_id,)).fetchone()
    stored = json.loads(text)
    stored["answers"][0]["text"] = f"the key is {secret}"
    conn.execute("UPDATE sessions SET result = ? WHERE id = ?", (json.dumps(stored), results[0].session_id))
    conn.commit()
    conn.close()
    monkeypatch.setattr(redaction, "_registered", {secret})
    lines = [line for line in invoke("export").stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 2 and secret not in "".join(lines)
    for line in lines:
        assert line == SessionLine.model_validate_json(line).model_dump_json()
    texts = {json.loads(line)["session_id"]: json.loads(line)["answers"][0]["text"] for line in lines}
    assert texts[results[0].session_id] == f"the key is {redaction.REDACTED}"
    assert texts[results[1].session_id] == results[1].answers[0].text


async def test_bias_records_read_the_same_in_csv_and_jsonl(backend_url, monkeypatch):
    # A whole score is an integer in both (8, never 8.0 in one and 8 in the other); a
    # fractional one (records from another tool) stays as it is.
    monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
    await run_sessions(1)
    jsonl = invoke("export", "--bias-records", "--format", "jsonl").stdout
    rows = list(csv.DictReader(io.StringIO(invoke("export", "--bias-records", "--format", "csv").stdout)))
    records = [json.loads(line) for line in jsonl.splitlines()]
    assert len(records) == len(rows) == 3 * 2
    for record, row in zip(records, rows, strict=True):
        assert isinstance(record["score_value"], int) and f'"score_value": {record["score_value"]},' in jsonl
        as_text = {k: "" if v is None else json.dumps(v) if not isinstance(v, str) else v for k, v in record.items()}
        assert row == as_text


def test_a_fractional_bias_score_is_kept_in_both_formats():
    from council.bias.export import RECORD_FIELDS, export_bias_records

    class Rows:
        def bias_record_rows(self, fields, since=None):
            yield tuple({"score_value": 7.5, "self_review": 0}.get(f, 1) for f in fields)

    jsonl, table = io.StringIO(), io.StringIO()
    export_bias_records(Rows(), jsonl, fmt="jsonl")
    export_bias_records(Rows(), table, fmt="csv")
    assert json.loads(jsonl.getvalue())["score_value"] == 7.5
    (row,) = csv.DictReader(io.StringIO(table.getvalue()))
    assert row["score_value"] == "7.5" and row["self_review"] == "false" and list(row) == list(RECORD_FIELDS)
