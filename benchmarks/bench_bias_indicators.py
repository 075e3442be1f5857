"""Simulation: the bias report's verdicts on councils with known truth (issue 61, findings 5–8).

    python benchmarks/bench_bias_indicators.py                     # every scenario, 1,000 replicates a cell
    python benchmarks/bench_bias_indicators.py --reps 200 --only position_council_size
    python benchmarks/bench_bias_indicators.py --only length_coverage --reps 2000

Each replicate writes one council's bias records (seeded) into an in-memory store and reads
``bias_report`` from it, as a user would; the share of replicates where the report says what
the scenario makes true or false is printed per cell of sessions:

* ``self_preference_generous`` — reviewer a scores every answer 1 point higher, no reviewer
  prefers its own answer (self-reviews included): the share with a's self-preference
  significant (goal ≈ 0.05); ``self_preference_planted`` plants +1.5 for a's own answers (power).
* ``position_council_size`` — sessions alternate between a 3-member and a 5-member council whose
  answers' mean scores differ by 1 point, no position effect: the share with
  ``position_bias.bias_detected`` (goal ≈ 0.05).
* ``position_one_reviewer`` — one of four reviewers scores the four answers 10, 9, 8, 7 by display
  position, the others ignore position: the share with ``bias_detected`` (power, goal ≈ 1).
* ``calibration_exclude`` — self_review = "exclude", four identical reviewers, model a's answers 2
  points better (so reviewer a never scores the best answer): the share of reports with any
  reviewer labelled harsh or generous *and* significant (goal ≈ 0.05).
* ``calibration_planted`` — the same with reviewer b 1 point harsher (power).
* ``length_coverage`` — sessions of 3–5 answers whose length and mean score have within-session
  correlation rho (lengths normal, or skewed log-normal): the coverage of
  ``length_correlation_ci`` (goal ≈ 0.95), by ``pooled_length_correlation`` on the sessions'
  sums as the report reads them (no store: 4,000 replicates take seconds).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from council.bias.report import BiasReport, bias_report  # noqa: E402
from council.storage import SQLiteStore  # noqa: E402
from council.storage.bias_summaries import ALL_TABLES  # noqa: E402

SESSIONS = (5, 10, 30, 100)
LENGTH_SESSIONS = (10, 30, 100, 300)
RHOS = (0.0, 0.3, 0.5, 0.7)


def _row(session: str, reviewer: str, model: str, position: int, score: float, length: int, own: bool) -> dict:
    return {
        "schema_version": "1.2.0", "session_id": session, "reviewer_id": reviewer, "model_id": model,
        "position": position, "response_length_chars": 6 * length, "response_length_words": length,
        "score_value": float(min(10, max(1, round(score)))), "query_hash": None,
        "timestamp": "2026-01-01T00:00:00.000000+00:00", "scale_min": 1, "scale_max": 10,
        "self_review": int(own), "council": None,
    }  # fmt: skip


def council(
    rng: random.Random,
    sessions: int,
    *,
    members: Callable[[int], list[str]],
    reviewers: Callable[[int], list[str]] | None = None,
    quality: dict[str, float] | None = None,
    council_mean: Callable[[int], float] = lambda s: 6.0,
    harshness: dict[str, float] | None = None,
    self_preference: dict[str, float] | None = None,
    by_position: dict[str, list[float]] | None = None,
    self_review: str = "include",
    noise: float = 1.0,
) -> list[dict[str, Any]]:
    """One council's records: every reviewer scores every member's answer (its own too unless
    ``self_review`` is "exclude") in its own shuffled order. A score is the session's mean +
    the answer's quality (the model's plus a per-answer draw) + the reviewer's harshness + its
    self-preference on its own answer + noise, rounded to 1–10; a reviewer in ``by_position``
    gives the listed scores by display position instead."""
    quality, harshness = quality or {}, harshness or {}
    self_preference, by_position = self_preference or {}, by_position or {}
    out = []
    for s in range(sessions):
        sid = f"s{s:05d}"
        answering = members(s)
        answer = {m: council_mean(s) + quality.get(m, 0.0) + rng.gauss(0, 1.0) for m in answering}
        length = {m: rng.randint(50, 400) for m in answering}
        for reviewer in (reviewers or members)(s):
            shown = [m for m in answering if self_review != "exclude" or m != reviewer]
            rng.shuffle(shown)
            for position, model in enumerate(shown):
                own = model == reviewer
                if reviewer in by_position:
                    score = by_position[reviewer][position]
                else:
                    score = (answer[model] + harshness.get(reviewer, 0.0) + rng.gauss(0, noise)
                             + (self_preference.get(reviewer, 0.0) if own else 0.0))  # fmt: skip
                out.append(_row(sid, reviewer, model, position, score, length[model], own))
    return out


FOUR = ["a", "b", "c", "d"]


def _four(_s: int) -> list[str]:
    return FOUR


def _three_or_five(s: int) -> list[str]:
    return ["a", "b", "c"] if s % 2 else ["a", "b", "c", "d", "e"]


SCENARIOS: dict[str, dict[str, Any]] = {
    "self_preference_generous": {"members": _four, "harshness": {"a": 1.0}},
    "self_preference_planted": {"members": _four, "harshness": {"a": 1.0}, "self_preference": {"a": 1.5}},
    "position_council_size": {"members": _three_or_five, "council_mean": lambda s: 7.0 if s % 2 else 6.0},
    "position_one_reviewer": {"members": _four, "by_position": {"a": [10, 9, 8, 7]}},
    "calibration_exclude": {"members": _four, "quality": {"a": 2.0}, "self_review": "exclude"},
    "calibration_planted": {"members": _four, "quality": {"a": 2.0}, "harshness": {"b": -1.0},
                            "self_review": "exclude"},
}  # fmt: skip


class Reports:
    """One in-memory store (opening one runs every migration: 0.1 s), emptied for each replicate."""

    def __init__(self) -> None:
        self.store = SQLiteStore.memory()

    def __call__(self, records: list[dict[str, Any]]) -> BiasReport:
        with self.store.db.conn:
            for table in ("bias_records", *ALL_TABLES):
                self.store.db.execute(f"DELETE FROM {table}")
        self.store.insert_bias_records(records)
        return bias_report(self.store)

    def close(self) -> None:
        self.store.close()


def self_preference_flagged(report: BiasReport) -> bool:
    sp = report.self_preference.get("a")
    return sp is not None and sp.test.significant


def position_flagged(report: BiasReport) -> bool:
    return report.position_bias.bias_detected


def calibration_flagged(report: BiasReport) -> bool:
    """The honesty verdict's "x: harsh (significant)": a label with a significant test."""
    return any(p.classification in ("harsh", "generous") and p.significant for p in report.reviewers.values())


FLAGGED: dict[str, Callable[[BiasReport], bool]] = {
    "self_preference": self_preference_flagged,
    "position": position_flagged,
    "calibration": calibration_flagged,
}


def rate(scenario: str, sessions: int, reps: int, seed: int) -> float:
    """The share of ``reps`` seeded replicates whose report flags what ``scenario`` is about."""
    flagged = next(f for topic, f in FLAGGED.items() if scenario.startswith(topic))
    reports = Reports()
    try:
        hits = 0
        for rep in range(reps):
            rng = random.Random(f"{seed}-{scenario}-{sessions}-{rep}")
            hits += flagged(reports(council(rng, sessions, **SCENARIOS[scenario])))
        return hits / reps
    finally:
        reports.close()


# -- the length correlation's interval --------------------------------------------------------


def length_sessions(
    rng: np.random.Generator, sessions: int, rho: float, *, skewed: bool = False
) -> list[tuple[int, float, float, float, float, float]]:
    """Per-session sums (n, Σx, Σy, Σx², Σy², Σxy) of 3–5 answers whose length x and mean score y
    have within-session correlation ``rho``; sessions differ in their mean length and score. With
    ``skewed`` the length's deviations are log-normal (σ 0.5), standardised."""
    k = rng.integers(3, 6, size=sessions)
    present = np.arange(5) < k[:, None]
    if skewed:
        mu, sd = math.exp(0.125), math.sqrt((math.exp(0.25) - 1) * math.exp(0.25))
        u = (rng.lognormal(0, 0.5, size=(sessions, 5)) - mu) / sd
    else:
        u = rng.standard_normal((sessions, 5))
    x = (rng.normal(200, 60, size=(sessions, 1)) + 40 * u) * present
    e = rng.standard_normal((sessions, 5))
    y = (rng.normal(6, 1, size=(sessions, 1)) + 0.8 * (rho * u + math.sqrt(1 - rho * rho) * e)) * present
    sums = np.stack([x.sum(1), y.sum(1), (x * x).sum(1), (y * y).sum(1), (x * y).sum(1)], axis=1)
    return [(int(n), *map(float, row)) for n, row in zip(k, sums, strict=True)]


def length_coverage(sessions: int, rho: float, reps: int, seed: int, *, skewed: bool = False) -> tuple[float, float]:
    """(coverage of ``length_correlation_ci``, mean estimate) over ``reps`` seeded replicates."""
    from council.methods.bias_indicators import pooled_length_correlation

    rng = np.random.default_rng([seed, sessions, round(100 * rho), skewed])
    covered, total = 0, 0.0
    for _ in range(reps):
        pooled = pooled_length_correlation(length_sessions(rng, sessions, rho, skewed=skewed))
        lo, hi = pooled.length_correlation_ci
        covered += lo <= rho <= hi
        total += pooled.length_correlation
    return covered / reps, total / reps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=61)
    parser.add_argument("--only", choices=[*SCENARIOS, "length_coverage"], action="append")
    args = parser.parse_args()
    chosen = args.only or [*SCENARIOS, "length_coverage"]
    print(f"$ python benchmarks/bench_bias_indicators.py {' '.join(sys.argv[1:])}")
    start = time.perf_counter()
    for scenario in chosen:
        if scenario == "length_coverage":
            for skewed in (False, True):
                for rho in RHOS:
                    cells = []
                    for m in LENGTH_SESSIONS:
                        coverage, mean = length_coverage(m, rho, args.reps, args.seed, skewed=skewed)
                        cells.append(f"{m} sessions {coverage:.3f} (r̄ {mean:+.3f})")
                    shape = "skewed" if skewed else "normal"
                    print(f"length_coverage {shape} rho={rho}: " + "; ".join(cells), flush=True)
            continue
        cells = [f"{m} sessions {rate(scenario, m, args.reps, args.seed):.3f}" for m in SESSIONS]
        print(f"{scenario}: " + "; ".join(cells), flush=True)
    print(f"{args.reps} replicates a cell; {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
