"""The leaderboard of pairwise judgments, optionally with the answers' style held equal
(``--control``) and win rates against a baseline (``--baseline``): judgment files
(``council leaderboard --judgments``) and the store's judged pairs (``Store.judged_pairs``) go
through the same :func:`rate_judgments`, so the same pairs give the same numbers.

Loading is :mod:`council.leaderboard.judgment_files`; the plain ratings are the leaderboard's own
(:func:`council.leaderboard.ratings.build_leaderboard`, every judgment one unit); style control is
:mod:`council.methods.style_control` and the baseline's raw and length-controlled win rates
are :mod:`council.methods.length_controlled`. docs/methods.md, "Style control" and
"Length-controlled win rate".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from council.errors import InputError, UsageError
from council.leaderboard.judgment_files import MARKDOWN_KEYS, Judgment, load_judgments
from council.leaderboard.ratings import (
    DEFAULT_BOOTSTRAP,
    MAX_BOOTSTRAP,
    Leaderboard,
    StyleCoefficient,
    build_leaderboard,
    rank_within_groups,
)
from council.storage import ComparisonData

CONTROLS = ("length", "markdown")


def parse_control(text: str | None) -> list[str]:
    """``length,markdown`` → ``["length", "markdown"]``; an unknown or empty name is a usage error."""
    if text is None:
        return []
    names = [part.strip() for part in text.split(",")]
    bad = [n for n in names if n not in CONTROLS]
    if bad or not names:
        raise UsageError(f"--control takes {' and/or '.join(CONTROLS)}, comma-separated; got {text!r}")
    return sorted(set(names), key=CONTROLS.index)


def _grouped(a: np.ndarray, b: np.ndarray, y: np.ndarray) -> list[tuple[int, dict[tuple[int, int], float]]]:
    """Every judgment one unit, P(B better) = y; identical ones merged as the store's are."""
    from council.storage.data import group_outcomes

    outcomes = (
        ((((j, i), p), ((i, j), 1 - p)), 1) for i, j, p in zip(a.tolist(), b.tolist(), y.tolist(), strict=True)
    )
    return group_outcomes((((pair, w) for pair, w in pairs if w > 0), units) for pairs, units in outcomes)


def _needs(judgments: Sequence[Judgment], keys: tuple[str, str], what: str) -> None:
    missing = sum(1 for j in judgments if getattr(j, keys[0]) is None or getattr(j, keys[1]) is None)
    if missing:
        raise InputError(
            f"{what} needs {keys[0]} and {keys[1]} on every judgment; {missing} of {len(judgments)} lack them"
        )


def _covariates(judgments: Sequence[Judgment], control: Sequence[str]) -> tuple[list[str], np.ndarray]:
    from council.methods.style_control import style_difference

    names: list[str] = []
    columns: list[np.ndarray] = []
    if "length" in control:
        _needs(judgments, ("length_a", "length_b"), "--control length")
        names.append("length")
        columns.append(
            style_difference(np.array([j.length_a for j in judgments]), np.array([j.length_b for j in judgments]))
        )
    if "markdown" in control:
        _needs(judgments, ("markdown_a", "markdown_b"), "--control markdown")
        for key in MARKDOWN_KEYS:
            a = np.array([getattr(j.markdown_a, key) for j in judgments])
            b = np.array([getattr(j.markdown_b, key) for j in judgments])
            names.append(key)
            columns.append(style_difference(a, b))
    return names, np.column_stack(columns)


def length_controlled(board: Leaderboard, judgments: Sequence[Judgment], index: dict[str, int], baseline: str) -> None:
    """Each model's ``lc_win_rate`` against ``baseline`` (its raw one is the leaderboard's own),
    with ``lc_method`` and, where the games cannot determine it, None and ``lc_reason``."""
    from council.methods.length_controlled import BaselineGames, cross_fitted_difficulty, lc_win_rates

    games = [j for j in judgments if baseline in (j.model_a, j.model_b)]
    n = len(index)
    model = np.array([index[j.model_b if j.model_a == baseline else j.model_a] for j in games], dtype=np.int64)
    pref = np.array([j.b_better if j.model_a == baseline else 1 - j.b_better for j in games])
    sign = np.array([1.0 if j.model_a == baseline else -1.0 for j in games])
    with_lengths = all(j.length_a is not None and j.length_b is not None for j in games)
    with_prompts = all(j.prompt_id is not None for j in games)
    delta = None
    if with_lengths:
        delta = sign * np.array([float(j.length_b - j.length_a) for j in games])  # type: ignore[operator]
    prompt = None
    n_prompts = 0
    if with_prompts:
        ids: dict[str, int] = {}
        prompt = np.array([ids.setdefault(str(j.prompt_id), len(ids)) for j in games], dtype=np.int64)
        n_prompts = len(ids)
    data = BaselineGames(model=model, preference=pref, length_delta=delta, prompt=prompt)
    lc = None
    if with_lengths and len(games):
        difficulty = cross_fitted_difficulty(data, n, n_prompts) if with_prompts else None
        lc = lc_win_rates(data, n, difficulty)
        if difficulty is not None:
            alone = int((difficulty == 0).sum())
            if alone:
                board.notes.append(
                    f"Instruction difficulty for lc_win_rate comes from the other models' games on the same prompt: "
                    f"{alone} of {len(games)} judgments against the baseline have no other model's game on their "
                    "prompt and use none."
                )
    if not with_lengths:
        board.notes.append("lc_win_rate needs length_a and length_b on every judgment against the baseline: left out.")
    elif not with_prompts:
        missing = sum(1 for j in games if j.prompt_id is None)
        board.notes.append(
            f"lc_win_rate without instruction difficulty: {missing} of {len(games)} judgments against the baseline "
            "carry no prompt_id (AlpacaEval's length_controlled_minimal)."
        )
    for m in board.models:
        i = index[m.model]
        if m.model == baseline:
            m.lc_win_rate = 50.0  # by definition, as AlpacaEval lists its baseline
        elif lc is not None:
            m.lc_win_rate = None if np.isnan(lc.rates[i]) else float(lc.rates[i])
            m.lc_method, m.lc_reason = lc.method[i], lc.reason[i]
    if lc is not None and any(r is not None for r in lc.reason):
        unset = [m.model for m in board.models if m.lc_reason is not None and m.lc_win_rate is None]
        pooled = [m.model for m in board.models if m.lc_method == "pooled length slope"]
        if pooled:
            board.notes.append(f"lc_win_rate with the other models' length slope (its own games cannot tell quality "
                               f"from length; lc_reason): {', '.join(pooled)}.")  # fmt: skip
        if unset:
            board.notes.append(f"lc_win_rate not determined by the games (null; lc_reason says why): "
                               f"{', '.join(unset)}.")  # fmt: skip


#: The fit holds a models × models win matrix (and its Hessian) per bootstrap round, all rounds
#: at once, and inverts it: a file naming thousands of models would take gigabytes and hours.
MAX_MODELS = 2000
MAX_ROUND_CELLS = 25_000_000  # bootstrap rounds × models²: about 1.6 GB at the peak


def _check_size(n_models: int, bootstrap: int, files: Sequence[str]) -> None:
    where = ", ".join(files) or "the judged pairs"
    if n_models > MAX_MODELS:
        raise InputError(f"{where}: {n_models} models; a leaderboard rates at most {MAX_MODELS}")
    if bootstrap * n_models**2 > MAX_ROUND_CELLS:
        most = MAX_ROUND_CELLS // n_models**2
        raise InputError(f"{where}: {n_models} models with {bootstrap} bootstrap rounds would need gigabytes; "
                         f"use --bootstrap {most} or fewer (0 for no intervals)")  # fmt: skip


def judged_leaderboard(
    paths: Iterable[Path | str],
    *,
    judgments_format: str = "council",
    control: Sequence[str] = (),
    baseline: str | None = None,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> Leaderboard:
    """Ratings from judgment files (pure but for reading them)."""
    if not 0 <= bootstrap <= MAX_BOOTSTRAP:
        raise UsageError(f"--bootstrap must be between 0 and {MAX_BOOTSTRAP}, got {bootstrap}")
    loaded = load_judgments(paths, judgments_format)
    board = rate_judgments(loaded.judgments, control=control, baseline=baseline, bootstrap=bootstrap, seed=seed,
                           where=loaded.files)  # fmt: skip
    board.files = list(loaded.files)
    if not board.models:  # the store's "nothing on record" note does not fit files
        board.notes = [f"No pairwise comparisons between two models in {', '.join(loaded.files)}."]
    if loaded.unjudged:
        board.notes.append(f"AlpacaEval items without a preference (not judged), left out: {loaded.unjudged}.")
    return board


def stored_judgments(rows: Iterable[dict[str, Any]]) -> list[Judgment]:
    """The store's judged pairs (``Store.judged_pairs``) as judgments, rated as a file of them is.

    Built without a file's checks: the store's rows are already valid (its query keeps finished
    comparisons of two named models), and a file's limits (a model name's length) are not the
    store's. Each distinct model name and markdown count is one object shared by every judgment
    that has it (they are only read): about 1 instead of 2 kB a judgment, for a fit that holds
    them all."""
    from council.leaderboard.judgment_files import MarkdownCounts

    shared: dict[Any, Any] = {}

    def counts(value: dict[str, int] | None) -> MarkdownCounts | None:
        if value is None:
            return None
        key = (value["headers"], value["lists"], value["bold"])
        found = shared.get(key)
        if found is None:
            found = shared[key] = MarkdownCounts.model_construct(**value)
        return found

    keys = ("winner", "length_a", "length_b", "prompt_id")
    return [
        Judgment.model_construct(
            model_a=shared.setdefault(row["model_a"], row["model_a"]),
            model_b=shared.setdefault(row["model_b"], row["model_b"]),
            **{k: row[k] for k in keys},
            markdown_a=counts(row["markdown_a"]),
            markdown_b=counts(row["markdown_b"]),
        )
        for row in rows
    ]


def rate_judgments(
    judgments: Sequence[Judgment],
    *,
    control: Sequence[str] = (),
    baseline: str | None = None,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    where: Sequence[str] = (),
) -> Leaderboard:
    """The leaderboard of ``judgments``, files' or the store's: the same judgments, the same numbers.

    ``where``: the files they came from, for messages."""
    names = sorted({j.model_a for j in judgments} | {j.model_b for j in judgments})
    _check_size(len(names), bootstrap, where)
    index = {name: i for i, name in enumerate(names)}
    if baseline is not None and baseline not in index:
        raise UsageError(f"--baseline {baseline!r}: no judgment names this model")
    a = np.array([index[j.model_a] for j in judgments], dtype=np.int64)
    b = np.array([index[j.model_b] for j in judgments], dtype=np.int64)
    y = np.array([j.b_better for j in judgments], dtype=float)
    data = ComparisonData(models=names, judgments=_grouped(a, b, y))
    covariates = _covariates(judgments, control) if control and len(names) >= 2 else None
    board = build_leaderboard(
        data, source="judgments", bootstrap=0 if covariates else bootstrap, seed=seed, baseline=baseline
    )
    board.control = list(control)
    if covariates is not None:
        from council.methods.style_control import style_controlled_ratings

        cov_names, matrix = covariates
        fit = style_controlled_ratings(a, b, y, matrix, cov_names, len(names), bootstrap=bootstrap, seed=seed)
        board.bootstrap = bootstrap
        board.coefficients = {
            k: StyleCoefficient(estimate=c.estimate, ci=c.ci, standard_error=c.standard_error,
                                not_estimable=c.not_estimable, identified=c.identified)
            for k, c in fit.coefficients.items()
        }
        for m in board.models:
            i = index[m.model]
            m.rating = float(fit.ratings[i])
            m.ci = None if fit.intervals is None else (float(fit.intervals[i, 0]), float(fit.intervals[i, 1]))
            m.identified, m.not_identified = i not in fit.not_identified, fit.not_identified.get(i)
        board.models.sort(key=lambda m: (m.group, -m.rating, m.model))
        rank_within_groups(board.models)
        board.notes.append(
            f"Ratings with {' and '.join(control)} held equal (style control): the coefficients are the judge's "
            "pull toward the longer / more formatted answer, in log-odds per standard deviation."
        )
        if fit.not_identified:
            board.notes.append(
                f"{len(fit.not_identified)} of {len(names)} models' ratings with the style held equal are not "
                "identified by the judgments (identified: false; they rest on the prior): "
                + ", ".join(names[i] for i in fit.not_identified) + "."
            )
    if baseline is not None and board.models:
        length_controlled(board, judgments, index, baseline)
    return board
