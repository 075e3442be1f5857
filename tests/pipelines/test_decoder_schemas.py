"""The judges' output schemas state every structural rule, so a constrained decoder
(llama.cpp's grammar, strict structured output) produces valid passes by construction."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

from council.providers.json_schema import inline_refs
from council.judging.engine import GENERAL_CRITERIA
from council.judging.rubrics import DEPTH_CRITERIA, load_bias_checklist, load_rubric
from council.judging.schemas import JudgeReasoning, pairwise_pass_model, rubric_grade_model
from council.providers.grammar import (
    MAX_FREE_ITEMS,
    REASONING_CHARS,
    SHORT_TEXT_CHARS,
    constrain_schema_for_grammar,
    json_schema_gbnf,
)
from council.session.schemas import peer_review_schema

JUDGE_SCHEMAS = {
    "pairwise": pairwise_pass_model(GENERAL_CRITERIA).model_json_schema(),
    "pairwise-depth-no-tie": pairwise_pass_model(DEPTH_CRITERIA, (1, 10), False).model_json_schema(),
    "pairwise-checklist": pairwise_pass_model(
        ["a criterion with spaces", "ünïcödé"], bias_checklist=load_bias_checklist()
    ).model_json_schema(),
    "grade": rubric_grade_model(load_rubric("general"), load_bias_checklist()).model_json_schema(),
}


def _objects(node: Any, path: str = "$"):
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            yield path, node
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    yield from _objects(sub, f"{path}.{name}")
            else:
                yield from _objects(value, path)
    elif isinstance(node, list):
        for item in node:
            yield from _objects(item, path)


@pytest.mark.parametrize("name", JUDGE_SCHEMAS)
def test_every_object_is_closed_and_fully_required(name):
    # What OpenAI's strict mode requires of every object, and what makes "each criterion exactly
    # once" a property of the schema: all keys required, no others allowed.
    schema = inline_refs(JUDGE_SCHEMAS[name])
    for path, obj in _objects(schema):
        assert obj.get("additionalProperties") is False, path
        assert sorted(obj.get("required", [])) == sorted(obj["properties"]), path
    text = json.dumps(schema)
    for keyword in ("uniqueItems", "patternProperties", "minProperties", "if", "not"):
        assert f'"{keyword}"' not in text, keyword


@pytest.mark.parametrize("name", JUDGE_SCHEMAS)
def test_llama_cpp_compiles_the_constrained_schema(name):
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar", reason="needs the 'local' extra")
    constrained = constrain_schema_for_grammar(JUDGE_SCHEMAS[name], max_string_length=400)
    gbnf = json_schema_gbnf(constrained)
    assert llama_grammar.LlamaGrammar.from_string(gbnf, verbose=False) is not None


def _walk(node: Any, name: str = ""):
    if isinstance(node, dict):
        yield name, node
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for prop, sub in value.items():
                    yield from _walk(sub, prop)
            else:
                yield from _walk(value, name)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item, name)


def test_the_grammar_bounds_every_field_and_keeps_reasoning_in_words():
    constrained = constrain_schema_for_grammar(JUDGE_SCHEMAS["pairwise"], max_string_length=400)
    seen = set()
    for name, node in _walk(constrained):
        if node.get("type") == "string" and "enum" not in node:
            cap = REASONING_CHARS if "reasoning" in name else SHORT_TEXT_CHARS
            assert node["maxLength"] <= cap, name
            if "reasoning" in name:
                assert "pattern" in node, name
                seen.add("pattern")
        if node.get("type") == "array":
            assert node["maxItems"] <= MAX_FREE_ITEMS, name
        if name == "confidence":
            assert node["enum"][0] == 0 and node["enum"][-1] == 1 and len(node["enum"]) == 21
            seen.add("confidence")
        if name in ("a_score", "b_score"):
            assert node["enum"] == [1, 2, 3, 4, 5]
    assert seen == {"pattern", "confidence"}


REASONING_PATTERN = next(
    node["pattern"]
    for name, node in _walk(constrain_schema_for_grammar(JUDGE_SCHEMAS["grade"], max_string_length=400))
    if name == "reasoning"
)
REASONING = TypeAdapter(JudgeReasoning)


@given(st.from_regex(REASONING_PATTERN, fullmatch=True, alphabet=st.characters(codec="ascii")))
def test_every_reasoning_the_grammar_allows_is_valid(text):
    # The constrained schema accepts a subset of what the validator accepts.
    assert REASONING.validate_python(text)


@pytest.mark.parametrize(
    "text, allowed",
    [
        ("Both answers name Paris; A adds the date.", True),
        ("La réponse A cite la date, donc elle est meilleure.", True),
        ("{${${${${${${${${${${${", False),
        ("............", False),
        ("12345 678910 11", False),
        ("ok", False),
        (" leading space is refused", False),
    ],
)
def test_reasoning_pattern_examples(text, allowed):
    assert (re.fullmatch(REASONING_PATTERN, text) is not None) is allowed


def test_peer_review_ranking_is_an_enum_of_permutations_under_the_grammar():
    constrained = constrain_schema_for_grammar(peer_review_schema(("A", "B", "C"), (1, 10)), max_string_length=200)
    ranking = constrained["properties"]["ranking"]
    assert len(ranking["enum"]) == 6 and all(sorted(r) == ["A", "B", "C"] for r in ranking["enum"])


def _bias_checks(constrained: dict[str, Any]) -> list[dict[str, Any]]:
    checks = constrained["properties"]["bias_checklist"]["properties"]
    assert checks
    return list(checks.values())


@pytest.mark.parametrize("name", ["grade", "pairwise-checklist"])
def test_under_the_grammar_a_detected_bias_always_has_a_note(name):
    # A tiny local judge wrote {"note": "", "detected": true} three times in a row for a response
    # file ending in a newline, and `council grade` failed: the validator requires the note
    # (schemas.BiasCheck), and the grammar let the decoder leave it out.
    from jsonschema import Draft202012Validator

    constrained = constrain_schema_for_grammar(JUDGE_SCHEMAS[name], max_string_length=400)
    for check in _bias_checks(constrained):
        validator = Draft202012Validator(check)
        assert not validator.is_valid({"note": "", "detected": True})
        assert not validator.is_valid({"note": "   ", "detected": True})
        assert validator.is_valid({"note": "", "detected": False})
        assert validator.is_valid({"note": "Answer B is longer, so I checked.", "detected": True})
        assert validator.is_valid({"note": "Answer B is longer, so I checked.", "detected": False})


def _detected_note_patterns() -> set[str]:
    checks = _bias_checks(constrain_schema_for_grammar(JUDGE_SCHEMAS["grade"], max_string_length=400))
    return {
        branch["properties"]["note"]["pattern"]
        for check in checks
        for branch in check.get("anyOf", [])
        if "pattern" in branch["properties"]["note"]
    }


@given(st.data())
def test_every_note_the_grammar_allows_for_a_detected_bias_is_valid(data):
    from council.judging.schemas import rubric_grade_model

    (pattern,) = _detected_note_patterns()
    note = data.draw(st.from_regex(pattern, fullmatch=True, alphabet=st.characters(codec="ascii")))
    model = rubric_grade_model(load_rubric("general"), load_bias_checklist())
    check = model.model_fields["bias_checklist"].annotation
    item_type = next(iter(check.model_fields.values())).annotation
    assert item_type.model_validate({"note": note, "detected": True}).note == note
