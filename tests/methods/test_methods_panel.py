"""The panel analysis (council.methods.panel) against independent references: ``krippendorff.alpha``,
numpy's ``corrcoef``, hand-computed examples; and the n_eff interval's coverage on a seeded simulation."""

from __future__ import annotations

import json
import random

import krippendorff
import numpy as np
import pytest

import council.methods.panel as panel_module
from council.methods.panel import (
    PanelItem,
    effective_judges,
    krippendorff_alpha,
    majority,
    n_eff_interval,
    panel,
    pearson_matrix,
)

CODE = {"A": 0, "B": 1, "TIE": 2}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_alpha_matches_the_krippendorff_package(seed: int) -> None:
    rng = random.Random(seed)
    units = [[rng.choice(("A", "A", "B", "TIE", None)) for _ in range(4)] for _ in range(60)]
    data = np.array([[np.nan if v is None else CODE[v] for v in unit] for unit in units], dtype=float).T
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert krippendorff_alpha(units) == pytest.approx(expected)


def test_alpha_by_hand() -> None:
    # Two coders, four units: A/A, A/B, B/B, B/B. Coincidences: o_AA = 2, o_AB = o_BA = 1, o_BB = 4;
    # n_A = 3, n_B = 5, n = 8; D_o = 2/8; D_e = (64 − 9 − 25) / (8·7) = 30/56; α = 1 − (1/4)/(30/56) = 8/15.
    assert krippendorff_alpha([["A", "A"], ["A", "B"], ["B", "B"], ["B", "B"]]) == pytest.approx(8 / 15)
    assert krippendorff_alpha([["A", "A"], ["A", "A"]]) is None  # no variation: α undefined


def test_correlations_match_numpy_corrcoef() -> None:
    rng = np.random.default_rng(4)
    errors = (rng.random((80, 5)) < 0.3).astype(float)
    assert np.allclose(pearson_matrix(errors), np.corrcoef(errors, rowvar=False))


def test_n_eff_by_hand() -> None:
    assert effective_judges(5, 0.0) == 5
    assert effective_judges(5, 1.0) == 1
    assert effective_judges(9, 0.5) == pytest.approx(9 / 5)
    assert effective_judges(3, -0.6) is None and effective_judges(3, None) is None


def test_majority() -> None:
    assert majority(["A", "A", "B"]) == "A"
    assert majority(["A", "B", "TIE"]) == "TIE"
    assert majority(["A", "B", None]) == "TIE"
    assert majority(["B", None]) == "B"


def test_the_panel_block_by_hand() -> None:
    items = [
        PanelItem({"x": "A", "y": "A", "z": "B"}, "A", [("x", "A", "A"), ("x", "B", "A")], longer="A", label="A"),
        PanelItem({"x": "B", "y": "A", "z": "B"}, "B", [("x", "A", "A"), ("x", "B", "B")], longer="B", label="A"),
        PanelItem({"x": "TIE", "y": "B", "z": "B"}, "B", [], longer=None, label="B"),
    ]
    p = panel(items, ["x", "y", "z"], bootstrap=50)
    x = p.judges[0]
    assert x.decided == pytest.approx(2 / 3)
    assert x.agreement_with_combined == pytest.approx(2 / 3)  # A = A, B = B, TIE ≠ B
    assert x.p_prefers_first == pytest.approx(3 / 4)  # A-first chose A twice; B-first chose B once, A once
    assert x.p_prefers_longer == pytest.approx(1.0)  # both decided verdicts on uneven pairs: the longer one
    assert x.accuracy == pytest.approx(1 / 3)
    assert x.accuracy_per_order is not None and x.accuracy_per_order.a_first == 1.0
    assert x.accuracy_per_order.b_first == 0.5
    assert x.sensitivity == pytest.approx(0.5) and x.specificity == pytest.approx(0.0)
    assert p.agreement["x"]["y"] == pytest.approx(1 / 3) and p.agreement["x"]["x"] == 1.0
    # Per order, the majority of that order's passes: only x has passes (A first: A, A; B first: A, B).
    assert (p.majority_accuracy_per_order.a_first, p.majority_accuracy_per_order.b_first) == (1.0, 0.5)
    assert p.majority_accuracy == pytest.approx(0.75)
    assert p.combined_accuracy == pytest.approx(2 / 3)
    assert p.best_single_accuracy == 1.0  # y: A, A, B, each the label
    errors = np.array([[0, 0, 1], [1, 0, 1], [1, 0, 0]], dtype=float)
    expected = np.corrcoef(errors, rowvar=False)
    assert p.error_correlation is not None
    assert p.error_correlation["x"]["z"] == pytest.approx(expected[0, 2])
    assert p.error_correlation["x"]["y"] is None  # y never errs: its r is undefined
    assert p.mean_error_correlation == pytest.approx(expected[0, 2])
    assert expected[0, 2] == pytest.approx(-0.5)
    # y never errs: it is left out of k as of ρ̄, so n_eff is that of x and z, 2 / (1 + (2 − 1)·(−0.5)) = 4
    # (errors that go against each other count for more than their number). Counted in k, y would
    # make 1 + (3 − 1)·ρ̄ = 0 and leave no n_eff.
    assert p.n_eff == pytest.approx(4.0) and p.n_eff_judges == 2 and p.n_eff_left_out == {"y": "always right"}


def test_the_plain_majority_is_per_order_over_the_passes() -> None:
    # The judges' verdicts are not what the plain majority reads: each order's passes are.
    items = [
        PanelItem({"x": "TIE", "y": "A", "z": "TIE"}, "TIE",
                  [("x", "A", "A"), ("y", "A", "A"), ("z", "A", "B"),
                   ("x", "B", "B"), ("y", "B", "A"), ("z", "B", "B")],
                  label="A"),  # A first: A, A, B -> A (right); B first: B, A, B -> B (wrong)
        PanelItem({"x": "TIE", "y": "B", "z": None}, "B",
                  [("x", "A", "A"), ("y", "A", "B"), ("x", "B", "B"), ("y", "B", "B"), ("z", "B", "B")],
                  label="B"),  # A first: A, B -> no strict majority, TIE (wrong); B first: B, B, B (right)
        PanelItem({"x": "A", "y": "A", "z": "A"}, "A", [("x", "A", "TIE"), ("y", "A", "A"), ("z", "A", "A")],
                  label="A"),  # A first: TIE, A, A -> A (right); no pass with B first: not counted there
    ]  # fmt: skip
    p = panel(items, ["x", "y", "z"], bootstrap=20)
    assert p.majority_accuracy_per_order is not None
    assert p.majority_accuracy_per_order.a_first == pytest.approx(2 / 3)
    assert p.majority_accuracy_per_order.b_first == pytest.approx(1 / 2)
    assert p.majority_accuracy == pytest.approx((2 / 3 + 1 / 2) / 2)  # the mean of the two orders
    assert p.combined_accuracy == pytest.approx(2 / 3)  # TIE, B, A against A, B, A
    # One order only (a batch without swapping): the majority is that order's.
    one = panel([PanelItem({"x": "A", "y": "B"}, "TIE", [("x", "A", "A"), ("y", "A", "A")], label="A")], ["x", "y"])
    assert one.majority_accuracy_per_order.b_first is None and one.majority_accuracy == 1.0


def test_no_labels_no_label_keys() -> None:
    # The panel's own shape leaves out what only labels measure (no caller has to), in a dump and in JSON.
    p = panel([PanelItem({"x": "A", "y": "B"}, "TIE")], ["x", "y"])
    for shape in (p.model_dump(), json.loads(p.model_dump_json())):
        assert shape.keys() == {"judges", "agreement", "krippendorff_alpha"}
        assert shape["judges"][0].keys() == {"judge", "decided", "agreement_with_combined", "p_prefers_first",
                                             "p_prefers_longer"}  # fmt: skip
    # With labels they are there, null where undefined (x never judged a labelled pair; n_eff needs two).
    labelled = panel([PanelItem({"x": None, "y": "A"}, "A", label="A")], ["x", "y"])
    shape = labelled.model_dump()
    assert shape["n_eff"] is None and shape["n_eff_ci"] is None and shape["combined_accuracy"] == 1.0
    assert shape["judges"][0]["accuracy"] is None and shape["judges"][0]["accuracy_per_order"] is None
    assert p.krippendorff_alpha == 0.0  # one unit of two different values: D_o = D_e = 1


def simulated_errors(rng: np.random.Generator, items: int, judges: int, shared: float, p: float) -> np.ndarray:
    """Each item: with probability ``shared`` every judge takes one common Bernoulli(p) draw,
    otherwise each its own: every pair's error correlation is exactly ``shared``."""
    common = rng.random(items) < shared
    joint = rng.random(items) < p
    own = rng.random((items, judges)) < p
    return np.where(common[:, None], joint[:, None], own).astype(float)


def test_the_n_eff_interval_covers_the_true_value_on_a_seeded_simulation() -> None:
    k, shared = 5, 0.4
    truth = effective_judges(k, shared)
    rng = np.random.default_rng(58)
    runs, covered = 60, 0
    for run in range(runs):
        ci = n_eff_interval(simulated_errors(rng, 300, k, shared, 0.3), draws=200, seed=run)
        assert ci is not None
        covered += ci[0] <= truth <= ci[1]
    assert covered / runs >= 0.85  # nominal 95 %; the percentile interval of a ratio runs a little short


def reference_interval(errors: np.ndarray, draws: int, seed: int) -> list[float]:
    """The documented bootstrap, resample by resample: numpy's ``default_rng(seed)`` draws the
    items of every resample at once, n_eff of each by ``numpy.corrcoef`` over the judges whose
    errors vary in it, the 2.5 % and 97.5 % quantiles of the defined ones."""
    n = errors.shape[0]
    picks = np.random.default_rng(seed).integers(0, n, size=(draws, n))
    values = []
    for pick in picks:
        sample = errors[pick]
        sample = sample[:, sample.std(axis=0) > 0]  # a judge whose errors never vary counts in neither ρ̄ nor k
        k = sample.shape[1]
        if k < 2:
            continue
        r = np.corrcoef(sample, rowvar=False)
        rho = r[~np.eye(k, dtype=bool)].mean()
        if 1 + (k - 1) * rho > 0:
            values.append(k / (1 + (k - 1) * rho))
    return [float(q) for q in np.quantile(values, [0.025, 0.975])]


@pytest.mark.parametrize("chunk", [None, 100])  # every resample at once, or a few at a time
def test_the_n_eff_interval_is_the_documented_bootstrap(monkeypatch: pytest.MonkeyPatch, chunk: int | None) -> None:
    if chunk is not None:
        monkeypatch.setattr(panel_module, "RESAMPLE_CHUNK", chunk)
    errors = (np.random.default_rng(3).random((40, 4)) < 0.3).astype(float)
    errors[:, 3] = errors[:, 3] * (np.arange(40) < 3)  # a judge that errs on 3 pairs: constant in some resamples
    assert n_eff_interval(errors, draws=300, seed=11) == pytest.approx(reference_interval(errors, 300, 11), abs=1e-12)


def test_a_judge_whose_errors_never_vary_counts_neither_in_rho_nor_in_k() -> None:
    # Every label A; an error is a B. x and y err on some pairs, z on all, w on none: z's and w's
    # correlations are undefined, so the panel's n_eff is that of x and y, and it says why.
    x = [1, 1, 0, 0, 1, 0, 0, 0]
    y = [1, 1, 1, 0, 0, 0, 0, 0]
    items = [
        PanelItem({"x": "AB"[ex], "y": "AB"[ey], "z": "B", "w": "A"}, "A", label="A")
        for ex, ey in zip(x, y, strict=True)
    ]
    p = panel(items, ["x", "y", "z", "w"], bootstrap=200)
    r = np.corrcoef(x, y)[0, 1]
    assert r == pytest.approx(7 / 15)  # by hand: (n·Σxy − Σx·Σy) / (n·Σx² − (Σx)²) = (8·2 − 3·3) / (8·3 − 3·3)
    assert p.mean_error_correlation == pytest.approx(r)
    assert p.n_eff == pytest.approx(2 / (1 + r)) and p.n_eff_judges == 2  # not 4 / (1 + 3r) of 4
    assert p.n_eff_left_out == {"z": "always wrong", "w": "always right"}
    # The bootstrap keeps the same rule: the two constant columns change nothing.
    errors = np.array([x, y], dtype=float).T
    assert p.n_eff_ci == n_eff_interval(errors, draws=200)
    # Fewer than two judges whose errors vary: no effective number.
    lone = panel(items, ["x", "z", "w"], bootstrap=20)
    assert lone.n_eff is None and lone.n_eff_ci is None and lone.n_eff_judges == 1
    assert lone.n_eff_left_out == {"z": "always wrong", "w": "always right"}
