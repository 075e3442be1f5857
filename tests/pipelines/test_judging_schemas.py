"""Judge output schemas reject what docs/methods.md calls invalid and state their structure in the
JSON schema itself; rubric files fail with one clear line."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from council.providers.asking import validate_output
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
from council.methods.verdicts import criterion_items

CRITERIA = ["accuracy", "clarity"]


def pass_doc(**overrides):
    doc = {
        "comparison": {
            name: {
                "reasoning": f"A is better on {name}",
                "a_strength": "precise",
                "b_strength": "short",
                "winner": "A",
                "a_score": 4,
                "b_score": 3,
            }
            for name in CRITERIA
        },
        "overall_reasoning": "A is more accurate",
        "differentiators": {"a_advantages": ["cites sources"], "b_advantages": []},
        "winner": "A",
        "confidence": 0.8,
    }
    doc.update(overrides)
    return doc


def with_item(index, **fields):
    doc = pass_doc()
    doc["comparison"][CRITERIA[index]].update(fields)
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
    doc["comparison"] = dict(reversed(doc["comparison"].items()))
    parsed = MODEL_5.model_validate_json(json.dumps(doc))
    assert list(criterion_items(parsed, "comparison")) == CRITERIA
    assert parsed.winner == "A" and parsed.confidence == 0.8
    dumped = parsed.model_dump(mode="json")
    assert set(dumped["comparison"]) == set(CRITERIA)  # dumped by criterion name, as the judge wrote it


@pytest.mark.parametrize(
    "model, doc, loc, message",
    [
        (MODEL_5, with_item(0, a_score=3.5), "comparison.accuracy.a_score", "valid integer"),
        (MODEL_5, with_item(0, a_score=3.0), "comparison.accuracy.a_score", "valid integer"),
        (MODEL_10, with_item(1, b_score=11), "comparison.clarity.b_score", "less than or equal to 10"),
        (MODEL_5, with_item(1, b_score=6), "comparison.clarity.b_score", "less than or equal to 5"),
        (MODEL_5, with_item(0, b_score=0), "comparison.accuracy.b_score", "greater than or equal to 1"),
        (MODEL_10, with_item(0, a_score="7"), "comparison.accuracy.a_score", "valid integer"),
        (MODEL_5, with_item(0, a_score=True), "comparison.accuracy.a_score", "valid integer"),
        (MODEL_5, with_item(0, reasoning=""), "comparison.accuracy.reasoning", "at least 12 characters"),
        (MODEL_5, with_item(1, reasoning="  \n "), "comparison.clarity.reasoning", "at least 12 characters"),
        (MODEL_5, with_item(1, reasoning="."), "comparison.clarity.reasoning", "at least 12 characters"),
        (MODEL_5, with_item(0, reasoning="............"), "comparison.accuracy.reasoning", "in words"),
        (MODEL_5, with_item(0, reasoning="12345 678910"), "comparison.accuracy.reasoning", "in words"),
        (MODEL_5, with_item(0, reasoning="aaaaaaaaaaaaaaa"), "comparison.accuracy.reasoning", "in words"),
        (MODEL_5, with_item(0, reasoning="alone " + "7 " * 500), "comparison.accuracy.reasoning", "in words"),
        (MODEL_5, pass_doc(overall_reasoning=""), "overall_reasoning", "at least 12 characters"),
        (MODEL_5, pass_doc(confidence=1.5), "confidence", "less than or equal to 1"),
        (MODEL_5, pass_doc(confidence="0.5"), "confidence", "valid number"),
        (MODEL_5, pass_doc(winner="C"), "winner", "'A', 'B' or 'TIE'"),
        (MODEL_5, pass_doc(verdict="A"), "verdict", "Extra inputs"),
    ],
)
def test_invalid_values_are_rejected_with_a_clear_location(model, doc, loc, message):
    problems = errors_of(model, doc)
    assert any(got_loc == loc and message in msg for got_loc, msg in problems), problems


@pytest.mark.parametrize("reasoning", ["two words", "first " + "7 " * 500 + "second", "двa слова"])
def test_reasoning_with_two_words_anywhere_is_enough(reasoning):
    parsed = MODEL_5.model_validate_json(json.dumps(with_item(0, reasoning=reasoning.ljust(12, "."))))
    assert criterion_items(parsed, "comparison")[CRITERIA[0]]["reasoning"] == reasoning.ljust(12, ".")


def test_missing_reasoning_is_rejected():
    doc = pass_doc()
    del doc["comparison"]["clarity"]["reasoning"]
    assert ("comparison.clarity.reasoning", "Field required") in errors_of(MODEL_5, doc)


def test_each_criterion_exactly_once():
    doc = pass_doc()
    del doc["comparison"]["clarity"]
    assert errors_of(MODEL_5, doc) == [("comparison.clarity", "Field required")]
    doc = pass_doc()
    doc["comparison"]["speed"] = doc["comparison"]["clarity"]
    assert ("comparison.speed", "Extra inputs are not permitted") in errors_of(MODEL_5, doc)
    # A criterion written twice: JSON keeps the last, so the other is missing.
    item = json.dumps(pass_doc()["comparison"]["accuracy"])
    text = json.dumps(pass_doc()).replace('"clarity":', '"accuracy":')
    assert item and ("comparison.clarity", "Field required") in [
        (".".join(map(str, e["loc"])), e["msg"]) for e in _errors_json(MODEL_5, text)
    ]


def _errors_json(model, text):
    with pytest.raises(ValidationError) as exc:
        model.model_validate_json(text)
    return exc.value.errors()


def test_reasoning_must_be_written_before_the_scores():
    doc = pass_doc()
    item = doc["comparison"]["accuracy"]
    doc["comparison"]["accuracy"] = {"a_score": 4, **{k: v for k, v in item.items() if k != "a_score"}}
    [(loc, msg)] = errors_of(MODEL_5, doc)
    assert loc == "comparison.accuracy" and "write 'reasoning' before 'a_score'" in msg
    late = {k: v for k, v in pass_doc().items() if k != "overall_reasoning"}
    late["overall_reasoning"] = "A is more accurate throughout"
    [(loc, msg)] = errors_of(MODEL_5, late)
    assert loc == "" and "write 'overall_reasoning' before 'winner', 'confidence'" in msg
    grade = grade_doc()
    first = grade["criteria"]["accuracy"]
    grade["criteria"]["accuracy"] = {"score": first["score"], "reasoning": first["reasoning"]}
    assert ("criteria.accuracy", "Value error, write 'reasoning' before 'score'") in errors_of(GRADE, grade)


def test_reasoning_order_is_checked_in_every_order_of_the_keys():
    """Every order of a criterion's keys, and of the reply's: refused exactly when a decided key
    comes before the reasoning, naming those keys in the order the model lists them."""
    item = pass_doc()["comparison"]["accuracy"]
    for order in itertools.permutations(item):
        doc = pass_doc()
        doc["comparison"]["accuracy"] = {key: item[key] for key in order}
        early = [k for k in ("winner", "a_score", "b_score") if order.index(k) < order.index("reasoning")]
        if early:
            message = "write 'reasoning' before " + ", ".join(repr(k) for k in early)
            assert [(loc, msg) for loc, msg in errors_of(MODEL_5, doc)] == [
                ("comparison.accuracy", f"Value error, {message}")
            ]
        else:
            assert MODEL_5.model_validate_json(json.dumps(doc)).winner == "A"
    top = pass_doc()
    for order in itertools.permutations(top):
        early = [k for k in ("winner", "confidence") if order.index(k) < order.index("overall_reasoning")]
        doc = {key: top[key] for key in order}
        if early:
            assert errors_of(MODEL_5, doc)[0][1].endswith(
                "write 'overall_reasoning' before " + ", ".join(repr(k) for k in early)
            )
        else:
            assert MODEL_5.model_validate_json(json.dumps(doc)).winner == "A"


def test_tie_is_rejected_when_not_allowed():
    no_tie = pairwise_pass_model(CRITERIA, (1, 5), allow_tie=False)
    assert ("winner", "Input should be 'A' or 'B'") in errors_of(no_tie, pass_doc(winner="TIE"))
    assert ("comparison.accuracy.winner", "Input should be 'A' or 'B'") in errors_of(
        no_tie, with_item(0, winner="TIE")
    )
    assert MODEL_5.model_validate(pass_doc(winner="TIE")).winner == "TIE"
    assert no_tie.model_json_schema()["properties"]["winner"]["enum"] == ["A", "B"]


def test_validation_error_text_is_usable_in_a_re_request():
    reply = "Here you go:\n```json\n" + json.dumps(with_item(0, a_score=3.5)) + "\n```"
    parsed, problem = validate_output(MODEL_10, reply)
    assert parsed is None and "comparison.accuracy.a_score" in problem and "3.5" in problem
    parsed, problem = validate_output(MODEL_10, "```json\n" + json.dumps(pass_doc()) + "\n```")
    assert problem is None and criterion_items(parsed, "comparison")["accuracy"]["a_score"] == 4


def test_pass_schema_states_every_rule_a_decoder_must_keep():
    schema = MODEL_5.model_json_schema()
    assert list(schema["properties"]) == ["comparison", "overall_reasoning", "differentiators", "winner", "confidence"]
    assert schema["required"] == list(schema["properties"])
    assert schema["additionalProperties"] is False
    comparison = schema["$defs"]["Comparison"]
    # every criterion once: a required key each, nothing else
    assert list(comparison["properties"]) == CRITERIA == comparison["required"]
    assert comparison["additionalProperties"] is False
    item = schema["$defs"]["CriterionComparison"]
    assert list(item["properties"]) == ["reasoning", "a_strength", "b_strength", "winner", "a_score", "b_score"]
    assert item["properties"]["reasoning"]["minLength"] == 12
    assert item["properties"]["a_score"]["type"] == "integer"
    assert (item["properties"]["a_score"]["minimum"], item["properties"]["a_score"]["maximum"]) == (1, 5)
    advantages = schema["$defs"]["Differentiators"]["properties"]["a_advantages"]
    assert advantages["maxItems"] == 5


def test_pass_model_is_cached_and_checks_its_arguments():
    assert pairwise_pass_model(CRITERIA, (1, 5), True) is MODEL_5
    assert pairwise_pass_model(DEPTH_CRITERIA).model_json_schema()["$defs"]["Comparison"]["required"] == [
        "Granularity",
        "Insight",
        "Critique",
        "Evidence",
        "Density",
    ]
    for bad in ([], ["a", "a"], [""]):
        with pytest.raises(ValueError):
            pairwise_pass_model(bad)
    for scale in ((5, 1), (1, 1), (1.0, 5), (1, 2, 3)):
        with pytest.raises(ValueError):
            pairwise_pass_model(CRITERIA, scale)


def test_pass_model_can_record_the_bias_checklist():
    checklist = load_bias_checklist()
    model = pairwise_pass_model(CRITERIA, bias_checklist=checklist)
    answers = {item.id: {"note": "", "detected": False} for item in checklist.items}
    assert model.model_validate(pass_doc(bias_checklist=answers)).bias_checklist.position.detected is False
    assert "bias_checklist" in errors_of(model, pass_doc())[0][0]


# -------------------------------------------------------------------- rubric grades

GENERAL = load_rubric("general")
CHECKLIST = load_bias_checklist()


def grade_doc(scores=(4, 4, 3, 5, 4), concerns=(), detected=()):
    return {
        "criteria": {
            c.name: {"reasoning": f"judged on {c.name}", "score": s}
            for c, s in zip(GENERAL.criteria, scores, strict=True)
        },
        "overall_reasoning": "a solid answer overall",
        "safety_concerns": list(concerns),
        "bias_checklist": {
            item.id: {"note": f"noticed {item.id}" if item.id in detected else "", "detected": item.id in detected}
            for item in CHECKLIST.items
        },
    }


GRADE = rubric_grade_model(GENERAL, CHECKLIST)


def test_rubric_grade_model_validates():
    parsed = GRADE.model_validate_json(json.dumps(grade_doc()))
    assert list(criterion_items(parsed, "criteria")) == GENERAL.criterion_names
    schema = GRADE.model_json_schema()
    assert list(schema["$defs"]["CriterionGrade"]["properties"]) == ["reasoning", "score"]
    assert schema["$defs"]["Criteria"]["required"] == GENERAL.criterion_names
    assert schema["$defs"]["Criteria"]["additionalProperties"] is False
    assert set(schema["$defs"]["BiasChecklistAnswers"]["properties"]) == {i.id for i in CHECKLIST.items}


@pytest.mark.parametrize(
    "mutate, loc",
    [
        (lambda d: d["criteria"]["accuracy"].update(score=6), "criteria.accuracy.score"),
        (lambda d: d["criteria"]["accuracy"].update(score=4.5), "criteria.accuracy.score"),
        (lambda d: d["criteria"]["clarity"].update(reasoning=""), "criteria.clarity.reasoning"),
        (lambda d: d["criteria"]["clarity"].update(reasoning="ok"), "criteria.clarity.reasoning"),
        (lambda d: d["criteria"]["clarity"].pop("reasoning"), "criteria.clarity.reasoning"),
        (lambda d: d["criteria"].pop("reasoning"), "criteria.reasoning"),
        (lambda d: d["criteria"].update(style=d["criteria"]["clarity"]), "criteria.style"),
        (lambda d: d.update(safety_concerns=["x"] * 6), "safety_concerns"),
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
        # a rubric states its scale: no silent 1-5
        ('name = "t"\n[[criteria]]\nname = "x"\n', "scale: Field required"),
        # weights are numbers, finite and bounded, so totals stay finite
        (GOOD + 'weight = "2"\n', "weight: Input should be a valid number"),
        (GOOD + "weight = true\n", "weight: Input should be a valid number"),
        (GOOD + "weight = 1e308\n", "less than or equal to 1000"),
        (GOOD + "weight = inf\n", "weight"),
        (GOOD + "weight = nan\n", "weight"),
        ('name = "t"\nscale = [1, 5]\n' + "".join(f'[[criteria]]\nname = "c{i}"\n' for i in range(2000)), "at most 50"),
        ('name = "t"\nscale = [1, 5]\n' + '[[criteria]]\nname = ""\nweight = "x"\n' * 30, "and 57 more"),
    ],
)
def test_bad_rubric_is_one_clear_line(tmp_path, text, fragment):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as exc:
        load_rubric(path)
    message = str(exc.value)
    assert fragment in message and str(path) in message
    assert "\n" not in message and len(message) <= 400
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
