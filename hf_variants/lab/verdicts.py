"""The protocol's rules, shared by ``hf-variants compare``, the classification grid and the GLUE studies:
which learning rate a held-out sweep chooses (:func:`choose_learning_rate`), what one fine-tuning run
shows (:func:`run_status`) and what a variant's runs against its matched control's show over seeds
(:func:`compare_pairs`, whose words come from the one rule :func:`verdict`: above, below, equivalent within a
margin declared before the run, not resolved, or not comparable).

A run *counts* only when it learned. One that failed (solver or non-finite stop), predicts one class,
stayed on its starting loss or scores no better than the task's guessing level is named as such and left out
of the paired interval over the runs that learned; the intention-to-treat interval beside it counts it at the
guessing level, so that a failure rate is in the comparison too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..settings import compare as compare_settings
from .statistics import (
    ONE_CLASS_SHARE,
    Interval,
    guessing_bound,
    holm,
    mean_interval,
    paired_difference_if_any,
    rates_p_value,
)

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
    """What one fine-tuning run showed, whichever study ran it: every study reads its records into this
    with :func:`~.outcomes.read_outcome`, and :func:`run_status` is the one rule over it. A measure a study
    does not record keeps its default, and the test that needs it is not made (no loss curve: no plateau
    test; no chance level: no at-chance test)."""

    value: float | None  # the headline score; None when the run failed
    failed: str | None = None  # what stopped it (an error text, or the record's status)
    one_class: bool = False  # predicted one class or one constant score (an undefined correlation too)
    losses: Sequence[float] = ()  # the logged training losses, in order
    chance: float | None = None  # a constant guess's accuracy; only for an accuracy metric
    examples: int | None = None  # the evaluation examples behind ``value`` (for the guessing bound)
    loss: float | None = None  # the loss on the evaluation examples, where recorded

    def held_out(self) -> HeldOutRun:
        """This run as the learning-rate choice reads a held-out run."""
        return HeldOutRun(self.value, self.one_class, self.loss)


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


#: The verdict's four outcomes (:func:`verdict`).
ABOVE, BELOW, EQUIVALENT, NOT_RESOLVED, NOT_COMPARABLE = (
    "above its control", "below its control", "equivalent", "not resolved", "not comparable")
#: The significance level of every test: the 95% interval, the 90% interval of the two one-sided tests.
ALPHA = 0.05
#: The equivalence margin when none is declared, as a fraction of the task's metric
#: (:data:`hf_variants.settings.compare.DEFAULT_EQUIVALENCE_MARGIN`, declared there in points, says why).
DEFAULT_EQUIVALENCE_MARGIN = compare_settings.DEFAULT_EQUIVALENCE_MARGIN / 100


@dataclass(frozen=True)
class Verdict:
    """What one seed-paired difference says against a margin declared before the run (:func:`verdict`)."""

    outcome: str  # one of ABOVE, BELOW, EQUIVALENT, NOT_RESOLVED, NOT_COMPARABLE
    difference: Interval | None  # variant − control over the paired seeds (95% interval)
    margin: float  # the equivalence margin, a fraction of the metric
    adjusted_p: float | None = None  # the paired t-test's p-value, Holm-adjusted within the family
    family: int = 1  # the pairs the adjustment is over
    why_not: str | None = None  # for NOT_COMPARABLE: why
    equivalence_p: float | None = None  # the two one-sided tests' p-value, Holm-adjusted within the family

    def p_text(self, p: float) -> str:
        """``p = 0.012``, with ``, Holm-adjusted over 4 pairs`` in a family of more than one."""
        return f"p = {p:.3f}" + (f", Holm-adjusted over {self.family} pairs" if self.family > 1 else "")

    @property
    def text(self) -> str:
        """One sentence: the outcome, the interval and what it still allows (the outcome's words are the
        verdict; "no difference" is never said, only "equivalent within ±m")."""
        points, m = 100, f"±{100 * self.margin:.1f}"
        d = self.difference
        shown = None if d is None else f"{d.difference_text(points)} points over {d.n} seeds"
        adjusted = "" if self.adjusted_p is None else self.p_text(self.adjusted_p)
        if self.outcome == NOT_COMPARABLE:
            return f"{NOT_COMPARABLE}: {self.why_not}" + (f"; {shown}" if shown and d.spread else "")
        if self.outcome in (ABOVE, BELOW):
            inside = self.difference.equivalence_p(self.margin) < ALPHA  # and yet smaller than the margin
            inside = " (inside the margin: smaller than any effect of interest)" if inside else ""
            return f"{self.outcome}: {shown} ({adjusted}){inside}"
        low, high = d.bounds(1 - 2 * ALPHA)
        if self.outcome == EQUIVALENT:
            tost = "" if self.equivalence_p is None else f"; {self.p_text(self.equivalence_p)}"
            return (f"equivalent within {m} points: {shown} (90% interval [{points * low:+.1f}, {points * high:+.1f}] "
                    f"inside {m}{tost})")
        return (f"{NOT_RESOLVED}: {shown} ({adjusted}); the data still allow anything from {points * d.low:+.1f} "
                f"to {points * d.high:+.1f} points, so neither a difference nor equivalence within {m} is shown")


def verdict(difference: Interval | None, margin: float, adjusted_p: float | None = None, family: int = 1,
            why_not: str | None = None, adjusted_equivalence_p: float | None = None) -> Verdict:  # fmt: skip
    """The one rule every comparison's words come from, in this order:

    - *not comparable* (``why_not``): fewer than two paired seeds, no spread (every seed's difference the same),
      or a calibration control that failed;
    - *above / below its control*: the paired t-test's p-value, adjusted within its family (:func:`~.statistics.
      holm`; the unadjusted one when ``adjusted_p`` is not given), below :data:`ALPHA`;
    - *equivalent within ±margin*: the two one-sided tests (TOST), their p-value adjusted within the same family
      (``adjusted_equivalence_p``; unadjusted, i.e. the 90% interval inside ``(−margin, +margin)``, when not given),
      below :data:`ALPHA`;
    - *not resolved*: neither."""
    if why_not is None and difference is None:
        why_not = "fewer than 2 seeds where both learned"
    elif why_not is None and not difference.spread:
        why_not = f"the difference was {100 * difference.mean:+.1f} points in every one of {difference.n} seeds " + (
            "(both scored the same in every seed)" if difference.mean == 0 else "(no spread: no interval)")
    if why_not is not None:
        return Verdict(NOT_COMPARABLE, difference, margin, why_not=why_not)
    p = difference.p_value() if adjusted_p is None else adjusted_p
    if p < ALPHA:
        return Verdict(ABOVE if difference.mean > 0 else BELOW, difference, margin, p, family)
    tost = difference.equivalence_p(margin) if adjusted_equivalence_p is None else adjusted_equivalence_p
    return Verdict(EQUIVALENT if tost < ALPHA else NOT_RESOLVED, difference, margin, p, family,
                   equivalence_p=tost)  # fmt: skip


@dataclass(frozen=True)
class PairComparison:
    """A variant against its matched control on one task over seeds (:func:`compare_pairs`)."""

    per_protocol: Verdict  # over the seeds where both learned
    intention_to_treat: Verdict | None  # over every seed both ran, a run that did not learn at the guessing level
    learned: dict[str, tuple[int, int]]  # "variant"/"control" → (runs that learned, runs)
    learned_p: float  # Fisher's exact test that the two learned rates are equal
    left_out: dict[str, list[str]]  # "variant"/"control" → "seed 43: stayed on the plateau", …
    means: tuple[Interval, Interval] | None  # each side's mean over the same seeds as ``per_protocol``
    guessing: float | None  # the score a run that did not learn is counted at in ``intention_to_treat``

    @property
    def disagreement(self) -> str | None:
        """Where counting every run reads otherwise than counting the runs that learned: in verdict (one of
        them not comparable included) or in sign; None when they agree."""
        itt, pp = self.intention_to_treat, self.per_protocol
        if itt is None:
            return None
        if itt.outcome != pp.outcome:
            return f"the verdict differs ({pp.outcome} over the runs that learned, {itt.outcome} counting every run)"
        if pp.difference is not None and itt.difference is not None and pp.difference.mean * itt.difference.mean < 0:
            return "the sign differs"
        return None

    @property
    def text(self) -> str:
        """The conclusion: the verdict over the runs that learned, the learned rates, and counting every run."""
        variant, control = self.learned["variant"], self.learned["control"]
        parts = [self.per_protocol.text,
                 f"learned {variant[0]}/{variant[1]} against {control[0]}/{control[1]} (Fisher's exact p = "
                 f"{self.learned_p:.2f})"]  # fmt: skip
        itt = self.intention_to_treat
        if itt is not None and variant[0] + control[0] < variant[1] + control[1]:
            same_reason = itt.outcome == NOT_COMPARABLE and itt.why_not == self.per_protocol.why_not
            shown = itt.text
            if same_reason and itt.difference is not None:
                d = itt.difference
                shown = (f"{d.difference_text(100)} points over {d.n} seeds" if d.spread else
                         f"{100 * d.mean:+.1f} points in every one of {d.n} seeds")  # fmt: skip
            parts.append(f"counting every run, one that did not learn at the guessing level "
                         f"{100 * self.guessing:.1f}: {shown}")  # fmt: skip
        if self.disagreement:
            parts.append(f"the two readings disagree: {self.disagreement}")
        return "; ".join(parts)


def scored_at_guessing(runs: Mapping[Any, RunOutcome], guessing: float) -> dict[int, float]:
    """Seed → score of every run: a run that learned at its score, any other (failed, one class, on the
    plateau, at chance) at the task's guessing level: the intention-to-treat reading."""
    return {int(seed): run.value if run_status(run) == LEARNED else guessing for seed, run in runs.items()}


Pair = tuple[Mapping[Any, RunOutcome], Mapping[Any, RunOutcome]]


def compare_pairs(
    pairs: Mapping[Any, Pair], margins: Mapping[Any, float] | float = DEFAULT_EQUIVALENCE_MARGIN,
    guessing: Mapping[Any, float | None] | float | None = None, why_not: Mapping[Any, str | None] | str | None = None,
    counted: Callable[[Mapping[Any, RunOutcome]], dict[int, float]] = learned_values,
) -> dict[Any, PairComparison]:
    """Each pair (key → variant's and control's runs, seed → outcome) against its margin, the family
    adjusted together (Holm, over the pairs with an interval; the t-tests and the equivalence tests each): the
    difference over the seeds where both
    count (``counted``: by default those that learned) and the intention-to-treat difference over every
    seed both ran (``guessing``: the task's guessing level; None: not made). ``why_not``: every pair (or, a mapping,
    each pair it names) is not comparable for this reason (a failed calibration), its intervals still shown."""
    def per_key(value: Any, key: Any) -> Any:
        return value.get(key) if isinstance(value, Mapping) else value

    paired: dict[Any, dict[str, Interval | None]] = {}
    for key, (variant, control) in pairs.items():
        level = per_key(guessing, key)
        paired[key] = {"pp": paired_difference_if_any(counted(variant), counted(control)),
                       "itt": None if level is None else paired_difference_if_any(
                           scored_at_guessing(variant, level), scored_at_guessing(control, level))}  # fmt: skip
    compared = {reading: {key: d[reading] for key, d in paired.items() if d[reading] is not None and d[reading].spread}
                for reading in ("pp", "itt")}  # fmt: skip
    adjusted = {reading: holm({key: d.p_value() for key, d in found.items()}) for reading, found in compared.items()}
    equivalence = {reading: holm({key: d.equivalence_p(per_key(margins, key)) for key, d in found.items()})
                   for reading, found in compared.items()}  # fmt: skip
    comparisons = {}
    for key, (variant, control) in pairs.items():
        margin, level = per_key(margins, key), per_key(guessing, key)
        readings = {reading: verdict(paired[key][reading], margin, adjusted[reading].get(key), len(adjusted[reading]),
                                     per_key(why_not, key), equivalence[reading].get(key))
                    for reading in ("pp", "itt")}  # fmt: skip
        v, c = counted(variant), counted(control)
        both = sorted(v.keys() & c.keys())
        learned = {"variant": (len(learned_values(variant)), len(variant)),
                   "control": (len(learned_values(control)), len(control))}  # fmt: skip
        comparisons[key] = PairComparison(
            readings["pp"], None if level is None else readings["itt"], learned,
            rates_p_value(learned["variant"], learned["control"]),
            {who: [f"seed {seed}: {reason(run)}" for seed, run in runs.items() if int(seed) not in values]
             for who, runs, values in (("variant", variant, v), ("control", control, c))},
            (mean_interval([v[s] for s in both]), mean_interval([c[s] for s in both])) if both else None, level,
        )  # fmt: skip
    return comparisons


def compare_pair(variant: Mapping[Any, RunOutcome], control: Mapping[Any, RunOutcome],
                 margin: float = DEFAULT_EQUIVALENCE_MARGIN, guessing: float | None = None,
                 counted: Callable[[Mapping[Any, RunOutcome]], dict[int, float]] = learned_values,
                 ) -> PairComparison:  # fmt: skip
    """:func:`compare_pairs` for a family of one pair (no adjustment)."""
    return compare_pairs({0: (variant, control)}, margin, guessing, counted=counted)[0]
