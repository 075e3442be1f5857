"""Benchmark: the embedded local models as pairwise judges, against human labels.

    python benchmarks/bench_local_judge.py                          # the offline default judge, all 16 pairs
    python benchmarks/bench_local_judge.py --models smollm2 gemma3 --limit 4
    python benchmarks/bench_local_judge.py --json

For each model it runs the real CLI, ``council batch benchmarks/data/labelled_pairs.jsonl
--judge local/<name> --json --concurrency 1`` (a subprocess; the ``council`` package beside
this script, in a fresh COUNCIL_HOME), then reads the figures from the batch's JSON summary
and from the database that run wrote: calls and their latency, passes valid of total (and the
commonest reasons a pass was invalid), items finished, the judge's agreement with the labels
(accuracy, per display order, Cohen's κ, position consistency), and the position-driven
verdicts: swap pairs whose two valid passes both chose the response shown first (or both the
one shown second), and how many of those items the swap strategy turned into a tie.

The pairs are human-labelled (PandaLM's test set; benchmarks/data/README.md). ``--concurrency 1``
because local inference is serialised anyway: queued calls would spend their timeout waiting.
Exit status: 0 when every model ran (invalid passes are a finding, not an error); 1 when a
model could not run (not installed, failed to load, or not one call answered), with the reason.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench_common import ROOT, prepare  # also puts the package on sys.path

DATA = ROOT / "benchmarks" / "data" / "labelled_pairs.jsonl"


class ModelCannotRun(Exception):
    """One line saying why a local model could not judge here."""


def default_model() -> str:
    """The offline default judge: the default council's chairman, as ``council batch`` picks it."""
    from council.config.loader import OFFLINE_DEFAULT

    council = OFFLINE_DEFAULT["councils"][OFFLINE_DEFAULT["defaults"]["council"]]
    return str(OFFLINE_DEFAULT["models"][council["chairman"]]["model"]).removeprefix("local/")


def limited(source: Path, limit: int | None, target: Path) -> Path:
    """The first ``limit`` items of ``source`` (validated by the project's loader) in ``target``."""
    from council.judging.batch import parse_batch

    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    lines = lines[:limit] if limit else lines
    content = "\n".join(lines) + "\n"
    parse_batch(content, str(source), "pairwise")  # a bad file stops here, before any model loads
    target.write_text(content, encoding="utf-8")
    return target


def cli_argv(name: str, batch_file: Path, output: Path) -> list[str]:
    """The ``council batch`` arguments for one judge."""
    return [
        "batch", str(batch_file), "--mode", "pairwise", "--judge", f"local/{name}",
        "--concurrency", "1", "--json", "--output", str(output),
    ]  # fmt: skip


def run_cli(name: str, batch_file: Path, home: Path, timeout: float) -> tuple[dict[str, Any], float]:
    """``council batch`` in its own process; its JSON summary and the process's wall time."""
    # `python -m council` with this checkout first on the path: the code beside this script is
    # what gets measured, not whichever council is installed.
    env = {
        **os.environ,
        "COUNCIL_HOME": str(home),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.pop("COUNCIL_CONFIG", None)
    argv = [sys.executable, "-m", "council", *cli_argv(name, batch_file, home / "results.jsonl")]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ModelCannotRun(f"`council batch` did not finish within {timeout:g} s") from None
    wall = time.perf_counter() - t0
    try:
        summary = json.loads(proc.stdout)
    except json.JSONDecodeError:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"no output (exit status {proc.returncode})"
        raise ModelCannotRun(f"`council batch` exited {proc.returncode}: {reason}") from None
    # Exit 1 with a summary means some items failed (e.g. every pass invalid): a finding.
    if proc.returncode not in (0, 1) or not isinstance(summary, dict):
        raise ModelCannotRun(f"`council batch` exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return summary, wall


def recorded(db_path: Path, batch_id: str) -> dict[str, Any]:
    """What the run recorded for the batch: items, every pass, every call attempt."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        items = [
            dict(r)
            for r in conn.execute(
                "SELECT bi.item_id, bi.status, bi.label, bi.run_id, r.winner FROM batch_items bi "
                "JOIN judgment_runs r ON r.id = bi.run_id WHERE bi.batch_id = ? ORDER BY bi.position",
                [batch_id],
            )
        ]
        runs = [item["run_id"] for item in items]
        marks = ", ".join("?" for _ in runs)
        passes = [
            dict(r)
            for r in conn.execute(
                "SELECT run_id, judge, vote, pass, shown_first, valid, attempts, winner, problem "
                f"FROM judgments WHERE kind = 'pairwise' AND run_id IN ({marks}) ORDER BY id",
                runs,
            )
        ]
        calls = [
            dict(r)
            for r in conn.execute(
                f"SELECT ok, latency_ms, error FROM calls WHERE session_id IN ({marks}) ORDER BY id", runs
            )
        ]
    finally:
        conn.close()
    return {"items": items, "passes": passes, "calls": calls}


def position_driven(items: list[dict[str, Any]], passes: list[dict[str, Any]]) -> dict[str, int]:
    """Swap pairs (one judge's vote, both passes valid) whose two passes disagree because of the
    order: both chose the response shown first, or both the one shown second (winners are in the
    original labels: the A-first pass picking A and the B-first pass picking B is "first both
    times"); and how many of those items ended in a tie."""
    final = {item["run_id"]: item["winner"] for item in items}
    pairs: dict[tuple[str, str, int], dict[str, str]] = {}
    for p in passes:
        if p["valid"] and p["shown_first"] in ("A", "B"):
            pairs.setdefault((p["run_id"], p["judge"], p["vote"]), {})[p["shown_first"]] = p["winner"]
    both = [(key[0], s) for key, s in pairs.items() if "A" in s and "B" in s]
    first = [run for run, s in both if (s["A"], s["B"]) == ("A", "B")]
    second = [run for run, s in both if (s["A"], s["B"]) == ("B", "A")]
    driven = set(first) | set(second)
    return {
        "swap_pairs": len(both),
        "agreeing_pairs": sum(1 for _, s in both if s["A"] == s["B"]),
        "first_shown_both": len(first),
        "second_shown_both": len(second),
        "items_position_driven": len(driven),
        "position_driven_items_tied": sum(1 for run in driven if final.get(run) == "TIE"),
    }


def pass_agreement(items: list[dict[str, Any]], passes: list[dict[str, Any]]) -> dict[str, int]:
    """Every valid pass of every item (finished or not) against the item's label, and how often
    it chose the response it was shown first: still a reading when no item finished."""
    label = {item["run_id"]: item["label"] for item in items}
    valid = [p for p in passes if p["valid"] and p["shown_first"] in ("A", "B")]
    return {
        "valid_passes": len(valid),
        "picked_label": sum(1 for p in valid if p["winner"] == label.get(p["run_id"])),
        "picked_first_shown": sum(1 for p in valid if p["winner"] == p["shown_first"]),
        "picked_tie": sum(1 for p in valid if p["winner"] == "TIE"),
    }


def bench_model(name: str, batch_file: Path, home: Path, timeout: float) -> dict[str, Any]:
    from council.providers.local_weights import local_model_problem

    problem = local_model_problem(name)
    if problem:
        raise ModelCannotRun(problem)
    home.mkdir(parents=True)
    summary, process_wall = run_cli(name, batch_file, home, timeout)
    rec = recorded(home / "council.db", summary["batch_id"])
    calls = rec["calls"]
    answered = [c for c in calls if c["ok"]]
    if calls and not answered:
        raise ModelCannotRun(f"no call answered; first error: {calls[0]['error'] or 'unknown'}")
    if not calls:
        raise ModelCannotRun("the batch made no calls")
    passes = rec["passes"]
    labels = summary.get("labels") or {}
    return {
        "model": f"local/{name}",
        "command": "council " + shlex.join(cli_argv(name, Path("PAIRS.jsonl"), Path("RESULTS.jsonl"))),
        "items": summary["items"],
        "finished": summary["finished"],
        "failed": summary["failed"],
        "missing": summary["missing"],
        "calls": summary["calls"],
        "calls_recorded": len(calls),
        "calls_answered": len(answered),
        "process_wall_s": round(process_wall, 2),
        "batch_wall_s": round(summary["wall_time_s"], 2),
        "s_per_call": round(summary["wall_time_s"] / summary["calls"], 2) if summary["calls"] else None,
        # Recorded per call attempt, queueing for the model included (an item's two passes start together).
        "mean_call_latency_s": round(sum(c["latency_ms"] or 0 for c in calls) / len(calls) / 1000, 2),
        "prompt_tokens": summary["prompt_tokens"],
        "completion_tokens": summary["completion_tokens"],
        "passes": len(passes),
        "passes_valid": sum(1 for p in passes if p["valid"]),
        "invalid_reasons": Counter(p["problem"] or "unknown" for p in passes if not p["valid"]).most_common(3),
        "verdicts": {"A": summary["a_wins"], "B": summary["b_wins"], "TIE": summary["ties"]},
        "inconsistent_pairs": summary["inconsistent_pairs"],
        "summary_swap_pairs": summary["swap_pairs"],
        "labels": labels or None,
        "position": position_driven(rec["items"], passes),
        "all_passes": pass_agreement(rec["items"], passes),
        "item_errors": summary.get("errors") or {},
    }


def _pct(part: int | None, whole: int | None) -> str:
    return "-" if not whole or part is None else f"{part}/{whole} ({part / whole:.0%})"


def _num(x: float | None, fmt: str = ".3f") -> str:
    return "-" if x is None else format(x, fmt)


def render(r: dict[str, Any]) -> None:
    lab, pos = r["labels"], r["position"]
    print(f"\n== {r['model']} (a small offline model) ==")
    print(f"$ {r['command']}")
    print(
        f"calls {r['calls']} ({r['calls_answered']} answered); wall {r['batch_wall_s']:.1f} s batch, "
        f"{r['process_wall_s']:.1f} s process; {_num(r['s_per_call'], '.2f')} s per call "
        f"(recorded call latency, queueing included: mean {r['mean_call_latency_s']:.2f} s); "
        f"tokens {r['prompt_tokens']} + {r['completion_tokens']}"
    )
    print(f"passes valid: {_pct(r['passes_valid'], r['passes'])}")
    for reason, count in r["invalid_reasons"]:
        print(f"  invalid x{count}: {reason[:150]}")
    print(
        f"items finished: {r['finished']} of {r['items']} ({r['failed']} failed, {r['missing']} missing); "
        f"verdicts A {r['verdicts']['A']} / B {r['verdicts']['B']} / TIE {r['verdicts']['TIE']}"
    )
    if lab:
        order = lab.get("per_order_accuracy") or {}
        correct, total = lab.get("per_order_correct") or {}, lab.get("per_order_passes") or {}
        print(
            f"labels (finished items): accuracy {_pct(lab['agree'], lab['labelled'])}, judge ties {lab['ties']}, "
            f"kappa {_num(lab['cohen_kappa'])}"
        )
        print(
            f"  pass picked the label, A shown first: {_pct(correct.get('a_first'), total.get('a_first'))}; "
            f"B shown first: {_pct(correct.get('b_first'), total.get('b_first'))} "
            f"(rates {_num(order.get('a_first'), '.2f')} / {_num(order.get('b_first'), '.2f')})"
        )
        print(f"  position consistency: {_pct(lab.get('consistent_pairs'), lab.get('swap_pairs'))} of valid swap pairs")
        if lab.get("confusion"):
            rows = ", ".join(
                f"{label}->" + "/".join(str(v) for v in verdicts.values())
                for label, verdicts in lab["confusion"].items()
                if any(verdicts.values())
            )
            print(f"  confusion label->A/B/TIE: {rows or 'empty'}")
    else:
        print("labels: no agreement table (the summary carries none)")
    every = r["all_passes"]
    print(
        f"valid passes of all items: picked the label {_pct(every['picked_label'], every['valid_passes'])}, "
        f"the response shown first {_pct(every['picked_first_shown'], every['valid_passes'])}, "
        f"a tie {every['picked_tie']}"
    )
    print(
        f"position-driven: {pos['items_position_driven']} items; of {pos['swap_pairs']} valid swap pairs, "
        f"{pos['first_shown_both']} first-shown won both, {pos['second_shown_both']} second-shown won both, "
        f"{pos['agreeing_pairs']} agreed; the swap turned {pos['position_driven_items_tied']} of those items into ties"
    )
    for item, error in list(r["item_errors"].items())[:3]:
        print(f"  failed {item}: {error[:150]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--models", nargs="+", metavar="NAME", help="local model names (default: the offline default judge)"
    )
    parser.add_argument("--limit", type=int, metavar="N", help="only the first N items of the data file")
    parser.add_argument("--data", type=Path, default=DATA, help="labelled pairs, batch JSONL (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per model run (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = parser.parse_args()
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")

    description = [
        "council batch on human-labelled pairs, one local judge at a time "
        "(small offline models: expect weak, position-driven verdicts)"
    ]
    with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
        root = prepare(__file__, *description, litellm=False)
    models = args.models or [default_model()]
    batch_file = limited(args.data, args.limit, Path(root.name) / "pairs.jsonl")
    items = sum(1 for line in batch_file.read_text(encoding="utf-8").splitlines() if line.strip())
    if not args.json:
        source = os.path.relpath(args.data, ROOT)
        print(f"{items} pairs from {source}; models: {', '.join(models)}; {os.cpu_count()} cores")

    results: list[dict[str, Any]] = []
    failures: dict[str, str] = {}
    for name in models:
        try:
            result = bench_model(name, batch_file, Path(root.name) / name, args.timeout)
        except ModelCannotRun as exc:
            failures[name] = str(exc)
            print(f"error: local/{name} cannot run: {exc}", file=sys.stderr)
            continue
        results.append(result)
        if not args.json:
            render(result)
    if args.json:
        print(json.dumps({"data": str(args.data), "items": items, "results": results, "errors": failures}, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
