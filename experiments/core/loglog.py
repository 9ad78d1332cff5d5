"""How a cost grows: a straight line fitted on log-log axes, and the segments that leave it.

A cost ``y`` that grows as a power of the state ``x`` (``y = a x^k``) is a straight line of slope
``k`` on log-log axes: ``k = 1`` is linear growth (twice the state, twice the time), ``k = 0`` a
cost that does not grow, ``k > 1`` one that grows faster than the state (a cache or a server's
memory that ran out).  :func:`fit` finds ``k`` by least squares on ``log10 x`` and ``log10 y``;
:func:`bends` compares every segment between neighbouring points with it: a segment whose own
slope differs from the fitted one by more than a stated tolerance is where the curve bends, and
its two ends say between which sizes.

Only positive values have a logarithm: a point with ``x <= 0`` or ``y <= 0`` (a cost of zero, a
metric the run did not report) is left out of the fit and counted in :attr:`Fit.left_out`, never
turned into a number it is not.  A fit needs two distinct ``x``; with fewer, :func:`fit` returns
``None``.  Nothing here reads a file or a clock: the functions are pure, so they are tested on
numbers alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

#: how far (in slope units) a segment's own slope may be from the fitted one before it is called
#: a bend: 0.5 is the difference between linear growth and growth with the square root
BEND_TOLERANCE = 0.5


@dataclass(frozen=True)
class Fit:
    """``log10 y = intercept + slope * log10 x`` over the points used (``x_min``..``x_max``)."""

    slope: float
    intercept: float
    #: the share of the variance of ``log10 y`` the line explains (1.0: every point on it)
    r2: float
    points: int
    x_min: float
    x_max: float
    #: points left out because ``x`` or ``y`` was not positive
    left_out: int = 0

    def predict(self, x: float) -> float:
        """The fitted ``y`` at ``x`` (``x > 0``), inside or outside the measured range."""
        return 10 ** (self.intercept + self.slope * math.log10(x))


@dataclass(frozen=True)
class Bend:
    """A segment between neighbouring points whose own slope is not the fitted one."""

    x_from: float
    x_to: float
    slope: float  # the segment's own slope on log-log axes
    fitted: float  # the fit's slope over all the points

    @property
    def steeper(self) -> bool:
        """The cost grows faster than the fit says here (what an exhausted cache looks like)."""
        return self.slope > self.fitted


def usable(xs: Sequence[float | None], ys: Sequence[float | None]) -> list[tuple[float, float]]:
    """The points a log-log axis can hold (both coordinates positive and finite), by ``x``."""
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values but {len(ys)} y values")
    return sorted((float(x), float(y)) for x, y in zip(xs, ys)
                  if x is not None and y is not None and x > 0 and y > 0
                  and math.isfinite(x) and math.isfinite(y))


def fit(xs: Sequence[float | None], ys: Sequence[float | None]) -> Fit | None:
    """The least-squares line through ``(log10 x, log10 y)``; ``None`` without two distinct
    positive ``x`` with a positive ``y``."""
    pts = usable(xs, ys)
    lx = [math.log10(x) for x, _ in pts]
    ly = [math.log10(y) for _, y in pts]
    if len(set(lx)) < 2:
        return None
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    sxx = sum((a - mx) ** 2 for a in lx)
    sxy = sum((a - mx) * (b - my) for a, b in zip(lx, ly))
    slope = sxy / sxx
    intercept = my - slope * mx
    syy = sum((b - my) ** 2 for b in ly)
    residual = sum((b - (intercept + slope * a)) ** 2 for a, b in zip(lx, ly))
    r2 = 1.0 - residual / syy if syy > 0 else 1.0
    return Fit(slope=slope, intercept=intercept, r2=r2, points=len(pts), x_min=pts[0][0],
               x_max=pts[-1][0], left_out=len(xs) - len(pts))


def segment_slopes(xs: Sequence[float | None], ys: Sequence[float | None]) -> list[tuple[float, float, float]]:
    """``(x_from, x_to, slope)`` of every segment between neighbouring usable points, by ``x``
    (points at the same ``x`` make no segment)."""
    pts = usable(xs, ys)
    out = []
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x1 > x0:
            out.append((x0, x1, (math.log10(y1) - math.log10(y0)) / (math.log10(x1) - math.log10(x0))))
    return out


def bends(xs: Sequence[float | None], ys: Sequence[float | None], tolerance: float = BEND_TOLERANCE,
          fitted: Fit | None = None) -> list[Bend]:
    """The segments whose own slope differs from the fit's by more than ``tolerance``, in order
    of ``x``; none for a curve with fewer than three points (two points are their own fit)."""
    line = fitted or fit(xs, ys)
    segments = segment_slopes(xs, ys)
    if line is None or len(segments) < 2:
        return []
    return [Bend(x0, x1, s, line.slope) for x0, x1, s in segments if abs(s - line.slope) > tolerance]
