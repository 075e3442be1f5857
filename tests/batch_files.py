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


LLMBAR = Path(__file__).resolve().parent / "data" / "llmbar"
LLMBAR_EVALUATORS = ("GPT-4", "PaLM2", "ChatGPT", "LLaMA2", "Falcon")


def llmbar_jury() -> tuple[list[dict[str, Any]], dict[str, dict[tuple[str, str], str | None]]]:
    """LLMBar's 419 labelled pairs (tests/data/llmbar) as batch items, their texts stand-ins of the
    outputs' lengths (the extract keeps no text), and per evaluator its published verdict as seen
    for (text shown first, text shown second): None where LLMBar parsed none."""
    import csv

    flip = {"A": "B", "B": "A"}
    rows: list[dict[str, Any]] = []
    seen: dict[str, dict[tuple[str, str], str | None]] = {e: {} for e in LLMBAR_EVALUATORS}
    with (LLMBAR / "verdicts.csv").open(newline="", encoding="utf-8") as fh:
        for pair in csv.DictReader(fh):
            a = f"{pair['id']} output 1 ".ljust(int(pair["length_a"]), ".")
            b = f"{pair['id']} output 2 ".ljust(int(pair["length_b"]), ".")
            rows.append({"id": pair["id"], "prompt": "Follow the instruction.", "a": a, "b": b,
                         "label": pair["label"].upper()})  # fmt: skip
            for e in LLMBAR_EVALUATORS:
                first, second = pair[f"{e}.ab"].upper(), pair[f"{e}.ba"].upper()
                seen[e][(a, b)] = first or None  # output_1 shown first: as it is
                seen[e][(b, a)] = flip[second] if second else None  # output_2 first: its "A" is output_2
    return rows, seen
