"""What one fine-tuning run shows and when it counts (``hf_variants.lab.verdicts``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

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


def test_summary_and_pair_verdict_use_only_runs_that_learned() -> None:
    run = Outcome(None, chance=0.5, examples=400, losses=FALLING)
    stopped = Outcome(None, failed="NonFiniteStepError: Step 45: non-finite gradient in fc.weight. Nothing was updated")
    variant = {"1": replace(run, value=0.9), "2": replace(run, value=0.8), "3": stopped}
    control = {"1": replace(run, value=0.7), "2": replace(run, value=0.7), "3": replace(run, value=0.95)}
    interval = verdicts.summary(variant)
    assert (interval.mean, interval.n) == (pytest.approx(0.85), 2)
    verdict = verdicts.pair_verdict(variant, control)
    assert verdict.difference.mean == pytest.approx(0.15) and verdict.difference.n == 2
    assert verdict.left_out == {"variant": ["seed 3: failed (NonFiniteStepError: Step 45: non-finite gradient)"],
                                "control": []}
    assert verdict.seeds == 3
    assert verdicts.summary({"1": Outcome(None, failed="x")}) is None
    solver = Outcome(None, failed="ODESolverError: Step 12: N-ODE block 0: the dopri5 solver failed (underflow in dt "
                                  "nan) after 80 function evaluations. The input may be stiff")  # fmt: skip
    assert verdicts.reason(solver) == ("failed (ODESolverError: Step 12: N-ODE block 0: the dopri5 solver failed "
                                       "(underflow in dt nan) after 80 function evaluations)")  # fmt: skip


def test_a_difference_without_spread_is_no_interval() -> None:
    """Every seed at the same score for both models (a task at its ceiling) gives a zero-width interval, which
    measures nothing: the verdict says the task cannot separate them; a constant non-zero difference gets no
    interval either, and neither is ever reported as a detected difference."""
    run = Outcome(None, chance=0.5, examples=400, losses=FALLING)
    ceiling = {str(seed): replace(run, value=1.0) for seed in (1, 2, 3)}
    tied = verdicts.pair_verdict(ceiling, ceiling)
    assert tied.text == "cannot separate these models: every seed of both scored 100.0"
    assert tied.difference.difference_text(100) == "+0.0 in every seed" and not tied.difference.excludes_zero
    below = verdicts.pair_verdict({seed: replace(r, value=0.9) for seed, r in ceiling.items()}, ceiling)
    assert below.text == "no interval: the difference was -10.0 points in every one of 3 seeds (no spread)"
    assert not below.difference.excludes_zero
    spread = verdicts.pair_verdict({"1": replace(run, value=0.9), "2": replace(run, value=0.8)}, ceiling)
    # differences -10 and -20 points: mean -15, s = 7.07, t(0.975, 1) = 12.706: ±63.5 points; detectable with
    # 80% power: (t(0.975, 1) + t(0.8, 1)) · s / √2 = (12.706 + 1.376) · 5 = 70.4 points
    assert spread.text == ("no difference detected: -15.0 [-78.5, +48.5] points over 2 seeds (the interval holds 0; "
                           "could detect ±70.4)")


def test_the_detectable_difference_against_hand_computed_values() -> None:
    """The paired t-test's minimum detectable difference, (t_{0.975,n−1} + t_{0.8,n−1}) · s/√n, against table
    values: n = 3, s = 1: (4.3027 + 1.0607) / √3 = 3.0966; n = 5, s = √10: (2.7764 + 0.9410) · √2 = 5.2565."""
    three = statistics.mean_interval([1.0, 2.0, 3.0])  # s = 1
    assert three.detectable_difference() == pytest.approx(3.0966, abs=1e-3)
    five = statistics.mean_interval([0.0, 2.0, 4.0, 6.0, 8.0])  # s = √10, s/√n = √2
    assert five.detectable_difference() == pytest.approx(5.2565, abs=1e-3)
    assert statistics.mean_interval([1.0, 1.0]).detectable_difference() is None  # no spread
    assert statistics.mean_interval([1.0]).detectable_difference() is None  # one value
    assert three.detectable_difference(power=0.5) == pytest.approx(three.half_width)  # t_{0.5} = 0: the interval


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


def test_a_verdict_that_could_not_see_what_the_budget_resolves_is_inconclusive() -> None:
    """A difference whose interval holds 0 is "no difference detected" only when its seeds could have detected
    the effect the positive control showed the budget resolves; otherwise it is inconclusive, as a verdict
    with fewer than two seeds is — so that two runs at other seeds do not read one as "no difference" and the
    other as "no verdict"."""
    run = Outcome(None, chance=0.5, examples=400, losses=FALLING)
    control = {str(seed): replace(run, value=1.0) for seed in (1, 2, 3)}
    variant = {"1": replace(run, value=0.9), "2": replace(run, value=0.8)}  # detectable ±70.4 (table above)
    assert verdicts.pair_verdict(variant, control, resolution=0.80).text.startswith("no difference detected: -15.0")
    assert verdicts.pair_verdict(variant, control, resolution=0.50).text == (
        "inconclusive at this budget: -15.0 [-78.5, +48.5] points over 2 seeds (the interval holds 0, but it could "
        "only detect ±70.4, more than the 50.0-point effect the positive control showed this budget resolves)")
    one_seed = verdicts.pair_verdict({"1": replace(run, value=0.9)}, control, resolution=0.50)
    assert one_seed.text == "inconclusive at this budget: fewer than 2 of 3 seeds where both learned"
