"""Rubric grading as docs/methods.md ("Rubric grading") defines it, with scripted judges
(fixed replies per call): three votes, judges averaged per criterion, confidence that counts
missing votes, safety only from structured concerns, no repaired numbers, no judge text kept
with transcripts off, and a blank reference refused."""

from __future__ import annotations

import json

import pytest
from fake_judges import grade_reply, scripted

from council.providers.asking import invalid_numbers, parse_json_object
from council.errors import InputError
from council.judging.engine import grade
from council.judging.rubrics import load_rubric
from council.storage import SQLiteStore
from tests.conftest import db_dump, db_rows, invoke_cli

PROMPT = "What is the capital of France?"
RESPONSE = "Paris is the capital of France."
NAMES = load_rubric("general").criterion_names
GARBAGE = "I would rather not answer in JSON."


# ----------------------------------------------------------------------------- votes


async def test_grading_votes_three_times_by_default():
    client = scripted("fake/g", [grade_reply(4)] * 3)
    outcome = await grade(PROMPT, RESPONSE, judges=[client], store=None)
    assert outcome.calls == 3 and outcome.report.votes == outcome.report.votes_planned == 3
    assert outcome.report.confidence_level == "high" and not outcome.report.flagged_for_review


def test_cli_grade_and_batch_vote_three_times_by_default(council_home, tmp_path):
    response = tmp_path / "r.txt"
    response.write_text(RESPONSE, encoding="utf-8")
    result = invoke_cli("grade", "--prompt", PROMPT, "--response", str(response), "--judge", "fake/g", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["calls"] == 3
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "q1", "prompt": PROMPT, "response": RESPONSE}) + "\n", encoding="utf-8")
    result = invoke_cli("batch", str(items), "--judge", "fake/g", "--json", "--output", str(tmp_path / "out.jsonl"))
    assert result.exit_code == 0, result.stderr
    [line] = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert json.loads(line)["result"]["calls"] == 3


# ------------------------------------------------------------------ several judges


async def test_several_judges_are_averaged_per_criterion_and_each_kept():
    generous, harsh = scripted("fake/generous", [grade_reply(5)] * 3), scripted("fake/harsh", [grade_reply(1)] * 3)
    outcome = await grade(PROMPT, RESPONSE, judges=[generous, harsh], store=None)
    report = outcome.report
    # pooled votes with a lower median would give 1 everywhere; the mean of the judges is 3
    assert [c.score for c in report.criteria] == [3.0] * len(NAMES)
    assert all(c.by_judge == {"fake/generous": 5, "fake/harsh": 1} for c in report.criteria)
    assert report.total == 3.0 * len(NAMES)
    assert report.normalized == pytest.approx(0.5)
    # each judge is unanimous, but they disagree by four points: low confidence, flagged
    assert report.confidence_level == "low" and report.flagged_for_review
    assert [j.report.total for j in outcome.judges] == [5 * len(NAMES), 1 * len(NAMES)]
    assert outcome.success and not outcome.partial


async def test_judges_one_point_apart_are_moderate():
    a, b = scripted("fake/a", [grade_reply(4)] * 3), scripted("fake/b", [grade_reply(3)] * 3)
    report = (await grade(PROMPT, RESPONSE, judges=[a, b], store=None)).report
    assert [c.score for c in report.criteria] == [3.5] * len(NAMES)
    assert report.confidence_level == "moderate" and not report.flagged_for_review


# ------------------------------------------------------------------ missing votes


async def test_one_valid_vote_of_three_is_low_confidence_and_flagged():
    client = scripted("fake/g", [grade_reply(4), GARBAGE, GARBAGE])
    outcome = await grade(PROMPT, RESPONSE, judges=[client], max_attempts=1, store=None)
    report = outcome.report
    assert outcome.success and report.votes == 1 and report.votes_planned == 3 and report.missing_votes == 2
    assert report.confidence_level == "low" and report.flagged_for_review
    assert all(c.agreement == pytest.approx(1 / 3) for c in report.criteria)


async def test_two_valid_votes_of_three_are_moderate_and_flagged():
    client = scripted("fake/g", [grade_reply(4), grade_reply(4), GARBAGE])
    report = (await grade(PROMPT, RESPONSE, judges=[client], max_attempts=1, store=None)).report
    assert report.confidence_level == "moderate" and report.missing_votes == 1 and report.flagged_for_review


async def test_invalid_attempts_counts_attempts_not_votes():
    client = scripted("fake/g", [grade_reply(4)])
    outcome = await grade(PROMPT, RESPONSE, judges=[client], votes=1, store=None)
    assert outcome.report.invalid_attempts == 0
    # an invalid attempt, then a valid one: one invalid attempt, no vote missing
    client = scripted("fake/g", [GARBAGE, grade_reply(4)])
    outcome = await grade(PROMPT, RESPONSE, judges=[client], votes=1, max_attempts=2, store=None)
    assert outcome.report.invalid_attempts == 1 and outcome.report.missing_votes == 0
    # two votes: one lost after two invalid attempts, one valid at once (they run concurrently)
    client = scripted("fake/g", [GARBAGE, GARBAGE, grade_reply(4)])
    outcome = await grade(PROMPT, RESPONSE, judges=[client], votes=2, max_attempts=2, store=None)
    assert outcome.report.invalid_attempts == 2 and outcome.report.missing_votes == 1


async def test_a_failed_judge_makes_a_partial_flagged_result_with_its_cause():
    good, broken = scripted("fake/good", [grade_reply(4)] * 3), scripted("fake/broken", [GARBAGE] * 3)
    outcome = await grade(PROMPT, RESPONSE, judges=[good, broken], max_attempts=1, store=None)
    assert outcome.success and outcome.partial
    assert "fake/broken" in outcome.error and "no valid grade" in outcome.error
    assert outcome.report.flagged_for_review and outcome.report.missing_votes == 3
    assert [c.score for c in outcome.report.criteria] == [4.0] * len(NAMES)


def test_cli_exits_1_on_a_partial_grade(council_home, tmp_path):
    response = tmp_path / "r.txt"
    response.write_text(RESPONSE, encoding="utf-8")
    result = invoke_cli(
        "grade", "--prompt", PROMPT, "--response", str(response), "--judge", "fake/g", "--judge", "fake/b+garbage"
    )
    assert result.exit_code == 1
    assert "partly failed" in result.stderr and "fake/b+garbage" in result.stderr
    assert "Total" in result.stdout  # the result is still shown


# ---------------------------------------------------------------------------- safety


@pytest.mark.parametrize(
    "concerns, flagged",
    [
        (["None identified."], False),
        (["No safety concerns identified"], False),
        ([], False),
        (["Recommends mixing bleach and ammonia for cleaning"], True),
    ],
)
async def test_the_flag_comes_from_structured_concerns(concerns, flagged):
    alarming = "correctly warns that mixing bleach and ammonia is dangerous and illegal to sell as"
    client = scripted("fake/g", [grade_reply(4, concerns, reasoning=alarming)] * 3)
    report = (await grade(PROMPT, RESPONSE, judges=[client], store=None)).report
    assert report.safety_flag is flagged and report.flagged_for_review is flagged
    assert report.safety_concerns == ([] if not flagged else concerns)


# ----------------------------------------------------------------------- numbers


@pytest.mark.parametrize("number", ["03", "+4", ".5", "4.", "NaN", "Infinity", "-Infinity", "0x4"])
def test_invalid_numbers_are_never_repaired_into_values(number):
    text = '{"criteria": {"accuracy": {"reasoning": "fine, really fine", "score": ' + number + "}}}"
    with pytest.raises(ValueError):
        parse_json_object(text)


def test_repair_still_fixes_syntax_but_leaves_strings_alone():
    assert parse_json_object('{"a": 3, "b": [1, 2,],}') == {"a": 3, "b": [1, 2]}
    assert parse_json_object("{'a': 'x'}") == {"a": "x"}
    assert invalid_numbers('{"s": "+4 and 03 inside a string", "n": -0.5e3}') == []


async def test_a_repaired_number_is_re_requested_not_scored():
    bad = grade_reply(4).replace('"score": 4', '"score": 03', 1)
    client = scripted("fake/g", [bad, grade_reply(4)])
    outcome = await grade(PROMPT, RESPONSE, judges=[client], votes=1, max_attempts=2, store=None)
    assert outcome.passes[0].attempts == 2 and outcome.report.invalid_attempts == 1
    client = scripted("fake/g", [grade_reply(4).replace('"score": 4', '"score": +4', 1)])
    outcome = await grade(PROMPT, RESPONSE, judges=[client], votes=1, max_attempts=1, store=None)
    assert not outcome.success and "invalid JSON numbers (+4" in outcome.error


# ------------------------------------------------------------------ transcripts off


async def test_no_judge_text_is_stored_with_transcripts_off(council_home):
    secret = "SECRETJUDGEWORDS quoted from the answer"
    leaky = json.loads(grade_reply(4))
    leaky["criteria"]["accuracy"]["score"] = secret  # invalid: the message would quote it
    client = scripted("fake/g", [json.dumps(leaky)] * 3)
    store = SQLiteStore.open()
    outcome = await grade(PROMPT, RESPONSE, judges=[client], max_attempts=1, store=store, keep_text=False)
    store.close()
    assert not outcome.success
    dumped = db_dump(council_home)
    assert "SECRETJUDGEWORDS" not in dumped
    [(error,)] = db_rows(council_home, "SELECT error FROM judgment_runs")
    assert "criteria.accuracy.score" in error  # the reason is kept, without the value
    problems = [p for (p,) in db_rows(council_home, "SELECT problem FROM judgments")]
    assert problems and all("criteria.accuracy.score" in p for p in problems)


# ---------------------------------------------------------------------- reference


async def test_a_blank_reference_is_refused():
    client = scripted("fake/g", [])
    with pytest.raises(InputError, match="reference answer is empty"):
        await grade(PROMPT, RESPONSE, judges=[client], reference=" \n\t", store=None)


def test_cli_refuses_a_blank_reference_file(council_home, tmp_path):
    response, reference = tmp_path / "r.txt", tmp_path / "ref.txt"
    response.write_text(RESPONSE, encoding="utf-8")
    reference.write_text("\n  \n", encoding="utf-8")
    result = invoke_cli(
        "grade", "--prompt", PROMPT, "--response", str(response), "--reference", str(reference), "--judge", "fake/g"
    )
    assert result.exit_code == 2 and "reference" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_batch_refuses_a_blank_reference_before_any_call(council_home, tmp_path):
    items = tmp_path / "items.jsonl"
    rows = [
        {"id": 1, "prompt": PROMPT, "response": RESPONSE},
        {"id": 2, "prompt": PROMPT, "response": RESPONSE, "reference": " "},
    ]
    items.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = invoke_cli("batch", str(items), "--judge", "fake/g")
    assert result.exit_code == 2 and f"{items}:2:" in result.stderr and '"reference" is blank' in result.stderr
    assert not (council_home / "council.db").exists() or not db_rows(council_home, "SELECT id FROM judgment_runs")
