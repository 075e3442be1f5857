"""Benchmark: LLMBar's five published evaluators replayed as a jury through ``council batch``,
combined by the vote and by Dawid–Skene, against the labels (issue 58).

    python benchmarks/bench_llmbar_jury.py [--confidence P]

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

Then the adaptive jury (``--combine dawid-skene --adaptive --confidence P``, default 0.95). The 419
pairs are split in two halves (even and odd rows of the extract). The judges' reliabilities are
fitted by Dawid–Skene, without labels, over a batch of one half; the adaptive jury then judges
the other half, so no pair it is measured on was fitted on; both ways round. Each pair's **full
panel verdict** is the posterior maximum over all ten annotators (five judges, two orders) under
the same fitted matrices, computed from the published verdicts (the replay knows them all); the
run asks only what it needs. It prints calls (one per annotator asked) against the full panel's,
the measured agreement with the full panel, the agreement the summary expects
(``agreement_with_full_panel``), the accuracy against the labels of both and of a Dawid–Skene fit
over the whole evaluated half (``--combine dawid-skene`` without ``--adaptive``), and whether the
goal holds: at least 40 % fewer calls at at least 98 % agreement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import bench_common  # noqa: F401  (puts the package and tests/ on sys.path)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--confidence", type=float, default=0.95, help="the adaptive jury's --confidence")
    args = parser.parse_args()
    jury()
    adaptive(args.confidence)


def jury() -> None:
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


async def _judged(rows, seen, judges, settings, batch_id, store, home):
    from batch_files import LLMBAR_EVALUATORS
    from fake_judges import replaying_judge

    from council.judging.batch import content_digest, parse_batch, run_batch

    text = "".join(json.dumps(r) + "\n" for r in rows)
    clients = [replaying_judge(j, seen[e], 6 * len(rows)) for j, e in zip(judges, LLMBAR_EVALUATORS, strict=True)]
    output = Path(home) / f"{batch_id}.results.jsonl"
    summary = await run_batch(parse_batch(text, f"{batch_id}.jsonl"), settings=settings, judges=clients,
                              batch_id=batch_id, source=f"{batch_id}.jsonl", content_sha256=content_digest(text),
                              store=store, output=output, concurrency=32)  # fmt: skip
    return summary, [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]


def _full_panel(row, seen, judges, reliabilities):
    """The verdict with every annotator asked, under the fitted matrices (from the published verdicts)."""
    from batch_files import LLMBAR_EVALUATORS

    from council.methods.adaptive_jury import posterior, posterior_verdict

    flip = {"A": "B", "B": "A", "TIE": "TIE"}
    votes = {}
    for judge, e in zip(judges, LLMBAR_EVALUATORS, strict=True):
        first, second = seen[e][(row["a"], row["b"])], seen[e][(row["b"], row["a"])]
        if first:
            votes[(judge, "A")] = first
        if second:
            votes[(judge, "B")] = flip[second]
    return posterior_verdict(posterior(reliabilities.prior, reliabilities.matrices(), votes))[0]


def adaptive(confidence: float) -> None:
    from batch_files import LLMBAR_EVALUATORS, llmbar_jury

    from council.judging.adaptive import AdaptiveJury, reliabilities_from_batch
    from council.judging.batch import BatchSettings
    from council.storage import SQLiteStore

    rows, seen = llmbar_jury()
    judges = [f"fake/{e.lower()}" for e in LLMBAR_EVALUATORS]
    halves = (rows[0::2], rows[1::2])
    totals = {"pairs": 0, "calls": 0, "full": 0, "agree": 0, "expected": 0.0, "right": 0, "full_right": 0,
              "refit_right": 0, "refit_agree": 0}  # fmt: skip
    print(f"confidence {confidence}; {len(rows)} pairs in two halves; 5 judges x 2 orders = 10 annotators")
    print(f"{'fit on':>7} {'run on':>7} {'pairs':>6} {'calls':>6} {'full':>6} {'saved':>7} {'agree':>7} "
          f"{'expect':>7} {'acc':>6} {'full acc':>8} {'DS acc':>7}")  # fmt: skip
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as home:
        store = SQLiteStore.open(Path(home) / "council.db")
        for k, (fit, run) in enumerate((halves, halves[::-1])):
            plain = BatchSettings(judges=judges, combine="dawid-skene")
            asyncio.run(_judged(fit, seen, judges, plain, f"fit{k}", store, home))
            jury = AdaptiveJury(confidence=confidence, reliabilities=reliabilities_from_batch(store, f"fit{k}"))
            settings = BatchSettings(judges=judges, combine="dawid-skene", adaptive=True, jury=jury)
            summary, lines = asyncio.run(_judged(run, seen, judges, settings, f"adaptive{k}", store, home))
            _, refit = asyncio.run(_judged(run, seen, judges, plain, f"refit{k}", store, home))
            full = [_full_panel(r, seen, judges, jury.reliabilities) for r in run]
            n = len(lines)
            agree = sum(line["result"]["winner"] == f for line, f in zip(lines, full, strict=True))
            right = sum(line["result"]["winner"] == line["label"] for line in lines)
            full_right = sum(f == r["label"] for f, r in zip(full, run, strict=True))
            refit_right = sum(line["result"]["winner"] == line["label"] for line in refit)
            refit_agree = sum(a["result"]["winner"] == b["result"]["winner"] for a, b in zip(lines, refit, strict=True))
            a = summary.adaptive
            print(f"{'even' if k == 0 else 'odd':>7} {'odd' if k == 0 else 'even':>7} {n:6} {summary.calls:6} "
                  f"{a.calls_full_panel:6} {a.calls_saved / a.calls_full_panel:7.1%} {agree / n:7.1%} "
                  f"{a.agreement_with_full_panel:7.1%} {right / n:6.1%} {full_right / n:8.1%} "
                  f"{refit_right / n:7.1%}")  # fmt: skip
            for key, value in (("pairs", n), ("calls", summary.calls), ("full", a.calls_full_panel), ("agree", agree),
                               ("expected", a.agreement_with_full_panel * n), ("right", right),
                               ("full_right", full_right), ("refit_right", refit_right),
                               ("refit_agree", refit_agree)):  # fmt: skip
                totals[key] += value
    wall = time.perf_counter() - started
    t = totals
    saved = 1 - t["calls"] / t["full"]
    agreement = t["agree"] / t["pairs"]
    n = t["pairs"]
    print(f"both halves: {t['calls']} calls of {t['full']} ({saved:.1%} fewer), agreement with the full panel "
          f"{t['agree']} of {n} = {agreement:.1%} (expected by the model {t['expected'] / n:.1%})")  # fmt: skip
    print(f"accuracy against the labels: adaptive {t['right'] / n:.1%}, full panel {t['full_right'] / n:.1%}, "
          f"Dawid-Skene refitted over the evaluated half {t['refit_right'] / n:.1%} (adaptive agrees with it on "
          f"{t['refit_agree'] / n:.1%})")  # fmt: skip
    print(f"adaptive part: {wall:.1f} s")
    met = saved >= 0.40 and agreement >= 0.98
    print(f"goal (>= 40 % fewer calls at >= 98 % agreement with the full panel): {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
