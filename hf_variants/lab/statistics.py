"""Means with 95% intervals, paired differences, the tests the verdicts are made of (the paired t-test,
two one-sided tests for equivalence, Holm's adjustment, Fisher's exact test of two rates, the binomial tail
of a tally) and the "did not learn" rule of the comparisons."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
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

    @property
    def sd(self) -> float:
        """The values' standard deviation ``s``, recovered from the half-width (``nan`` without spread)."""
        return self.standard_error * math.sqrt(self.n)

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
        """The smallest true mean this test finds (its 95% interval excluding 0) with probability ``power``, given
        the values' spread and number (:func:`detectable_difference`, the exact noncentral-t computation); None
        without an interval (n < 2 or no spread)."""
        if not self.spread:
            return None
        return detectable_difference(self.sd, self.n, power)

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


# --------------------------------------------------------------------------------------------
# Power of the paired t-test and of the equivalence test, exact (noncentral t, Owen's integral)
# --------------------------------------------------------------------------------------------
def finds_difference_probability(effect: float, sd: float, n: int) -> float:
    """The probability that the paired t-test on ``n`` seeds finds a true mean difference ``effect`` (its 95%
    interval excludes 0), when the per-seed differences have standard deviation ``sd``:
    ``P(|T| > t_{0.975, n−1})`` for ``T`` noncentral t with ``n − 1`` degrees of freedom and noncentrality
    ``effect · √n / sd``."""
    df, critical = n - 1, float(stats.t.ppf(0.975, n - 1))
    noncentrality = abs(effect) * math.sqrt(n) / sd  # the test is symmetric in the sign of the effect
    far_tail = float(stats.nct.cdf(-critical, df, noncentrality))
    if not math.isfinite(far_tail):  # SciPy returns NaN deep in the tail (below 1e-15) for some arguments
        far_tail = 0.0
    return float(stats.nct.sf(critical, df, noncentrality)) + far_tail


def detectable_difference(sd: float, n: int, power: float = 0.8) -> float:
    """The smallest true mean difference the paired t-test on ``n`` seeds finds with probability ``power``
    (:func:`finds_difference_probability`), solved exactly on the noncentral t. The central-t shortcut
    ``(t_{0.975} + t_{power}) · sd / √n`` is 16% too small at n = 2 and 5% at n = 3."""
    if n < 2 or not sd > 0:
        raise ValueError(f"detectable_difference: needs n ≥ 2 seeds and a spread above 0, got n={n}, sd={sd}")
    if not 0.025 < power < 1:
        raise ValueError(f"detectable_difference: needs 0.025 < power < 1, got {power}")
    from scipy.optimize import brentq

    high = sd
    while finds_difference_probability(high, sd, n) < power:
        high *= 2
    return float(brentq(lambda effect: finds_difference_probability(effect, sd, n) - power, 0.0, high, xtol=1e-10))


def equivalence_probability(sd: float, n: int, margin: float, difference: float = 0.0) -> float:
    """The probability that two one-sided tests at 5% on ``n`` seeds call a pair equivalent within ``±margin``
    (its 90% interval inside the margins) when the true mean difference is ``difference`` and the per-seed
    differences have standard deviation ``sd``. Exact (Owen 1965): given the sample deviation ``s``, the mean
    must fall within ``±(margin − t_{0.95, n−1} · s/√n)``; that is integrated over ``(n − 1) s² / sd² ∼ χ²_{n−1}``."""
    if n < 2 or not sd > 0 or not margin > 0:
        raise ValueError(f"equivalence_probability: needs n ≥ 2, sd > 0 and margin > 0, got n={n}, sd={sd}, "
                         f"margin={margin}")  # fmt: skip
    from scipy.integrate import quad

    df, critical, root_n = n - 1, float(stats.t.ppf(0.95, n - 1)), math.sqrt(n)

    def inside(chi_square: float) -> float:
        room = margin - critical * sd * math.sqrt(chi_square / df) / root_n  # how far the mean may stray
        if room <= 0:
            return 0.0
        scale = sd / root_n
        window = stats.norm.cdf((room - difference) / scale) - stats.norm.cdf((-room - difference) / scale)
        return float(window * stats.chi2.pdf(chi_square, df))

    widest = df * (margin * root_n / (critical * sd)) ** 2  # beyond it the interval is wider than ±margin
    low, high = (float(stats.chi2.ppf(tail, df)) for tail in (1e-13, 1 - 1e-13))  # where χ² has its mass
    if widest <= low:
        return 0.0
    high = min(widest, high)
    return float(min(1.0, quad(inside, low, high, points=[min(max(df, low), high)], limit=200)[0]))


def fewest_seeds(probability_at: Callable[[int], float], target: float, most: int = 1000) -> int | None:
    """The fewest seeds ``n`` (at least 2, at most ``most``) with ``probability_at(n) ≥ target``, for a probability that
    grows with the seeds (a bisection); None when ``most`` seeds do not reach it."""
    if probability_at(most) < target:
        return None
    low, high = 2, most
    while low < high:
        middle = (low + high) // 2
        low, high = (middle + 1, high) if probability_at(middle) < target else (low, middle)
    return low


def seeds_for_equivalence(sd: float, margin: float, probability: float = 0.8, most: int = 1000) -> int | None:
    """The fewest seeds (at least 2) at which a pair with no true difference and per-seed standard deviation
    ``sd`` is called equivalent within ``±margin`` with at least ``probability``
    (:func:`equivalence_probability`); None when even ``most`` seeds do not reach it."""
    return fewest_seeds(lambda n: equivalence_probability(sd, n, margin), probability, most)
