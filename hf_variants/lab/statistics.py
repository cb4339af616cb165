"""Means with 95% intervals, paired differences and the "did not learn" rule of the comparisons."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

#: A run "did not learn" when at least this share of its test predictions is one class.
ONE_CLASS_SHARE = 0.99


@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` values with the half-width of its two-sided 95% Student-t interval
    (``nan`` half-width for fewer than two values)."""

    mean: float
    half_width: float
    n: int

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    @property
    def spread(self) -> bool:
        """Whether the values differ at all: every value equal (a task at its ceiling or floor for both models)
        gives a zero-width interval, which measures nothing."""
        return self.n >= 2 and self.half_width > 0

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies entirely above or below 0 (never, with fewer than two values or no spread)."""
        return self.spread and (self.low > 0 or self.high < 0)

    def detectable_difference(self, power: float = 0.8) -> float | None:
        """The smallest true mean this test finds (its interval excluding 0) with probability ``power``,
        given the values' spread and number: ``(t_{0.975, n−1} + t_{power, n−1}) · s / √n`` (the paired
        t-test's minimum detectable difference at α = 0.05); None without an interval (n < 2 or no
        spread)."""
        if not self.spread:
            return None
        t_interval = float(stats.t.ppf(0.975, self.n - 1))
        return self.half_width * (1 + float(stats.t.ppf(power, self.n - 1)) / t_interval)

    def mean_text(self, scale: float = 1.0, digits: int = 1) -> str:
        """``mean ± half-width`` (``mean (n = 1)`` for one value), times ``scale``, ``digits`` decimals."""
        if math.isnan(self.half_width):
            return f"{scale * self.mean:.{digits}f} (n = {self.n})"
        return f"{scale * self.mean:.{digits}f} ± {scale * self.half_width:.{digits}f}"

    def difference_text(self, scale: float = 1.0, digits: int = 1) -> str:
        """A difference as ``+mean [low, high]`` times ``scale`` (``digits`` decimals), bold when the interval
        excludes 0; without spread, ``+mean in every seed`` (a zero-width interval would read as precision)."""
        if self.n >= 2 and not self.spread:
            return f"{scale * self.mean:+.{digits}f} in every seed"
        text = f"{scale * self.mean:+.{digits}f} [{scale * self.low:+.{digits}f}, {scale * self.high:+.{digits}f}]"
        return f"**{text}**" if self.excludes_zero else text


def mean_interval(values: Sequence[float]) -> Interval:
    """``mean ± t_{0.975, n−1} · s / √n``; raises ``ValueError`` for no values or a non-finite one."""
    if not values:
        raise ValueError("mean_interval needs at least one value.")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"mean_interval got a non-finite value: {list(values)!r}.")
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return Interval(mean, math.nan, n)
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return Interval(mean, float(stats.t.ppf(0.975, n - 1)) * math.sqrt(variance / n), n)


def paired_difference(variant: dict[int, float], control: dict[int, float]) -> Interval:
    """Interval of ``variant[s] − control[s]`` over the seeds ``s`` both have (paired by seed)."""
    seeds = sorted(variant.keys() & control.keys())
    if not seeds:
        raise ValueError("paired_difference: the variant and its control share no seed.")
    return mean_interval([variant[s] - control[s] for s in seeds])


def paired_difference_if_any(variant: dict[int, float], control: dict[int, float]) -> Interval | None:
    """:func:`paired_difference`, or None with fewer than two shared seeds (no interval, no verdict)."""
    return paired_difference(variant, control) if len(variant.keys() & control.keys()) >= 2 else None


def guessing_bound(chance: float, examples: int) -> float:
    """The accuracy that a model guessing at ``chance`` (the majority share) stays below with 97.5%
    probability on ``examples`` items: ``chance + 1.96 · √(chance (1 − chance) / examples)``."""
    return chance + 1.96 * math.sqrt(chance * (1 - chance) / examples)


def predicts_one_class(prediction_counts: Sequence[int]) -> bool:
    """Whether one class takes at least :data:`ONE_CLASS_SHARE` of the predictions."""
    total = sum(prediction_counts)
    return total > 0 and max(prediction_counts) >= ONE_CLASS_SHARE * total


def majority_share(labels: Sequence[int]) -> float:
    """Accuracy of always predicting the most frequent label (the chance score of a one-class model)."""
    return max(labels.count(c) for c in set(labels)) / len(labels) if labels else math.nan
