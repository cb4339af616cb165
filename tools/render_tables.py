#!/usr/bin/env python
"""Render the comparison tables of the results page (docs/results.md) and docs/experiments/ from the
committed result files (``hf_variants.lab.tables``); nothing in them is typed by hand.

    python tools/render_tables.py            # rewrite docs/experiments/{classification,transject_*}.md and the blocks
    python tools/render_tables.py --check    # exit 1 if either is out of date with the result files

The page's blocks lie between ``<!-- BEGIN generated: NAME -->`` and ``<!-- END generated: NAME -->``
(NAME: ``classification``, ``transject-bounds``, ``parity``, ``transject-readings``, ``pretraining-budget``,
``pretraining-budget-long``, ``glue-after-pretraining``, ``depth-adaptivity``, ``never-from-scratch-pilot``,
``never-from-scratch``, ``never-from-scratch-compute``, ``never-from-scratch-listops-plateau``,
``never-from-scratch-listops-budget``);
docs/findings.md and its forest plot come from ``tools/findings.py``; docs/which-variant.md's ``which-variant`` block
comes from the main job's default report, the classification grid
and the model benchmark. (The package's generated modules ``hf_variants/core/registered_*.py`` come from
``python -m hf_variants.export_code``.)
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from benchmark_tables import (
    attention_benchmark_table,
    gradient_checkpointing_table,
    onnx_table,
    packing_table,
    padding_table,
    pretrain_compile_table,
    streaming_budget_table,
    streaming_table,
    transject_weights_table,
)
from findings import aa_record_block, default_report_block, default_runs_block, power_preset_block
from findings import rendered as findings_pages
from mkdocs_hooks import card_body
from never_from_scratch import (
    SCRATCH,
    compute_table,
    payoff_table,
    plateau_exit_counts,
    plateau_exit_table,
    scratch_table,
    tally_table,
    verdict_table,
)
from records import RECORDS, unpacked
from study_tables import (
    depth_adaptivity_table,
    injective_layer_table,
    parity_table,
    reading_table,
    startup_table,
    transject_bounds_table,
)
from which_variant import which_variant_table

import hf_variants
from hf_variants.lab.report import report_markdown
from hf_variants.lab.tables import PAIRS, comparison_table, settings_text, sweep_table

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"
#: The GLUE studies' tables live beside their drivers (``experiments/glue_after_pretraining/glue_study.py``).
sys.path.append(str(EXPERIMENTS / "glue_after_pretraining"))
glue_study = importlib.import_module("glue_study")
sys.path.append(str(ROOT / "benchmarks"))
benchmark_pages = importlib.import_module("benchmark_pages")
BENCHMARK_RECORDS = ROOT / "benchmarks" / "records"
GRID = EXPERIMENTS / "classification"
TASKS = ["ag_news", "listops", "imdb"]
#: The tasks of the self-pretraining study.
NFS_TASKS = [*TASKS, "sst2"]
#: The committed grid was made with the grid's own training loop, which its runs no longer use (they train on the
#: Trainer: the grid's fingerprint names the engine); this command runs the same study on today's engine.
COMMAND = "hf-variants study classification_from_scratch --data_dir $DATA --output_dir runs/classification"
#: TransJect's two readings of the residual weight α_l (paper eq. 3 vs the authors' code) and the authors'
#: token-embedding initialisation, each against its matched control, on the current engine (issue #29).
TRANSJECT_GRIDS = {
    "transject_residual": "--pairs transject transject:residual_weight=sigmoid",
    "transject_embedding": "--pairs transject:embedding_init=standard_normal",
}
#: Each non-default reading of TransJect (folder, pair) against the default's runs in transject_residual.
TRANSJECT_READINGS = [
    ("transject_residual", "transject:residual_weight=sigmoid"),
    ("transject_embedding", "transject:embedding_init=standard_normal"),
]
BOUNDS = EXPERIMENTS / "transject_bounds" / "transject_bounds.json"
PARITY = EXPERIMENTS / "parity" / "parity.json"
PARITY_COMMAND = "python experiments/parity/parity.py --output_dir runs/parity"
BUDGET = EXPERIMENTS / "glue_after_pretraining" / "pretraining_budget"
BUDGET_COMMAND = (
    "python experiments/glue_after_pretraining/pretraining_budget.py --data_dir $DATA "
    "--output_dir runs/pretraining-budget "
    "--work_dir runs/pretraining-budget-models"
)
LONG_BUDGET = EXPERIMENTS / "glue_after_pretraining" / "pretraining_budget_long"
LONG_BUDGET_COMMAND = (
    "python experiments/glue_after_pretraining/pretraining_budget.py --budgets 5000 10000 --checkpoint_every 1000 "
    "--data_dir $DATA "
    "--output_dir runs/pretraining-budget-long --work_dir runs/pretraining-budget-long-models"
)
AFTER_PRETRAINING = EXPERIMENTS / "glue_after_pretraining" / "comparison"
AFTER_PRETRAINING_COMMAND = (
    "python experiments/glue_after_pretraining/glue_after_pretraining.py --data_dir $DATA --steps 3000 "
    "--output_dir runs/glue-after-pretraining --work_dir runs/glue-after-pretraining-models"
)
#: The self-pretraining study's pilot (``hf_variants/lab/studies/never_from_scratch.toml``, narrowed by its file).
PILOT = EXPERIMENTS / "never_from_scratch_pilot"
PILOT_COMMAND = (
    "hf-variants study experiments/never_from_scratch_pilot/pilot.toml --tasks ag_news --data_dir $DATA "
    "--output_dir runs/never-from-scratch-pilot"
)


#: A diagnostic of the study on ListOps: the same self-pretrained Macaron pair fine-tuned 4x longer (its file says why).
LISTOPS_BUDGET = EXPERIMENTS / "never_from_scratch_listops_budget"
LISTOPS_BUDGET_COMMAND = (
    "hf-variants study experiments/never_from_scratch_listops_budget/budget.toml --tasks listops "
    "--conditions self_pretrained --data_dir $DATA --output_dir runs/never-from-scratch-listops-budget"
)
#: The self-pretraining study itself (``hf_variants/lab/studies/never_from_scratch.toml``), grown cell by cell.
STUDY = EXPERIMENTS / "never_from_scratch"
STUDY_COMMAND = (
    "hf-variants study never_from_scratch --data_dir $DATA --output_dir runs/never-from-scratch"
)
#: The study's cells at a larger size and longer sequences, run on a GPU (its own study file says which).
GPU_STUDY = EXPERIMENTS / "never_from_scratch_gpu"
GPU_STUDY_COMMAND = (
    "hf-variants study experiments/never_from_scratch_gpu/study.toml --tasks imdb listops --data_dir $DATA "
    "--output_dir runs/never-from-scratch-gpu"
)


def never_from_scratch_block(folder: Path, command: str, scratch_alone: bool = False) -> str:
    """The study's two answers, or "Not run yet." before its first paired cell; with ``scratch_alone``, the
    scratch condition's own variant − control table first (its settings under it)."""
    committed, folder = folder, read(folder)
    payoff, verdicts = payoff_table(folder, NFS_TASKS), verdict_table(folder, NFS_TASKS)
    parts = []
    if scratch_alone and (folder / SCRATCH).is_dir():
        parts.append(f"*From scratch* (variant − control)\n\n{scratch_table(folder, NFS_TASKS)}\n"
                     f"{settings_text(folder / SCRATCH, NFS_TASKS)}\n")  # fmt: skip
    if payoff.strip():
        parts.append(f"*Does self-pretraining pay off?* (each model: self-pretrained − scratch)\n\n{payoff}\n"
                     f"*Does it change the verdicts?* (variant − control in each condition)\n\n{verdicts}\n"
                     f"*How many differences exclude 0*, against the chance that at least that many would with no true "
                     f"difference (the binomial tail at 5%, as if the intervals were independent; pairs that share a "
                     f"control are not); a difference two pairs read counts once, and a verdict whose control did "
                     f"not learn in some seed is counted apart\n\n"
                     f"{tally_table(folder, NFS_TASKS)}\n")
    elif not parts:
        parts.append("Not run yet.\n\n")
    return "".join(parts) + rendered_from(committed, command)


def read(study: Path) -> Path:
    """The folder the lab's readers read for a committed study: its JSON-lines records unpacked
    (``tools/records.py``), or the folder itself when it holds plain record files (a study not yet packed)."""
    return unpacked(study) if (study / RECORDS).is_dir() else study


def rendered_from(folder: Path, command: str | None = None, made: bool = True) -> str:
    """The line under a generated block: which committed files it comes from, and the command that made them (or,
    not ``made``, that runs the same study again on today's engine)."""
    source = folder.relative_to(ROOT).as_posix() + ("" if folder.suffix else "/")
    made_by = "made by" if made else "made by an earlier version of the grid's training loop; run again on today's by"
    made_by = f", {made_by}\n`{command}`" if command else ""
    return f"Rendered by `python tools/render_tables.py` from `{source}`{made_by}.\n"


#: The page that holds the generated blocks.
RESULTS_PAGE = ROOT / "docs" / "results.md"


def generated_blocks() -> dict[str, str]:
    """The generated content of each block of the results page."""
    return {
        "classification": (
            f"{comparison_table(read(GRID), TASKS)}\n{settings_text(read(GRID), TASKS)}\n"
            f"{rendered_from(GRID, COMMAND, made=False)}"
        ),
        "transject-bounds": f"{transject_bounds_table(BOUNDS)}\n{rendered_from(BOUNDS)}",
        "parity": f"{parity_table(PARITY)}\n{rendered_from(PARITY, PARITY_COMMAND)}",
        "transject-readings": transject_readings(),
        "pretraining-budget": f"{glue_study.budget_study_table(read(BUDGET))}\n{rendered_from(BUDGET, BUDGET_COMMAND)}",
        "pretraining-budget-long": (
            f"{glue_study.budget_study_table(read(LONG_BUDGET))}\n{rendered_from(LONG_BUDGET, LONG_BUDGET_COMMAND)}"
        ),
        "glue-after-pretraining": (
            f"{glue_study.pair_study_table(read(AFTER_PRETRAINING), PAIRS)}\n"
            f"{rendered_from(AFTER_PRETRAINING, AFTER_PRETRAINING_COMMAND)}"
        ),
        "depth-adaptivity": f"{depth_adaptivity_table(NODE_NFE)}\n{rendered_from(NODE_NFE)}",
        "never-from-scratch-pilot": never_from_scratch_block(PILOT, PILOT_COMMAND),
        "never-from-scratch": never_from_scratch_block(STUDY, STUDY_COMMAND, scratch_alone=True),
        "never-from-scratch-compute": f"{compute_table(read(STUDY), NFS_TASKS)}\n{rendered_from(STUDY)}",
        "never-from-scratch-gpu": never_from_scratch_block(GPU_STUDY, GPU_STUDY_COMMAND, scratch_alone=True),
        "never-from-scratch-listops-plateau": (
            f"{plateau_exit_table(read(STUDY), 'listops')}\n{plateau_exit_counts(read(STUDY), 'listops')}\n"
            f"{rendered_from(STUDY)}"
        ),
        "never-from-scratch-listops-budget": (
            f"{plateau_exit_table(read(LISTOPS_BUDGET), 'listops')}\n"
            f"{plateau_exit_counts(read(LISTOPS_BUDGET), 'listops')}\n"
            f"{rendered_from(LISTOPS_BUDGET, LISTOPS_BUDGET_COMMAND)}"
        ),
    }


#: The N-ODE Transformer's function evaluations (``experiments/node_nfe/node_nfe.py``): results page and its card.
NODE_NFE = EXPERIMENTS / "node_nfe" / "node_nfe.json"
NODE_CARD = ROOT / "hf_variants" / "model_cards" / "node_transformer.md"
#: The startup times of docs/benchmarks.md (``benchmarks/startup_benchmark.py``).
BENCHMARKS_PAGE = ROOT / "docs" / "benchmarks.md"
STARTUP = BENCHMARK_RECORDS / "startup.json"


#: The fine-tuning page and the padding benchmark (``benchmarks/finetune_padding_benchmark.py``) its block comes from.
FINETUNING_PAGE = ROOT / "docs" / "fine-tuning.md"
PADDING_BENCHMARK = BENCHMARK_RECORDS / "padding_benchmark.json"
#: The benchmarks page's blocks rendered from benchmark records: {block: (record, its table)}.
BENCHMARK_BLOCKS = {
    "transject-weights": (BENCHMARK_RECORDS / "transject_weights.json", transject_weights_table),
    "pretrain-compile": (BENCHMARK_RECORDS / "pretrain_compile.json", pretrain_compile_table),
    "attention-benchmark": (BENCHMARK_RECORDS / "attention_benchmark.json", attention_benchmark_table),
    "packing-benchmark": (BENCHMARK_RECORDS / "packing_benchmark.json", packing_table),
    "streaming-benchmark": (BENCHMARK_RECORDS / "streaming_benchmark.json", streaming_table),
    "streaming-budget": (BENCHMARK_RECORDS / "streaming_budget.json", streaming_budget_table),
    "gradient-checkpointing-benchmark": (BENCHMARK_RECORDS / "gradient_checkpointing_benchmark.json",
                                         gradient_checkpointing_table),
    "onnx-benchmark": (BENCHMARK_RECORDS / "onnx_benchmark.json", onnx_table),
}
#: The front door: its ``default-report`` block comes from the committed default run.
README = ROOT / "README.md"
#: The main job's page: its ``power-preset`` block comes from the committed ``--preset power`` run.
MAIN_JOB_PAGE = ROOT / "docs" / "main-job.md"
#: The "Which variant?" page and the records its table is read from.
WHICH_VARIANT_PAGE = ROOT / "docs" / "which-variant.md"
MAIN_JOB_RESULTS = EXPERIMENTS / "compare" / "default" / "results.json"
MODEL_BENCHMARK = BENCHMARK_RECORDS / "model_benchmark.json"


def which_variant_blocks() -> dict[str, str]:
    sources = ", ".join(f"`{path.relative_to(ROOT).as_posix()}`"
                        for path in (MAIN_JOB_RESULTS, GRID, STUDY, MODEL_BENCHMARK))  # fmt: skip
    table = which_variant_table(MAIN_JOB_RESULTS, read(GRID), TASKS, MODEL_BENCHMARK, read(STUDY), NFS_TASKS)
    return {"which-variant": f"{table}\nRendered by `python tools/render_tables.py` from {sources}.\n"}


#: How long each page that states its run time took, run as written (``benchmarks/benchmark_pages.py``).
PAGE_TIMES = BENCHMARK_RECORDS / "page_times.json"


def page_time_block(times: dict[str, float], cpu_count: int) -> str:
    """A page's stated run time, from its record: the wall clock of every block run in order in a fresh folder."""
    minutes, seconds = divmod(round(times["wall_seconds"]), 60)
    took = f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
    return (f"Run as written, block after block in an empty folder, the whole page took **{took}** on a "
            f"{cpu_count}-core CPU (`benchmarks/benchmark_pages.py`; the test suite runs it too).\n")


def fill_blocks(page: str, blocks: dict[str, str] | None = None, path: Path = RESULTS_PAGE) -> str:
    for name, content in (generated_blocks() if blocks is None else blocks).items():
        begin, end = f"<!-- BEGIN generated: {name} -->", f"<!-- END generated: {name} -->"
        if begin not in page or end not in page:
            raise SystemExit(f"{path.relative_to(ROOT)} has no {begin} … {end} block to fill.")
        head, rest = page.split(begin, 1)
        page = f"{head}{begin}\n{content}{end}{rest.split(end, 1)[1]}"
    return page


def grid_command(name: str) -> str:
    """The command that made (and resumes) one of :data:`TRANSJECT_GRIDS`."""
    return (
        f"OMP_NUM_THREADS=1 hf-variants study classification_from_scratch {TRANSJECT_GRIDS[name]} "
        f"--data_dir $DATA --output_dir runs/{name.replace('_', '-')}"
    )


def transject_readings() -> str:
    """TransJect's non-default readings against its default, paired by seed, with where they come from."""
    readings = [(read(EXPERIMENTS / name), spec) for name, spec in TRANSJECT_READINGS if (EXPERIMENTS / name).is_dir()]
    table = reading_table((read(EXPERIMENTS / "transject_residual"), "transject"), readings, TASKS)
    commands = " and\n".join(f"`{grid_command(name)}`" for name in TRANSJECT_GRIDS if (EXPERIMENTS / name).is_dir())
    return f"{table}\nRendered by `python tools/render_tables.py` from the grids made by\n{commands}.\n"


def document(grid: Path, title: str, command: str) -> str:
    """A grid's page: the answer table, what the injective layers carry (TransJect rows), settings, sweeps."""
    grid = read(grid)
    layers = injective_layer_table(grid, TASKS)
    layers_section = (
        "## What TransJect's injective layers carry\n\n"
        "Per finished run (including any that did not learn): the trained residual weights α_l of eq. 3 and the "
        "test accuracy of the same trained model with every α_l set to 0, i.e. each layer replaced by the "
        "identity (the encoder is then its injective embedding and the pooling). A difference near 0 means the "
        "layers carry nothing.\n\n"
        f"{layers}\n"
        if len(layers.splitlines()) > 2 else ""
    )
    return (
        f"# {title}\n\n"
        "Generated by `python tools/render_tables.py`; do not edit by hand.\n\n"
        f"```bash\n{command}\n```\n\n"
        "## Answer\n\n"
        "Means over seeds with 95% Student-t intervals; the difference is paired by seed (bold: its interval "
        "excludes 0). A run whose test predictions are ≥ 99% one class \"did not learn\": it is left out of "
        "means and pairs and named in the cell, with the task's chance score.\n\n"
        f"{comparison_table(grid, TASKS)}\n{layers_section}## Settings\n\n{settings_text(grid, TASKS)}\n"
        "## Learning-rate sweeps (held-out slice of the training split, seed 0)\n\n"
        "Tokens/s were measured on a shared 2-core CPU while other jobs ran; they depend on the machine's "
        "load and are not a speed comparison.\n\n"
        f"{sweep_table(grid, TASKS)}"
    )


def rendered_pages() -> dict[Path, str]:
    """Every generated page and block as the committed result files give them: ``{path: its text}``."""
    pages_folder = ROOT / "docs" / "experiments"
    card_table = (f"{depth_adaptivity_table(NODE_NFE)}\n"
                  "(From `experiments/node_nfe/node_nfe.json` of the hf-variants repository.)\n")
    pages = {
        RESULTS_PAGE: fill_blocks(RESULTS_PAGE.read_text(encoding="utf-8")),
        NODE_CARD: fill_blocks(NODE_CARD.read_text(encoding="utf-8"), {"depth-adaptivity": card_table}, NODE_CARD),
        BENCHMARKS_PAGE: fill_blocks(BENCHMARKS_PAGE.read_text(encoding="utf-8"),
                                     {"startup": startup_table(STARTUP)}, BENCHMARKS_PAGE),
        WHICH_VARIANT_PAGE: fill_blocks(WHICH_VARIANT_PAGE.read_text(encoding="utf-8"), which_variant_blocks(),
                                        WHICH_VARIANT_PAGE),
        pages_folder / "classification.md": document(
            GRID, "From-scratch classification: each variant against its matched control", COMMAND
        ),
    }
    pages.update(findings_pages())
    pages[README] = fill_blocks(README.read_text(encoding="utf-8"), {"default-report": default_report_block()}, README)
    if PADDING_BENCHMARK.is_file():
        padding = {"padding-benchmark": padding_table(json.loads(PADDING_BENCHMARK.read_text(encoding="utf-8")))}
        pages[FINETUNING_PAGE] = fill_blocks(FINETUNING_PAGE.read_text(encoding="utf-8"), padding, FINETUNING_PAGE)
        pages[BENCHMARKS_PAGE] = fill_blocks(pages[BENCHMARKS_PAGE], padding, BENCHMARKS_PAGE)
    benchmark_blocks = {name: table(json.loads(record.read_text(encoding="utf-8")))
                        for name, (record, table) in BENCHMARK_BLOCKS.items() if record.is_file()}  # fmt: skip
    pages[BENCHMARKS_PAGE] = fill_blocks(pages[BENCHMARKS_PAGE], benchmark_blocks, BENCHMARKS_PAGE)
    if (EXPERIMENTS / "compare" / "power" / "results.json").is_file():
        pages[MAIN_JOB_PAGE] = fill_blocks(MAIN_JOB_PAGE.read_text(encoding="utf-8"),
                                           {"power-preset": power_preset_block(), "default-runs": default_runs_block(),
                                            "aa-record": aa_record_block()},
                                           MAIN_JOB_PAGE)
    if PAGE_TIMES.is_file():
        timed = json.loads(PAGE_TIMES.read_text(encoding="utf-8"))
        for name, times in timed["pages"].items():
            page = ROOT / name
            if times.get("blocks_sha256") != benchmark_pages.blocks_digest(page.read_text(encoding="utf-8")):
                raise SystemExit(f"{name}: its code blocks are not those its run time was measured on "
                                 f"({PAGE_TIMES.relative_to(ROOT)}); time it again with "
                                 "benchmarks/benchmark_pages.py, with nothing else running.")  # fmt: skip
            pages[page] = fill_blocks(pages.get(page, page.read_text(encoding="utf-8")),
                                      {"page-time": page_time_block(times, timed["cpu_count"])}, page)  # fmt: skip
    for model_type in hf_variants.VARIANTS:  # a variant's page is its model card, readable on GitHub too
        page = ROOT / "docs" / "variants" / f"{model_type}.md"
        pages[page] = fill_blocks(page.read_text(encoding="utf-8"), {"model-card": card_body(model_type)}, page)
    for results in sorted((EXPERIMENTS / "compare").glob("*/results.json")):  # each committed main job's report
        pages[results.with_name("report.md")] = report_markdown(json.loads(results.read_text(encoding="utf-8")))
    for name in TRANSJECT_GRIDS:
        if (EXPERIMENTS / name).is_dir():
            title = f"TransJect's layers on the classification grid ({TRANSJECT_GRIDS[name].removeprefix('--pairs ')})"
            pages[pages_folder / f"{name}.md"] = document(EXPERIMENTS / name, title, grid_command(name))
    return pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    pages = rendered_pages()
    stale = [path for path, text in pages.items() if not path.is_file() or path.read_text(encoding="utf-8") != text]
    if args.check:
        if stale:
            sys.exit(f"out of date with the result files: {', '.join(map(str, stale))} (run tools/render_tables.py)")
        return
    for path, text in pages.items():
        path.write_text(text, encoding="utf-8")
    print(f"wrote {', '.join(str(path.relative_to(ROOT)) for path in pages)}")


if __name__ == "__main__":
    main()
