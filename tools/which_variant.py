"""The "Which variant?" table (docs/which-variant.md): for each variant, what this package measured
against its matched control — the main job's verdict, the classification grid's, the self-pretraining study's in
each of its conditions, the cost in training throughput and memory, and the runs that failed or did not learn —
read from the committed records, never typed by hand (the docs renderer writes it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from never_from_scratch import SCRATCH, conditions

from hf_variants.lab import verdicts
from hf_variants.lab.grid_evidence import grid_comparisons
from hf_variants.lab.report import verdict_words

#: The variants, each at its paper's default, in the order of the pages.
VARIANTS = ("macaron_bert", "mgk_bert", "transject", "node_transformer")
#: The sizes of the benchmark rows shown: hidden size, sequence length.
BENCHMARK_SHAPES = ((256, 128), (256, 512))


def cell_text(label: str, comparison: verdicts.PairComparison) -> str:
    """One pair in a table cell: the verdict (over the runs that learned, the family adjusted) and its interval,
    the learned counts when a run did not learn, and the intention-to-treat reading where it disagrees
    (``imdb: not resolved, +0.9 [-1.0, +2.7]``)."""
    def reading(verdict: verdicts.Verdict) -> str:
        d = verdict.difference
        return verdict_words(verdict) + ("" if d is None or not d.spread else f", {d.difference_text(100, bold=False)}")

    text = f"{label}: {reading(comparison.per_protocol)}"
    learned = comparison.learned
    if any(k < n for k, n in learned.values()):
        text += f" (learned {learned['variant'][0]}/{learned['variant'][1]} vs {learned['control'][0]}/" \
                f"{learned['control'][1]})"
    if comparison.disagreement and comparison.intention_to_treat is not None:
        text += f"; counting every run: {reading(comparison.intention_to_treat)}"
    return text


def main_job_comparisons(results_file: Path) -> dict[tuple[str, str], verdicts.PairComparison]:
    """(variant, task) → its comparison in a ``hf-variants compare`` report's ``results.json``
    (:func:`~.report.pair_comparisons`, the report's own family and margins), at the rates each seed chose."""
    from hf_variants.lab.evidence import pair_comparisons

    results = json.loads(results_file.read_text(encoding="utf-8"))
    return {(variant, task): comparison for (variant, _, task), comparison in pair_comparisons(results).items()}


def main_job_verdicts(results_file: Path) -> dict[str, list[str]]:
    """Variant → its verdict on each task of a ``hf-variants compare`` report (:func:`main_job_comparisons`)."""
    found: dict[str, list[str]] = {}
    for (variant, task), comparison in main_job_comparisons(results_file).items():
        if variant in VARIANTS:
            found.setdefault(variant, []).append(cell_text(task, comparison))
    return found


def grid_verdicts(grid_dir: Path, tasks: list[str], label: str = "") -> dict[str, list[str]]:
    """Variant → its verdict on each task of a grid (``task{label}: verdict``, :func:`grid_comparisons`)."""
    found: dict[str, list[str]] = {}
    for (spec, task), comparison in grid_comparisons(grid_dir, tasks, keep=VARIANTS.__contains__).items():
        found.setdefault(spec, []).append(cell_text(f"{task}{label}", comparison))
    return found


def study_verdicts(study_dir: Path, tasks: list[str]) -> dict[str, list[str]]:
    """Variant → its verdict on each task in each condition of a study with conditions (``scratch`` first)."""
    found: dict[str, list[str]] = {}
    for condition in [SCRATCH, *conditions(study_dir)]:
        for variant, lines in grid_verdicts(study_dir / condition, tasks, label=f" ({condition})").items():
            found.setdefault(variant, []).extend(lines)
    return found


def benchmark_costs(benchmark_file: Path) -> dict[str, list[str]]:
    """Variant → its training throughput and training-state memory as shares of its matched control's, at
    each benchmarked shape of :data:`BENCHMARK_SHAPES` (the model benchmark's record)."""
    rows = json.loads(benchmark_file.read_text(encoding="utf-8"))["rows"]
    by_key = {(row["model"], row["hidden"], row["length"]): row for row in rows}
    found: dict[str, list[str]] = {}
    for variant in VARIANTS:
        for hidden, length in BENCHMARK_SHAPES:
            row, control = by_key.get((variant, hidden, length)), by_key.get((f"control of {variant}", hidden, length))
            if row is None or control is None:
                continue
            memory = row["training_state_bytes"] / control["training_state_bytes"]
            found.setdefault(variant, []).append(
                f"{length} tokens: {row['throughput_vs_control']:.2f}× the tokens/s, {memory:.2f}× the memory"
            )
    return found


def which_variant_table(results_file: Path, grid_dir: Path, grid_tasks: list[str], benchmark_file: Path,
                        study_dir: Path | None = None, study_tasks: list[str] | None = None) -> str:  # fmt: skip
    """One row per variant: the main job's verdicts, the grid's, the study's (per condition), and the cost
    against the control."""
    main_job = main_job_verdicts(results_file)
    grid = grid_verdicts(grid_dir, grid_tasks)
    study = study_verdicts(study_dir, study_tasks or []) if study_dir is not None else {}
    costs = benchmark_costs(benchmark_file)
    lines = [
        "| variant | main job (`hf-variants compare`, embedded task) | classification grid (from scratch) | "
        "self-pretraining study (per condition) | cost against its control (training, hidden 256) |",
        "|---|---|---|---|---|",
    ]
    for variant in VARIANTS:
        cells: list[Any] = [main_job.get(variant), grid.get(variant), study.get(variant), costs.get(variant)]
        shown = ["<br>".join(cell) if cell else "not measured" for cell in cells]
        lines.append(f"| [{variant}](variants/{variant}.md) | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"
