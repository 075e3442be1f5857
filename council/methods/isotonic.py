"""Isotonic regression by the pool-adjacent-violators algorithm (pure): the monotone map from a
verdict's stated probability to how often such verdicts are right (``council calibrate``).

The fit is scikit-learn's ``IsotonicRegression(out_of_bounds="clip")``'s, which the tests check it
against: points with the same x are pooled first (their weighted mean target, their summed weight);
then, along increasing x, any block whose mean exceeds the next block's is merged with it (the
means weighted), until the block means never decrease. The map is the line through the blocks'
points, flat beyond the first and last x. The write-up is in docs/methods.md ("Calibration map").
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class IsotonicMap:
    """Breakpoints ``xs`` (strictly increasing) and their values ``ys`` (non-decreasing); the map
    interpolates linearly between them and is clipped to the end values beyond them."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]

    def __call__(self, x: float) -> float:
        xs, ys = self.xs, self.ys
        if x <= xs[0]:
            return ys[0]
        if x >= xs[-1]:
            return ys[-1]
        i = bisect.bisect_right(xs, x)  # xs[i - 1] <= x < xs[i]
        x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
        return y0 + (x - x0) * (y1 - y0) / (x1 - x0)

    def points(self) -> list[list[float]]:
        """The breakpoints as ``[[x, y], ...]`` (what the store keeps)."""
        return [[x, y] for x, y in zip(self.xs, self.ys, strict=True)]

    @classmethod
    def from_points(cls, points: Sequence[Sequence[float]]) -> IsotonicMap:
        xs = tuple(float(p[0]) for p in points)
        ys = tuple(float(p[1]) for p in points)
        if (
            not xs
            or any(b <= a for a, b in zip(xs, xs[1:], strict=False))
            or any(b < a for a, b in zip(ys, ys[1:], strict=False))
        ):
            raise ValueError("a calibration map needs increasing x and non-decreasing y")
        return cls(xs, ys)


def fit_isotonic(x: Sequence[float], y: Sequence[float], weights: Sequence[float] | None = None) -> IsotonicMap:
    """The non-decreasing least-squares fit of ``y`` on ``x`` (weighted by ``weights``)."""
    if len(x) != len(y) or (weights is not None and len(weights) != len(x)):
        raise ValueError("one target per x (and one weight each)")
    if not x:
        raise ValueError("isotonic regression needs at least one point")
    w = weights if weights is not None else [1.0] * len(x)
    # Pool equal x: [x, Σ w·y, Σ w].
    pooled: list[list[float]] = []
    for xi, yi, wi in sorted(zip(x, y, w, strict=True)):
        if pooled and pooled[-1][0] == xi:
            pooled[-1][1] += wi * yi
            pooled[-1][2] += wi
        else:
            pooled.append([float(xi), wi * yi, float(wi)])
    # Pool adjacent violators: blocks of [Σ w·y, Σ w, points], merged while a mean decreases.
    blocks: list[list[float]] = []
    for _, wy, wt in pooled:
        blocks.append([wy, wt, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] >= blocks[-1][0] / blocks[-1][1]:
            wy2, wt2, n2 = blocks.pop()
            blocks[-1][0] += wy2
            blocks[-1][1] += wt2
            blocks[-1][2] += n2
    fitted = [b[0] / b[1] for b in blocks for _ in range(int(b[2]))]
    xs = [p[0] for p in pooled]
    # A point inside a flat run changes nothing on the line: only the run's ends are kept.
    keep = [i for i in range(len(xs)) if i in (0, len(xs) - 1) or fitted[i] != fitted[i - 1]
            or fitted[i] != fitted[i + 1]]  # fmt: skip
    return IsotonicMap(tuple(xs[i] for i in keep), tuple(fitted[i] for i in keep))
