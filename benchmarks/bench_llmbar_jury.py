"""Benchmark: LLMBar's five published evaluators replayed as a jury through ``council batch``,
combined by the vote and by Dawid–Skene, against the labels (issue 58).

    git clone https://github.com/princeton-nlp/LLMBar /tmp/LLMBar
    python benchmarks/bench_llmbar_jury.py --llmbar /tmp/LLMBar

LLMBar (Zeng et al., 2024) publishes, for its 419 human-verified pairs (Natural and the four
Adversarial sets), the verdicts of GPT-4, PaLM2, ChatGPT, LLaMA2 and Falcon under its ``Vanilla``
prompt in both orders. Each evaluator becomes a judge that gives, for each pass, its published
verdict for that pair in that order (an unparsed verdict, ``None``, is replayed as a TIE); the
batch runs through ``council.judging.batch.run_batch`` (what ``council batch`` calls) with the
consistency strategy, once with ``--combine vote`` and once with ``--combine dawid-skene``, in a
throwaway ``COUNCIL_HOME``. It prints the accuracy of each combination against the labels, the
panel (each judge's accuracy per order and over both, n_eff with its interval, Krippendorff's α)
and whether the goal holds: Dawid–Skene, which reads no label, at least as accurate as the best
single judge's verdict over both orders.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import bench_common  # noqa: F401  (puts the package and tests/ on sys.path)

SUBSETS = ("Natural", "Adversarial/Neighbor", "Adversarial/GPTInst", "Adversarial/GPTOut", "Adversarial/Manual")
EVALUATORS = ("GPT-4", "PaLM2", "ChatGPT", "LLaMA2", "Falcon")
FLIP = {"A": "B", "B": "A", "TIE": "TIE"}
AS_LABEL = {"1": "A", "2": "B", None: "TIE"}


def load(llmbar: Path, prompt: str) -> tuple[list[dict[str, Any]], dict[str, dict[tuple[str, str], str]]]:
    """The pairs as batch items, and per evaluator its verdict as seen for (text shown first, second)."""
    rows: list[dict[str, Any]] = []
    seen: dict[str, dict[tuple[str, str], str]] = {e: {} for e in EVALUATORS}
    for subset in SUBSETS:
        base = llmbar / "Dataset" / "LLMBar" / subset / "evaluators"
        results = {e: json.loads((base / e / prompt / "result.json").read_text(encoding="utf-8")) for e in EVALUATORS}
        for i, pair in enumerate(results["GPT-4"]):
            a, b = pair["output_1"], pair["output_2"]
            rows.append({"id": f"{subset}/{i}", "prompt": pair["input"], "a": a, "b": b,
                         "label": "A" if pair["label"] == 1 else "B"})  # fmt: skip
            for e in EVALUATORS:
                published = results[e][i]
                if published["input"] != pair["input"] or published["output_1"] != a:
                    raise SystemExit(f"{subset}: {e}'s results are not in GPT-4's order at pair {i}")
                orders = published["results"][0]
                seen[e][(a, b)] = AS_LABEL[orders["swap = False"]["winner"]]
                seen[e][(b, a)] = FLIP[AS_LABEL[orders["swap = True"]["winner"]]]
    return rows, seen


def replaying(evaluator: str, seen: dict[tuple[str, str], str], calls: int) -> Any:
    """A judge that gives ``evaluator``'s published verdict for the pair in the order shown."""
    from fake_judges import scripted

    from council.testing.replies import FakeResponder, answer_slots

    responder = FakeResponder()

    def reply(request: Any) -> str:
        document = json.loads(responder.reply("fake/replay", request.messages, json_schema=request.json_schema,
                                              schema_name=request.schema_name))  # fmt: skip
        slots = answer_slots(request.messages)
        document["winner"] = seen[(slots["A"], slots["B"])]
        return json.dumps(document)

    return scripted(f"fake/{evaluator.lower()}", [reply] * calls)


def both_orders_right(rows: list[dict[str, Any]], seen: dict[tuple[str, str], str]) -> float:
    """LLMBar's "correct in both orders" for one evaluator."""
    right = sum(seen[(r["a"], r["b"])] == r["label"] and FLIP[seen[(r["b"], r["a"])]] == r["label"] for r in rows)
    return right / len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--llmbar", type=Path, required=True, help="a checkout of princeton-nlp/LLMBar")
    parser.add_argument("--prompt", default="Vanilla", help="the evaluators' prompting strategy (a folder name)")
    args = parser.parse_args()
    print("$ python " + shlex.join(["benchmarks/bench_llmbar_jury.py", *sys.argv[1:]]))
    rows, seen = load(args.llmbar, args.prompt)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    with tempfile.TemporaryDirectory() as home:
        import os

        os.environ["COUNCIL_HOME"] = home
        from council.judging.batch import BatchSettings, content_digest, parse_batch, run_batch
        from council.storage import SQLiteStore

        items = parse_batch(text, "llmbar.jsonl")
        judges = [f"fake/{e.lower()}" for e in EVALUATORS]
        summaries = {}
        for combine in ("vote", "dawid-skene"):
            clients = [replaying(e, seen[e], 2 * len(rows)) for e in EVALUATORS]
            store = SQLiteStore.open(Path(home) / f"{combine}.db")
            summaries[combine] = asyncio.run(
                run_batch(items, settings=BatchSettings(judges=judges, combine=combine), judges=clients,  # type: ignore[arg-type]
                          batch_id=combine, source="llmbar.jsonl", content_sha256=content_digest(text), store=store,
                          concurrency=32)  # fmt: skip
            )
    panel = summaries["vote"].panel
    print(f"{len(rows)} pairs, {len(EVALUATORS)} evaluators ({args.prompt}), strategy consistency")
    print(f"{'judge':12} {'A first':>8} {'B first':>8} {'both':>8} {'verdict':>8}")
    for e, judge in zip(EVALUATORS, panel.judges, strict=True):
        order = judge.accuracy_per_order
        print(f"{e:12} {order.a_first:8.1%} {order.b_first:8.1%} {both_orders_right(rows, seen[e]):8.1%} "
              f"{judge.accuracy:8.1%}")  # fmt: skip
    best = max(both_orders_right(rows, seen[e]) for e in EVALUATORS)
    vote, ds = (summaries[c].labels.accuracy for c in ("vote", "dawid-skene"))
    print(f"plain majority of the judges' verdicts: {panel.majority_accuracy:.1%}")
    print(f"combined, --combine vote:        {vote:.1%}")
    print(f"combined, --combine dawid-skene: {ds:.1%} (no label read)")
    print(f"best single judge, both orders:  {best:.1%}")
    low, high = panel.n_eff_ci or (float("nan"), float("nan"))
    print(f"n_eff {panel.n_eff:.2f} [{low:.2f}, {high:.2f}] of {len(EVALUATORS)}, mean error correlation "
          f"{panel.mean_error_correlation:.3f}, Krippendorff's α {panel.krippendorff_alpha:.3f}")  # fmt: skip
    print(f"goal (Dawid–Skene ≥ best single judge over both orders): {'met' if ds >= best else 'NOT met'}")


if __name__ == "__main__":
    main()
