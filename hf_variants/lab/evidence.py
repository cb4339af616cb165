"""What a comparison's record (``results.json``) says, as data: each model's runs as outcomes, every pair's
verdict (one Holm family per record), the calibration controls' checks and the A/A groups, the margins and
guessing levels they are judged by. :mod:`.report` renders these as Markdown; the findings page renders them
from the committed records."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..tasks import EmbeddedLevels, get_task
from . import verdicts
from .outcomes import MAIN_JOB_RUN, read_outcome
from .statistics import Interval, paired_difference_if_any


def run_outcomes(runs: dict[str, dict[str, Any]], task: str, guessing: float | None = None
                 ) -> dict[str, verdicts.RunOutcome]:  # fmt: skip
    """Seed → a final run's record (:func:`~hf_variants.lab.measurement.final_run`) as the protocol's verdicts
    read it; ``guessing``: the task's guessing level where it declares one above the majority share the run
    records."""
    return {seed: read_outcome(record, MAIN_JOB_RUN, task, chance=guessing) for seed, record in runs.items()}


def declared_guessing_levels(results: dict[str, Any]) -> dict[str, float | None]:
    """Task → the guessing level the task declares (:meth:`~hf_variants.tasks.TaskDeclaration.guessing_level`,
    at the difficulty the comparison's settings record); None for a task that declares none."""
    levels = EmbeddedLevels.from_settings(results["settings"])
    return {task: get_task(task).guessing_level(levels) for task in results["tasks"]}


def guessing_level(results: dict[str, Any], task: str) -> float | None:
    """The score a run that did not learn is counted at: the task's declared level or its dev majority share,
    whichever is higher (None for a regression task)."""
    recorded = [run.get("chance") for entry in results["models"].values()
                for run in entry["fine_tuning"][task]["runs"].values()]  # fmt: skip
    levels = [level for level in [*recorded, declared_guessing_levels(results)[task]] if level is not None]
    return max(levels) if levels else None


def margins(results: dict[str, Any]) -> dict[str, float]:
    """Task → its equivalence margin as a fraction (``--equivalence_margin``; the default for a record that
    declares none)."""
    from ..settings.compare import equivalence_margin

    return {task: equivalence_margin(results["settings"], task) / 100 for task in results["tasks"]}


def chosen_each_seed(tuned: dict[str, Any]) -> bool:
    """Whether a model's fine-tuning record chose its rate at each seed (the protocol's rule,
    :data:`~hf_variants.lab.protocol.RATE_CHOICE`); older records chose once per model, at its first seed."""
    return "rate_choice" in tuned


def chosen_rates(tuned: dict[str, Any]) -> dict[str, float]:
    """Seed → the learning rate its final run was made at (one rate for every seed in an older record)."""
    if chosen_each_seed(tuned):
        return {seed: float(rate) for seed, rate in tuned["learning_rates"].items()}
    return dict.fromkeys(tuned["runs"], float(tuned["learning_rate"]))


def heldout_sweeps(tuned: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Each rate choice's held-out scores (rate → score): one per seed, or one for the model in an older record."""
    if chosen_each_seed(tuned):
        return tuned["heldout_scores"]
    return {"all seeds": tuned.get("heldout_scores_by_learning_rate", {})}


def final_runs_by_rate(tuned: dict[str, Any]) -> dict[str | None, dict[str, Any]]:
    """Every final run of a model's fine-tuning, each once: rate → seed → record (``None``: at the chosen rates, where
    the final runs were not made at every rate)."""
    if "runs_at_every_rate" in tuned:
        return tuned["runs_at_every_rate"]
    return {None: tuned["runs"], **tuned.get("runs_at_other_rates", {})}


def runs_at_rate(results: dict[str, Any], model: str, task: str, rate: str | None = None) -> dict[str, Any] | None:
    """A model's final runs on a task (seed → record): at its chosen learning rates, or at ``rate`` (as ``f"{r:g}"``)
    where the record holds final runs at every rate (``--final_runs_at_every_rate``); None where it holds none."""
    tuned = results["models"][model]["fine_tuning"][task]
    if rate is None:
        return tuned["runs"]
    if "runs_at_every_rate" in tuned:
        return tuned["runs_at_every_rate"].get(rate)
    if f"{tuned['learning_rate']:g}" == rate:
        return tuned["runs"]
    return tuned.get("runs_at_other_rates", {}).get(rate)


def final_rates(results: dict[str, Any]) -> list[str]:
    """The learning rates every model's final runs were made at (``--final_runs_at_every_rate``); empty when the
    final runs were made at the chosen rate only."""
    if not results["settings"].get("final_runs_at_every_rate"):
        return []
    return [f"{rate:g}" for rate in sorted(results["settings"]["finetune_learning_rates"])]


def outcomes_of(results: dict[str, Any], model: str, task: str, rate: str | None = None
                ) -> dict[str, verdicts.RunOutcome]:  # fmt: skip
    """A model's final runs on a task (at its chosen rate, or at ``rate``) as outcomes, at the task's declared
    guessing level."""
    return run_outcomes(runs_at_rate(results, model, task, rate), task, declared_guessing_levels(results)[task])


def pretraining_losses(entry: dict[str, Any]) -> dict[int, float]:
    """Seed → the model's MLM validation loss after pretraining at that seed (one seed in older records)."""
    runs = entry.get("pretraining_runs") or ({"0": entry["pretraining"]} if "pretraining" in entry else {})
    return {int(seed): run["eval_loss"] for seed, run in runs.items()}


def loss_difference(results: dict[str, Any], variant: str, control: str, task: str) -> Interval | None:
    """The seed-paired difference of the dev cross-entropy (a continuous measure beside accuracy, which
    a run tends to reach all at once) over the seeds where both learned; None with fewer than two."""
    def losses(model: str) -> dict[int, float]:
        runs = results["models"][model]["fine_tuning"][task]["runs"]
        learned = verdicts.learned_values(outcomes_of(results, model, task))
        recorded = {seed: runs[str(seed)].get("metrics", {}).get("loss") for seed in learned}
        return {seed: loss for seed, loss in recorded.items() if loss is not None}

    return paired_difference_if_any(losses(variant), losses(control))


def variant_pairs(results: dict[str, Any]) -> list[tuple[str, str]]:
    """(variant, its matched control) for every variant run with one, in the report's order."""
    return [(entry["control_of"], name) for name, entry in results["models"].items() if entry.get("control_of")]


def not_calibrated(results: dict[str, Any], rate: str | None = None) -> str | None:
    """Why no pair of the report (at ``rate``: both sides at that rate) is comparable: a calibration control failed
    (at that rate); None when none did."""
    failed = [f"the {kind} control on {task} failed" for kind, task, passed, _ in calibration_checks(results, rate)
              if not passed]  # fmt: skip
    at = "" if rate is None else f" at learning rate {rate}"
    return f"this budget is not calibrated{at} ({'; '.join(failed)})" if failed else None


def pair_comparisons(results: dict[str, Any], rates: Sequence[str | None] = (None,), margin_points: float | None = None
                     ) -> dict[tuple[str, ...], verdicts.PairComparison]:  # fmt: skip
    """(variant, control, task) → the verdict of every pair of the report (:func:`~.verdicts.compare_pairs`), one
    family (Holm) per report; every pair is not comparable when a calibration control failed. With ``rates``
    (:func:`final_rates`), (variant, control, task, rate) → the pair at each common rate, one family together, each
    rate's pairs judged by that rate's calibration. ``margin_points``: every task judged at this margin instead of its
    declared one (the report's sensitivity line)."""
    why_not = {rate: not_calibrated(results, rate) for rate in rates}
    keys = [(variant, control, task, rate) for variant, control in variant_pairs(results)
            for task in results["tasks"] for rate in rates]  # fmt: skip
    pairs = {key: (outcomes_of(results, key[0], key[2], key[3]), outcomes_of(results, key[1], key[2], key[3]))
             for key in keys}  # fmt: skip
    margin, guessing = margins(results), {task: guessing_level(results, task) for task in results["tasks"]}
    if margin_points is not None:
        margin = dict.fromkeys(margin, margin_points / 100)
    compared = verdicts.compare_pairs(pairs, {key: margin[key[2]] for key in pairs},
                                      {key: guessing[key[2]] for key in pairs},
                                      {key: why_not[key[3]] for key in pairs})  # fmt: skip
    return {(key[:3] if rates == (None,) else key): comparison for key, comparison in compared.items()}


#: The margins (points) every pair's verdict is also given at, to show how much it rests on the declared one.
SENSITIVITY_MARGINS = (1.0, 2.0, 3.0)


#: The probability with which the seeds a pair would need reach equivalence when nothing differs.
SEEDS_NEEDED_PROBABILITY = 0.8


#: The seeds of a default comparison when the records that do not say (:func:`default_seeds`) were made.
EARLIER_DEFAULT_SEEDS = 3


def default_seeds(results: dict[str, Any]) -> int:
    """The seeds of a default comparison when ``results`` was made (its ``default_seeds``, written from
    :data:`~hf_variants.settings.compare.DEFAULT_SEEDS`): the size of the groups its A/A check judges."""
    return int(results.get("default_seeds", EARLIER_DEFAULT_SEEDS))


def aa_outcomes(results: dict[str, Any]) -> Counter[str]:
    """The A/A check: the negative control (:func:`negative_control_rule`) against the BERT control, its seeds
    split into disjoint groups of a default-size comparison's seed count (:func:`default_seeds`), at every rate
    the final runs were made at; outcome → how many groups' verdicts (each alone, unadjusted) said it. Nothing
    differs between the two, so every *above* or *below* is a false positive."""
    size = default_seeds(results)
    counted: Counter[str] = Counter()
    for seeds, judge in aa_pairings(results):
        for start in range(0, len(seeds) - size + 1, size):
            counted[judge(seeds[start : start + size])] += 1
    return counted


def aa_false_positives(records: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """The A/A checks of several records pooled (:func:`aa_outcomes`; each record its own data draw, ``--seed``, so
    no two of their groups share a run): how many disjoint default-size groups said *above* or *below*, of how many.
    A ``ValueError`` when the records' default sizes differ: their groups would not be one comparison's size."""
    sizes = {default_seeds(results) for results in records}
    if len(sizes) > 1:
        raise ValueError(f"aa_false_positives: the records' default comparisons differ in size ({sorted(sizes)} seeds)")
    counted = sum((aa_outcomes(results) for results in records), Counter[str]())
    return counted[verdicts.ABOVE] + counted[verdicts.BELOW], sum(counted.values())


def aa_pairings(results: dict[str, Any]) -> Iterator[tuple[list[str], Callable[[Sequence[str]], str]]]:
    """For each task and each rate the final runs were made at (:func:`final_rates`; the chosen ones when there
    are none), with at least two default-size groups of seeds where the negative control and the BERT control
    both ran: those seeds, and the verdict's outcome (alone, unadjusted) of the two over a group of them."""
    calibration, size, margin = results.get("calibration") or {}, default_seeds(results), margins(results)
    if "negative" not in calibration:
        return
    for task in results["tasks"]:
        for rate in final_rates(results) or [None]:
            replica = outcomes_of(results, calibration["negative"], task, rate)
            baseline = outcomes_of(results, calibration["baseline"], task, rate)
            seeds = sorted(replica.keys() & baseline.keys(), key=int)
            if len(seeds) >= 2 * size:
                yield seeds, lambda group, r=replica, b=baseline, m=margin[task]: verdicts.compare_pair(
                    {s: r[s] for s in group}, {s: b[s] for s in group}, m).per_protocol.outcome  # fmt: skip


#: How many random default-size groups :func:`aa_resampled_rate` draws, and the seed of the draw.
AA_RESAMPLES, AA_RESAMPLE_SEED = 2000, 0


def aa_resampled_rate(results: dict[str, Any]) -> tuple[float, int] | None:
    """The share of default-size groups drawn at random from the A/A check's seeds — :data:`AA_RESAMPLES` at each
    task and rate that :func:`aa_outcomes` judges, paired as it pairs them (:func:`aa_pairings`) — whose verdict
    says *above* or *below*; with the fewest seeds a draw was made from. The groups overlap, so this reads the rate
    at the spread of this record's seeds: a precise reading of one record, not a count of independent comparisons.
    None where :func:`aa_outcomes` judges no group."""
    size, draw, said, fewest = default_seeds(results), random.Random(AA_RESAMPLE_SEED), [], None
    for seeds, judge in aa_pairings(results):
        fewest = len(seeds) if fewest is None else min(fewest, len(seeds))
        said += [judge(draw.sample(seeds, size)) in (verdicts.ABOVE, verdicts.BELOW) for _ in range(AA_RESAMPLES)]
    return None if not said else (sum(said) / len(said), fewest)


def positive_control_verdicts(results: dict[str, Any], rate: str | None = None) -> dict[str, verdicts.PairComparison]:
    """Task → the positive control against the baseline (every finished run counts: a model that cannot learn
    the task is what it shows), on the tasks it ran on; at their chosen rates, or both at ``rate``."""
    calibration = results.get("calibration") or {}
    if not calibration:
        return {}
    margin = margins(results)
    return {
        task: verdicts.compare_pair(outcomes_of(results, calibration["positive"], task, rate),
                                    outcomes_of(results, calibration["baseline"], task, rate), margin[task],
                                    counted=verdicts.finished_values)
        for task in calibration.get("positive_tasks", [])
    }  # fmt: skip


def negative_control_verdict(results: dict[str, Any], task: str, rate: str | None = None) -> verdicts.Verdict:
    """The negative control (the baseline from other seeds) against the baseline on ``task``, over the runs that
    learned, at the chosen rates or both at ``rate``: the A/A comparison, a family of one."""
    calibration = results["calibration"]
    return verdicts.compare_pair(outcomes_of(results, calibration["negative"], task, rate),
                                 outcomes_of(results, calibration["baseline"], task, rate),
                                 margins(results)[task]).per_protocol  # fmt: skip


def calibration_checks(results: dict[str, Any], rate: str | None = None) -> list[tuple[str, str, bool, str]]:
    """The calibration controls' verdicts (:func:`~hf_variants.lab.spec.with_calibration_controls`):
    ``(control, task, passed, verdict text)``. The positive control (every finished run counts) passes when it
    comes out below its baseline; the negative control (the runs that learned, as every verdict counts) when
    it is equivalent to its baseline within the task's margin: the seeds' own noise stays inside the margin. At
    the rates each model chose, or with every model at ``rate`` (:func:`final_rates`)."""
    calibration = results.get("calibration") or {}
    if not calibration:
        return []
    checks = [("positive", task, comparison.per_protocol.outcome == verdicts.BELOW, comparison.per_protocol.text)
              for task, comparison in positive_control_verdicts(results, rate).items()]  # fmt: skip
    for task in results["tasks"]:
        outcome = negative_control_verdict(results, task, rate)
        checks.append(("negative", task, outcome.outcome == verdicts.EQUIVALENT, outcome.text))
    return checks


#: The share of fresh seed sets in which a comparison should pass its calibration (:func:`calibration_outlook`).
CALIBRATION_TARGET = 0.9


def calibration_probability(aa_sd: float, positive_effect: float, positive_sd: float, seeds: int, margin: float
                            ) -> float:  # fmt: skip
    """The probability that a comparison of ``seeds`` seeds passes its calibration on a task, if the true spreads
    are those given: the negative control called equivalent within ``margin`` when nothing differs
    (:func:`~.statistics.equivalence_probability` at the A/A spread) times the positive control found below
    (:func:`~.statistics.finds_difference_probability` of its effect at its spread). The two share the baseline's
    runs, so the product is an approximation."""
    from .statistics import equivalence_probability, finds_difference_probability

    if seeds < 2:
        return 0.0
    below = finds_difference_probability(positive_effect, positive_sd, seeds) if positive_effect < 0 else 0.0
    return equivalence_probability(aa_sd, seeds, margin) * below


@dataclass(frozen=True)
class CalibrationOutlook:
    """What a record's own spreads say of its calibration on one task (:func:`calibration_outlook_of`)."""

    aa_sd: float  # the A/A difference's spread per seed
    positive_effect: float  # the positive control's mean difference
    positive_sd: float
    seeds: int  # the comparison's size the probability is for
    probability: float  # that a comparison of ``seeds`` seeds passes its calibration (calibration_probability)
    seeds_needed: int | None  # the fewest seeds that pass with CALIBRATION_TARGET (None: more than 200)


def calibration_outlook_of(results: dict[str, Any], task: str, seeds: int | None = None) -> CalibrationOutlook | None:
    """The record's calibration outlook on ``task`` for a comparison of ``seeds`` seeds (default: the record's
    own); None without both controls' intervals on the task."""
    from .statistics import fewest_seeds

    calibration = results.get("calibration") or {}
    positive = positive_control_verdicts(results).get(task)
    if "negative" not in calibration or positive is None:
        return None
    margin = margins(results)[task]
    aa, pc = negative_control_verdict(results, task).difference, positive.per_protocol.difference
    if aa is None or pc is None or not aa.spread or not pc.spread:
        return None
    seeds = seeds or len(runs_at_rate(results, calibration["baseline"], task))
    chance = calibration_probability(aa.sd, pc.mean, pc.sd, seeds, margin)
    needed = fewest_seeds(lambda n: calibration_probability(aa.sd, pc.mean, pc.sd, n, margin), CALIBRATION_TARGET, 200)
    return CalibrationOutlook(aa.sd, pc.mean, pc.sd, seeds, chance, needed)


def calibration_across_draws(records: Sequence[dict[str, Any]], task: str, seeds: int) -> list[float] | None:
    """For comparisons made on different data draws (``--seed``), the probability that a comparison of ``seeds``
    seeds passes its calibration on ``task``, each at the spreads its own record measured: the spread of a
    user's fresh run includes the draw, which one record's seeds never vary. Their mean is the chance for a draw
    taken at random among these. None where a record lacks either control's interval."""
    outlooks = [calibration_outlook_of(results, task, seeds) for results in records]
    return None if None in outlooks else [outlook.probability for outlook in outlooks]
