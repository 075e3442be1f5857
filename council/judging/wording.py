"""A verdict's measures and a jury's panel in words, the same for every front-end (the CLI's
``compare`` and batch summary, a batch's HTML page, the MCP tools). A comparison's two measures
are named apart: the judges' stated confidence is a number from 0 to 1, the agreement of the
votes or judges a level; said side by side, never as one ("confidence 0.32, high"). Pure: no
rich, no I/O."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from council.methods.panel import Panel


def verdict_measures(judge_confidence: float, agreement_level: str) -> str:
    """``judge confidence 0.32, agreement high``: each number named for what it is."""
    return f"judge confidence {judge_confidence:.2f}, agreement {agreement_level}"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def panel_judge_rows(p: Panel) -> tuple[list[str], list[list[str]]]:
    """The panel's judges as a table (its headers, a row per judge), the same on every front-end;
    the accuracy columns only with labels."""
    labelled = p.best_single_accuracy is not None
    headers = ["judge", "decides", "agrees with combined", "prefers first", "prefers longer"]
    headers += ["accuracy", "A first / B first"] if labelled else []
    rows = []
    for j in p.judges:
        row = [j.judge, pct(j.decided), pct(j.agreement_with_combined), pct(j.p_prefers_first),
               pct(j.p_prefers_longer)]  # fmt: skip
        if labelled:
            order = j.accuracy_per_order
            row += [pct(j.accuracy), "-" if order is None else f"{pct(order.a_first)} / {pct(order.b_first)}"]
        rows.append(row)
    return headers, rows


def panel_numbers(p: Panel) -> list[tuple[str, str]]:
    """The panel's own numbers, named: Krippendorff's α and, with labels, ρ̄, n_eff with its
    interval and the accuracies side by side."""
    rows = [("Krippendorff's α (nominal)", num(p.krippendorff_alpha))]
    if p.best_single_accuracy is not None:
        ci = "" if p.n_eff_ci is None else f" [{p.n_eff_ci[0]:.2f}, {p.n_eff_ci[1]:.2f}]"
        n_eff = "-" if p.n_eff is None else f"{p.n_eff:.2f}{ci} of {p.n_eff_judges}"
        if p.n_eff_left_out:
            n_eff += "; left out: " + ", ".join(f"{j} ({why})" for j, why in p.n_eff_left_out.items())
        rows += [
            ("mean error correlation ρ̄", num(p.mean_error_correlation)),
            ("n_eff (independent judges, 95% interval)", n_eff),
            ("accuracy: majority / combined / best single judge",
             f"{pct(p.majority_accuracy)} / {pct(p.combined_accuracy)} / {pct(p.best_single_accuracy)}"),
        ]  # fmt: skip
    return rows
