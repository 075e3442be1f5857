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

from council.json_schema import SCHEMA_MAP_KEYWORDS, inline_refs, integer_bounds, map_subschemas

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
    kept = {k: v for k, v in node.items() if k in ("title", "description")}
    return {**kept, "enum": [list(p) for p in itertools.permutations(labels, n)]}


def _integer_enum(node: dict[str, Any]) -> dict[str, Any] | None:
    if node.get("type") != "integer" or "enum" in node or "const" in node:
        return None
    lo, hi = integer_bounds(node)
    if lo is None or hi is None:
        return None
    if hi < lo or hi - lo + 1 > MAX_INTEGER_ENUM:
        return None
    kept = {k: v for k, v in node.items() if k in ("title", "description")}
    return {**kept, "enum": list(range(lo, hi + 1))}


def _is_free_string(node: Mapping[str, Any]) -> bool:
    return node.get("type") == "string" and not any(k in node for k in ("enum", "const", "pattern", "format"))


def _rewrite(node: Any, max_permutations: int, max_string_length: int | None) -> Any:
    if isinstance(node, list):
        return [_rewrite(item, max_permutations, max_string_length) for item in node]
    if not isinstance(node, dict):
        return node
    for special in (_permutation_enum(node, max_permutations), _integer_enum(node)):
        if special is not None:
            return special
    out = map_subschemas(node, lambda sub: _rewrite(sub, max_permutations, max_string_length))
    if max_string_length is not None and _is_free_string(node):
        cap = node.get("maxLength")
        out["maxLength"] = max_string_length if not isinstance(cap, int) else min(cap, max_string_length)
        if isinstance(out.get("minLength"), int) and out["minLength"] > out["maxLength"]:
            out["maxLength"] = out["minLength"]
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
    - with ``max_string_length``, every free-text string gets that ``maxLength`` (or keeps a
      smaller one), which bounds the length of the whole reply.

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
