"""Batch files for tests, written once: a pairwise item, and a JSON Lines file of items."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def pair(i: int, **fields: Any) -> dict[str, Any]:
    """Pairwise item ``i`` (id ``item-i``); ``fields`` replace or add keys (``a="edited"``)."""
    return {"id": f"item-{i}", "prompt": f"Question {i}?", "a": f"Answer A {i}, with detail.", "b": f"B {i}.", **fields}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    """``rows`` as a JSON Lines file at ``path``."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
