"""Rebuild tests/data/llmbar/ from a checkout or git snapshot of princeton-nlp/LLMBar.

LLMBar (https://github.com/princeton-nlp/LLMBar, MIT; Zeng et al., ICLR 2024) publishes, for each of
its five evaluation sets (Natural and the four Adversarial ones), the pairs with their human label
(``dataset.json``) and each evaluator's outputs in both orders
(``evaluators/<LLM>/<strategy>/result.json``) with their statistics (``statistics.json``). This
script keeps, for the five evaluators the paper compares (GPT-4, PaLM2, ChatGPT, LLaMA2, Falcon)
under the ``Vanilla`` strategy directory, only the verdicts:

- ``verdicts.csv``: one row per pair: ``id`` (subset/position), ``subset``, ``label`` (``a`` when
  output_1 is the better one, ``b`` when output_2 is), ``length_a``, ``length_b`` (characters of
  the two outputs; no texts), then ``<evaluator>.ab`` (output_1 shown first, LLMBar's
  ``swap = False``) and ``<evaluator>.ba`` (output_2 shown first): the output the evaluator
  preferred, ``a`` or ``b`` in the pair's own terms (LLMBar already maps the swapped pass back), or
  empty where LLMBar parsed no verdict;
- ``published.csv``: the published ``statistics.json`` counts for the same evaluators and sets
  (``correct_False``, ``correct_True``, ``correct_both``, ``equal``), so that the tests check the
  extract against them.

    python scripts/llmbar_extract.py GIT_DIR_OR_CHECKOUT [--commit HEAD] [--out tests/data/llmbar]

Every evaluator's rows are checked against ``dataset.json`` (same instruction, outputs and label,
in the same order) before anything is written.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

SUBSETS = {  # the name kept in the extract → its folder under Dataset/LLMBar
    "Natural": "Natural",
    "Neighbor": "Adversarial/Neighbor",
    "GPTInst": "Adversarial/GPTInst",
    "GPTOut": "Adversarial/GPTOut",
    "Manual": "Adversarial/Manual",
}
EVALUATORS = ("GPT-4", "PaLM2", "ChatGPT", "LLaMA2", "Falcon")
STRATEGY = "Vanilla"
ORDERS = {"ab": "swap = False", "ba": "swap = True"}
WINNER = {"1": "a", "2": "b"}
COUNTS = ("correct_False", "correct_True", "correct_both", "equal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a git directory (bare snapshot) or a checkout of LLMBar")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent.parent / "tests/data/llmbar")
    args = parser.parse_args()

    def read(path: str):
        done = subprocess.run(
            ["git", "-C", str(args.source), "show", f"{args.commit}:Dataset/LLMBar/{path}"], capture_output=True
        )
        if done.returncode:
            sys.exit(f"error: cannot read {path} at {args.commit}: {done.stderr.decode(errors='replace').strip()}")
        return json.loads(done.stdout)

    rows, published = [], []
    for subset, folder in SUBSETS.items():
        pairs = read(f"{folder}/dataset.json")
        subset_rows = [
            {
                "id": f"{subset}/{i}",
                "subset": subset,
                "label": WINNER[str(p["label"])],
                "length_a": len(p["output_1"]),
                "length_b": len(p["output_2"]),
            }
            for i, p in enumerate(pairs)
        ]
        for evaluator in EVALUATORS:
            where = f"{folder}/evaluators/{evaluator}/{STRATEGY}"
            results = read(f"{where}/result.json")
            if len(results) != len(pairs):
                sys.exit(f"error: {where} has {len(results)} rows for {len(pairs)} pairs")
            for row, pair, result in zip(subset_rows, pairs, results, strict=True):
                if any(result[k] != pair[k] for k in ("input", "output_1", "output_2", "label")):
                    sys.exit(f"error: {where} row {row['id']} is not the dataset's pair")
                final = result["results"][-1]  # what LLMBar's statistics count
                for order, key in ORDERS.items():
                    row[f"{evaluator}.{order}"] = WINNER.get(final[key]["winner"], "")
            stats = read(f"{where}/statistics.json")
            counts = {k: int(re.match(r"(\d+) / ", stats[k]).group(1)) for k in COUNTS}
            published.append({"subset": subset, "evaluator": evaluator, "pairs": len(pairs), **counts})
        rows += subset_rows

    args.out.mkdir(parents=True, exist_ok=True)
    for name, table in (("verdicts.csv", rows), ("published.csv", published)):
        with (args.out / name).open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(table[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(table)
    print(f"{len(rows)} pairs, {len(EVALUATORS)} evaluators -> {args.out}")


if __name__ == "__main__":
    main()
