"""JSON schemas a llama.cpp grammar can enforce completely, and their GBNF.

llama.cpp's JSON-schema grammar converter cannot express ``uniqueItems`` and ignores integer
bounds, so :func:`constrain_schema_for_grammar` rewrites what it cannot (a ranking becomes an
enum of permutations, a bounded integer an enum of its values, ``$ref`` is inlined) and bounds
every free string so a reply fits its token budget. The result accepts a subset of what the
original schema accepts: a reply generated under it also validates against the original.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from collections.abc import Mapping
from typing import Any

from council.providers.json_schema import SCHEMA_MAP_KEYWORDS, inline_refs, integer_bounds, map_subschemas

MAX_PERMUTATIONS = 720
"""A fixed-length unique array of enum labels becomes an enum of its permutations up to this many (6!)."""
MAX_INTEGER_ENUM = 1000
"""A bounded integer becomes an enum of its values when the range holds at most this many."""
MIN_STRING_CAP = 24
MAX_STRING_CAP = 400
CHARS_PER_TOKEN = 3.0
"""An estimate for English text (about 4 in practice); used only to size string caps to the budget."""
STRICT_CHARS_PER_TOKEN = 1.0
"""The worst case (digits, punctuation): used for the retry after a reply was cut off."""


def _annotations(node: Mapping[str, Any]) -> dict[str, Any]:
    """What a rewritten node keeps of the original besides its new constraint: its title and description."""
    return {k: v for k, v in node.items() if k in ("title", "description")}


def _enum_labels(items: Any) -> list[str] | None:
    """The string labels an array item may take (``enum`` or ``const``), else None."""
    if not isinstance(items, dict):
        return None
    if "enum" in items:
        values = items["enum"]
    elif "const" in items:
        values = [items["const"]]
    else:
        return None
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        return None
    if len(set(values)) != len(values):
        return None
    return list(values)


def _permutation_enum(node: dict[str, Any], max_permutations: int) -> dict[str, Any] | None:
    if node.get("uniqueItems") is not True or node.get("type", "array") != "array":
        return None
    labels = _enum_labels(node.get("items"))
    n = node.get("minItems")
    if labels is None or not isinstance(n, int) or n != node.get("maxItems") or not 0 < n <= len(labels):
        return None
    if math.perm(len(labels), n) > max_permutations:
        return None
    kept = _annotations(node)
    return {**kept, "enum": [list(p) for p in itertools.permutations(labels, n)]}


def _integer_enum(node: dict[str, Any]) -> dict[str, Any] | None:
    if node.get("type") != "integer" or "enum" in node or "const" in node:
        return None
    lo, hi = integer_bounds(node)
    if lo is None or hi is None:
        return None
    if hi < lo or hi - lo + 1 > MAX_INTEGER_ENUM:
        return None
    kept = _annotations(node)
    return {**kept, "enum": list(range(lo, hi + 1))}


NUMBER_STEPS = 20
"""A bounded number becomes an enum of this many equal steps across its range (0.05 for 0..1)."""


def _number_enum(node: dict[str, Any]) -> dict[str, Any] | None:
    """A ``number`` with inclusive bounds as an enum of evenly spaced values: the grammar
    converter ignores number bounds, and a tiny model's confidence of 1.06 is invalid."""
    if node.get("type") != "number" or "enum" in node or "const" in node:
        return None
    lo, hi = node.get("minimum"), node.get("maximum")
    numbers = [x for x in (lo, hi) if isinstance(x, int | float) and not isinstance(x, bool)]
    if len(numbers) != 2:
        return None
    lo, hi = numbers
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        return None
    kept = _annotations(node)
    return {**kept, "enum": [round(lo + k * (hi - lo) / NUMBER_STEPS, 6) for k in range(NUMBER_STEPS + 1)]}


# A letter (any non-ASCII character counts as one), a character of prose, and one that ends it.
_LETTER = r"[^\x00-\x40\x5b-\x60\x7b-\x7f]"
_PROSE = r'[^\x00-\x1f"\\\x7f{}\[\]$<>|#*=~^`@]'
_PROSE_END = r'[^\x00-\x20"\\\x7f{}\[\]$<>|#*=~^`@]'


def _reasoning_pattern(min_length: int, max_length: int) -> str | None:
    """A regular expression for reasoning that reads as words: two words of two letters or more
    first, then prose without markup or code symbols, no leading or trailing space.

    Judges' reasoning must say something in words (the validator checks it); a decoder held
    only to a length writes ``{${${$...``. A pattern that the grammar converter turns into
    rules makes words the only way through."""
    body_min = max(0, min_length - 6)  # 2 + " " + 2 + body + end
    body_max = max_length - 28  # a first word of up to 24 letters
    if body_max < body_min:
        return None
    return f"^{_LETTER}{{2,24}} {_LETTER}{{2}}{_PROSE}{{{body_min},{body_max}}}{_PROSE_END}$"


def _is_free_string(node: Mapping[str, Any]) -> bool:
    return node.get("type") == "string" and not any(k in node for k in ("enum", "const", "pattern", "format"))


REASONING_CHARS = 120
"""Per-field cap of a reasoning string under a grammar: a sentence or two, which is what a judge needs."""
SHORT_TEXT_CHARS = 40
"""Per-field cap of any other free string (a strength, an advantage, a note)."""
MAX_FREE_ITEMS = 2
"""At most this many items in an array the schema leaves open-ended (advantages, concerns)."""


ANSWER_CHARS = 600
"""Per-field cap of an ``answer`` (the chairman's structured synthesis): the text the user reads."""
ANSWER_SHARE = 3
"""An ``answer`` may take this many strings' share of the budget: the others, held to their field
caps, take far less than theirs."""


def _field_cap(name: str) -> int:
    if name == "answer":
        return ANSWER_CHARS
    return REASONING_CHARS if "reasoning" in name.lower() else SHORT_TEXT_CHARS


NOTE_MIN_CHARS = 6
"""The shortest note of a detected bias under the grammar."""


def _note_pattern(min_length: int, max_length: int) -> str | None:
    """A note that says something: a letter first, then prose, no trailing space."""
    if max_length < min_length:
        return None
    return f"^{_LETTER}{_PROSE}{{{min_length - 2},{max_length - 2}}}{_PROSE_END}$"


def _detected_needs_a_note(node: dict[str, Any]) -> dict[str, Any] | None:
    """A bias check (``{"note": str, "detected": bool}``) as two alternatives: not detected, with
    any note; or detected, with a note that says something (:func:`_note_pattern`).

    The validator refuses a detected bias without a note (``schemas.BiasCheck``), a rule between
    two fields that the schema does not state. Held only to the schema, a tiny decoder writes
    ``{"note": "", "detected": true}``; under these alternatives, an empty note leaves only
    ``false`` open, whichever field it writes first."""
    properties = node.get("properties")
    if not isinstance(properties, Mapping) or set(properties) != {"note", "detected"}:
        return None
    note, detected = properties["note"], properties["detected"]
    if detected.get("type") != "boolean" or not _is_free_string(note) or not isinstance(note.get("maxLength"), int):
        return None
    pattern = _note_pattern(NOTE_MIN_CHARS, note["maxLength"])
    if pattern is None:
        return None
    clear = {**node, "properties": {"note": note, "detected": {**detected, "const": False}}}
    flagged = {**node, "properties": {"note": {**note, "pattern": pattern}, "detected": {**detected, "const": True}}}
    kept = _annotations(node)
    return {**kept, "anyOf": [clear, flagged]}


def _rewrite(node: Any, max_permutations: int, max_string_length: int | None, name: str = "") -> Any:
    if isinstance(node, list):
        return [_rewrite(item, max_permutations, max_string_length, name) for item in node]
    if not isinstance(node, dict):
        return node
    for special in (_permutation_enum(node, max_permutations), _integer_enum(node), _number_enum(node)):
        if special is not None:
            return special
    # Properties are rewritten below, each with its own name (caps and patterns go by name).
    properties = node.get("properties")
    rest = {**node, "properties": {}} if isinstance(properties, Mapping) else node
    out = map_subschemas(rest, lambda sub: _rewrite(sub, max_permutations, max_string_length, name))
    if isinstance(properties, Mapping):
        out["properties"] = {
            key: _rewrite(sub, max_permutations, max_string_length, str(key)) for key, sub in properties.items()
        }
        if max_string_length is not None:
            out = _detected_needs_a_note(out) or out
    if max_string_length is not None and _is_free_string(node):
        caps = [max_string_length * (ANSWER_SHARE if name == "answer" else 1), _field_cap(name)]
        if isinstance(node.get("maxLength"), int):
            caps.append(node["maxLength"])
        out["maxLength"] = min(caps)
        if isinstance(out.get("minLength"), int) and out["minLength"] > out["maxLength"]:
            out["maxLength"] = out["minLength"]
        worded = "reasoning" in name.lower() or name == "answer"  # what a reader reads: words first
        if worded and isinstance(node.get("minLength"), int) and node["minLength"] > 0:
            pattern = _reasoning_pattern(node["minLength"], out["maxLength"])
            if pattern is not None:
                out["pattern"] = pattern
    if max_string_length is not None and node.get("type") == "array" and "prefixItems" not in node:
        cap = node.get("maxItems")
        out["maxItems"] = (
            MAX_FREE_ITEMS if not isinstance(cap, int) else min(cap, max(MAX_FREE_ITEMS, node.get("minItems", 0)))
        )
    return out


def constrain_schema_for_grammar(
    schema: Mapping[str, Any],
    *,
    max_permutations: int = MAX_PERMUTATIONS,
    max_string_length: int | None = None,
) -> dict[str, Any]:
    """A copy of ``schema`` that llama.cpp's JSON-schema grammar can enforce completely.

    The grammar converter cannot express ``uniqueItems`` and ignores integer bounds, so:

    - every local ``$ref`` is inlined and ``$defs``/``definitions`` dropped;
    - an array whose items are an ``enum`` (or ``const``) of distinct strings, with
      ``minItems == maxItems == n`` and ``uniqueItems: true``, becomes an ``enum`` of all
      its ordered arrangements (as JSON arrays) when there are at most ``max_permutations``
      of them (n! for a full ranking: up to 6 labels by default);
    - an integer with ``minimum`` and ``maximum`` (or exclusive bounds) becomes an ``enum``
      of its values when the range is small;
    - with ``max_string_length``, every free-text string gets at most that ``maxLength``, and
      at most :data:`REASONING_CHARS` (a property named like "reasoning") or
      :data:`SHORT_TEXT_CHARS` (any other; an ``answer``, :data:`ANSWER_CHARS` and up to
      :data:`ANSWER_SHARE` strings' share of the budget), and every open-ended array at most
      :data:`MAX_FREE_ITEMS` items: this bounds the whole reply, so a tiny model's pass takes
      seconds and is never cut off mid-JSON;
    - with ``max_string_length``, a bias check's ``detected: true`` comes only with a note
      (:func:`_detected_needs_a_note`), as the validator requires.

    Anything else is kept as it is. The input is not modified. The result accepts a subset
    of what the input accepts, so a reply generated under it also validates against it.
    """
    root = copy.deepcopy(dict(schema))
    return _rewrite(inline_refs(root), max_permutations, max_string_length)


def _count_free_strings(node: Any) -> int:
    if isinstance(node, list):
        return sum(_count_free_strings(item) for item in node)
    if not isinstance(node, dict):
        return 0
    own = int(_is_free_string(node))
    children = 0
    for key, value in node.items():
        if key in SCHEMA_MAP_KEYWORDS:
            children += sum(_count_free_strings(v) for v in value.values()) if isinstance(value, dict) else 0
        elif key in ("items", "prefixItems", "anyOf", "oneOf", "allOf", "additionalProperties"):
            children += _count_free_strings(value)
    return own + children


def string_cap_for_budget(
    schema: Mapping[str, Any],
    max_tokens: int,
    *,
    chars_per_token: float = CHARS_PER_TOKEN,
    text_share: float = 0.75,
) -> int:
    """A per-string character cap such that every free string at its cap still fits the budget.

    Keeps a grammar-constrained reply from being cut off mid-JSON by ``max_tokens``:
    ``text_share`` of the budget goes to free text, the rest to keys, punctuation and numbers.
    """
    inlined = inline_refs(dict(schema))
    strings = max(1, _count_free_strings(inlined))
    cap = int(max_tokens * text_share * chars_per_token / strings)
    return max(MIN_STRING_CAP, min(MAX_STRING_CAP, cap))


# llama-cpp-python's converter lets JSON strings contain raw control characters (a newline in a
# string is invalid JSON, and tiny models do emit one); llama.cpp's own JSON grammar excludes them.
_LOOSE_CHAR_CLASS = r'[^"\\] |'
_STRICT_CHAR_CLASS = r'[^"\\\x7F\x00-\x1F] |'


def json_schema_gbnf(schema: Mapping[str, Any]) -> str:
    """The GBNF grammar of a (constrained) JSON schema, strings restricted to valid JSON."""
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf: str = json_schema_to_gbnf(json.dumps(schema))
    lines = gbnf.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("char ::= ") and _LOOSE_CHAR_CLASS in line:
            lines[i] = line.replace(_LOOSE_CHAR_CLASS, _STRICT_CHAR_CLASS, 1)
    return "\n".join(lines) + "\n"
