"""The main job's report (``report.md``) from its ``results.json``: whether the budget can be trusted (the
calibration controls), each variant against its matched control with the paired interval and what it could
detect, every run left out and why, all models, figures and the command (:func:`report_markdown`), rendered
from what the record says (:mod:`.evidence`). A pure function of the record, so a committed report re-renders
from its results file."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from . import verdicts
from .evidence import (
    AA_RESAMPLES,
    CALIBRATION_TARGET,
    SEEDS_NEEDED_PROBABILITY,
    SENSITIVITY_MARGINS,
    aa_outcomes,
    aa_resampled_rate,
    calibration_checks,
    calibration_outlook_of,
    chosen_each_seed,
    chosen_rates,
    declared_guessing_levels,
    default_seeds,
    final_rates,
    final_runs_by_rate,
    guessing_level,
    heldout_sweeps,
    loss_difference,
    margins,
    not_calibrated,
    outcomes_of,
    pair_comparisons,
    pretraining_losses,
    run_outcomes,
    variant_pairs,
)
from .statistics import mean_interval, paired_difference_if_any, proportion_interval


def counted_rates_text(rates: Iterable[float], shown: Callable[[float], str] = "{:g}".format) -> str:
    """Rates the seeds were trained at: one rate when all were, else each with its count (``1e-3 ×2, 3e-3 ×1``);
    ``—`` for none. ``shown`` writes one rate."""
    counted = Counter(rates)
    if len(counted) <= 1:
        return "—" if not counted else shown(next(iter(counted)))
    return ", ".join(f"{shown(rate)} ×{count}" for rate, count in sorted(counted.items()))


def chosen_rates_text(tuned: dict[str, Any]) -> str:
    """The chosen rates of a model's seeds (:func:`counted_rates_text`)."""
    return counted_rates_text(chosen_rates(tuned).values())


def score_text(results: dict[str, Any], model: str, task: str) -> str:
    """A model's score on a task over seeds: the mean ± 95% half-width of the runs that learned, and how
    many did (``99.8 ± 0.4 (3/3 learned)``, ``— (0/3 learned: 3 stayed on the plateau)``)."""
    outcomes = outcomes_of(results, model, task)
    interval = verdicts.summary(outcomes)
    statuses = Counter(verdicts.run_status(outcome) for outcome in outcomes.values())
    learned = statuses.pop(verdicts.LEARNED, 0)
    why = "".join(f"{'; ' if index else ': '}{count} {status}"
                  for index, (status, count) in enumerate(statuses.items()))  # fmt: skip
    return f"{'—' if interval is None else interval.mean_text(100)} ({learned}/{len(outcomes)} learned{why})"


def rate_choice_note(results: dict[str, Any], pair: tuple[str, str], task: str) -> str:
    """In a record that chose each side's rate once (older than the rule of choosing at each seed), where the two
    sides chose different learning rates, which each chose and by what held-out margin (the chosen rate's held-out
    score against the best other rate's); empty when they chose the same, or chose at each seed."""
    chosen = {name: results["models"][name]["fine_tuning"][task] for name in pair}
    if any(chosen_each_seed(tuned) for tuned in chosen.values()):  # each seed's choice is inside its replicate
        return ""
    rates = {tuned.get("learning_rate") for tuned in chosen.values()}
    if len(rates) == 1 or None in rates:  # the same rate, or a record that does not say
        return ""
    sides = []
    for who, tuned in zip(pair, chosen.values(), strict=True):
        scores = {rate: score for rate, score in tuned.get("heldout_scores_by_learning_rate", {}).items()
                  if score is not None}  # fmt: skip
        rate = f"{tuned['learning_rate']:g}"
        others = {r: v for r, v in scores.items() if r != rate}
        if rate in scores and others:
            runner_up = max(others, key=lambda r: others[r])
            sides.append(f"{who} chose {rate} (held-out {100 * scores[rate]:.1f} against {100 * others[runner_up]:.1f}"
                         f" at {runner_up})")  # fmt: skip
        else:
            sides.append(f"{who} chose {rate}")
    return (" The two sides chose different learning rates: " + "; ".join(sides) + ". The difference is then also "
            "the two rates'.")  # fmt: skip


def answer_lines(results: dict[str, Any]) -> list[str]:
    """The report's first section: each variant against its matched control over seeds, and what to
    conclude (:func:`pair_comparisons`)."""
    tasks, models = results["tasks"], results["models"]
    pairs = variant_pairs(results)
    lines = ["## Answer: each variant against its matched control", ""]
    if not pairs:
        return [*lines, "No variant was run with its matched control (`--no_matched_controls`).", ""]
    lines += [
        "| variant | matched control (only the idea turned off) | task | variant | control | learned (variant, "
        "control) | variant − control [95% interval] | counting every run [95% interval] | verdict | dev loss, "
        "variant − control | MLM validation loss, variant − control | learning rate (variant / control) |",
        "|---|---|---|---:|---:|---|---:|---:|---|---:|---:|---|",
    ]
    conclusions, comparisons = [], pair_comparisons(results)
    at_margins = {points: pair_comparisons(results, margin_points=points) for points in SENSITIVITY_MARGINS}
    for variant, control in pairs:
        for task in tasks:
            comparison = comparisons[variant, control, task]
            v, c = models[variant]["fine_tuning"][task], models[control]["fine_tuning"][task]
            pp, itt = comparison.per_protocol, comparison.intention_to_treat
            means = ("—", "—") if comparison.means is None else tuple(m.mean_text(100) for m in comparison.means)
            changes = ", ".join(f"`{k}={value}`" for k, value in models[control]["control_changes"].items())
            loss = loss_difference(results, variant, control, task)
            mlm = paired_difference_if_any(pretraining_losses(models[variant]), pretraining_losses(models[control]))
            learned = ", ".join(f"{k}/{n}" for k, n in comparison.learned.values())
            lines.append(
                f"| {variant} | {changes} | {task} | {means[0]} | {means[1]} | {learned} | "
                f"{'—' if pp.difference is None else pp.difference.difference_text(100)} | "
                f"{'—' if itt is None or itt.difference is None else itt.difference.difference_text(100)} | "
                f"{pp.outcome} | {'—' if loss is None else loss.difference_text(digits=3)} | "
                f"{'—' if mlm is None else mlm.difference_text(digits=3)} | "
                f"{chosen_rates_text(v)} / {chosen_rates_text(c)} |"
            )
            left_out = [f"{who} {', '.join(items)}" for who, items in comparison.left_out.items() if items]
            note = f" Left out: {'; '.join(left_out)}." if left_out else ""
            for who, tuned in ((variant, v), ("its control", c)):
                failed = [name for name, sweep in heldout_sweeps(tuned).items()
                          if sweep and all(score is None for score in sweep.values())]  # fmt: skip
                if failed:
                    where = "" if failed == ["all seeds"] else f" at seed {', '.join(failed)}"
                    note += f" Every held-out run of {who}{where} failed, so the smallest rate was used there."
            note += rate_choice_note(results, (variant, control), task)
            note += seeds_needed_note(pp) + sensitivity_note(at_margins, (variant, control, task))
            conclusions.append(f"- {task}: {variant} — {comparison.text}.{note}")
    runs = {variant: len(models[variant]["fine_tuning"][tasks[0]]["runs"]) for variant, _ in pairs}
    seeds = max(runs.values())
    own = "".join(f"; {variant} and its control: {count} seeds, their own budget (`--model_seeds`)"
                  for variant, count in runs.items() if count < seeds)  # fmt: skip
    metrics = ", ".join(sorted({models[pairs[0][0]]["fine_tuning"][t]["metric"] for t in tasks}))
    lines += ["", f"Dev {metrics} ×100 ({seeds} seeds{own}; "
              "each seed is a whole replicate: its own pretraining, then its "
              "fine-tuning). *variant* and *control*: mean ± 95% half-width over the seeds where both learned, the "
              "seeds the difference is paired over. *variant − control*: the seed-paired difference over those "
              "seeds, bold when its 95% interval excludes 0. *Counting every run* (intention to treat): the same "
              "difference over every seed, a run that did not learn counted at the task's guessing level. *Learned "
              "k/n*: runs that learned, compared by Fisher's exact test. The dev loss (cross-entropy, lower is "
              "better) and the MLM validation loss after pretraining are paired the same way. A run that failed, "
              "predicted one class (≥ 99% of dev predictions), stayed on its starting loss (last quarter of its "
              f"logged losses ≥ {verdicts.PLATEAU_SHARE:.0%} of the first) or scored below the guessing bound (the "
              "task's guessing level plus 1.96 binomial standard errors) did not learn. "
              + rate_rule_text(results), "", *verdict_rules(results, len(comparisons)),
              "What to conclude:", "", *conclusions, ""]  # fmt: skip
    return lines


def sensitivity_note(at_margins: dict[float, dict[tuple[str, ...], verdicts.PairComparison]],
                     key: tuple[str, ...]) -> str:  # fmt: skip
    """`` At ±1 / ±2 / ±3: not resolved / equivalent / equivalent.``: the pair's verdict at each of
    :data:`SENSITIVITY_MARGINS` (the same family, Holm-adjusted the same way); empty for a pair not comparable."""
    outcomes = [at_margins[points][key].per_protocol.outcome for points in SENSITIVITY_MARGINS]
    if verdicts.NOT_COMPARABLE in outcomes:
        return ""
    shown = " / ".join(f"±{points:g}" for points in SENSITIVITY_MARGINS)
    return f" At {shown}: {' / '.join(outcomes)}."


def seeds_needed_note(verdict: verdicts.Verdict) -> str:
    """For a pair not resolved: the seeds at which, with its spread and no true difference, it would be called
    equivalent within its margin with :data:`SEEDS_NEEDED_PROBABILITY` (:func:`~.statistics.seeds_for_equivalence`),
    and the smallest difference its seeds find with 80% power; empty otherwise."""
    from .statistics import seeds_for_equivalence

    d = verdict.difference
    if verdict.outcome != verdicts.NOT_RESOLVED or d is None or not d.spread:
        return ""
    sd = d.sd
    needed = seeds_for_equivalence(sd, verdict.margin, SEEDS_NEEDED_PROBABILITY)
    seeds = "more than 1,000 seeds" if needed is None else f"{needed} seeds"
    return (f" Its {d.n} seeds find a difference of {100 * d.detectable_difference():.1f} points with 80% power; at "
            f"its spread ({100 * sd:.1f} points per seed) {seeds} would call it equivalent within "
            f"±{100 * verdict.margin:.1f} with {SEEDS_NEEDED_PROBABILITY:.0%} probability if nothing differed.")


def rate_rule_text(results: dict[str, Any]) -> str:
    """How the record's learning rates were chosen, with each side's tuning budget (Dodge et al. 2019)."""
    first = next(iter(next(iter(results["models"].values()))["fine_tuning"].values()))
    rates = sorted({rate for sweep in heldout_sweeps(first).values() for rate in sweep}, key=float)
    seeds = len(first["runs"])
    if len(rates) < 2:
        used = sorted({f"{rate:g}" for rate in chosen_rates(first).values()}, key=float)
        return (f"Every final run was made at one learning rate, {', '.join(used)}, the same for both sides of every "
                "pair: no rate was chosen, so none of the intervals holds a choice's noise, and each verdict holds at "
                "this rate (several `--finetune_learning_rates` make each seed choose its own). Tuning budget: none, "
                "on either side. The dev set was seen only by the final runs.")  # fmt: skip
    if chosen_each_seed(first):
        return (f"Each seed chose each model's learning rate per task on its own held-out slice of the training split "
                f"(the best held-out score of {', '.join(rates)}), so the choice is part of the replicate, as "
                "initialisation and data order are, and every interval holds its noise. Tuning budget of each side "
                f"per task: {len(rates)} rates × {seeds} seeds = {len(rates) * seeds} held-out runs. The dev set was "
                "seen only by the final runs.")  # fmt: skip
    return (f"Each model chose its learning rate per task once, from held-out runs at {', '.join(rates)} at its first "
            "seed, and every seed reused it: **this record was made under that older rule, whose rate choice is not "
            "inside the intervals** (each seed now makes its own choice). The dev set was seen only by the final "
            "runs.")  # fmt: skip


def every_rate_lines(results: dict[str, Any]) -> list[str]:
    """Where the final runs were made at every swept rate: each pair at each common rate (one Holm family), beside
    the verdict at the rates the two sides chose."""
    rates = final_rates(results)
    if not rates or not variant_pairs(results):
        return []
    comparisons = pair_comparisons(results, rates)
    calibrated = [f"at {rate}: " + ("calibrated (the positive control below, the negative control equivalent within "
                                    "the margin)" if (why := not_calibrated(results, rate)) is None
                                    else why.replace(f"this budget is not calibrated at learning rate {rate}",
                                                     "not calibrated"))
                  for rate in rates]  # fmt: skip
    lines = ["## Each pair at every learning rate", "",
             "The final runs were made at every swept rate, so each pair is also compared with both sides at the "
             "same rate: a verdict that holds at every common rate does not depend on the rate choice. Each rate is "
             "calibrated on its own, with every model at that rate: " + "; ".join(calibrated) + ".", "",
             "| variant | task | learning rate (both sides) | learned (variant, control) | variant − control [95% "
             "interval] | counting every run [95% interval] | verdict |",
             "|---|---|---|---|---:|---:|---|"]  # fmt: skip
    for (variant, _control, task, rate), comparison in comparisons.items():
        pp, itt = comparison.per_protocol, comparison.intention_to_treat
        learned = ", ".join(f"{k}/{n}" for k, n in comparison.learned.values())
        lines.append(f"| {variant} | {task} | {rate} | {learned} | "
                     f"{'—' if pp.difference is None else pp.difference.difference_text(100)} | "
                     f"{'—' if itt is None or itt.difference is None else itt.difference.difference_text(100)} | "
                     f"{verdict_words(pp)} |")  # fmt: skip
    return [*lines, "", f"Holm-adjusted over the {len(comparisons)} pair–rate comparisons of this table.", ""]


def verdict_words(verdict: verdicts.Verdict) -> str:
    """A verdict's outcome in a table cell, with its margin when it says equivalent (``equivalent within ±2.0``)."""
    within = f" within ±{100 * verdict.margin:.1f}" if verdict.outcome == verdicts.EQUIVALENT else ""
    return verdict.outcome + within


def negative_control_rule(results: dict[str, Any]) -> str:
    """What the record's negative control shared with the BERT control (:data:`~.spec.SHARED_DATA_RULE`); an
    older record's drew its data order and masks from its own seeds too, sources of noise no pair has."""
    return (results.get("calibration") or {}).get("negative_shares") or (
        "the BERT control under other seeds for everything: initialisation, data order, masks and held-out slices "
        "(the record's older rule; a variant and its control share the data of their seed)"
    )


def aa_check_lines(results: dict[str, Any]) -> list[str]:
    """The A/A check's section (:func:`aa_outcomes`): the observed false-positive rate of a default-size
    comparison beside the nominal 5%, with its exact interval; empty with too few seeds."""
    counted = aa_outcomes(results)
    groups = sum(counted.values())
    if not groups:
        return []
    positives = counted[verdicts.ABOVE] + counted[verdicts.BELOW]
    low, high = proportion_interval(positives, groups)
    said = ", ".join(f"{outcome} {count}" for outcome, count in counted.most_common())
    return ["## A/A check: a default-size comparison where nothing differs", "",
            f"The BERT control against its own replicates ({negative_control_rule(results)}), split into {groups} "
            f"disjoint groups of {default_seeds(results)} seeds (a default comparison's size) at every rate the "
            f"final runs were made at, each group judged alone by the verdict rule. Verdicts: {said}. *Above* or "
            f"*below* said {positives} times in {groups}: {100 * positives / groups:.0f}% [{100 * low:.0f}%, "
            f"{100 * high:.0f}%] (95% exact interval), against the test's nominal {100 * verdicts.ALPHA:.0f}%. "
            "Groups share nothing, but the rates' groups share their pretrainings." + resampled_text(results),
            ""]  # fmt: skip


def resampled_text(results: dict[str, Any]) -> str:
    """The A/A rate read from random default-size groups of the record's seeds (:func:`aa_resampled_rate`)."""
    resampled = aa_resampled_rate(results)
    if resampled is None:
        return ""
    rate, seeds = resampled
    return (f" Drawn at random from the same seeds ({seeds}), {AA_RESAMPLES:,} times at each rate, a default-size "
            f"group says *above* or *below* {100 * rate:.1f}% of the time (overlapping groups: a reading of this "
            "record's spread, not independent comparisons).")


def verdict_rules(results: dict[str, Any], family: int) -> list[str]:
    """How the verdicts were made: the margin of each task (and whether the record declared it), the
    adjustment, the guessing levels."""
    margin = margins(results)
    shown = ", ".join(f"±{100 * margin[task]:.1f} points on {task}" for task in results["tasks"])
    guessing = ", ".join(f"{100 * level:.1f} on {task}" for task in results["tasks"]
                         if (level := guessing_level(results, task)) is not None)  # fmt: skip
    declared = results.get("margins")
    if declared:
        reasons = sorted({(entry["declared"], entry["reason"]) for entry in declared.values()})
        why = "; ".join(f"declared {day}, before this comparison's first run: {reason}" for day, reason in reasons)
    elif "equivalence_margin" in results["settings"]:
        why = "given with `--equivalence_margin`"
    else:
        why = ("this record was made before margins were declared: the margin was applied to it afterwards, after "
               "records like it had been seen")  # fmt: skip
    return [f"**Verdicts.** Equivalence margin: {shown} ({why}). *Above/below its control*: the paired t-test's "
            f"p-value, Holm-adjusted over the {family} variant–task pairs of this report, below 0.05. *Equivalent "
            "within ±m*: the two one-sided tests' p-value, Holm-adjusted over the same pairs, below 0.05 (for one "
            "pair: its 90% interval inside ±m). *Not resolved*: neither; the interval's ends are what is still "
            "possible. *Not comparable*: fewer than two seeds where both learned, or a calibration control failed."
            + (f" Guessing levels: {guessing}." if guessing else ""), ""]


def calibration_outlook(results: dict[str, Any], task: str, seeds: int | None = None) -> str:
    """What the record's own spreads say of its calibration on ``task`` (:func:`~.evidence.calibration_outlook_of`):
    the probability that a comparison with ``seeds`` seeds (default: the record's own) passes, and the fewest seeds
    that pass with :data:`~.evidence.CALIBRATION_TARGET`; empty without both controls' intervals on the task."""
    outlook = calibration_outlook_of(results, task, seeds)
    if outlook is None:
        return ""
    reach = "more than 200 seeds" if outlook.seeds_needed is None else f"{outlook.seeds_needed} seeds"
    return (f"At the spreads this record measured on {task} (A/A: {100 * outlook.aa_sd:.1f} points per seed; positive "
            f"control: {100 * outlook.positive_effect:+.1f} points, {100 * outlook.positive_sd:.1f} per seed), a "
            f"comparison with {outlook.seeds} seeds passes its calibration with probability {outlook.probability:.0%}, "
            f"and {reach} would pass it with {CALIBRATION_TARGET:.0%} (two estimates from this record's own seeds: a "
            "reading, not a guarantee).")


def trust_lines(results: dict[str, Any]) -> list[str]:
    """The report's first line (whether this budget can be trusted, from :func:`calibration_checks`) and
    the calibration section."""
    checks = calibration_checks(results)
    if not checks:
        return ["No calibration controls were run (`--no_calibration_controls`): nothing shows what this "
                "comparison could detect.", ""]  # fmt: skip
    calibration = results["calibration"]
    failed = [(kind, task, text) for kind, task, passed, text in checks if not passed]
    if failed:
        why = "; ".join(
            f"the {kind} control on {task} {'was not detected' if kind == 'positive' else 'was not equivalent'} "
            f"({text})" for kind, task, text in failed
        )
        first = (f"**This budget cannot be trusted:** {why}. Every pair below is therefore not comparable; its "
                 "intervals are shown for what they still allow. Raise the seeds (`--num_seeds`) or the budget.")
        if any(kind == "negative" for kind, _, _ in failed):
            first += rate_choice_note(results, (calibration["negative"], calibration["baseline"]), results["tasks"][0])
        at_rates = [rate for rate in final_rates(results) if not_calibrated(results, rate) is None]
        if at_rates:
            first += (f" With every model at the same learning rate the budget is calibrated at "
                      f"{', '.join(at_rates)}: the pairs at that rate are judged in \"Each pair at every learning "
                      "rate\".")  # fmt: skip
    else:
        first = ("**Calibrated:** on every task the positive control came out below its baseline and the negative "
                 "control (the same model from other seeds) was equivalent to it within the margin. This shows "
                 "that the budget sees an effect as large as the positive control's and that its seed noise stays "
                 "inside the margin; each pair below says only what its own verdict says.")  # fmt: skip
    lines = [first, "", "## Calibration: what this comparison can see", ""]
    for kind, task, passed, text in checks:
        if kind == "positive":
            who = f"`{calibration['positive']}` (tokens not mixed: a bag of words) against {calibration['baseline']}"
            expected = "below, as it must be" if passed else "NOT below: it must be"
        else:
            who = f"{calibration['negative']} against {calibration['baseline']} (the same model)"
            expected = ("equivalent within the margin, as it must be" if passed
                        else "NOT equivalent within the margin: it must be")  # fmt: skip
        lines.append(f"- {'Positive' if kind == 'positive' else 'Negative'} control, {task}: {who} — {text}. "
                     f"{expected[0].upper()}{expected[1:]}.")  # fmt: skip
    if "negative" in calibration:
        lines += ["", f"The negative control is {negative_control_rule(results)}."]
    outlooks = [text for task in results["tasks"] if (text := calibration_outlook(results, task))]
    return [*lines, *(["", *outlooks] if outlooks else []), ""]


def left_out_lines(results: dict[str, Any]) -> list[str]:
    """Every run that does not count, final and held-out, with why (the error's first clause and step)."""
    lines = []
    for name, entry in results["models"].items():
        for task, tuned in entry["fine_tuning"].items():
            for rate, runs in final_runs_by_rate(tuned).items():
                at = "" if rate is None else f", final run at learning rate {rate}"
                for seed, outcome in run_outcomes(runs, task, declared_guessing_levels(results)[task]).items():
                    if verdicts.run_status(outcome) != verdicts.LEARNED:
                        lines.append(f"- {name}, {task}{at}, seed {seed}: {verdicts.reason(outcome)}.")
            for rate, why in tuned.get("heldout_left_out", {}).items():
                lines.append(f"- {name}, {task}, held-out run at learning rate {rate}: {why}.")
    return ["## Runs left out", "", *(lines or ["None: every run finished and learned."]), ""]


#: How a report writes the folder its run wrote into: the reader's own (``--output_dir OUT``).
OUTPUT_FOLDER = "OUT"


def without_output_folder(results: dict[str, Any]) -> dict[str, Any]:
    """The records as a report shows them: the run's output folder written as ``OUT`` in the command, the data's
    description and the settings, so that a report reads the same wherever its run was made and names no path
    of that machine."""
    folder = str(results["settings"]["output_dir"])
    command = results["command"]
    for form in (f"--output_dir {folder}", f"--output_dir={folder}"):
        command = command.replace(form, f"--output_dir {OUTPUT_FOLDER}")
    description = results["data"]["description"].replace(f" in {folder}/", f" in {OUTPUT_FOLDER}/")
    return {**results, "command": command, "data": {**results["data"], "description": description},
            "settings": {**results["settings"], "output_dir": OUTPUT_FOLDER}}  # fmt: skip


def report_markdown(results: dict[str, Any]) -> str:
    results = without_output_folder(results)
    tasks = results["tasks"]
    first_model = next(iter(results["models"].values()))
    task_headers = "".join(f" {task} dev {first_model['fine_tuning'][task]['metric']} |" for task in tasks)
    lines = [
        "# hf-variants compare",
        "",
        *trust_lines(results),
        f"Data: {results['data']['description']}.",
        "",
        *answer_lines(results),
        *every_rate_lines(results),
        *aa_check_lines(results),
        *left_out_lines(results),
        "## All models",
        "",
        f"| model | parameters | MLM steps | MLM tokens/s † | MLM validation loss |{task_headers} training time † |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(tasks) + "---:|",
    ]
    for name, entry in results["models"].items():
        pre = entry["pretraining"]
        scores = "".join(f" {score_text(results, name, t)} |" for t in tasks)
        label = f"{name} (transformers BERT, external reference)" if entry.get("external_reference") else name
        lines.append(
            f"| {label} | {entry['parameters']:,} | {pre['steps']} | {pre['tokens_per_second']:,.0f} | "
            f"{mean_interval(list(pretraining_losses(entry).values())).mean_text(digits=3)} |{scores} "
            f"{entry['training_seconds']:.0f} s |"
        )
    lines += ["", "Dev scores ×100 over seeds; every fine-tuned model was reloaded with",
              "`AutoModelForSequenceClassification` and its dev score recomputed (equal to the reported one).",
              "† Tokens/s and training time (pretraining plus the final runs) depend on the machine's load",
              f"while each run trained ({results['settings']['workers']} runs side by side); they are not a speed",
              "comparison — the benchmarks are (docs \"Benchmarks\").",
              f"The comparison took {results['wall_seconds']:.0f} s, {results['training_wall_seconds']:.0f} s of "
              "them training.", "", "## Figures", ""]  # fmt: skip
    without_attention = [n for n, e in results["models"].items() if not e.get("has_attention_probabilities", True)]
    if without_attention:
        lines += [f"No attention maps or ranks for {', '.join(without_attention)}: no attention probabilities in "
                  "the token mixer (TransJect's orthogonal attention mixes tokens through Σ, the mean mixer by the "
                  "unweighted mean).", ""]  # fmt: skip
    for figure in results["figures"]:
        lines += [f"![{Path(figure['path']).stem}]({figure['path']})", "", f"*{figure['caption']}*", ""]
    lines += ["## Command and configuration", "", "```bash", results["command"], "```", "", "```json",
              json.dumps({"settings": results["settings"],
                          "config_overrides": {k: v["config_overrides"] for k, v in results["models"].items()}},
                         indent=2), "```", ""]  # fmt: skip
    return "\n".join(lines)
