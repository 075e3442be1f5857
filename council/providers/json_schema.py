"""Reading the JSON Schemas we send to models: references and integer bounds.

The fake provider (which generates replies that fit a schema) and the local backend
(which turns a schema into a llama.cpp grammar) both need to follow local ``$ref``s and
to know an integer field's range; this is the one place that does either.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping
from typing import Any

# Keywords whose values are data, not schemas: never rewritten.
LITERAL_KEYWORDS = frozenset({"enum", "const", "default", "examples", "required"})
# Keywords whose values map arbitrary names (which may look like keywords) to schemas.
SCHEMA_MAP_KEYWORDS = frozenset({"properties", "patternProperties", "dependentSchemas"})


def resolve_pointer(root: Mapping[str, Any], ref: str) -> Any:
    """The node a local ``$ref`` (``#/$defs/Name``) points to in ``root``."""
    if not ref.startswith("#"):
        raise ValueError(f"unsupported $ref {ref!r} (only local references)")
    target: Any = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(target, Mapping) or part not in target:
            raise ValueError(f"unresolvable $ref {ref}")
        target = target[part]
    return target


def resolve_ref(root: Mapping[str, Any], schema: Any, *, max_hops: int = 32) -> Any:
    """``schema`` with its own top-level ``$ref`` chain followed (siblings of a ``$ref`` refine it)."""
    hops = 0
    while isinstance(schema, Mapping) and "$ref" in schema and hops < max_hops:
        target = resolve_pointer(root, schema["$ref"])
        extra = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **extra} if extra else target
        hops += 1
    return schema


def map_subschemas(node: Mapping[str, Any], visit: Callable[[Any], Any]) -> dict[str, Any]:
    """Apply ``visit`` to every sub-schema of ``node``; copy literal data untouched."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in LITERAL_KEYWORDS:
            out[key] = copy.deepcopy(value)
        elif key in SCHEMA_MAP_KEYWORDS and isinstance(value, Mapping):
            out[key] = {name: visit(sub) for name, sub in value.items()}
        else:
            out[key] = visit(value)
    return out


def inline_refs(schema: Any, root: Mapping[str, Any] | None = None, seen: tuple[str, ...] = ()) -> Any:
    """A copy of ``schema`` with every local ``$ref`` replaced by what it points to (no ``$defs`` left)."""
    root = schema if root is None else root
    if isinstance(schema, list):
        return [inline_refs(item, root, seen) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    ref = schema.get("$ref")
    local = isinstance(ref, str) and ref.startswith("#")
    rest = {k: v for k, v in schema.items() if k not in ("$defs", "definitions") and not (local and k == "$ref")}
    out = map_subschemas(rest, lambda sub: inline_refs(sub, root, seen))
    if isinstance(ref, str) and local:
        if ref in seen:
            raise ValueError(f"recursive $ref {ref} cannot be inlined")
        # Keywords next to a $ref refine it; the referenced schema's own come first.
        out = {**inline_refs(resolve_pointer(root, ref), root, (*seen, ref)), **out}
    return out


def integer_bounds(schema: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The inclusive integer range a schema allows (``minimum``/``maximum`` and their
    exclusive forms, fractional bounds rounded inwards); None where a side is open."""
    lows, highs = [], []
    for key, shift in (("minimum", 0), ("exclusiveMinimum", 1)):
        value = schema.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            lows.append(math.floor(value) + shift if shift else math.ceil(value))
    for key, shift in (("maximum", 0), ("exclusiveMaximum", 1)):
        value = schema.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            highs.append(math.ceil(value) - shift if shift else math.floor(value))
    return (max(lows) if lows else None, min(highs) if highs else None)
