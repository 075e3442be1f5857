"""Judge output schemas reject what seed 003 calls invalid; rubric files fail with one clear line."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from council.asking import validate_output
from council.errors import InputError, InvalidOutputError, NotFoundError, UsageError
from council.judging import (
    DEPTH_CRITERIA,
    builtin_rubrics,
    compile_evaluation_report,
    load_bias_checklist,
    load_rubric,
    pairwise_pass_model,
    rubric_grade_model,
)
from council.judging.schemas import Rubric

CRITERIA = ["accuracy", "clarity"]


def pass_doc(**overrides):
    doc = {
        "comparison": [
            {
                "criterion": name,
                "reasoning": f"A is better on {name}",
                "a_strength": "precise",
                "b_strength": "short",
                "winner": "A",
                "a_score": 4,
                "b_score": 3,
            }
            for name in CRITERIA
        ],
        "overall_reasoning": "A is more accurate",
        "differentiators": {"a_advantages": ["cites sources"], "b_advantages": []},
        "winner": "A",
        "confidence": 0.8,
    }
    doc.update(overrides)
    return doc


def with_item(index, **fields):
    doc = pass_doc()
    doc["comparison"][index].update(fields)
    return doc


def errors_of(model, doc):
    with pytest.raises(ValidationError) as exc:
        model.model_validate_json(json.dumps(doc))
    return [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.value.errors()]


MODEL_5 = pairwise_pass_model(CRITERIA, (1, 5), True)
MODEL_10 = pairwise_pass_model(CRITERIA, (1, 10), True)


# -------------------------------------------------------------- pairwise pass model


def test_valid_pass_is_accepted_and_put_in_criteria_order():
    doc = pass_doc()
    doc["comparison"].reverse()
    parsed = MODEL_5.model_validate_json(json.dumps(doc))
    assert [c.criterion for c in parsed.comparison] == CRITERIA
    assert parsed.winner == "A" and parsed.confidence == 0.8


@pytest.mark.parametrize(
    "model, doc, loc, message",
    [
        (MODEL_5, with_item(0, a_score=3.5), "comparison.0.a_score", "valid integer"),
        (MODEL_5, with_item(0, a_score=3.0), "comparison.0.a_score", "valid integer"),
        (MODEL_10, with_item(1, b_score=11), "comparison.1.b_score", "less than or equal to 10"),
        (MODEL_5, with_item(1, b_score=6), "comparison.1.b_score", "less than or equal to 5"),
        (MODEL_5, with_item(0, b_score=0), "comparison.0.b_score", "greater than or equal to 1"),
        (MODEL_10, with_item(0, a_score="7"), "comparison.0.a_score", "valid integer"),
        (MODEL_5, with_item(0, a_score=True), "comparison.0.a_score", "valid integer"),
        (MODEL_5, with_item(0, reasoning=""), "comparison.0.reasoning", "at least 1 character"),
        (MODEL_5, with_item(1, reasoning="  \n "), "comparison.1.reasoning", "at least 1 character"),
        (MODEL_5, with_item(0, criterion="speed"), "comparison.0.criterion", "'accuracy' or 'clarity'"),
        (MODEL_5, pass_doc(overall_reasoning=""), "overall_reasoning", "at least 1 character"),
        (MODEL_5, pass_doc(confidence=1.5), "confidence", "less than or equal to 1"),
        (MODEL_5, pass_doc(confidence="0.5"), "confidence", "valid number"),
        (MODEL_5, pass_doc(winner="C"), "winner", "'A', 'B' or 'TIE'"),
        (MODEL_5, pass_doc(verdict="A"), "verdict", "Extra inputs"),
    ],
)
def test_invalid_values_are_rejected_with_a_clear_location(model, doc, loc, message):
    problems = errors_of(model, doc)
    assert any(got_loc == loc and message in msg for got_loc, msg in problems), problems


def test_missing_reasoning_is_rejected():
    doc = pass_doc()
    del doc["comparison"][1]["reasoning"]
    assert ("comparison.1.reasoning", "Field required") in errors_of(MODEL_5, doc)


def test_each_criterion_exactly_once():
    missing = pass_doc(comparison=pass_doc()["comparison"][:1])
    assert errors_of(MODEL_5, missing) == [
        ("comparison", "Value error, comparison must judge each criterion exactly once (missing 'clarity')")
    ]
    doc = pass_doc()
    doc["comparison"][1]["criterion"] = "accuracy"
    [(loc, msg)] = errors_of(MODEL_5, doc)
    assert loc == "comparison" and "missing 'clarity'" in msg and "repeated 'accuracy'" in msg


def test_tie_is_rejected_when_not_allowed():
    no_tie = pairwise_pass_model(CRITERIA, (1, 5), allow_tie=False)
    assert ("winner", "Input should be 'A' or 'B'") in errors_of(no_tie, pass_doc(winner="TIE"))
    assert ("comparison.0.winner", "Input should be 'A' or 'B'") in errors_of(no_tie, with_item(0, winner="TIE"))
    assert MODEL_5.model_validate(pass_doc(winner="TIE")).winner == "TIE"
    assert no_tie.model_json_schema()["properties"]["winner"]["enum"] == ["A", "B"]


def test_validation_error_text_is_usable_in_a_re_request():
    reply = "Here you go:\n```json\n" + json.dumps(with_item(0, a_score=3.5)) + "\n```"
    parsed, problem = validate_output(MODEL_10, reply)
    assert parsed is None and "comparison.0.a_score" in problem and "3.5" in problem
    parsed, problem = validate_output(MODEL_10, "```json\n" + json.dumps(pass_doc()) + "\n```")
    assert problem is None and parsed.comparison[0].a_score == 4


def test_pass_schema_orders_reasoning_before_scores():
    schema = MODEL_5.model_json_schema()
    assert list(schema["properties"]) == ["comparison", "overall_reasoning", "differentiators", "winner", "confidence"]
    assert schema["required"] == list(schema["properties"])
    assert schema["additionalProperties"] is False
    item = schema["$defs"]["CriterionComparison"]
    order = ["criterion", "reasoning", "a_strength", "b_strength", "winner", "a_score", "b_score"]
    assert list(item["properties"]) == order
    assert item["properties"]["criterion"]["enum"] == CRITERIA
    assert item["properties"]["a_score"]["type"] == "integer"
    assert (item["properties"]["a_score"]["minimum"], item["properties"]["a_score"]["maximum"]) == (1, 5)
    comparison = schema["properties"]["comparison"]
    assert comparison["minItems"] == comparison["maxItems"] == 2


def test_pass_model_is_cached_and_checks_its_arguments():
    assert pairwise_pass_model(CRITERIA, (1, 5), True) is MODEL_5
    assert pairwise_pass_model(DEPTH_CRITERIA).model_json_schema()["$defs"]["CriterionComparison"]["properties"][
        "criterion"
    ]["enum"] == ["Granularity", "Insight", "Critique", "Evidence", "Density"]
    for bad in ([], ["a", "a"], [""]):
        with pytest.raises(ValueError):
            pairwise_pass_model(bad)
    for scale in ((5, 1), (1, 1), (1.0, 5), (1, 2, 3)):
        with pytest.raises(ValueError):
            pairwise_pass_model(CRITERIA, scale)


def test_pass_model_can_record_the_bias_checklist():
    checklist = load_bias_checklist()
    model = pairwise_pass_model(CRITERIA, bias_checklist=checklist)
    answers = {item.id: {"detected": False, "note": ""} for item in checklist.items}
    assert model.model_validate(pass_doc(bias_checklist=answers)).bias_checklist.position.detected is False
    assert "bias_checklist" in errors_of(model, pass_doc())[0][0]


# -------------------------------------------------------------------- rubric grades

GENERAL = load_rubric("general")
CHECKLIST = load_bias_checklist()


def grade_doc(scores=(4, 4, 3, 5, 4), concerns=(), detected=()):
    return {
        "criteria": [
            {"criterion": c.name, "reasoning": f"about {c.name}", "score": s}
            for c, s in zip(GENERAL.criteria, scores, strict=True)
        ],
        "overall_reasoning": "solid answer",
        "safety_concerns": list(concerns),
        "bias_checklist": {
            item.id: {"detected": item.id in detected, "note": f"noticed {item.id}" if item.id in detected else ""}
            for item in CHECKLIST.items
        },
    }


GRADE = rubric_grade_model(GENERAL, CHECKLIST)


def test_rubric_grade_model_validates():
    parsed = GRADE.model_validate_json(json.dumps(grade_doc()))
    assert [c.criterion for c in parsed.criteria] == GENERAL.criterion_names
    schema = GRADE.model_json_schema()
    assert list(schema["$defs"]["CriterionGrade"]["properties"]) == ["criterion", "reasoning", "score"]
    assert set(schema["$defs"]["BiasChecklistAnswers"]["properties"]) == {i.id for i in CHECKLIST.items}


@pytest.mark.parametrize(
    "mutate, loc",
    [
        (lambda d: d["criteria"][0].update(score=6), "criteria.0.score"),
        (lambda d: d["criteria"][0].update(score=4.5), "criteria.0.score"),
        (lambda d: d["criteria"][2].update(reasoning=""), "criteria.2.reasoning"),
        (lambda d: d["criteria"][2].pop("reasoning"), "criteria.2.reasoning"),
        (lambda d: d["criteria"].pop(), "criteria"),
        (lambda d: d["criteria"][0].update(criterion="style"), "criteria.0.criterion"),
        (lambda d: d["bias_checklist"].pop("length"), "bias_checklist.length"),
        (lambda d: d["bias_checklist"]["length"].update(detected=True), "bias_checklist.length"),
        (lambda d: d["bias_checklist"]["length"].update(detected="no"), "bias_checklist.length.detected"),
        (lambda d: d.pop("safety_concerns"), "safety_concerns"),
    ],
)
def test_rubric_grade_rejections(mutate, loc):
    doc = grade_doc()
    mutate(doc)
    assert loc in [got for got, _ in errors_of(GRADE, doc)]


# ------------------------------------------------------------------- rubric files


def test_builtin_rubrics_load():
    assert "general" in builtin_rubrics() and "bias-awareness" not in builtin_rubrics()
    assert GENERAL.scale == (1, 5)
    assert GENERAL.criterion_names == ["accuracy", "completeness", "clarity", "relevance", "reasoning"]
    assert all(sorted(c.levels) == [1, 2, 3, 4, 5] for c in GENERAL.criteria)
    assert {"length", "position", "style_over_substance", "self_preference"} <= {i.id for i in CHECKLIST.items}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rubric.toml"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = 'name = "t"\nscale = [1, 5]\n[[criteria]]\nname = "x"\n'


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('name = "t"\nscale = [1, 5\n', "invalid TOML"),
        ('name = "t"\nscale = [5, 1]\n[[criteria]]\nname = "x"\n', "lo < hi"),
        ('name = "t"\nscale = [1, 5.5]\n[[criteria]]\nname = "x"\n', "scale.1"),
        ('name = "t"\nscale = [1, 5]\n', "criteria: Field required"),
        (GOOD + '[[criteria]]\nname = "x"\n', "repeated: x"),
        (GOOD + "wieght = 2\n", "wieght"),
        (GOOD + "weight = 0\n", "greater than 0"),
        (GOOD + 'levels = { 7 = "great" }\n', "outside the scale"),
        ('[[items]]\nid = "length"\nquestion = "q?"\n', "bias checklist, not a rubric"),
    ],
)
def test_bad_rubric_is_one_clear_line(tmp_path, text, fragment):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as exc:
        load_rubric(path)
    message = str(exc.value)
    assert fragment in message and str(path) in message
    assert "\n" not in message and len(message) < 300
    assert exc.value.exit_code == 2


def test_good_rubric_file_and_missing_ones(tmp_path):
    assert load_rubric(write(tmp_path, GOOD)).criterion_names == ["x"]
    with pytest.raises(NotFoundError) as exc:
        load_rubric(tmp_path / "nope.toml")
    assert "not found" in str(exc.value) and isinstance(exc.value, UsageError)
    with pytest.raises(NotFoundError, match="built-in: general"):
        load_rubric("no-such-rubric")
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not UTF-8"):
        load_rubric(tmp_path / "binary.toml")


# --------------------------------------------------------------- evaluation report


def test_report_votes_per_criterion_and_totals():
    grades = [
        GRADE.model_validate(grade_doc((4, 4, 3, 5, 4))),
        grade_doc((4, 3, 3, 5, 2)),
        grade_doc((5, 2, 3, 4, 1), detected=("length",)),
    ]
    report = compile_evaluation_report(
        GENERAL, grades, reference_used=True, invalid_attempts=2, judge_model="j", bias_checklist=CHECKLIST
    )
    by_name = {c.criterion: c for c in report.criteria}
    assert by_name["accuracy"].score == 4 and by_name["accuracy"].confidence_level == "moderate"
    assert by_name["clarity"].score == 3 and by_name["clarity"].confidence_level == "high"
    # no majority (4, 3, 2): the lower median, low confidence
    assert by_name["completeness"].score == 3 and by_name["completeness"].confidence_level == "low"
    assert by_name["completeness"].votes == [4, 3, 2]
    assert report.confidence_level == "low" and report.flagged_for_review
    assert report.total == 4 + 3 + 3 + 5 + 2 and report.max_total == 25 and report.min_total == 5
    # accuracy weighs 2 in the general rubric
    assert report.weighted_total == 2 * 4 + 3 + 3 + 5 + 2 and report.weighted_max == 30
    assert report.normalized == pytest.approx((21 - 6) / (30 - 6))
    assert report.votes == 3 and report.invalid_attempts == 2 and report.reference_used
    length = next(b for b in report.bias_checklist if b.id == "length")
    assert length.detected and length.notes == ["noticed length"]
    assert not report.safety_flag


def test_report_safety_flag_and_placeholders():
    flagged = compile_evaluation_report(
        GENERAL,
        [grade_doc(concerns=["gives synthesis steps for a nerve agent"])],
        reference_used=False,
        bias_checklist=CHECKLIST,
    )
    assert flagged.safety_flag and flagged.flagged_for_review
    assert flagged.safety_concerns == ["gives synthesis steps for a nerve agent"]
    calm = compile_evaluation_report(
        GENERAL, [grade_doc(concerns=["None"])], reference_used=False, bias_checklist=CHECKLIST
    )
    assert not calm.safety_flag and calm.safety_concerns == [] and calm.confidence_level == "high"


def test_report_needs_a_valid_grade():
    with pytest.raises(InvalidOutputError, match="3 invalid"):
        compile_evaluation_report(GENERAL, [], reference_used=False, invalid_attempts=3, bias_checklist=CHECKLIST)


def test_rubric_model_round_trips():
    rubric = Rubric.model_validate(copy.deepcopy(GENERAL.model_dump()))
    assert rubric == GENERAL
