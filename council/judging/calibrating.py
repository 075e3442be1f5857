"""A batch's verdict probabilities against its labels (the summary's ``calibration``), and the
calibration maps fitted on them (``council calibrate``, ``--calibration NAME``).

Every combined pair verdict has a probability: under ``--combine dawid-skene`` the posterior
(``council.judging.jury``); under the vote, all the vote knows of a pair, the share of its valid
passes (every judge in every order, every vote) that name the combined verdict. A map is an
isotonic fit (:mod:`council.methods.isotonic`) of right verdicts on those probabilities over a
labelled batch, and applies only to probabilities made the same way. docs/evaluation/batches.md
("Calibrated probabilities") says what a user sees; docs/methods.md ("Calibration map") the method.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from council.errors import NotFoundError, UsageError
from council.methods.calibration import Calibration, ReliabilityBin, calibration, vote_share
from council.methods.isotonic import IsotonicMap, fit_isotonic

if TYPE_CHECKING:
    from council.storage import Store

#: The fewest labelled pairs a map is fitted on: fewer leave most of its steps to chance.
MIN_ITEMS = 20
#: A map's name: shown in summaries and typed on command lines.
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class CalibrationMap:
    """A stored map as a batch applies it: its ``name``, the batch it was ``fitted_on`` and how
    that batch combined its verdicts (``combine``)."""

    name: str
    fitted_on: str
    combine: str
    mapping: IsotonicMap


class AppliedCalibration(BaseModel):
    """The summary's ``calibrated``: the map applied, and with labels the calibrated probabilities'
    calibration (ECE and Brier null, the bins empty, without labelled pairs)."""

    name: str
    fitted_on: str
    ece: float | None
    brier: float | None
    bins: list[ReliabilityBin]


def verdict_probability(result: Mapping[str, Any]) -> float | None:
    """The probability of a pair's combined verdict: the posterior where the combination gave one,
    else the share of its valid passes naming the verdict (None without any)."""
    if result.get("probability") is not None:
        return float(result["probability"])
    winners = [p["winner"] for p in result.get("passes", ()) if p["valid"] and p["winner"]]
    return vote_share(winners, result["winner"])


def judged_pair(row: Mapping[str, Any]) -> bool:
    return row["mode"] == "pairwise" and row["status"] == "ok" and bool(row.get("result"))


class CalibrationTally:
    """The labelled pairs' probabilities (raw and, with a map, calibrated) and whether each verdict
    was right, gathered as a batch's rows are read (three values a labelled pair)."""

    def __init__(self, applied: CalibrationMap | None = None) -> None:
        self.applied = applied
        self.raw: list[float] = []
        self.calibrated: list[float] = []
        self.right: list[bool] = []

    def add(self, row: Mapping[str, Any]) -> None:
        if not row.get("label") or not judged_pair(row):
            return
        result = row["result"]
        p = verdict_probability(result)
        if p is None:
            return
        self.raw.append(p)
        self.right.append(row["winner"] == row["label"])
        if self.applied is not None:
            self.calibrated.append(self.applied.mapping(p))

    def result(self) -> Calibration | None:
        return calibration(self.raw, self.right) if self.raw else None

    def applied_result(self) -> AppliedCalibration | None:
        if self.applied is None:
            return None
        c = calibration(self.calibrated, self.right)
        return AppliedCalibration(name=self.applied.name, fitted_on=self.applied.fitted_on, ece=c.ece,
                                  brier=c.brier, bins=c.bins)  # fmt: skip


def with_probability(rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """``rows`` with each judged pair's result carrying ``probability`` (SPEC.md, "Juries"): the
    posterior where the combination gave one, else the vote's share."""
    for row in rows:
        if judged_pair(row):
            result = row["result"]
            result["probability"] = verdict_probability(result)
        yield row


def calibrated_rows(rows: Iterable[dict[str, Any]], applied: CalibrationMap) -> Iterator[dict[str, Any]]:
    """``rows`` (``council.judging.batch.judged_rows``', whose judged pairs carry ``probability``)
    with each judged pair's result gaining ``calibrated_probability``, the map's value of it."""
    for row in rows:
        if judged_pair(row):
            result = row["result"]
            p = result.get("probability")
            if p is not None:
                result["calibrated_probability"] = applied.mapping(p)
        yield row


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise UsageError("a calibration map's name is 1 to 64 letters, digits, '.', '_' or '-', starting with "
                         "a letter or digit")  # fmt: skip
    return name


def load_map(store: Store, name: str, combine: str) -> CalibrationMap:
    """The stored map ``name`` for a batch combining by ``combine``; a ``UsageError`` when there is
    none or it was fitted on probabilities made another way."""
    found = store.calibration_map(check_name(name))
    if found is None:
        raise NotFoundError(f"no calibration map {name!r} in the store (make one with council calibrate)")
    if found["combine"] != combine:
        raise UsageError(
            f"calibration map {name!r} was fitted on {found['combine']} probabilities; this batch combines by "
            f"{combine}: fit a map on a batch combined the same way"
        )
    return CalibrationMap(name, found["batch_id"], found["combine"], IsotonicMap.from_points(found["points"]))


class FittedMap(BaseModel):
    """What ``council calibrate`` kept, with the batch's calibration before and after the map (in
    sample: the map is fitted on these very pairs)."""

    name: str
    batch_id: str
    combine: str
    items: int
    points: list[list[float]]
    ece: float | None
    brier: float | None
    ece_calibrated: float | None
    brier_calibrated: float | None


def fit_map(store: Store, name: str, batch_id: str, combine: str, rows: Iterable[Mapping[str, Any]]) -> FittedMap:
    """Fit the isotonic map of the right verdicts on their probabilities over ``rows`` (batch
    ``batch_id``'s, combined by ``combine``: ``council.judging.batch.judged_rows``) and keep it
    as ``name`` (replacing a map of that name)."""
    tally = CalibrationTally()
    for row in rows:
        tally.add(row)
    n = len(tally.raw)
    if not n:
        raise UsageError(f"batch {batch_id} has no labelled pair: a calibration map is fitted on items with a label")
    if n < MIN_ITEMS:
        raise UsageError(f"batch {batch_id} has {n} labelled pairs; a calibration map needs at least {MIN_ITEMS}")
    mapping = fit_isotonic(tally.raw, [1.0 if ok else 0.0 for ok in tally.right])
    store.save_calibration_map(name, batch_id=batch_id, combine=combine, items=n, points=mapping.points())
    before = calibration(tally.raw, tally.right)
    after = calibration([mapping(p) for p in tally.raw], tally.right)
    return FittedMap(name=name, batch_id=batch_id, combine=combine, items=n, points=mapping.points(),
                     ece=before.ece, brier=before.brier, ece_calibrated=after.ece,
                     brier_calibrated=after.brier)  # fmt: skip
