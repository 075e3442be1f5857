"""Rebuild tests/data/alpaca_eval/ from a checkout or git snapshot of tatsu-lab/alpaca_eval.

AlpacaEval (https://github.com/tatsu-lab/alpaca_eval, Apache-2.0) keeps the judge's pairwise
annotations of many models against its baseline (gpt4_1106_preview) in
``results/<model>/weighted_alpaca_eval_gpt4_turbo/annotations.json`` and the published AlpacaEval
2.0 table in ``src/alpaca_eval/leaderboards/data_AlpacaEval_2/weighted_alpaca_eval_gpt4_turbo_leaderboard.csv``.
This script keeps only what the length-controlled win rate needs, in council's judgments format
(one JSON object a line: model_a = the baseline, model_b = the model, preference = P(B better) =
AlpacaEval's preference − 1, prompt_id, length_a, length_b in characters), gzip-compressed, and the
published rows of the models whose annotations are present.

    python scripts/alpaca_eval_extract.py GIT_DIR_OR_CHECKOUT [--out tests/data/alpaca_eval]

Reads with ``git show HEAD:PATH`` when given a git directory (files missing from a partial
snapshot are skipped), else from the working tree.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import subprocess
from pathlib import Path

ANNOTATOR = "weighted_alpaca_eval_gpt4_turbo"
TABLE = f"src/alpaca_eval/leaderboards/data_AlpacaEval_2/{ANNOTATOR}_leaderboard.csv"
COLUMNS = ("model", "win_rate", "length_controlled_winrate", "n_total", "avg_length", "mode")


def reader(source: Path):
    if (source / "HEAD").is_file() and not (source / ".git").exists():  # a bare git directory

        def read(path: str) -> bytes | None:
            done = subprocess.run(["git", "--git-dir", str(source), "show", f"HEAD:{path}"], capture_output=True)
            return done.stdout if done.returncode == 0 else None

    else:

        def read(path: str) -> bytes | None:
            p = source / path
            return p.read_bytes() if p.is_file() else None

    return read


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent.parent / "tests/data/alpaca_eval")
    args = parser.parse_args()
    read = reader(args.source)
    table = list(csv.DictReader(io.StringIO(read(TABLE).decode())))
    args.out.mkdir(parents=True, exist_ok=True)
    prompts: dict[str, int] = {}
    kept = []
    with gzip.GzipFile(args.out / "judgments.jsonl.gz", "wb", mtime=0) as gz:
        for row in table:
            model = row[""]
            raw = read(f"results/{model}/{ANNOTATOR}/annotations.json")
            if raw is None:
                continue
            kept.append({"model": model, **{k: row[k] for k in COLUMNS[1:]}})
            for a in json.loads(raw):
                pid = prompts.setdefault(a["instruction"], len(prompts))
                pref = a.get("preference")
                if a["generator_1"] == model or pref is None or pref != pref:
                    continue  # the baseline against itself (50 % by definition); items never judged
                line = {
                    "model_a": a["generator_1"],
                    "model_b": model,
                    # AlpacaEval's preference − 1 = P(model better); 0 was its old code for a tie
                    "preference": 0.5 if pref == 0 else round(pref - 1, 12),
                    "prompt_id": str(pid),
                    "length_a": len(a["output_1"] or ""),
                    "length_b": len(a["output_2"] or ""),
                }
                gz.write((json.dumps(line) + "\n").encode())
    with (args.out / "published.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(kept)
    print(f"{len(kept)} models, {len(prompts)} instructions -> {args.out}")


if __name__ == "__main__":
    main()
