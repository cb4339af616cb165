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


def run_outcome(record: dict[str, Any]) -> verdicts.RunOutcome:
    """A final run's record (:func:`~hf_variants.lab.measurement.final_run`) as the protocol's verdicts read it."""
    if record.get("failed"):
        return verdicts.RunOutcome(None, failed=record["failed"])
    return verdicts.RunOutcome(
        record["value"],
        one_class=bool(record.get("did_not_learn")),
        losses=[point["loss"] for point in record.get("curve", [])],
        chance=record.get("chance") if record["metric"] == "accuracy" else None,
        examples=record.get("dev_examples"),
    )


def run_outcomes(runs: dict[str, dict[str, Any]]) -> dict[str, verdicts.RunOutcome]:
    return {seed: run_outcome(record) for seed, record in runs.items()}


def score_text(tuned: dict[str, Any]) -> str:
    """A model's score on a task over seeds: the mean ± 95% half-width of the runs that learned, and how
    many did (``99.8 ± 0.4 (3/3 learned)``, ``— (0/3 learned: 3 stayed on the plateau)``)."""
    from collections import Counter

    runs = tuned["runs"]
    interval = verdicts.summary(run_outcomes(runs))
    others = Counter(run["status"] for run in runs.values() if run["status"] != verdicts.LEARNED)
    learned = len(runs) - sum(others.values())
    why = "".join(f"{'; ' if index else ': '}{count} {status}" for index, (status, count) in enumerate(others.items()))
    return f"{'—' if interval is None else interval.mean_text(100)} ({learned}/{len(runs)} learned{why})"


def pretraining_losses(entry: dict[str, Any]) -> dict[int, float]:
    """Seed → the model's MLM validation loss after pretraining at that seed (one seed in older records)."""
    runs = entry.get("pretraining_runs") or ({"0": entry["pretraining"]} if "pretraining" in entry else {})
    return {int(seed): run["eval_loss"] for seed, run in runs.items()}


def loss_difference(variant: dict[str, dict[str, Any]], control: dict[str, dict[str, Any]]) -> Interval | None:
    """The seed-paired difference of the dev cross-entropy (a continuous measure beside accuracy, which
    a run tends to reach all at once) over the seeds where both learned; None with fewer than two."""
    def losses(runs: dict[str, dict[str, Any]]) -> dict[int, float]:
        learned = verdicts.learned_values(run_outcomes(runs))
        recorded = {seed: runs[str(seed)].get("metrics", {}).get("loss") for seed in learned}
        return {seed: loss for seed, loss in recorded.items() if loss is not None}

    return paired_difference_if_any(losses(variant), losses(control))


def answer_lines(results: dict[str, Any]) -> list[str]:
    """The report's first section: each variant against its matched control over seeds, and what to
    conclude (:func:`~hf_variants.lab.verdicts.pair_verdict`)."""
    tasks, models = results["tasks"], results["models"]
    pairs = [(entry["control_of"], name) for name, entry in models.items() if entry.get("control_of")]
    lines = ["## Answer: each variant against its matched control", ""]
    if not pairs:
        return [*lines, "No variant was run with its matched control (`--no_matched_controls`).", ""]
    lines += [
        "| variant | matched control (only the idea turned off) | task | variant | control | "
        "variant − control [95% interval] | dev loss, variant − control | MLM validation loss, variant − control | "
        "learning rate (variant / control) |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    conclusions, resolved = [], resolutions(results)
    for variant, control in pairs:
        for task in tasks:
            v, c = models[variant]["fine_tuning"][task], models[control]["fine_tuning"][task]
            verdict = verdicts.pair_verdict(run_outcomes(v["runs"]), run_outcomes(c["runs"]),
                                            resolution=resolved.get(task))  # fmt: skip
            difference = "—" if verdict.difference is None else verdict.difference.difference_text(100)
            changes = ", ".join(f"`{k}={value}`" for k, value in models[control]["control_changes"].items())
            loss = loss_difference(v["runs"], c["runs"])
            mlm = paired_difference_if_any(pretraining_losses(models[variant]), pretraining_losses(models[control]))
            lines.append(
                f"| {variant} | {changes} | {task} | {score_text(v)} | {score_text(c)} | {difference} | "
                f"{'—' if loss is None else loss.difference_text(digits=3)} | "
                f"{'—' if mlm is None else mlm.difference_text(digits=3)} | "
                f"{v['learning_rate']:g} / {c['learning_rate']:g} |"
            )
            left_out = [f"{who} {', '.join(items)}" for who, items in verdict.left_out.items() if items]
            note = f" Left out: {'; '.join(left_out)}." if left_out else ""
            for who, tuned in ((variant, v), ("its control", c)):
                reasons = tuned.get("heldout_left_out", {}).values()
                failures = [why for why in reasons if why.startswith(verdicts.FAILED)]
                if failures and len(failures) == len(tuned.get("heldout_scores_by_learning_rate", ())):
                    note += f" Every held-out run of {who} failed, so its final runs used the smallest rate."
            if verdict.text.startswith("inconclusive"):
                note += (
                    f" At this budget the pair says nothing about {variant}'s idea; raise `--finetune_steps` or "
                    "`--pretrain_steps`, or use `--preset full`."
                )
            conclusions.append(f"- {task}: {variant} — {verdict.text}.{note}")
    seeds = len(models[pairs[0][0]]["fine_tuning"][tasks[0]]["runs"])
    metrics = ", ".join(sorted({models[pairs[0][0]]["fine_tuning"][t]["metric"] for t in tasks}))
    lines += ["", f"Dev {metrics} ×100: mean ± 95% half-width over the seeds that learned ({seeds} "
              "seeds); the difference is paired by seed over the seeds where both "
              "learned; the dev loss (cross-entropy, lower is better) is paired the same way, a continuous measure "
              "beside accuracy, and so is the MLM validation loss after pretraining at each seed (each seed is a "
              "whole replicate: its own pretraining, then its fine-tuning). \"Could detect ±d\": the smallest true "
              "difference these seeds find 80% of the time "
              "at their spread (the paired t-test's minimum detectable difference); a verdict whose interval holds 0 "
              "but that could not detect the effect the positive control showed this budget resolves is "
              "\"inconclusive at this budget\": it says nothing either way. A run that failed, predicted "
              "one class (≥ 99% of dev predictions), stayed on its "
              f"starting loss (last quarter of its logged losses ≥ {verdicts.PLATEAU_SHARE:.0%} of the first) or "
              "scored below chance (the dev majority share plus 1.96 binomial standard errors) is named and left "
              "out. Each model's learning rate was chosen per task by its score on a held-out slice of the training "
              "split; the dev set was seen only by the final runs.", "",
              "What to conclude:", "", *conclusions, ""]  # fmt: skip
    return lines


def positive_control_verdicts(results: dict[str, Any]) -> dict[str, verdicts.PairVerdict]:
    """Task → the positive control against the baseline (every finished run counts: a model that cannot learn
    the task is what it shows), on the tasks it ran on."""
    calibration, models = results.get("calibration") or {}, results["models"]
    if not calibration:
        return {}
    baseline = models[calibration["baseline"]]["fine_tuning"]
    return {
        task: verdicts.pair_verdict(run_outcomes(models[calibration["positive"]]["fine_tuning"][task]["runs"]),
                                    run_outcomes(baseline[task]["runs"]), verdicts.finished_values)
        for task in calibration.get("positive_tasks", [])
    }  # fmt: skip


def detected(verdict: verdicts.PairVerdict) -> bool:
    """Whether a positive control's verdict lies below 0, as it must."""
    return verdict.difference is not None and verdict.difference.excludes_zero and verdict.difference.mean < 0


def resolutions(results: dict[str, Any]) -> dict[str, float]:
    """Task → the effect this comparison showed it resolves there: the detected positive control's |difference|
    (:attr:`~hf_variants.lab.verdicts.PairVerdict.resolution`)."""
    return {task: abs(verdict.difference.mean) for task, verdict in positive_control_verdicts(results).items()
            if detected(verdict)}  # fmt: skip


def calibration_checks(results: dict[str, Any]) -> list[tuple[str, str, bool, str]]:
    """The calibration controls' verdicts (:func:`~hf_variants.lab.spec.with_calibration_controls`):
    ``(control, task, passed, verdict text)``; the positive control counts every finished run, the negative
    control the runs that learned, as every verdict does."""
    calibration, models = results.get("calibration") or {}, results["models"]
    if not calibration:
        return []
    baseline = models[calibration["baseline"]]["fine_tuning"]
    checks = [("positive", task, detected(verdict), verdict.text)
              for task, verdict in positive_control_verdicts(results).items()]  # fmt: skip
    for task in results["tasks"]:
        replica = run_outcomes(models[calibration["negative"]]["fine_tuning"][task]["runs"])
        verdict = verdicts.pair_verdict(replica, run_outcomes(baseline[task]["runs"]))
        held = verdict.difference is not None and verdict.difference.spread and not verdict.difference.excludes_zero
        checks.append(("negative", task, held, verdict.text))
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
            f"the {kind} control on {task} {'was not detected' if kind == 'positive' else 'did not hold 0'} ({text})"
            for kind, task, text in failed
        )
        first = f"**This budget cannot be trusted:** {why}. Raise the budget (`--preset full`) or the seeds."
    else:
        first = ("**Calibrated:** the positive control was detected and the negative control held 0 on every task, "
                 "so a verdict below that holds 0 means no difference larger than it could detect.")  # fmt: skip
    lines = [first, "", "## Calibration: what this comparison can see", ""]
    for kind, task, passed, text in checks:
        if kind == "positive":
            who = f"`{calibration['positive']}` (tokens not mixed: a bag of words) against {calibration['baseline']}"
            expected = "detected below 0, as it must be" if passed else "NOT detected: it must lie below 0"
        else:
            who = f"{calibration['negative']} against {calibration['baseline']} (the same model)"
            expected = "held 0, as it must" if passed else "DID NOT hold 0: it must"
        lines.append(f"- {'Positive' if kind == 'positive' else 'Negative'} control, {task}: {who} — {text}. "
                     f"{expected[0].upper()}{expected[1:]}.")  # fmt: skip
    return [*lines, ""]


def left_out_lines(results: dict[str, Any]) -> list[str]:
    """Every run that does not count, final and held-out, with why (the error's first clause and step)."""
    lines = []
    for name, entry in results["models"].items():
        for task, tuned in entry["fine_tuning"].items():
            for seed, record in tuned["runs"].items():
                if record["status"] != verdicts.LEARNED:
                    lines.append(f"- {name}, {task}, seed {seed}: {verdicts.reason(run_outcome(record))}.")
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
        scores = "".join(f" {score_text(entry['fine_tuning'][t])} |" for t in tasks)
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
