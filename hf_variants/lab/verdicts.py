"""The protocol's rules, shared by ``hf-variants compare``, the classification grid and the GLUE studies:
which learning rate a held-out sweep chooses (:func:`choose_learning_rate`), what one fine-tuning run
shows (:func:`run_status`) and what a variant's runs against its matched control's show over seeds
(:func:`pair_verdict`).

A run *counts* only when it learned. One that failed (solver or non-finite stop), predicts one class,
stayed on its starting loss or scores no better than chance is named as such and left out of the
means and of the paired interval, never averaged in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .statistics import ONE_CLASS_SHARE, Interval, guessing_bound, mean_interval, paired_difference

LEARNED = "learned"
#: Statuses of runs that do not count, in the order a run is tested for them.
FAILED, ONE_CLASS, ON_PLATEAU, AT_CHANCE = "failed", "did not learn", "stayed on the plateau", "at chance"
#: A run "stayed on the plateau" when the mean of the last quarter of its logged training losses is
#: still at least this share of its first logged loss.
PLATEAU_SHARE = 0.9
#: A run *left* its starting plateau at the first logged loss below this share of its first logged loss
#: (:func:`left_plateau_at`): on ListOps 3% under ln 10, where its plateau's logged means stay within 1%.
PLATEAU_EXIT_SHARE = 0.97


@dataclass(frozen=True)
class HeldOutRun:
    """One run of a learning-rate sweep, scored on a held-out slice of the training split (never on dev)."""

    score: float | None  # the task's headline metric; None when the run failed (non-finite stop, solver)
    one_class: bool = False  # ≥ ONE_CLASS_SHARE of its predictions one class (or one constant score)
    loss: float | None = None  # its loss on the held-out slice, where recorded: breaks a tie of scores

    @property
    def finished(self) -> bool:
        return self.score is not None and math.isfinite(self.score)


def collapsed(metrics: Mapping[str, float]) -> bool:
    """Whether ``run_glue``'s collapse measures (``largest_class_share`` or ``prediction_std``) say the
    run predicted one class (≥ :data:`ONE_CLASS_SHARE` of its predictions) or one constant score."""
    return metrics.get("prediction_std") == 0 or metrics.get("largest_class_share", 0.0) >= ONE_CLASS_SHARE


def choose_learning_rate(sweep: Mapping[float, HeldOutRun]) -> float:
    """The rate whose held-out run scored best among the runs that learned (finished, not one class);
    when none learned, among the runs that finished. A tie of scores (common on a small slice) goes to the
    lower held-out loss where the runs recorded one, else to the smaller rate. When every run failed,
    the smallest rate: the final runs then show over seeds what happens at the most cautious rate (and
    are reported as failures, never averaged in), instead of one failure ending the comparison."""
    if not sweep:
        raise ValueError("choose_learning_rate: the sweep is empty")
    learned = {rate: run.score for rate, run in sweep.items() if run.finished and not run.one_class}
    finished = learned or {rate: run.score for rate, run in sweep.items() if run.finished}
    if not finished:
        return min(sweep)
    best = max(finished.values())
    tied = sorted(rate for rate, score in finished.items() if score == best)
    losses = {rate: sweep[rate].loss for rate in tied}
    if all(loss is not None and math.isfinite(loss) for loss in losses.values()):
        return min(tied, key=lambda rate: (losses[rate], rate))
    return tied[0]


def stayed_on_plateau(losses: Sequence[float]) -> bool:
    """Whether a training-loss curve ended where it started (see :data:`PLATEAU_SHARE`); a curve of
    fewer than four logged losses says nothing and is not flagged."""
    if len(losses) < 4:
        return False
    tail = losses[-max(1, len(losses) // 4) :]
    return sum(tail) / len(tail) >= PLATEAU_SHARE * losses[0]


def left_plateau_at(curve: Sequence[Mapping[str, float]]) -> int | None:
    """The step of the first point of a recorded loss curve (``[{"step", "loss"}]``, as the grids record it)
    below :data:`PLATEAU_EXIT_SHARE` of its first point; None when no point is (or the curve is empty).
    A reading, not a rule: when runs leave the plateau says whether a budget cut them short."""
    if not curve:
        return None
    bound = PLATEAU_EXIT_SHARE * curve[0]["loss"]
    return next((int(point["step"]) for point in curve if point["loss"] < bound), None)


@dataclass(frozen=True)
class RunOutcome:
    """What one fine-tuning run showed, whichever study ran it: each study reads its own records into
    this (``report.run_outcome``, ``grid.run_outcome``, ``glue_after_pretraining.run_outcome``), and
    :func:`run_status` is the one rule over it. A measure a study does not record keeps its default, and
    the test that needs it is not made (no loss curve: no plateau test; no chance level: no at-chance test)."""

    value: float | None  # the headline score; None when the run failed
    failed: str | None = None  # what stopped it (an error text, or the record's status)
    one_class: bool = False  # predicted one class or one constant score (an undefined correlation too)
    losses: Sequence[float] = ()  # the logged training losses, in order
    chance: float | None = None  # a constant guess's accuracy; only for an accuracy metric
    examples: int | None = None  # the evaluation examples behind ``value`` (for the guessing bound)

    def held_out(self) -> HeldOutRun:
        """This run as the learning-rate choice reads a held-out run."""
        return HeldOutRun(self.value, self.one_class)


def run_status(run: RunOutcome) -> str:
    """:data:`LEARNED` or why the run does not count, tested in this order: :data:`FAILED`,
    :data:`ONE_CLASS`, :data:`ON_PLATEAU`, :data:`AT_CHANCE` (an accuracy no better than a guessing
    model's within its 95% bound, :func:`~.statistics.guessing_bound`)."""
    if run.failed:
        return FAILED
    if run.one_class:
        return ONE_CLASS
    if stayed_on_plateau(list(run.losses)):
        return ON_PLATEAU
    at_chance = run.chance is not None and run.examples and run.value < guessing_bound(run.chance, run.examples)
    return AT_CHANCE if at_chance else LEARNED


def reason(run: RunOutcome) -> str:
    """The run's status, for a failed run with the error's first clause (``failed (NonFiniteStepError:
    Step 45: non-finite gradient)``, ``failed (ODESolverError: Step 12: N-ODE block 0: the dopri5 solver
    failed (underflow in dt nan) after 80 function evaluations)``)."""
    status = run_status(run)
    if status != FAILED:
        return status
    first = re.split(r"\. | in (?![^(]*\))|; ", run.failed, maxsplit=1)[0]  # not " in " within parentheses
    return f"{status} ({first})"


def learned_values(runs: Mapping[Any, RunOutcome]) -> dict[int, float]:
    """Seed → score of the runs that learned."""
    return {int(seed): run.value for seed, run in runs.items() if run_status(run) == LEARNED}


def finished_values(runs: Mapping[Any, RunOutcome]) -> dict[int, float]:
    """Seed → score of the runs that finished (learned or not): what a positive control's runs are
    counted by, since a model that cannot learn the task is what it is there to show."""
    return {int(seed): run.value for seed, run in runs.items() if run_status(run) != FAILED}


def summary(runs: Mapping[Any, RunOutcome]) -> Interval | None:
    """Mean and 95% interval of the runs that learned (None when none did)."""
    values = learned_values(runs)
    return mean_interval(list(values.values())) if values else None


@dataclass(frozen=True)
class PairVerdict:
    """A variant against its matched control on one task over seeds."""

    difference: Interval | None  # variant − control over the seeds where both learned (None: < 2 such seeds)
    seeds: int  # seeds run
    left_out: dict[str, list[str]]  # "variant"/"control" → "seed 43: stayed on the plateau", …
    same_score: float | None = None  # the score of every counted seed of both models, when they are all one
    #: The effect the comparison showed it resolves on this task (the positive control's |difference|, a
    #: fraction); None where no positive control ran. A verdict that could not detect that much is inconclusive.
    resolution: float | None = None

    @property
    def text(self) -> str:
        """One sentence: above / below / no difference detected / inconclusive, with the interval and the
        smallest difference the seeds could have detected (:meth:`Interval.detectable_difference`). A verdict
        whose interval holds 0 but which could not have detected the effect the positive control showed this
        budget resolves (``resolution``) is *inconclusive*, as is one with fewer than two seeds: "no difference"
        would claim more than the seeds can say, and two runs at other seeds would read differently."""
        if self.difference is None:
            return f"inconclusive at this budget: fewer than 2 of {self.seeds} seeds where both learned"
        if self.same_score is not None:  # a task at its ceiling or floor for both: nothing to build an interval on
            return f"cannot separate these models: every seed of both scored {100 * self.same_score:.1f}"
        if not self.difference.spread:
            return (f"no interval: the difference was {100 * self.difference.mean:+.1f} points in every one of "
                    f"{self.difference.n} seeds (no spread)")
        shown = self.difference.difference_text(100)
        detectable = f"could detect ±{100 * self.difference.detectable_difference():.1f}"
        if not self.difference.excludes_zero:
            if self.resolution is not None and self.difference.detectable_difference() > self.resolution:
                return (f"inconclusive at this budget: {shown} points over {self.difference.n} seeds (the interval "
                        f"holds 0, but it {detectable.replace('could', 'could only')}, more than the "
                        f"{100 * self.resolution:.1f}-point effect the positive control showed this budget resolves)")
            return (f"no difference detected: {shown} points over {self.difference.n} seeds (the interval holds 0; "
                    f"{detectable})")
        side = "above" if self.difference.mean > 0 else "below"
        return f"{side} its control: {shown} points over {self.difference.n} seeds ({detectable})"


def pair_verdict(
    variant: Mapping[Any, RunOutcome], control: Mapping[Any, RunOutcome],
    counted: Callable[[Mapping[Any, RunOutcome]], dict[int, float]] = learned_values,
    resolution: float | None = None,
) -> PairVerdict:
    """The paired verdict of two models' runs (seed → outcome): the interval of the seed-wise
    difference over the seeds where both count (``counted``: by default those that learned); at least
    two such seeds, else inconclusive; ``resolution``: :attr:`PairVerdict.resolution`."""
    v, c = counted(variant), counted(control)
    left_out = {
        who: [f"seed {seed}: {reason(run)}" for seed, run in runs.items() if int(seed) not in values]
        for who, runs, values in (("variant", variant, v), ("control", control, c))
    }
    both = v.keys() & c.keys()
    difference = paired_difference(v, c) if len(both) >= 2 else None
    scores = {v[seed] for seed in both} | {c[seed] for seed in both}
    same_score = next(iter(scores)) if len(scores) == 1 else None
    return PairVerdict(difference, len(variant.keys() | control.keys()), left_out, same_score, resolution)
