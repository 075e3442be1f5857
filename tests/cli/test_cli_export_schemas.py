"""Exports analysts can rely on: one published JSON Schema per shape, checked against real exports.

Every line of every export (complete, partial, failed and transcript-free sessions, full and
redacted) validates against the committed schema in docs/schemas/, whose objects name every key
as required and allow no others: DuckDB and pandas see the same columns and types whatever the
data. Nothing in a session line is a map keyed by a member, model or position.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from conftest import invoke_cli
from jsonschema import Draft202012Validator

from council import Council
from council.errors import CouncilFailure
from council.exports.shapes import SCHEMA_DIR, column_types, export_schemas

ROOT = Path(__file__).resolve().parents[2]
SHAPES = ("sessions", "scores", "answers")


async def run(members: list[str], *, question: str = "Which planet has the most moons?", transcripts: bool = True):
    config = {"councils": {"default": {"members": members, "chairman": members[0]}},
              "privacy": {"store_transcripts": transcripts}}  # fmt: skip
    council = Council.from_config(config)
    try:
        return await council.run(question, seed=7)
    except CouncilFailure:
        return None
    finally:
        await council.aclose()


async def every_kind_of_session():
    await run(["fake/a", "fake/b", "fake/c"])  # complete
    await run(["fake/a", "fake/b", "fake/c", "fake/d+fail"])  # partial, four members
    await run(["fake/a", "fake/b", "fake/c", "fake/d", "fake/e", "fake/f+fail"])  # partial, six members
    await run(["fake/a+fail", "fake/b+fail"])  # failed: no quorum; the answers (errors) kept
    await run(["fake/a", "fake/b", "fake/c"], transcripts=False)


def lines(*args: str) -> list[dict]:
    result = invoke_cli("export", *args)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def schema(name: str) -> dict:
    return json.loads((ROOT / SCHEMA_DIR / f"export-{name}.schema.json").read_text(encoding="utf-8"))


def typed_cell(cell: str, kind: str):
    if cell == "" and kind.endswith("or null"):
        return None
    if kind.startswith("integer"):
        return int(cell)
    if kind.startswith("number"):
        return float(cell)
    if kind.startswith("boolean"):
        return {"true": True, "false": False}[cell]
    return cell[1:] if cell[:2] in ("'=", "'+", "'-", "'@") else cell


def key_paths(value, path="$") -> set[str]:
    if isinstance(value, dict):
        return {f"{path}.{k}" for k in value} | {p for k, v in value.items() for p in key_paths(v, f"{path}.{k}")}
    if isinstance(value, list):
        return {p for item in value for p in key_paths(item, f"{path}[]")}
    return set()


def test_the_committed_schemas_are_the_generated_ones():
    # Regenerate with: python scripts/write_export_schemas.py
    for name, generated in export_schemas().items():
        path = ROOT / SCHEMA_DIR / f"export-{name}.schema.json"
        assert path.exists(), path
        assert json.loads(path.read_text(encoding="utf-8")) == generated, name


async def test_every_line_of_every_export_validates_against_its_schema():
    await every_kind_of_session()
    for shape in SHAPES:
        validator = Draft202012Validator(schema(shape))
        for redact in ((), ("--redact",)):
            exported = lines("--shape", shape, *redact)
            assert exported, shape
            for line in exported:
                errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(line)]
                assert errors == [], (shape, redact, line.get("status"), errors[:3])
    for shape in SHAPES:  # CSV: the same rows, each cell read back by its column's type
        name = "sessions-csv" if shape == "sessions" else shape
        validator, types = Draft202012Validator(schema(name)), dict(column_types(name))
        text = invoke_cli("export", "--shape", shape, "--format", "csv").stdout
        rows = list(csv.DictReader(io.StringIO(text)))
        assert rows and list(rows[0]) == list(types)
        for row in rows:
            typed = {column: typed_cell(cell, types[column]) for column, cell in row.items()}
            assert list(validator.iter_errors(typed)) == [], (shape, typed)
    records = Draft202012Validator(schema("bias-records"))
    exported = lines("--bias-records")
    assert exported and all(not list(records.iter_errors(line)) for line in exported)


async def test_the_session_line_has_one_shape_whatever_the_data():
    await every_kind_of_session()
    docs = lines()
    statuses = {d["status"] for d in docs}
    assert statuses == {"complete", "partial", "failed"}
    top = {frozenset(d) for d in docs}
    assert len(top) == 1  # every key always present, failed sessions too
    failed = next(d for d in docs if d["status"] == "failed")
    assert failed["seed"] == 7 and failed["reviews"] == [] and failed["consensus"] is None
    answered = [(a["member"], a["status"]) for a in failed["answers"]]
    assert answered == [("fake/a+fail", "failed"), ("fake/b+fail", "failed")]
    assert failed["usage"]["calls"] >= 2 and failed["duration_ms"] >= 0 and failed["error"]
    four, six = (next(d for d in docs if len(d["members"]) == n) for n in (4, 6))
    assert key_paths(four) == key_paths(six)  # no field per member or position
    members = {m for d in docs for m in d["members"]}
    for doc in docs:
        assert not any(re.search(r"\.(fake/[^.\[]+|\d+)(\.|\[|$)", p) for p in key_paths(doc)), doc["status"]
        assert members.isdisjoint(k for p in key_paths(doc) for k in p.split("."))


async def test_maps_became_lists_of_records():
    result = await run(["fake/a", "fake/b", "fake/c"])
    [doc] = lines()
    assert doc["models"] == [{"id": m, "model": model} for m, model in result.models.items()]
    review = next(r for r in result.reviews if r.valid)
    exported = next(r for r in doc["reviews"] if r["reviewer"] == review.reviewer)
    assert exported["scores"] == [{"member": m, "score": s} for m, s in review.scores.items()]
    assert exported["reasoning"] == [{"member": m, "text": t} for m, t in review.reasoning.items()]
    assert exported["labels"] == [{"label": label, "member": m} for label, m in review.labels.items()]
    calibration = doc["bias"]["calibration"]
    assert {c["reviewer"] for c in calibration} == set(result.bias.calibration)
    assert [p["position"] for p in doc["bias"]["position_bias"]["positions"]] == sorted(result.bias.position_bias.means)
    [redacted] = lines("--redact")
    assert all(entry["text"] is None for r in redacted["reviews"] for entry in r["reasoning"])
    assert key_paths(redacted) == key_paths(doc)


def test_the_docs_table_gives_every_column_its_type():
    text = (ROOT / "docs" / "exports.md").read_text(encoding="utf-8")
    for table in ("sessions-csv", "scores", "answers", "bias-records"):
        for column, kind in column_types(table):
            assert re.search(rf"^\| `{re.escape(column)}` \| {re.escape(kind)} \|", text, re.M), (table, column, kind)
    assert "docs/exports.md" in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("shape", SHAPES)
def test_an_empty_store_exports_nothing_and_valid(shape):
    assert lines("--shape", shape) == []
