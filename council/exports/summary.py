"""The published JSON Schema of a batch's summary (``council batch --json``, ``batch results
--summary --json``, ``GET /v1/batches/{id}``, the MCP tool ``council_batch``): its keys and
types, the blocks present only where they apply (``panel``, ``combine``, ``calibration``,
``calibrated``, and the panel's keys that need labels) optional."""

from __future__ import annotations

from typing import Any

from council.exports.shapes import SCHEMA_URI

SUMMARY_SCHEMA = "batch-summary.schema.json"


def _untitled(node: Any) -> Any:
    if isinstance(node, list):
        return [_untitled(item) for item in node]
    if not isinstance(node, dict):
        return node
    kept = {k: _untitled(v) for k, v in node.items() if k not in ("title", "properties", "$defs")}
    for named in ("properties", "$defs"):  # maps of names to schemas: every name kept
        if named in node:
            kept[named] = {name: _untitled(sub) for name, sub in node[named].items()}
    return kept


def summary_schema() -> dict[str, Any]:
    """The schema (draft 2020-12) of a batch's summary, from its model: a key with a default may be
    absent (the optional blocks are left out where they do not apply)."""
    from council.judging.batch import BatchSummary

    # Validation mode: the summary's serializer leaves absent blocks out, which hides its keys from
    # the serialization schema; every key it writes is one of these.
    return {"$schema": SCHEMA_URI, "$id": SUMMARY_SCHEMA, **_untitled(BatchSummary.model_json_schema())}
