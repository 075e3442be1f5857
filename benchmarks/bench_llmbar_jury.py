"""Benchmark: LLMBar's five published evaluators replayed as a jury through ``council batch``,
combined by the vote and by Dawid–Skene, against the labels (issue 58).

    python benchmarks/bench_llmbar_jury.py

LLMBar (Zeng et al., 2024) publishes, for its 419 human-verified pairs (Natural and the four
Adversarial sets), the verdicts of GPT-4, PaLM2, ChatGPT, LLaMA2 and Falcon in both orders; the
extract in ``tests/data/llmbar`` keeps them (its README says how it was made). Each evaluator
becomes a judge that gives, for each pass, its published verdict for that pair in that order (a
verdict LLMBar could not parse: an invalid reply, so that judge fails on that pair); the texts are
stand-ins of the outputs' lengths. The batch runs through ``council.judging.batch.run_batch``
(what ``council batch`` calls) with the consistency strategy and ``--combine dawid-skene``, in a
throwaway store; each result line also keeps the vote's verdict (``judges_verdict``), what
``--combine vote`` gives. It prints both combinations' accuracy against the labels, the panel
(each judge's accuracy per order and of its own verdict, the plain majority per order, n_eff with
its interval, Krippendorff's α), the time, and whether the goal holds: Dawid–Skene, which reads
no label, at least as accurate as the best single judge's verdict over both orders.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import bench_common  # noqa: F401  (puts the package and tests/ on sys.path)


def main() -> None:
    from batch_files import LLMBAR_EVALUATORS, llmbar_jury
    from fake_judges import replaying_judge

    from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch
    from council.storage import SQLiteStore

    print("$ python benchmarks/bench_llmbar_jury.py" + "".join(f" {a}" for a in sys.argv[1:]))
    rows, seen = llmbar_jury()
    text = "".join(json.dumps(r) + "\n" for r in rows)
    judges = [f"fake/{e.lower()}" for e in LLMBAR_EVALUATORS]
    clients = [replaying_judge(j, seen[e], 6 * len(rows)) for j, e in zip(judges, LLMBAR_EVALUATORS, strict=True)]
    with tempfile.TemporaryDirectory() as home:
        output = Path(home) / "results.jsonl"
        started = time.perf_counter()
        summary = asyncio.run(
            run_batch(parse_batch(text, "llmbar.jsonl"), settings=BatchSettings(judges=judges, combine="dawid-skene"),
                      judges=clients, batch_id="llmbar", source="llmbar.jsonl", content_sha256=content_digest(text),
                      store=SQLiteStore.open(Path(home) / "council.db"), output=output, concurrency=32)  # fmt: skip
        )
        wall = time.perf_counter() - started
        lines = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    panel = summary.panel
    n = len(lines)
    both = {
        e: sum(seen[e][(r["a"], r["b"])] == r["label"] and seen[e][(r["b"], r["a"])] == {"A": "B", "B": "A"}[r["label"]]
               for r in rows)  # fmt: skip
        for e in LLMBAR_EVALUATORS
    }
    print(f"{n} pairs, {len(judges)} judges, strategy consistency, {summary.calls} calls in {wall:.1f} s")
    print(f"{'judge':10} {'A first':>8} {'B first':>8} {'both':>8} {'its verdict':>12}")
    for e, judge in zip(LLMBAR_EVALUATORS, panel.judges, strict=True):
        order = judge.accuracy_per_order
        print(f"{e:10} {order.a_first:8.1%} {order.b_first:8.1%} {both[e] / n:8.1%} {judge.accuracy:12.1%}")
    combined = sum(line["result"]["winner"] == line["label"] for line in lines)
    vote = sum(line["result"]["judges_verdict"]["winner"] == line["label"] for line in lines)
    best = max(both.values())
    print(f"--combine dawid-skene (no label read): {combined} of {n} = {combined / n:.1%}")
    print(f"--combine vote:                        {vote} of {n} = {vote / n:.1%}")
    by_order = panel.majority_accuracy_per_order
    print(f"plain majority, A first / B first:     {by_order.a_first:.1%} / {by_order.b_first:.1%}, "
          f"mean {panel.majority_accuracy:.1%}")  # fmt: skip
    print(f"best single judge, both orders:        {best} of {n} = {best / n:.1%}")
    low, high = panel.n_eff_ci
    print(f"n_eff {panel.n_eff:.2f} [{low:.2f}, {high:.2f}] of {panel.n_eff_judges}, mean error correlation "
          f"{panel.mean_error_correlation:.3f}, Krippendorff's α {panel.krippendorff_alpha:.3f}")  # fmt: skip
    print(f"goal (Dawid–Skene ≥ the best single judge over both orders): {'met' if combined >= best else 'NOT met'}")


if __name__ == "__main__":
    main()
