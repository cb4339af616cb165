"""What one fine-tuning run shows and when it counts (``hf_variants.lab.verdicts``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy import stats as scipy_stats

from hf_variants.lab import statistics, verdicts

Outcome = verdicts.RunOutcome
FALLING = (0.69, 0.4, 0.2, 0.1, 0.05, 0.02, 0.01, 0.01)


@pytest.mark.parametrize(
    ("losses", "flat"),
    [
        ((0.69, 0.70, 0.69, 0.68, 0.69, 0.70, 0.69, 0.69), True),  # ln 2 throughout
        ((0.69, 0.69, 0.69, 0.69, 0.69, 0.69, 0.40, 0.05), False),  # left it in the last quarter
        ((0.69, 0.50, 0.30, 0.10, 0.05, 0.02, 0.01, 0.01), False),
        ((1.10, 1.05, 1.00, 1.00), True),  # 1.00 ≥ 0.9 · 1.10 = 0.99
        ((0.69, 0.69, 0.69), False),  # too short to say
    ],
)
def test_a_run_that_ends_at_its_starting_loss_stayed_on_the_plateau(losses, flat) -> None:
    assert verdicts.stayed_on_plateau(list(losses)) is flat


def test_a_run_leaves_its_plateau_at_the_first_point_three_percent_below_its_first() -> None:
    def curve(losses: list[float]) -> list[dict[str, float]]:
        return [{"step": 15 * (i + 1), "loss": loss} for i, loss in enumerate(losses)]

    ln10 = 2.302585
    # 0.97 · 2.302585 = 2.2335: 2.24 is still on the plateau, 2.23 is off it (and later rises do not matter).
    assert verdicts.left_plateau_at(curve([ln10, 2.31, 2.29, 2.24, 2.23, 2.30, 1.9])) == 75
    assert verdicts.left_plateau_at(curve([ln10, 2.31, 2.29, 2.24, 2.30])) is None
    assert verdicts.left_plateau_at(curve([0.69, 0.60])) == 30  # 0.60 < 0.97 · 0.69 = 0.669
    assert verdicts.left_plateau_at([]) is None


def test_run_status_names_why_a_run_does_not_count() -> None:
    base = Outcome(0.9, chance=0.5, examples=400, losses=FALLING)
    assert verdicts.run_status(base) == verdicts.LEARNED
    assert verdicts.run_status(Outcome(None, failed="ODESolverError: …")) == verdicts.FAILED
    assert verdicts.run_status(replace(base, one_class=True)) == verdicts.ONE_CLASS
    assert verdicts.run_status(replace(base, losses=[0.69] * 8)) == verdicts.ON_PLATEAU
    # 0.5 + 1.96 · √(0.25 / 400) = 0.549: 54.5% is a guessing model's score, 56% is not
    assert verdicts.run_status(replace(base, value=0.545)) == verdicts.AT_CHANCE
    assert verdicts.run_status(replace(base, value=0.56)) == verdicts.LEARNED
    # a measure a study does not record: its test is not made
    assert verdicts.run_status(replace(base, value=0.1, chance=None)) == verdicts.LEARNED
    assert verdicts.run_status(replace(base, value=0.545, examples=None)) == verdicts.LEARNED
    assert verdicts.run_status(Outcome(0.9)) == verdicts.LEARNED


def test_summary_and_the_paired_difference_use_only_runs_that_learned() -> None:
    run = Outcome(None, chance=0.5, examples=400, losses=FALLING)
    stopped = Outcome(None, failed="NonFiniteStepError: Step 45: non-finite gradient in fc.weight. Nothing was updated")
    variant = {"1": replace(run, value=0.9), "2": replace(run, value=0.8), "3": stopped}
    control = {"1": replace(run, value=0.7), "2": replace(run, value=0.7), "3": replace(run, value=0.95)}
    interval = verdicts.summary(variant)
    assert (interval.mean, interval.n) == (pytest.approx(0.85), 2)
    comparison = verdicts.compare_pair(variant, control)
    assert comparison.per_protocol.difference.mean == pytest.approx(0.15)
    assert comparison.per_protocol.difference.n == 2
    assert comparison.left_out == {"variant": ["seed 3: failed (NonFiniteStepError: Step 45: non-finite gradient)"],
                                   "control": []}
    assert comparison.learned == {"variant": (2, 3), "control": (3, 3)}
    assert verdicts.summary({"1": Outcome(None, failed="x")}) is None
    solver = Outcome(None, failed="ODESolverError: Step 12: N-ODE block 0: the dopri5 solver failed (underflow in dt "
                                  "nan) after 80 function evaluations. The input may be stiff")  # fmt: skip
    assert verdicts.reason(solver) == ("failed (ODESolverError: Step 12: N-ODE block 0: the dopri5 solver failed "
                                       "(underflow in dt nan) after 80 function evaluations)")  # fmt: skip


def test_a_difference_without_spread_is_not_comparable() -> None:
    """Every seed at the same score for both models (a task at its ceiling) gives a zero-width interval, which
    measures nothing; a constant non-zero difference gets no interval either: neither is above, below or
    equivalent."""
    run = Outcome(None, chance=0.5, examples=400, losses=FALLING)
    ceiling = {str(seed): replace(run, value=1.0) for seed in (1, 2, 3)}
    tied = verdicts.compare_pair(ceiling, ceiling).per_protocol
    assert tied.outcome == verdicts.NOT_COMPARABLE
    assert tied.text == ("not comparable: the difference was +0.0 points in every one of 3 seeds (both scored the "
                         "same in every seed)")
    assert tied.difference.difference_text(100) == "+0.0 in every seed" and not tied.difference.excludes_zero
    below = verdicts.compare_pair({seed: replace(r, value=0.9) for seed, r in ceiling.items()}, ceiling).per_protocol
    assert below.text == ("not comparable: the difference was -10.0 points in every one of 3 seeds (no spread: no "
                          "interval)")


def simulated_pairs(difference: float, sd: float, n: int, draws: int = 200_000, seed: int = 0):
    """``draws`` simulated seed sets of ``n`` per-seed differences: their means and standard errors."""
    values = np.random.default_rng(seed).normal(difference, sd, (draws, n))
    return values.mean(axis=1), values.std(axis=1, ddof=1) / np.sqrt(n)


@pytest.mark.parametrize("n", [2, 3, 5, 12])
def test_the_detectable_difference_is_found_with_its_power(n: int) -> None:
    """A true difference of exactly the detectable size is found (95% interval excluding 0) in 80% of simulated
    seed sets; the central-t shortcut (t_{0.975} + t_{0.8}) · s/√n falls short of it, most at few seeds."""
    detectable = statistics.detectable_difference(1.0, n)
    means, errors = simulated_pairs(detectable, 1.0, n)
    found = np.mean(np.abs(means) / errors > scipy_stats.t.ppf(0.975, n - 1))
    assert found == pytest.approx(0.8, abs=0.005)
    shortcut = (scipy_stats.t.ppf(0.975, n - 1) + scipy_stats.t.ppf(0.8, n - 1)) / np.sqrt(n)
    assert shortcut < detectable
    shortfall = {2: 0.16, 3: 0.054}.get(n)
    if shortfall is not None:
        assert detectable / shortcut - 1 == pytest.approx(shortfall, abs=0.005)  # the shortcut is this much too small


def test_an_interval_gives_the_detectable_difference_of_its_spread() -> None:
    three = statistics.mean_interval([1.0, 2.0, 3.0])  # s = 1
    assert three.detectable_difference() == pytest.approx(statistics.detectable_difference(1.0, 3))
    assert three.detectable_difference(power=0.5) < three.detectable_difference()
    assert statistics.mean_interval([1.0, 1.0]).detectable_difference() is None  # no spread
    assert statistics.mean_interval([1.0]).detectable_difference() is None  # one value
    with pytest.raises(ValueError, match="n ≥ 2"):
        statistics.detectable_difference(1.0, 1)


@pytest.mark.parametrize(("difference", "sd", "n", "margin"),
                         [(0.0, 1.67, 3, 2.0), (0.0, 1.67, 5, 2.0), (0.5, 1.0, 6, 2.0), (1.5, 0.8, 10, 2.0)])
def test_the_equivalence_probability_against_simulated_seed_sets(difference, sd, n, margin) -> None:
    """Two one-sided tests call a pair equivalent when its 90% interval lies inside ±margin; the exact
    probability matches the share of simulated seed sets that are called so."""
    means, errors = simulated_pairs(difference, sd, n)
    half = scipy_stats.t.ppf(0.95, n - 1) * errors
    called = np.mean((means - half > -margin) & (means + half < margin))
    assert statistics.equivalence_probability(sd, n, margin, difference) == pytest.approx(called, abs=0.004)


def test_the_seeds_for_equivalence_are_the_fewest_that_reach_the_probability() -> None:
    """At the A/A spread of the old 400-example dev set (1.67 points) a null pair needs 10 seeds to be called
    equivalent within ±2 nine times in ten: 9 are not enough."""
    needed = statistics.seeds_for_equivalence(1.67, 2.0, 0.9)
    assert statistics.equivalence_probability(1.67, needed, 2.0) >= 0.9
    assert statistics.equivalence_probability(1.67, needed - 1, 2.0) < 0.9
    assert needed == 10
    assert statistics.seeds_for_equivalence(5.0, 0.1, 0.9, most=50) is None


# --------------------------------------------------------------------------------------------
# The learning-rate choice: one rule for compare, the grid and the GLUE studies
# --------------------------------------------------------------------------------------------
Run = verdicts.HeldOutRun


def test_the_rate_is_the_best_held_out_score_among_runs_that_learned() -> None:
    assert verdicts.choose_learning_rate({1e-3: Run(0.6), 3e-3: Run(0.7)}) == 3e-3
    assert verdicts.choose_learning_rate({3e-3: Run(0.7), 1e-3: Run(0.7)}) == 1e-3  # tie: the smaller
    # a tie with held-out losses recorded: the lower loss; with one loss missing, the smaller rate
    assert verdicts.choose_learning_rate({3e-3: Run(0.7, loss=0.41), 1e-3: Run(0.7, loss=0.52)}) == 3e-3
    assert verdicts.choose_learning_rate({3e-3: Run(0.7, loss=0.41), 1e-3: Run(0.7)}) == 1e-3
    assert verdicts.choose_learning_rate({3e-3: Run(0.7, loss=0.41), 1e-3: Run(0.8, loss=0.52)}) == 1e-3
    assert verdicts.choose_learning_rate({1e-3: Run(0.6), 3e-3: Run(0.9, one_class=True)}) == 1e-3
    assert verdicts.choose_learning_rate({1e-3: Run(None), 3e-3: Run(0.2)}) == 3e-3  # a failure is never chosen
    assert verdicts.choose_learning_rate({1e-3: Run(float("nan")), 3e-3: Run(0.1)}) == 3e-3


def test_without_a_run_that_learned_the_best_finished_then_the_smallest_rate() -> None:
    one_class = {1e-3: Run(0.5, one_class=True), 3e-3: Run(0.52, one_class=True), 1e-2: Run(None)}
    assert verdicts.choose_learning_rate(one_class) == 3e-3
    assert verdicts.choose_learning_rate({3e-3: Run(None), 1e-3: Run(None), 1e-2: Run(None)}) == 1e-3
    with pytest.raises(ValueError, match="sweep is empty"):
        verdicts.choose_learning_rate({})


@pytest.mark.parametrize(
    ("metrics", "expected"),
    [({"largest_class_share": 0.995}, True), ({"largest_class_share": 0.6}, False),
     ({"prediction_std": 0.0}, True), ({"prediction_std": 0.3}, False)],
)  # fmt: skip
def test_run_glue_collapse_measures_say_one_class(metrics: dict, expected: bool) -> None:
    assert verdicts.collapsed(metrics) is expected


# --------------------------------------------------------------------------------------------
# The verdict: above / below / equivalent within ±m / not resolved / not comparable
# --------------------------------------------------------------------------------------------
def runs_scoring(*values: float | None, chance: float | None = None) -> dict[str, Outcome]:
    """Seed → a run with each score (None: one that failed); with ``chance``, a score within the guessing bound
    of 400 examples is at chance."""
    return {str(seed): Outcome(None, failed="NonFiniteStepError: x") if value is None else
            Outcome(value, chance=chance, examples=400, losses=FALLING) for seed, value in enumerate(values)}


def test_the_statistics_against_hand_computed_values() -> None:
    """With n = 3 (two degrees of freedom) Student's t has a closed form, P(T > t) = ½ (1 − t / √(t² + 2)):
    differences 2, 3, 1 points have mean 2, s = 1, t = 2√3 = 3.4641, p = 1 − 3.4641/√14 = 0.0742; the 90%
    interval is 2 ± 2.9200 / √3 = [0.3141, 3.6859]; against ±2 the two one-sided tests give
    max(P(T > 4/0.5774), P(T < 0)) = 0.5."""
    interval = statistics.mean_interval([2.0, 3.0, 1.0])
    assert interval.standard_error == pytest.approx(1 / 3**0.5)
    assert interval.p_value() == pytest.approx(1 - 3.4641016 / 14**0.5, abs=1e-6)
    low, high = interval.bounds(0.90)
    assert (low, high) == (pytest.approx(0.314, abs=1e-3), pytest.approx(3.686, abs=1e-3))
    assert interval.equivalence_p(2.0) == pytest.approx(0.5)
    # TOST at 5% ⇔ the 90% interval inside the margin: 3.686 < 3.69 but not < 3.68
    assert interval.equivalence_p(3.69) < 0.05 < interval.equivalence_p(3.68)
    assert statistics.mean_interval([1.0, 1.0]).p_value() is None


def test_holm_adjusts_a_family_step_down() -> None:
    """p = 0.01, 0.04, 0.03, 0.20 (m = 4): sorted 0.01·4 = 0.04, 0.03·3 = 0.09, 0.04·2 = 0.08 → 0.09 (kept
    non-decreasing), 0.20·1 = 0.20; only the first stays below 0.05."""
    adjusted = statistics.holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.20})
    assert adjusted == {"a": pytest.approx(0.04), "c": pytest.approx(0.09), "b": pytest.approx(0.09),
                        "d": pytest.approx(0.20)}  # fmt: skip
    assert statistics.holm({"a": 0.6, "b": 0.7}) == {"a": 1.0, "b": 1.0}  # capped at 1
    assert statistics.holm({}) == {}


def test_fisher_and_the_binomial_tail_against_hand_computed_values() -> None:
    """Fisher: 3/3 against 0/3 learned — the one table at least as extreme either way has probability
    1/C(6,3) = 1/20 each: p = 0.1. Binomial: at least 3 of 15 tests at 5%: 1 − (0.95^15 + 15·0.05·0.95^14 +
    105·0.05²·0.95^13) = 0.0362; at least 1 of 15: 1 − 0.95^15 = 0.5367."""
    assert statistics.rates_p_value((3, 3), (0, 3)) == pytest.approx(0.1)
    assert statistics.rates_p_value((3, 3), (3, 3)) == pytest.approx(1.0)
    tail = 1 - (0.95**15 + 15 * 0.05 * 0.95**14 + 105 * 0.05**2 * 0.95**13)
    assert statistics.at_least_k_of_n(3, 15) == pytest.approx(tail) and tail == pytest.approx(0.0362, abs=1e-4)
    assert statistics.at_least_k_of_n(1, 15) == pytest.approx(1 - 0.95**15)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (1, 4), (3, 10), (10, 10), (2, 20)])
def test_the_exact_interval_of_a_rate_meets_its_definition(k: int, n: int) -> None:
    """Clopper–Pearson: at the low end, seeing at least k in n has probability 2.5%; at the high end, seeing at
    most k does (summed from the binomial's terms, not from the beta quantile the function uses); k = 0 and k = n
    have the closed forms 1 − 0.025^(1/n) and 0.025^(1/n)."""
    import math

    def at_most(k: int, p: float) -> float:
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k + 1))

    low, high = statistics.proportion_interval(k, n)
    assert low == (0.0 if k == 0 else pytest.approx(0.025 ** (1 / n) if k == n else low))
    assert high == (1.0 if k == n else pytest.approx(1 - 0.025 ** (1 / n) if k == 0 else high))
    if k > 0:
        assert 1 - at_most(k - 1, low) == pytest.approx(0.025, abs=1e-9)
    if k < n:
        assert at_most(k, high) == pytest.approx(0.025, abs=1e-9)
    with pytest.raises(ValueError, match="0 ≤ k ≤ n"):
        statistics.proportion_interval(n + 1, n)


@pytest.mark.parametrize(
    ("variant", "control", "outcome", "text"),
    [
        # differences +2, +3, +1 points: p = 0.074 (above), 90% interval [+0.3, +3.7], not inside ±2
        ((0.92, 0.93, 0.91), (0.90, 0.90, 0.90), verdicts.NOT_RESOLVED,
         "not resolved: +2.0 [-0.5, +4.5] points over 3 seeds (p = 0.074); the data still allow anything from -0.5 "
         "to +4.5 points, so neither a difference nor equivalence within ±2.0 is shown"),
        # differences +9, +7, +9: mean 8.33, s = 1.155, t = 12.5, p = 1 − 12.5/√158.25 = 0.0063
        ((0.99, 0.98, 0.99), (0.90, 0.91, 0.90), verdicts.ABOVE,
         "above its control: **+8.3 [+5.5, +11.2]** points over 3 seeds (p = 0.006)"),
        # differences +0.1, +0.2, 0.0: mean 0.1, s = 0.1; 95% interval 0.1 ± 4.303 · 0.0577 = [-0.15, +0.35], 90%
        # interval 0.1 ± 2.920 · 0.0577 = [-0.07, +0.27], inside ±2
        ((0.901, 0.902, 0.900), (0.90, 0.90, 0.90), verdicts.EQUIVALENT,
         "equivalent within ±2.0 points: +0.1 [-0.1, +0.3] points over 3 seeds (90% interval [-0.1, +0.3] inside "
         "±2.0; p = 0.000)"),
        ((0.9, None, None), (0.9, 0.9, 0.9), verdicts.NOT_COMPARABLE,
         "not comparable: fewer than 2 seeds where both learned"),
    ],
)  # fmt: skip
def test_one_verdict_rule_with_a_declared_margin(variant, control, outcome, text) -> None:
    verdict = verdicts.compare_pair(runs_scoring(*variant), runs_scoring(*control), margin=0.02).per_protocol
    assert verdict.outcome == outcome
    assert verdict.text == text
    assert "no difference" not in verdict.text


def test_above_and_below_are_adjusted_over_the_family() -> None:
    """Holm over the family: p = 0.0063 (differences +9, +7, +9) and p = 0.0377 (−40, −40, −20: t = 5,
    p = 1 − 5/√27): ×2 = 0.0127 and ×1 = 0.0377, both still below 0.05. A third pair at p = 0.074 makes the
    second ×2 = 0.0755: not resolved, though alone it would be below."""
    strong = (runs_scoring(0.99, 0.98, 0.99), runs_scoring(0.90, 0.91, 0.90))
    weaker = (runs_scoring(0.5, 0.5, 0.7), runs_scoring(0.9, 0.9, 0.9))
    borderline = (runs_scoring(0.92, 0.93, 0.91), runs_scoring(0.90, 0.90, 0.90))
    two = verdicts.compare_pairs({"strong": strong, "weaker": weaker})
    assert two["strong"].per_protocol.adjusted_p == pytest.approx(2 * (1 - 12.5 / 158.25**0.5), abs=1e-4)
    assert two["weaker"].per_protocol.outcome == verdicts.BELOW
    three = verdicts.compare_pairs({"strong": strong, "weaker": weaker, "borderline": borderline})
    assert three["weaker"].per_protocol.adjusted_p == pytest.approx(2 * (1 - 5 / 27**0.5), abs=1e-4)
    assert three["weaker"].per_protocol.outcome == verdicts.NOT_RESOLVED
    assert "Holm-adjusted over 3 pairs" in three["weaker"].per_protocol.text
    assert three["strong"].per_protocol.outcome == verdicts.ABOVE


def test_equivalence_is_adjusted_over_the_same_family() -> None:
    """Two one-sided tests are Holm-adjusted like the t-tests: two pairs each equivalent within ±2 alone (TOST
    p = 0.035 and 0.045) are not resolved together (the smaller doubled: 0.070, the larger raised to it), while a
    pair far inside the margin stays equivalent."""
    close = (runs_scoring(0.902, 0.906, 0.914), runs_scoring(0.90, 0.90, 0.90))  # +0.2, +0.6, +1.4 points
    closer_to_the_edge = (runs_scoring(0.905, 0.909, 0.916), runs_scoring(0.90, 0.90, 0.90))  # +0.5, +0.9, +1.6
    alone = {name: verdicts.compare_pair(*pair, margin=0.02).per_protocol
             for name, pair in (("close", close), ("edge", closer_to_the_edge))}  # fmt: skip
    tost = {name: verdict.difference.equivalence_p(0.02) for name, verdict in alone.items()}
    assert all(verdict.outcome == verdicts.EQUIVALENT for verdict in alone.values())
    assert tost["close"] == pytest.approx(0.0348, abs=1e-4) and tost["edge"] == pytest.approx(0.0448, abs=1e-4)
    tight = (runs_scoring(0.900, 0.901, 0.902), runs_scoring(0.90, 0.90, 0.90))
    family = verdicts.compare_pairs({"close": close, "edge": closer_to_the_edge, "tight": tight}, margins=0.02)
    for name in ("close", "edge"):
        assert family[name].per_protocol.outcome == verdicts.NOT_RESOLVED
        assert family[name].per_protocol.equivalence_p == pytest.approx(2 * tost["close"])
    assert family["tight"].per_protocol.outcome == verdicts.EQUIVALENT
    assert "Holm-adjusted over 3 pairs" in family["tight"].per_protocol.text


def test_counting_every_run_scores_a_run_that_did_not_learn_at_the_guessing_level() -> None:
    """The intention-to-treat difference: the variant's two runs that did not learn (one failed, one at chance)
    count at the guessing level 0.5: differences −40, −40, −20 → below, while over the runs that learned the pair
    is not comparable (one seed where both learned): the conclusion says the two readings disagree."""
    variant = runs_scoring(None, 0.52, 0.7, chance=0.5)
    assert verdicts.run_status(variant["1"]) == verdicts.AT_CHANCE
    comparison = verdicts.compare_pair(variant, runs_scoring(0.9, 0.9, 0.9, chance=0.5), guessing=0.5)
    assert comparison.per_protocol.outcome == verdicts.NOT_COMPARABLE
    itt = comparison.intention_to_treat
    assert [round(100 * itt.difference.mean, 1), itt.difference.n, itt.outcome] == [-33.3, 3, verdicts.BELOW]
    assert comparison.learned == {"variant": (1, 3), "control": (3, 3)}
    assert comparison.learned_p == pytest.approx(0.4)  # Fisher: 1/3 against 3/3
    assert comparison.disagreement == ("the verdict differs (not comparable over the runs that learned, below its "
                                       "control counting every run)")  # fmt: skip
    assert "the two readings disagree" in comparison.text and "guessing level 50.0" in comparison.text


def test_the_two_readings_disagreeing_in_sign_is_said() -> None:
    """Over the runs that learned the variant is ahead (+2, +3 points at seeds 0 and 1); its failed seed 2,
    counted at the guessing level 0.5 against the control's 0.9, turns the mean negative."""
    comparison = verdicts.compare_pair(runs_scoring(0.92, 0.93, None), runs_scoring(0.90, 0.90, 0.90),
                                       guessing=0.5)  # fmt: skip
    pp, itt = comparison.per_protocol, comparison.intention_to_treat
    assert pp.difference.mean > 0 > itt.difference.mean
    assert pp.outcome == itt.outcome == verdicts.NOT_RESOLVED and comparison.disagreement == "the sign differs"


def test_a_failed_calibration_makes_every_pair_not_comparable_with_its_interval_shown() -> None:
    pair = (runs_scoring(0.99, 0.98, 0.99), runs_scoring(0.90, 0.91, 0.90))
    comparison = verdicts.compare_pairs({"p": pair}, why_not="this budget is not calibrated")["p"]
    assert comparison.per_protocol.outcome == verdicts.NOT_COMPARABLE
    assert comparison.per_protocol.text == ("not comparable: this budget is not calibrated; **+8.3 [+5.5, +11.2]** "
                                            "points over 3 seeds")
