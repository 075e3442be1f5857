"""A panel of judges looked at as a whole (pure): how often each decides and agrees with the
combined verdict, its position and length preferences, the pairwise agreement matrix,
Krippendorff's α (nominal), and with labels each judge's accuracy, the correlation of the
judges' errors and the effective number of independent judges with a bootstrap interval.

A judge's *verdict* on an item is its own result under the batch's swap strategy ("A", "B" or
"TIE"; None when it failed); a *pass* is one order it was shown the pair in. With labels an
*error* is a verdict other than the label (a tie counts as an error). The write-up is in
docs/methods.md ("Panel analysis", "Effective number of judges").
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer

if TYPE_CHECKING:
    import numpy as np

BOOTSTRAP = 1000
BOOTSTRAP_SEED = 58
#: Items × resamples drawn in one go by the bootstrap.
RESAMPLE_CHUNK = 1 << 21
CI_LEVEL = 0.95


@dataclass(frozen=True)
class PanelItem:
    """One pair as the panel saw it: each judge's ``verdicts``, each valid pass as ``(judge,
    shown_first, winner)``, the ``combined`` verdict, the ``longer`` response ("A", "B"; None
    when equally long or unknown) and the ``label`` (None without one)."""

    verdicts: Mapping[str, str | None]
    combined: str
    passes: Sequence[tuple[str, str, str]] = field(default_factory=tuple)
    longer: str | None = None
    label: str | None = None


class PerOrder(BaseModel):
    a_first: float | None
    b_first: float | None


class _LabelKeys(BaseModel):
    """A model whose ``LABEL_KEYS`` measure against labels: they are in its shape (null where
    undefined) once set, and left out while unset, i.e. when no pair carries a label."""

    LABEL_KEYS: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _without_unset_label_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        for key in self.LABEL_KEYS:
            if key not in self.model_fields_set:
                data.pop(key, None)
        return data


class JudgeProfile(_LabelKeys):
    LABEL_KEYS = ("accuracy", "accuracy_per_order", "sensitivity", "specificity")

    judge: str
    #: Share of the items it judged where its verdict is A or B (not a tie).
    decided: float | None
    agreement_with_combined: float | None
    #: Of its valid passes that chose a response, the share that chose the one shown first.
    p_prefers_first: float | None
    #: Of its decided verdicts on pairs of unequal length, the share for the longer response.
    p_prefers_longer: float | None
    accuracy: float | None = None
    accuracy_per_order: PerOrder | None = None
    #: P(verdict A | label A) and P(verdict B | label B): "A" taken as the positive class.
    sensitivity: float | None = None
    specificity: float | None = None


class Panel(_LabelKeys):
    LABEL_KEYS = ("majority_accuracy", "majority_accuracy_per_order", "combined_accuracy", "best_single_accuracy",
                  "error_correlation", "mean_error_correlation", "n_eff", "n_eff_ci", "n_eff_judges",
                  "n_eff_left_out")  # fmt: skip

    judges: list[JudgeProfile]
    agreement: dict[str, dict[str, float | None]]
    krippendorff_alpha: float | None
    #: The plain majority: in each order, the strict majority of the passes shown that order
    #: (``majority_accuracy_per_order``); ``majority_accuracy`` the mean of the two orders'.
    majority_accuracy: float | None = None
    majority_accuracy_per_order: PerOrder | None = None
    combined_accuracy: float | None = None
    best_single_accuracy: float | None = None
    error_correlation: dict[str, dict[str, float | None]] | None = None
    mean_error_correlation: float | None = None
    n_eff: float | None = None
    n_eff_ci: list[float] | None = None
    #: The k of n_eff: the judges whose errors vary over the pairs it is computed on. A judge
    #: always right or always wrong there has no error correlation, and is left out of k as of ρ̄
    #: (``n_eff_left_out``: judge → "always right" / "always wrong").
    n_eff_judges: int | None = None
    n_eff_left_out: dict[str, str] | None = None


def _rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def majority(verdicts: Sequence[str | None]) -> str:
    """The strict majority of the verdicts given (a TIE can win it); no strict majority: TIE."""
    given = [v for v in verdicts if v is not None]
    if not given:
        return "TIE"
    top, count = Counter(given).most_common(1)[0]
    return top if count * 2 > len(given) else "TIE"


def krippendorff_alpha(units: Sequence[Sequence[Hashable | None]]) -> float | None:
    """Krippendorff's α for nominal data: ``units`` are the items, each the values its coders
    gave (None: missing). α = 1 − D_o / D_e from the coincidence matrix of the pairable values
    (units with at least two); None when nothing is pairable or every value is the same."""
    coincidences: Counter[tuple[Hashable, Hashable]] = Counter()
    for unit in units:
        values = [v for v in unit if v is not None]
        m = len(values)
        if m < 2:
            continue
        counts = Counter(values)
        for c, nc in counts.items():
            for k, nk in counts.items():
                coincidences[(c, k)] += (nc * (nk - (c == k))) / (m - 1)
    n_c: Counter[Hashable] = Counter()
    for (c, _), w in coincidences.items():
        n_c[c] += w
    n = sum(n_c.values())
    if n <= 1:
        return None
    observed = sum(w for (c, k), w in coincidences.items() if c != k) / n
    expected = (n * n - sum(v * v for v in n_c.values())) / (n * (n - 1))
    return None if expected == 0 else 1.0 - observed / expected


def pearson_matrix(columns: np.ndarray) -> np.ndarray:
    """Pearson's r of every pair of ``columns`` (items × judges, no missing values); NaN where a
    column is constant (numpy's ``corrcoef`` gives the same)."""
    import numpy as np  # only with labels: a panel without them loads no numpy

    centred = columns - columns.mean(axis=0)
    norms = np.sqrt((centred**2).sum(axis=0))
    with np.errstate(divide="ignore", invalid="ignore"):
        return (centred.T @ centred) / np.outer(norms, norms)


def mean_off_diagonal(r: np.ndarray) -> float | None:
    """The mean of the defined off-diagonal entries; None when there are none."""
    import numpy as np

    k = r.shape[0]
    values = r[~np.eye(k, dtype=bool)]
    values = values[~np.isnan(values)]
    return float(values.mean()) if values.size else None


def effective_judges(k: int, rho: float | None) -> float | None:
    """Kish's design effect applied to k judges: n_eff = k / (1 + (k − 1)·ρ̄); None when ρ̄ is
    undefined or so negative that the denominator is not positive."""
    if rho is None:
        return None
    denominator = 1 + (k - 1) * rho
    return k / denominator if denominator > 0 else None


def n_eff_interval(
    errors: np.ndarray, *, draws: int = BOOTSTRAP, seed: int = BOOTSTRAP_SEED, level: float = CI_LEVEL
) -> list[float] | None:
    """The percentile bootstrap interval of n_eff over items (``errors``: items × judges, 0/1):
    ``numpy.random.default_rng(seed).integers(0, n, (draws, n))`` draws the items of the
    ``draws`` resamples; resamples where n_eff is undefined are left out. None with fewer than
    two items or no defined resample."""
    import numpy as np

    n, k = errors.shape
    if n < 2:
        return None
    rng = np.random.default_rng(seed)
    x = errors.astype(float)
    products = (x[:, :, None] * x[:, None, :]).reshape(n, k * k)
    step = max(1, RESAMPLE_CHUNK // n)  # resamples drawn at once: memory stays bounded on large batches
    values = []
    for start in range(0, draws, step):
        m = min(step, draws - start)
        picks = rng.integers(0, n, size=(m, n))
        # How often each item is drawn in each resample: its weight in that resample's sums.
        counts = np.bincount((picks + n * np.arange(m)[:, None]).ravel(), minlength=m * n).reshape(m, n)
        values.append(_weighted_n_eff(counts.astype(float), x, products))
    drawn = np.concatenate(values)
    drawn = drawn[~np.isnan(drawn)]
    if not drawn.size:
        return None
    tail = (1 - level) / 2
    lo, hi = np.quantile(drawn, [tail, 1 - tail])
    return [float(lo), float(hi)]


def _weighted_n_eff(counts: np.ndarray, x: np.ndarray, products: np.ndarray) -> np.ndarray:
    """n_eff of each resample (a row of ``counts``: how often each item is in it) of the 0/1
    error columns ``x`` (``products``: each item's x_a·x_b, items × k²); NaN where undefined.
    Pearson's r from the resample's sums: r_ab = C_ab / √(C_aa·C_bb), C_ab = n·Σx_a·x_b − Σx_a·Σx_b,
    which on 0/1 data with integer counts is exact."""
    import numpy as np

    n, k = x.shape
    sums = counts @ x
    cov = n * (counts @ products).reshape(-1, k, k) - sums[:, :, None] * sums[:, None, :]
    scale = np.sqrt(np.diagonal(cov, axis1=1, axis2=2))
    with np.errstate(divide="ignore", invalid="ignore"):
        r = cov / (scale[:, :, None] * scale[:, None, :])
    # As for the panel's n_eff: only the judges whose errors vary in the resample count, in ρ̄ and in k.
    kept = (scale > 0).sum(axis=1)
    off = np.broadcast_to(~np.eye(k, dtype=bool), r.shape) & ~np.isnan(r)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(off, r, 0.0).sum(axis=(1, 2)) / off.sum(axis=(1, 2))
        denominator = 1 + (kept - 1) * rho
        return np.where((kept >= 2) & (denominator > 0), kept / denominator, np.nan)


def panel(items: Sequence[PanelItem], judges: Sequence[str], *, bootstrap: int = BOOTSTRAP) -> Panel:
    """The panel block of a batch of pairs judged by ``judges`` (in the order reported)."""
    labelled = [it for it in items if it.label is not None]
    profiles = [_profile(items, labelled, j) for j in judges]
    agreement: dict[str, dict[str, float | None]] = {}
    for a in judges:
        agreement[a] = {}
        for b in judges:
            both = [(it.verdicts.get(a), it.verdicts.get(b)) for it in items]
            both = [(x, y) for x, y in both if x is not None and y is not None]
            agreement[a][b] = _rate(sum(x == y for x, y in both), len(both))
    result = Panel(
        judges=profiles,
        agreement=agreement,
        krippendorff_alpha=krippendorff_alpha([[it.verdicts.get(j) for j in judges] for it in items]),
    )
    if not labelled:
        return result
    result.majority_accuracy_per_order = _majority_per_order(labelled)
    orders = [a for a in (result.majority_accuracy_per_order.a_first, result.majority_accuracy_per_order.b_first)
              if a is not None]  # fmt: skip
    result.majority_accuracy = sum(orders) / len(orders) if orders else None
    result.combined_accuracy = _rate(sum(it.combined == it.label for it in labelled), len(labelled))
    accuracies = [p.accuracy for p in profiles if p.accuracy is not None]
    result.best_single_accuracy = max(accuracies) if accuracies else None
    import numpy as np  # the error correlations: only a labelled panel loads numpy

    # Error indicators over the items every judge judged (a failed judge has no verdict to be wrong in).
    complete = [it for it in labelled if all(it.verdicts.get(j) is not None for j in judges)]
    errors = np.array([[float(it.verdicts[j] != it.label) for j in judges] for it in complete]).reshape(
        len(complete), len(judges)
    )
    r = pearson_matrix(errors) if len(complete) >= 2 else np.full((len(judges), len(judges)), np.nan)
    result.error_correlation = {
        a: {b: None if math.isnan(r[i, j]) else float(r[i, j]) for j, b in enumerate(judges)}
        for i, a in enumerate(judges)
    }
    # Undefined r are exactly the pairs with a judge whose errors never vary: ρ̄ is over the others.
    result.mean_error_correlation = mean_off_diagonal(r)
    varies = [bool(complete) and bool(errors[:, i].min() < errors[:, i].max()) for i in range(len(judges))]
    result.n_eff_judges = sum(varies)
    result.n_eff_left_out = {
        j: "always wrong" if errors[0, i] else "always right"
        for i, j in enumerate(judges)
        if complete and not varies[i]
    }
    k = result.n_eff_judges
    result.n_eff = effective_judges(k, result.mean_error_correlation) if k >= 2 else None
    result.n_eff_ci = n_eff_interval(errors, draws=bootstrap) if result.n_eff is not None else None
    return result


def _majority_per_order(labelled: Sequence[PanelItem]) -> PerOrder:
    """In each order, the share of the labelled pairs with a pass in that order whose passes'
    strict majority is the label (every valid pass a vote, as the judges were asked)."""
    right = {"A": [0, 0], "B": [0, 0]}
    for it in labelled:
        for order in right:
            said = [winner for (_, first, winner) in it.passes if first == order]
            if said:
                right[order][0] += majority(said) == it.label
                right[order][1] += 1
    return PerOrder(a_first=_rate(*right["A"]), b_first=_rate(*right["B"]))


def _profile(items: Sequence[PanelItem], labelled: Sequence[PanelItem], judge: str) -> JudgeProfile:
    judged = [it for it in items if it.verdicts.get(judge) is not None]
    decided = [it for it in judged if it.verdicts[judge] != "TIE"]
    chose = [(first, winner) for it in items for (j, first, winner) in it.passes if j == judge and winner != "TIE"]
    uneven = [it for it in decided if it.longer is not None]
    profile = JudgeProfile(
        judge=judge,
        decided=_rate(len(decided), len(judged)),
        agreement_with_combined=_rate(sum(it.verdicts[judge] == it.combined for it in judged), len(judged)),
        p_prefers_first=_rate(sum(first == winner for first, winner in chose), len(chose)),
        p_prefers_longer=_rate(sum(it.verdicts[judge] == it.longer for it in uneven), len(uneven)),
    )
    if not labelled:
        return profile
    mine = [it for it in labelled if it.verdicts.get(judge) is not None]
    if not mine:  # labels, but none on a pair it judged: its label keys are there, null
        profile.accuracy = profile.accuracy_per_order = profile.sensitivity = profile.specificity = None
        return profile
    profile.accuracy = _rate(sum(it.verdicts[judge] == it.label for it in mine), len(mine))
    per_order = {"A": [0, 0], "B": [0, 0]}
    for it in labelled:
        for j, first, winner in it.passes:
            if j == judge:
                per_order[first][0] += winner == it.label
                per_order[first][1] += 1
    profile.accuracy_per_order = PerOrder(a_first=_rate(*per_order["A"]), b_first=_rate(*per_order["B"]))
    said_a = [it for it in mine if it.label == "A"]
    said_b = [it for it in mine if it.label == "B"]
    profile.sensitivity = _rate(sum(it.verdicts[judge] == "A" for it in said_a), len(said_a))
    profile.specificity = _rate(sum(it.verdicts[judge] == "B" for it in said_b), len(said_b))
    return profile
