"""llm-council-core's bias_metrics.jsonl (schema 1.2.x) read by ``council bias-report --records``.

The fixtures were written by llm-council-core's own record builder (see
tests/fixtures/llm_council_core/README.md). Expected values are computed here from the
raw JSON lines, not from our report.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from council.bias.foreign import detect_format
from council.bias.loading import iter_lines
from council.bias.report import report_from_records_files
from council.errors import InputError

FIXTURES = Path(__file__).parent / "fixtures" / "llm_council_core"
CURRENT = FIXTURES / "bias_metrics_1.2.jsonl"
OLD = FIXTURES / "bias_metrics_pre_1.2.jsonl"


def raw(path=CURRENT):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def cli(args):
    from council.cli.main import cli as main

    return CliRunner().invoke(main, args)


def test_the_fixture_is_what_the_issue_describes():
    lines = raw()
    assert {r["schema_version"] for r in lines} == {"1.2.0"}
    assert {r["score_scale"] for r in lines} == {"1-10"}
    assert all(isinstance(r["query_metadata"], dict) for r in lines)
    hashes = {r["query_hash"] for r in lines} - {None}
    assert hashes and all(len(h) == 16 for h in hashes)
    assert any(r["reviewer_id"] == r["model_id"] for r in lines)  # self-reviews
    assert sum(r["score_value"] == 0.0 for r in lines) == 1  # their "no score"
    assert detect_format(lines[0]) == "llm-council-core"


def test_mapping_record_by_record():
    lines = raw()
    parsed = list(iter_lines(CURRENT))
    assert len(parsed) == len(lines) and all(p.problem is None for p in parsed)
    for src, p in zip(lines, parsed, strict=True):
        r = p.record
        assert (r.session_id, r.reviewer_id, r.model_id, r.position) == (
            src["session_id"], src["reviewer_id"], src["model_id"], src["position"])
        assert (r.scale_min, r.scale_max) == (1, 10)
        assert r.self_review == (src["reviewer_id"] == src["model_id"])
        assert r.query_hash is None  # a 16-hex hash under their key cannot group with ours
        assert r.response_length_chars == src["response_length_chars"] and r.response_length_words is None
        assert p.scored == (src["score_value"] != 0.0)
        if p.scored:
            assert r.score_value == src["score_value"]
        assert "query_metadata" not in r.model_dump()


def test_report_from_their_records():
    lines = raw()
    scored = [r for r in lines if r["score_value"] != 0.0]
    report = report_from_records_files([CURRENT])
    assert report.total_records == len(scored) and report.unscored_records == 1
    assert report.score_scale == (1.0, 10.0)
    by_reviewer = defaultdict(list)
    for r in scored:
        by_reviewer[r["reviewer_id"]].append(r["score_value"])
    assert sorted(report.reviewers) == sorted(by_reviewer)
    for rid, scores in by_reviewer.items():
        assert report.reviewers[rid].mean == pytest.approx(round(statistics.mean(scores), 3))
        assert report.reviewers[rid].samples == len(scores)
    by_position = defaultdict(list)
    for r in scored:
        by_position[r["position"]].append(r["score_value"])
    assert report.position_bias.counts == {p: len(v) for p, v in sorted(by_position.items())}
    self_reviewers = {r["reviewer_id"] for r in scored if r["reviewer_id"] == r["model_id"]}
    assert set(report.self_preference) <= self_reviewers
    notes = " ".join(report.notes)
    assert "llm-council-core" in notes and "without a score" in notes and "query hashes dropped" in notes
    # their records carry characters only: by default the report counts characters and says so
    assert report.length_unit == "chars" and report.length_missing == 0 and "counts characters" in notes
    words = report_from_records_files([CURRENT], length_unit="words")  # asked for words: left out, said so
    assert words.length_missing > 0 and "no length in words" in " ".join(words.notes)
    assert report_from_records_files([CURRENT], length_unit="chars").length_missing == 0


def test_named_format_and_the_wrong_name(tmp_path):
    named = report_from_records_files([CURRENT], records_format="llm-council-core")
    assert named.total_records == report_from_records_files([CURRENT]).total_records
    with pytest.raises(InputError, match=r"bias_metrics_1\.2\.jsonl:1: .*raw text.*query_metadata"):
        report_from_records_files([CURRENT], records_format="council")


def test_pre_1_2_records_are_refused():
    with pytest.raises(InputError, match=r"pre_1\.2\.jsonl:1: .*1\.1\.0.*ranking"):
        report_from_records_files([OLD])
    report = report_from_records_files([OLD], skip_bad=True)
    assert report.total_records == 0 and report.skipped_lines == len(raw(OLD))


@pytest.mark.parametrize(("override", "problem"), [
    ({"score_value": "7"}, "score_value"),
    ({"score_value": True}, "score_value"),
    ({"position": 9}, "position 9 is beyond"),
    ({"score_scale": "ten"}, "score_scale"),
    ({"query_hash": "the question itself"}, "query_hash"),
    ({"schema_version": "2.0.0"}, "not supported"),
])
def test_their_records_are_validated_like_ours(tmp_path, override, problem):
    lines = raw()
    lines[0] = {**lines[0], **override}
    path = tmp_path / "bias_metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    with pytest.raises(InputError, match=rf"bias_metrics\.jsonl:1: .*{problem}"):
        report_from_records_files([path])


def test_cli_reads_them_and_prints_json():
    result = cli(["bias-report", "--records", str(CURRENT), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["unscored_records"] == 1 and data["reviewer_calibration_test"]["p_value"] is not None
    result = cli(["bias-report", "--records", str(OLD)])
    assert result.exit_code == 2 and "Traceback" not in result.output and "ranking" in result.output
