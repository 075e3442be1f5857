"""A jury's panel and calibration wherever a user looks at a stored batch (issue 58): the HTML
page of ``council batch results --summary --html`` (a reliability plot in inline SVG drawn from
the calibration's bins, and the panel's tables), the server's ``GET /v1/batches/{id}`` and the
MCP tool ``council_batch``, each giving what ``council batch results --summary --json`` gives."""

from __future__ import annotations

import asyncio
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from batch_files import write_jsonl
from conftest import invoke_cli

from council.exports.summary import summary_schema
from council.judging.batch import BatchSummary
from council.judging.html import LEFT, PLOT, TOP, render_batch_html

ROOT = Path(__file__).resolve().parents[2]
JUDGES = ("fake/x", "fake/y+first", "fake/z")


def jury_batch(tmp_path: Path) -> dict:
    """A labelled jury batch, judged by the CLI into the configured store; its stored summary."""
    rows = [{"id": f"i{i}", "prompt": f"Q{i}?", "a": f"answer {i}" + "!" * i, "b": f"other {i}",
             "label": "AB"[i % 2]} for i in range(8)]  # fmt: skip
    path = write_jsonl(tmp_path / "jury.jsonl", rows)
    ran = invoke_cli("batch", str(path), *(a for j in JUDGES for a in ("--judge", j)), "--batch-id", "jury")
    assert ran.exit_code == 0, ran.stderr
    stored = invoke_cli("batch", "results", "jury", "--summary", "--json")
    assert stored.exit_code == 0, stored.stderr
    summary = json.loads(stored.stdout)
    assert summary["panel"] and summary["calibration"]
    return summary


def test_the_summary_with_its_panel_matches_its_published_schema(tmp_path, council_home):
    schema = json.loads((ROOT / "docs/schemas/batch-summary.schema.json").read_text())
    assert schema == summary_schema()
    jsonschema.validate(jury_batch(tmp_path), schema)  # with a panel and a calibration
    plain = write_jsonl(tmp_path / "one.jsonl", [{"id": "1", "prompt": "Q?", "a": "a", "b": "b"}])
    one = invoke_cli("batch", str(plain), "--judge", "fake/x", "--json")
    assert one.exit_code == 0 and "panel" not in json.loads(one.stdout)
    jsonschema.validate(json.loads(one.stdout), schema)  # without them
    assert {"panel", "calibration", "calibrated", "combine"} <= set(schema["properties"])
    assert {"n_eff", "n_eff_ci", "krippendorff_alpha"} <= set(schema["$defs"]["Panel"]["properties"])


def svg_of(page: str) -> ET.Element:
    [svg] = re.findall(r"<svg class=\"chart reliability\".*?</svg>", page, flags=re.S)
    return ET.fromstring(svg)  # well-formed XML, as inline SVG must be


def test_the_html_page_plots_the_calibration_bins_and_shows_the_panel(tmp_path, council_home):
    summary = jury_batch(tmp_path)
    page_file = tmp_path / "batch.html"
    written = invoke_cli("batch", "results", "jury", "--summary", "--html", str(page_file))
    assert written.exit_code == 0, written.stderr
    assert "Batch jury" in written.stdout  # the summary is still printed
    page = page_file.read_text()
    assert "<script" not in page.lower()
    svg = svg_of(page)
    ns = "{http://www.w3.org/2000/svg}"
    circles = svg.findall(f".//{ns}circle") or svg.findall(".//circle")
    filled = [b for b in summary["calibration"]["bins"] if b["count"]]
    assert len(circles) == len(filled) >= 1
    for circle, b in zip(circles, filled, strict=True):
        # x: the bin's mean stated probability, y: its share of right verdicts, on a PLOT-pixel square.
        assert float(circle.get("cx")) == pytest.approx(LEFT + b["mean_probability"] * PLOT, abs=0.01)
        assert float(circle.get("cy")) == pytest.approx(TOP + (1 - b["accuracy"]) * PLOT, abs=0.01)
    for judge in JUDGES:
        assert f"<td>{judge}</td>" in page
    assert "Krippendorff" in page and "n_eff" in page and "Agreement between judges" in page
    assert f"ECE {round(summary['calibration']['ece'], 3)}" in page

    printed = invoke_cli("batch", "results", "jury", "--summary", "--html", "-")
    assert printed.exit_code == 0 and printed.stdout.startswith("<!DOCTYPE html>")
    lone = invoke_cli("batch", "results", "jury", "--html", "-")
    assert lone.exit_code == 2 and "--html goes with --summary" in lone.stderr


def test_the_page_escapes_every_name():
    hostile = '<img src=x onerror="alert(1)">'
    summary = BatchSummary.model_validate({
        "batch_id": "</title><script>alert(1)</script>", "source": hostile, "items": 0, "finished": 0,
        "failed": 0, "missing": 0, "skipped": 0, "judged_this_run": 0, "pairwise": 0, "a_wins": 0, "b_wins": 0,
        "ties": 0, "swap_pairs": 0, "inconsistent_pairs": 0, "graded": 0, "safety_flagged": 0,
        "flagged_for_review": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0,
        "panel": {"judges": [{"judge": hostile, "decided": 1.0, "agreement_with_combined": 1.0,
                              "p_prefers_first": 0.5, "p_prefers_longer": None}],
                  "agreement": {hostile: {hostile: 1.0}}, "krippendorff_alpha": None},
    })  # fmt: skip
    page = render_batch_html(summary)
    assert "<script" not in page and "<img" not in page and "&lt;img src=x" in page


def test_the_server_gives_a_stored_batchs_summary(tmp_path, council_home, backend_url, monkeypatch):
    from starlette.testclient import TestClient

    from council.config import load_config
    from council.server.app import create_app

    monkeypatch.setenv("COUNCIL_DATABASE_URL", backend_url)
    summary = jury_batch(tmp_path)
    config = {"councils": {"default": {"members": ["fake/alpha", "fake/beta"], "chairman": "fake/alpha"}}}
    with TestClient(create_app(load_config(config)), base_url="http://127.0.0.1") as client:
        got = client.get("/v1/batches/jury")
        assert got.status_code == 200, got.text
        assert got.json() == summary
        missing = client.get("/v1/batches/nope")
        assert missing.status_code == 404 and "no batch 'nope'" in missing.json()["error"]["message"]
        unknown_map = client.get("/v1/batches/jury", params={"calibration": "none-such"})
        assert unknown_map.status_code in (400, 404) and "none-such" in unknown_map.json()["error"]["message"]


async def test_the_mcp_tool_gives_the_summary_with_its_panel(tmp_path, council_home):
    pytest.importorskip("mcp")
    from mcp import Client
    from mcp_stdio import mcp_server

    summary = await asyncio.to_thread(jury_batch, tmp_path)  # the CLI runs its own event loop
    config = tmp_path / "council.toml"
    config.write_text('[councils.default]\nmembers = ["fake/alpha", "fake/beta"]\nchairman = "fake/alpha"\n')
    async with Client(mcp_server(config, council_home)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "panel" in tools["council_batch"].output_schema["properties"]
        got = await client.call_tool("council_batch", {"batch_id": "jury"})
        assert not got.is_error, got.content
        assert got.structured_content == summary
        text = got.content[0].text
        assert all(f"- {judge}: decides" in text for judge in JUDGES)
        assert f"n_eff (independent judges, 95% interval): {summary['panel']['n_eff']:.2f}" in text
        assert f"ECE {summary['calibration']['ece']:.3f}" in text
        missing = await client.call_tool("council_batch", {"batch_id": "nope"})
        assert missing.is_error and missing.content[0].text.startswith("error: ")
