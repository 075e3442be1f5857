"""Rebuild ``labelled_pairs.jsonl`` from PandaLM's human-annotated test set (see README.md here).

    python benchmarks/data/select_labelled_pairs.py PATH/TO/testset-v1.json > benchmarks/data/labelled_pairs.jsonl

The rule, applied in this order: all three annotators gave the same non-tie verdict; the
instruction is not blank; instruction + input ≤ 300 characters; each response 15-350
characters; one item per instruction (the lowest idx); then, for each label, a fixed-seed
random sample of PER_LABEL items. Output order: A-labelled and B-labelled items alternate
(each in idx order), so any prefix (``--limit N`` of the benchmark) holds both directions.
"""

from __future__ import annotations

import json
import math
import random
import sys
from typing import Any

PER_LABEL = 8
SEED = 2023
LABELS = {1: "A", 2: "B"}


def text(value: Any) -> str:
    """A field's text; the file writes a missing input as NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def select(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    pool: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for row in sorted(rows, key=lambda r: r["idx"]):
        votes = {row["annotator1"], row["annotator2"], row["annotator3"]}
        instruction, given = text(row["instruction"]), text(row["input"])
        if len(votes) != 1 or not votes <= set(LABELS) or not instruction:
            continue
        if len(instruction) + len(given) > 300 or instruction in seen:
            continue
        if not all(15 <= len(text(row[k])) <= 350 for k in ("response1", "response2")):
            continue
        seen.add(instruction)
        pool[row["annotator1"]].append(row)
    rng = random.Random(SEED)
    chosen = {label: sorted(rng.sample(pool[label], PER_LABEL), key=lambda r: r["idx"]) for label in LABELS}
    return [row for pair in zip(*chosen.values(), strict=True) for row in pair]


def batch_item(row: dict[str, Any]) -> dict[str, Any]:
    instruction, given = text(row["instruction"]), text(row["input"])
    return {
        "id": f"pandalm-{row['idx']}",
        "prompt": f"{instruction}\n\n{given}" if given else instruction,
        "a": text(row["response1"]),
        "b": text(row["response2"]),
        "label": LABELS[row["annotator1"]],
        "metadata": {
            "source": "PandaLM testset-v1",
            "idx": row["idx"],
            "annotators": [row["annotator1"], row["annotator2"], row["annotator3"]],
            "cmp_key": row["cmp_key"],
        },
    }


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as fh:
        rows = json.load(fh)  # Python's json reads the file's NaN
    for row in select(rows):
        print(json.dumps(batch_item(row), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
