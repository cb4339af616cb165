"""The main job's report (``report.md``) from its ``results.json``: whether the budget can be trusted (the
calibration controls), each variant against its matched control with the paired interval and what it could
detect, every run left out and why, all models, figures and the command (:func:`report_markdown`). A pure
function of the record, so a committed report re-renders from its results file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import verdicts
from .statistics import Interval, mean_interval, paired_difference_if_any


def run_outcome(record: dict[str, Any], guessing: float | None = None) -> verdicts.RunOutcome:
    """A final run's record (:func:`~hf_variants.lab.measurement.final_run`) as the protocol's verdicts read it;
    ``guessing``: the task's guessing level where it declares one above the majority share the run records."""
    if record.get("failed"):
        return verdicts.RunOutcome(None, failed=record["failed"])
    levels = [level for level in (record.get("chance"), guessing) if level is not None]
    chance = max(levels) if levels and record["metric"] == "accuracy" else None
    return verdicts.RunOutcome(
        record["value"],
        one_class=bool(record.get("did_not_learn")),
        losses=[point["loss"] for point in record.get("curve", [])],
        chance=chance,
        examples=record.get("dev_examples"),
    )


def run_outcomes(runs: dict[str, dict[str, Any]], guessing: float | None = None) -> dict[str, verdicts.RunOutcome]:
    return {seed: run_outcome(record, guessing) for seed, record in runs.items()}


def declared_guessing_levels(results: dict[str, Any]) -> dict[str, float | None]:
    """Task → the guessing level the task declares (:func:`~.data_sources.declared_guessing_level`, at the
    difficulty the comparison's settings record), for the embedded tasks; None for the others."""
    from .data_sources import EmbeddedLevels, declared_guessing_level

    if results["data"]["kind"] != "synthetic":
        return dict.fromkeys(results["tasks"])
    levels = EmbeddedLevels.from_settings(results["settings"])
    return {task: declared_guessing_level(task, levels) for task in results["tasks"]}


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


def outcomes_of(results: dict[str, Any], model: str, task: str) -> dict[str, verdicts.RunOutcome]:
    """A model's final runs on a task as outcomes, at the task's declared guessing level."""
    return run_outcomes(results["models"][model]["fine_tuning"][task]["runs"], declared_guessing_levels(results)[task])


def score_text(results: dict[str, Any], model: str, task: str) -> str:
    """A model's score on a task over seeds: the mean ± 95% half-width of the runs that learned, and how
    many did (``99.8 ± 0.4 (3/3 learned)``, ``— (0/3 learned: 3 stayed on the plateau)``)."""
    from collections import Counter

    outcomes = outcomes_of(results, model, task)
    interval = verdicts.summary(outcomes)
    statuses = Counter(verdicts.run_status(outcome) for outcome in outcomes.values())
    learned = statuses.pop(verdicts.LEARNED, 0)
    why = "".join(f"{'; ' if index else ': '}{count} {status}"
                  for index, (status, count) in enumerate(statuses.items()))  # fmt: skip
    return f"{'—' if interval is None else interval.mean_text(100)} ({learned}/{len(outcomes)} learned{why})"


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


def pair_comparisons(results: dict[str, Any]) -> dict[tuple[str, str, str], verdicts.PairComparison]:
    """(variant, control, task) → the verdict of every pair of the report (:func:`~.verdicts.compare_pairs`), one
    family (Holm) per report; every pair is not comparable when a calibration control failed."""
    failed = [f"the {kind} control on {task} failed" for kind, task, passed, _ in calibration_checks(results)
              if not passed]  # fmt: skip
    why_not = f"this budget is not calibrated ({'; '.join(failed)})" if failed else None
    pairs = {(variant, control, task): (outcomes_of(results, variant, task), outcomes_of(results, control, task))
             for variant, control in variant_pairs(results) for task in results["tasks"]}  # fmt: skip
    margin, guessing = margins(results), {task: guessing_level(results, task) for task in results["tasks"]}
    return verdicts.compare_pairs(pairs, {key: margin[key[2]] for key in pairs},
                                  {key: guessing[key[2]] for key in pairs}, why_not)  # fmt: skip


def rate_choice_note(results: dict[str, Any], pair: tuple[str, str], task: str) -> str:
    """Where the two sides chose different learning rates, which each chose and by what held-out margin
    (the chosen rate's held-out score against the best other rate's); empty when they chose the same."""
    chosen = {name: results["models"][name]["fine_tuning"][task] for name in pair}
    if len({tuned["learning_rate"] for tuned in chosen.values()}) == 1:
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
                f"{v['learning_rate']:g} / {c['learning_rate']:g} |"
            )
            left_out = [f"{who} {', '.join(items)}" for who, items in comparison.left_out.items() if items]
            note = f" Left out: {'; '.join(left_out)}." if left_out else ""
            for who, tuned in ((variant, v), ("its control", c)):
                reasons = tuned.get("heldout_left_out", {}).values()
                failures = [why for why in reasons if why.startswith(verdicts.FAILED)]
                if failures and len(failures) == len(tuned.get("heldout_scores_by_learning_rate", ())):
                    note += f" Every held-out run of {who} failed, so its final runs used the smallest rate."
            note += rate_choice_note(results, (variant, control), task)
            conclusions.append(f"- {task}: {variant} — {comparison.text}.{note}")
    seeds = len(models[pairs[0][0]]["fine_tuning"][tasks[0]]["runs"])
    metrics = ", ".join(sorted({models[pairs[0][0]]["fine_tuning"][t]["metric"] for t in tasks}))
    lines += ["", f"Dev {metrics} ×100 ({seeds} seeds; each seed is a whole replicate: its own pretraining, then its "
              "fine-tuning). *variant* and *control*: mean ± 95% half-width over the seeds where both learned, the "
              "seeds the difference is paired over. *variant − control*: the seed-paired difference over those "
              "seeds, bold when its 95% interval excludes 0. *Counting every run* (intention to treat): the same "
              "difference over every seed, a run that did not learn counted at the task's guessing level. *Learned "
              "k/n*: runs that learned, compared by Fisher's exact test. The dev loss (cross-entropy, lower is "
              "better) and the MLM validation loss after pretraining are paired the same way. A run that failed, "
              "predicted one class (≥ 99% of dev predictions), stayed on its starting loss (last quarter of its "
              f"logged losses ≥ {verdicts.PLATEAU_SHARE:.0%} of the first) or scored below the guessing bound (the "
              "task's guessing level plus 1.96 binomial standard errors) did not learn. Each model's learning rate "
              "was chosen per task by its score on a held-out slice of the training split; the dev set was seen "
              "only by the final runs.", "", *verdict_rules(results, len(comparisons)),
              "What to conclude:", "", *conclusions, ""]  # fmt: skip
    return lines


def verdict_rules(results: dict[str, Any], family: int) -> list[str]:
    """How the verdicts were made: the margin of each task (and whether the record declared it), the
    adjustment, the guessing levels."""
    margin = margins(results)
    declared = "equivalence_margin" in results["settings"]
    shown = ", ".join(f"±{100 * margin[task]:.1f} points on {task}" for task in results["tasks"])
    guessing = ", ".join(f"{100 * level:.1f} on {task}" for task in results["tasks"]
                         if (level := guessing_level(results, task)) is not None)  # fmt: skip
    return [f"**Verdicts.** Equivalence margin: {shown} ("
            + ("declared before the run with `--equivalence_margin`" if declared else
               "the documented default; this record was made before margins were declared, so it was applied "
               "afterwards, without looking at these results")
            + "). *Above/below its control*: the paired t-test's p-value, Holm-adjusted over the "
            f"{family} variant–task pairs of this report, below 0.05. *Equivalent within ±m*: the 90% interval lies "
            "inside ±m (two one-sided tests at 5%). *Not resolved*: neither; the interval's ends are what is still "
            "possible. *Not comparable*: fewer than two seeds where both learned, or a calibration control failed."
            + (f" Guessing levels: {guessing}." if guessing else ""), ""]


def positive_control_verdicts(results: dict[str, Any]) -> dict[str, verdicts.PairComparison]:
    """Task → the positive control against the baseline (every finished run counts: a model that cannot learn
    the task is what it shows), on the tasks it ran on."""
    calibration = results.get("calibration") or {}
    if not calibration:
        return {}
    margin = margins(results)
    return {
        task: verdicts.compare_pair(outcomes_of(results, calibration["positive"], task),
                                    outcomes_of(results, calibration["baseline"], task), margin[task],
                                    counted=verdicts.finished_values)
        for task in calibration.get("positive_tasks", [])
    }  # fmt: skip


def calibration_checks(results: dict[str, Any]) -> list[tuple[str, str, bool, str]]:
    """The calibration controls' verdicts (:func:`~hf_variants.lab.spec.with_calibration_controls`):
    ``(control, task, passed, verdict text)``. The positive control (every finished run counts) passes when it
    comes out below its baseline; the negative control (the runs that learned, as every verdict counts) when
    it is equivalent to its baseline within the task's margin: the seeds' own noise stays inside the margin."""
    calibration = results.get("calibration") or {}
    if not calibration:
        return []
    checks = [("positive", task, comparison.per_protocol.outcome == verdicts.BELOW, comparison.per_protocol.text)
              for task, comparison in positive_control_verdicts(results).items()]  # fmt: skip
    margin = margins(results)
    for task in results["tasks"]:
        negative = verdicts.compare_pair(outcomes_of(results, calibration["negative"], task),
                                         outcomes_of(results, calibration["baseline"], task), margin[task])  # fmt: skip
        outcome = negative.per_protocol
        checks.append(("negative", task, outcome.outcome == verdicts.EQUIVALENT, outcome.text))
    return checks


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
    else:
        first = ("**Calibrated:** on every task the positive control came out below its baseline and the negative "
                 "control (the same model under other seeds) was equivalent to it within the margin. This shows "
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
    return [*lines, ""]


def left_out_lines(results: dict[str, Any]) -> list[str]:
    """Every run that does not count, final and held-out, with why (the error's first clause and step)."""
    lines = []
    for name, entry in results["models"].items():
        for task, tuned in entry["fine_tuning"].items():
            for seed, record in tuned["runs"].items():
                outcome = run_outcome(record, declared_guessing_levels(results)[task])
                if verdicts.run_status(outcome) != verdicts.LEARNED:
                    lines.append(f"- {name}, {task}, seed {seed}: {verdicts.reason(outcome)}.")
            for rate, why in tuned.get("heldout_left_out", {}).items():
                lines.append(f"- {name}, {task}, held-out run at learning rate {rate}: {why}.")
    return ["## Runs left out", "", *(lines or ["None: every run finished and learned."]), ""]


def report_markdown(results: dict[str, Any]) -> str:
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
              "comparison — `scripts/benchmark.py` is.",
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
