"""A judge's reply is validated from its own JSON text when it parses as is, instead of being
decoded, encoded and decoded again: the validator accepts and rejects exactly what it did
through the round trip, with the same values and the same reasons."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, StrictInt, ValidationError
from test_judging_schemas import CRITERIA, pass_doc

from council.providers.asking import check_output, describe_validation_error, parse_json_object
from council.judging import pairwise_pass_model

PASS = pairwise_pass_model(CRITERIA, (1, 5), True)


class Small(BaseModel):
    n: StrictInt
    x: float = 0.0
    s: str = ""


def round_trip(model: type[BaseModel], text: str) -> tuple[Any, str | None]:
    """What check_output did before: parse, encode again, validate the encoded text."""
    try:
        data = parse_json_object(text)
    except ValueError as exc:
        return None, str(exc)
    try:
        return model.model_validate_json(json.dumps(data)), None
    except ValidationError as exc:
        return None, describe_validation_error(exc)


class Raw:
    """A value written into the reply as this exact JSON text."""

    def __init__(self, text: str) -> None:
        self.text = text


class Twice:
    """A key written twice, with both values (JSON allows it; the last one counts)."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second


def dump(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            for one in (item.first, item.second) if isinstance(item, Twice) else (item,):
                parts.append(f"{json.dumps(key)}: {dump(one)}")
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dump(v) for v in value) + "]"
    return json.dumps(value)


def leaf_paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [path, *(p for k, v in value.items() for p in leaf_paths(v, (*path, k)))]
    if isinstance(value, list):
        return [path, *(p for i, v in enumerate(value) for p in leaf_paths(v, (*path, i)))]
    return [path]


PATHS = [p for p in leaf_paths(pass_doc()) if p]
# Spellings that decode to the same value, values near a type's edges, and values no scale allows.
TOKENS = ["3", "3.0", "3.5", "-0", "-0.0", "1e0", "1E2", "1e400", "-1e400", "5.000000000000001", "12345678901234567890",
          "0.8", "1", "0", '"7"', '"A"', '"TIE"', '"B "', "true", "null", "[]", "{}", '"\\u0041"', '"\\ud800"',
          '"caf\\u00e9"', '"a\\"b\\\\c"', '""', '"   "', '"\\n"', "NaN", "-Infinity", '"NaN"']  # fmt: skip
EDITS = st.lists(
    st.tuples(st.sampled_from(PATHS), st.sampled_from(TOKENS), st.sampled_from(["set", "twice", "drop"])), max_size=4
)
WRAPS = st.sampled_from(["{}", "```json\n{}\n```", "Here it is: {} Hope that helps.", "{},", "{}}"])


def edited(edits: list[tuple[tuple[Any, ...], str, str]]) -> dict[str, Any]:
    doc = pass_doc()
    for path, token, how in edits:
        parent: Any = doc
        for step in path[:-1]:
            if isinstance(parent, dict) and step in parent and not isinstance(parent[step], (Raw, Twice)):
                parent = parent[step]
            elif isinstance(parent, list) and isinstance(step, int) and step < len(parent):
                parent = parent[step]
            else:
                break
        else:
            last = path[-1]
            if isinstance(parent, dict) and how == "drop":
                parent.pop(last, None)
            elif isinstance(parent, dict):
                old = parent.get(last, Raw("null"))
                old = old.second if isinstance(old, Twice) else old
                parent[last] = Twice(old, Raw(token)) if how == "twice" else Raw(token)
            elif isinstance(parent, list) and isinstance(last, int) and last < len(parent):
                parent[last] = Raw(token)
    return doc


def same_outcome(model: type[BaseModel], text: str) -> None:
    parsed, invalid = check_output(model, text)
    expected, reason = round_trip(model, text)
    assert (parsed is None) == (expected is None), (text, invalid, reason)
    if parsed is not None:
        assert repr(parsed.model_dump()) == repr(expected.model_dump())  # repr: NaN equals itself
    else:
        assert invalid is not None and invalid.full == reason


@given(edits=EDITS, wrap=WRAPS)
def test_a_judge_pass_is_accepted_and_rejected_as_through_the_round_trip(edits, wrap):
    same_outcome(PASS, wrap.replace("{}", dump(edited(edits)), 1))


@given(n=st.sampled_from(TOKENS), x=st.sampled_from(TOKENS), s=st.sampled_from(TOKENS), twice=st.booleans())
def test_numbers_and_strings_are_read_as_through_the_round_trip(n, x, s, twice):
    fields = f'"n": {n}, "x": {x}, "s": {s}' + (f', "n": {x}' if twice else "")
    same_outcome(Small, "{" + fields + "}")


def test_the_reply_text_is_validated_as_is_when_it_parses():
    text = dump(pass_doc())
    parsed, invalid = check_output(PASS, "Sure:\n```json\n" + text + "\n```")
    assert invalid is None and parsed.model_dump(mode="json") == PASS.model_validate_json(text).model_dump(mode="json")
    # A reply needing repair (a trailing comma) is validated from the repaired value, as before.
    parsed, invalid = check_output(Small, '{"n": 3, "x": 0.5,}')
    assert invalid is None and parsed == Small(n=3, x=0.5)
    # Duplicate keys: the last one counts, on both paths.
    parsed, invalid = check_output(Small, '{"n": 3, "n": 4}')
    assert invalid is None and parsed.n == 4
    # NaN is still refused before validation, and a float score is still no integer.
    assert check_output(Small, '{"n": 3, "x": NaN}')[1].full == "NaN is not a JSON number"
    assert check_output(Small, '{"n": 3.0}')[0] is None
