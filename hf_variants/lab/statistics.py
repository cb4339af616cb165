"""Means with 95% intervals, paired differences, the tests the verdicts are made of (the paired t-test,
two one-sided tests for equivalence, Holm's adjustment, Fisher's exact test of two rates, the binomial tail
of a tally) and the "did not learn" rule of the comparisons."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

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

    @property
    def standard_error(self) -> float:
        """``s / √n``, recovered from the 95% half-width (``nan`` without spread)."""
        if not self.spread:
            return math.nan
        return self.half_width / float(stats.t.ppf(0.975, self.n - 1))

    def p_value(self) -> float | None:
        """The two-sided one-sample t-test of mean 0 (the paired t-test for a difference); None without
        spread. Below 0.05 exactly when the 95% interval excludes 0."""
        if not self.spread:
            return None
        return float(2 * stats.t.sf(abs(self.mean) / self.standard_error, self.n - 1))

    def bounds(self, confidence: float) -> tuple[float, float]:
        """The two-sided Student-t interval at ``confidence`` (0.90 for the equivalence test)."""
        half = float(stats.t.ppf(0.5 + confidence / 2, self.n - 1)) * self.standard_error
        return self.mean - half, self.mean + half

    def equivalence_p(self, margin: float) -> float | None:
        """Two one-sided t-tests (TOST) of ``|mean| ≥ margin``: the larger of the two one-sided p-values.
        Below 0.05 exactly when the 90% interval lies inside ``(−margin, +margin)``; None without spread."""
        if not self.spread:
            return None
        above_low = float(stats.t.sf((self.mean + margin) / self.standard_error, self.n - 1))
        below_high = float(stats.t.cdf((self.mean - margin) / self.standard_error, self.n - 1))
        return max(above_low, below_high)

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

    def difference_text(self, scale: float = 1.0, digits: int = 1, bold: bool = True) -> str:
        """A difference as ``+mean [low, high]`` times ``scale`` (``digits`` decimals), bold when the interval
        excludes 0 (and ``bold``); without spread, ``+mean in every seed`` (a zero-width interval would read as
        precision)."""
        if self.n >= 2 and not self.spread:
            return f"{scale * self.mean:+.{digits}f} in every seed"
        text = f"{scale * self.mean:+.{digits}f} [{scale * self.low:+.{digits}f}, {scale * self.high:+.{digits}f}]"
        return f"**{text}**" if bold and self.excludes_zero else text


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


Key = TypeVar("Key", bound=Hashable)


def holm(p_values: Mapping[Key, float]) -> dict[Key, float]:
    """Holm's step-down adjustment of a family of p-values: sorted ascending, the i-th (from 1) of m is
    multiplied by ``m − i + 1``, made non-decreasing and capped at 1. A hypothesis is rejected at α
    when its adjusted p-value is below α; the family-wise error rate is then at most α."""
    order = sorted(p_values, key=lambda key: p_values[key])
    adjusted, running = {}, 0.0
    for index, key in enumerate(order):
        running = max(running, min(1.0, (len(order) - index) * p_values[key]))
        adjusted[key] = running
    return adjusted


def rates_p_value(first: tuple[int, int], second: tuple[int, int]) -> float:
    """Fisher's exact two-sided test that two rates (``(successes, trials)`` each) are equal; 1 when
    either side has no trials."""
    (k1, n1), (k2, n2) = first, second
    if n1 == 0 or n2 == 0:
        return 1.0
    return float(stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue)


def at_least_k_of_n(k: int, n: int, chance: float = 0.05) -> float:
    """The probability that at least ``k`` of ``n`` independent tests, each positive with probability
    ``chance``, are positive: the binomial tail ``P(X ≥ k)``, summed in exact fractions, so that a rendered
    percentage does not depend on the SciPy version (P(X ≥ 1 of 2) is 9.75% exactly). Tests that share a control or
    seeds are not independent, so this is a reading of a tally, not a test of it."""
    p = Fraction(str(chance))
    return float(sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(max(k, 0), n + 1)))


def proportion_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Clopper–Pearson (exact) interval of a rate seen ``k`` times in ``n``: its ends are the rates at which
    seeing at least (at most) ``k`` has probability ``(1 − confidence) / 2``; ``(0, 1)`` for ``n = 0``."""
    if not 0 <= k <= n:
        raise ValueError(f"proportion_interval: needs 0 ≤ k ≤ n, got k={k}, n={n}")
    tail = (1 - confidence) / 2
    low = 0.0 if k == 0 else float(stats.beta.ppf(tail, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1 - tail, k + 1, n - k))
    return low, high
