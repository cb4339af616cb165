"""The repository's study-specific tables, rendered from their committed records onto the docs pages
(``tools/render_tables.py``): TransJect's bounds and injective layers, its readings against its default, PARITY,
the N-ODE evaluation counts and the startup times. The general tables of a grid (the variant-vs-control answer, its
settings and sweeps) are the lab's (:mod:`hf_variants.lab.tables`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hf_variants.lab.statistics import mean_interval, paired_difference_if_any
from hf_variants.lab.tables import difference_text, summarize_role, task_grids


def transject_bounds_table(results_file: Path) -> str:
    """The layer-wise distance ratios of the TransJect-bounds study with the trained α_l and the dev
    accuracy with every α_l set to 0 (what the layers contribute; recorded since the sigmoid rows)."""

    results = json.loads(results_file.read_text(encoding="utf-8"))
    finished = [model for model in results["models"].values() if model["status"] == "finished"]
    layers = len(finished[0]["distance_ratio"]) if finished else 0
    header = " | ".join(f"layer {i} max / median" for i in range(1, layers + 1))
    lines = [
        f"| model | SST-2 dev acc. | with α_l = 0 | {header} | trained α_l (layers 1–{layers}) |",
        "|---|---:|---:|" + "---:|" * layers + "---|",
    ]
    for name, model in results["models"].items():
        if model["status"] != "finished":  # reported as such, with no numbers
            cause = model.get("cause") or model.get("error") or ""
            lines.append(f"| {name} | {model['status']}: {cause} | — |" + " — |" * layers + " — |")
            continue
        ratios = " | ".join(f"{s['max']:.3f} / {s['median']:.3f}" for s in model["distance_ratio"])
        alphas = model.get("residual_weight_alpha_by_step") or {}
        final = alphas[max(alphas, key=int)] if alphas else None
        alpha_text = ", ".join(f"{a:+.3f}" for a in final) if final else "— (no injective layers)"
        zeroed = model.get("dev_accuracy_alpha_zero")
        zeroed_text = "—" if zeroed is None else f"{100 * zeroed:.1f}%"
        lines.append(f"| {name} | {100 * model['dev_accuracy']:.1f}% | {zeroed_text} | {ratios} | {alpha_text} |")
    return "\n".join(lines) + "\n"


def parity_table(results_file: Path) -> str:
    """PARITY (the parity study): per (d, N), the mean best training accuracy of the kept runs of vanilla
    and N-ODE blocks beside the paper's Table 1, the mean wall time to first reach it and the N-ODE blocks'
    function evaluations per forward. A cell whose runs stopped (non-finite values, solver failures) says
    how many, and one with no finished run gives no numbers."""

    results = json.loads(results_file.read_text(encoding="utf-8"))
    cells = {(cell["dim"], cell["blocks"], cell["block_type"]): cell for cell in results["cells"]}
    lines = [
        "| d | N | vanilla acc. (ours) | vanilla (paper) | N-ODE acc. (ours) | N-ODE (paper) | vanilla time to best "
        "| N-ODE time to best | N-ODE NFE / forward |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def stopped(cell: dict[str, Any]) -> str:
        counts = [f"{cell[status]}/{cell['runs']} {status}" for status in ("diverged", "solver_failed")
                  if cell.get(status)]  # fmt: skip
        return f" ({', '.join(counts)})" if counts else ""

    def accuracy(cell: dict[str, Any] | None) -> str:
        if cell is None:
            return "—"
        shown = f"{100 * cell['mean_best_accuracy']:.1f}%" if cell["kept"] else "no run finished"
        return shown + stopped(cell)

    def paper(cell: dict[str, Any] | None) -> str:
        value = None if cell is None else cell.get("paper_accuracy_percent")
        return "—" if value is None else f"{value:.1f}%"

    def seconds(cell: dict[str, Any] | None) -> str:
        return "—" if cell is None or not cell["kept"] else f"{cell['mean_time_to_best_s']:.1f} s"

    for dim, blocks in dict.fromkeys((d, n) for d, n, _ in cells):
        vanilla, ode = cells.get((dim, blocks, "vanilla")), cells.get((dim, blocks, "ode"))
        nfe = "—" if ode is None or not ode["kept"] else f"{ode['mean_nfe_per_forward']:.0f}"
        lines.append(f"| {dim} | {blocks} | {accuracy(vanilla)} | {paper(vanilla)} | {accuracy(ode)} | {paper(ode)} | "
                     f"{seconds(vanilla)} | {seconds(ode)} | {nfe} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def injective_layer_table(grid_dir: Path, tasks: list[str]) -> str:
    """What the injective layers of each TransJect row carry: per task and pair, the variant's test accuracy,
    its trained residual weights α_l (per layer, lowest and highest over the seeds), its accuracy with every
    α_l set to 0 (the layers as the identity) and the accuracy that zeroing costs, paired by run. Reads the
    ``residual_weights`` and ``accuracy_with_identity_layers`` fields the grid records for models with
    injective layers (:mod:`.grid_training`); pairs without them have no row. Every finished run counts here,
    including one that did not learn: the question is what the trained layers carry, not how well the model does."""
    lines = [
        "| task | model | test acc. % | trained α_l by layer (lowest … highest over seeds) | acc. % with every "
        "α_l = 0 | lost by zeroing α_l (paired, 95% CI) |",
        "|---|---|---:|---|---:|---:|",
    ]
    for task, grid in task_grids(grid_dir, tasks):
        for spec, roles in grid["cells"].items():
            runs = {seed: record for seed, record in roles["variant"]["seeds"].items()
                    if record["status"] == "finished" and "residual_weights" in record}  # fmt: skip
            if not runs:
                continue
            accuracy = {seed: record["accuracy"] for seed, record in runs.items()}
            zeroed = {seed: record["accuracy_with_identity_layers"] for seed, record in runs.items()}
            by_layer = zip(*(record["residual_weights"] for record in runs.values()), strict=True)
            alphas = "; ".join(f"{min(layer):+.3f} … {max(layer):+.3f}" for layer in by_layer)
            lost = paired_difference_if_any(accuracy, zeroed)
            lines.append(
                f"| {task} | `{spec}` | {mean_interval(list(accuracy.values())).mean_text(100)} | "
                f"{alphas} | {mean_interval(list(zeroed.values())).mean_text(100)} | "
                f"{'—' if lost is None else lost.difference_text(100)} |"
            )
    return "\n".join(lines) + "\n"


def same_grid_settings(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether two task folders of a grid ran on the same data and settings (their pairs may differ), so
    that their runs of one seed pair up."""
    settings = [{k: v for k, v in grid["settings"].items() if k != "pairs"} for grid in (first, second)]
    return settings[0] == settings[1] and first["data"] == second["data"]


def reading_table(reference: tuple[Path, str], readings: list[tuple[Path, str]], tasks: list[str]) -> str:
    """One model read two ways: each reading's variant (``(grid folder, pair)``) against the ``reference``
    reading's variant, paired by seed — e.g. TransJect's ``residual_weight="sigmoid"`` against its default.
    Folders must hold the same grid settings and data (else ``ValueError`` naming them): only then is seed
    s the same data order in both."""
    lines = [
        f"| task | reading | test acc. % | `{reference[1]}` test acc. % | reading − `{reference[1]}` "
        "(paired, 95% CI) |",
        "|---|---|---:|---:|---:|",
    ]
    reference_grids = dict(task_grids(reference[0], tasks))
    for task in tasks:
        if task not in reference_grids or reference[1] not in reference_grids[task]["cells"]:
            continue
        base_grid = reference_grids[task]
        base = summarize_role(base_grid["cells"][reference[1]]["variant"], base_grid["data"])
        for folder, spec in readings:
            grids = dict(task_grids(folder, [task]))
            if task not in grids or not grids[task]["cells"].get(spec, {}).get("variant", {}).get("seeds"):
                continue
            if not same_grid_settings(grids[task], base_grid):
                raise ValueError(f"{folder / task} and {reference[0] / task} hold grids of other settings or data: "
                                 "their seeds do not pair.")  # fmt: skip
            reading = summarize_role(grids[task]["cells"][spec]["variant"], grids[task]["data"])
            lines.append(
                f"| {task} | `{spec}` | {reading['text']} | {base['text']} | "
                f"{difference_text(reading['learned'], base['learned'])} |"
            )
    return "\n".join(lines) + "\n"


def depth_adaptivity_table(results_file: Path) -> str:
    """The N-ODE Transformer's function evaluations per block against the solver tolerance, and the largest
    change of the last hidden state against a solve 100× tighter than the tightest (the N-ODE evaluation-count study),
    with the model and commit it was measured on."""

    results = json.loads(results_file.read_text(encoding="utf-8"))
    blocks = len(results["by_tolerance"][0]["nfe_per_block"])
    tightest = min(row["rtol_atol"] for row in results["by_tolerance"]) / 100  # the script's reference solve
    columns = " | ".join(f"NFE block {i + 1}" for i in range(blocks))
    lines = [
        f"| rtol = atol | {columns} | max \\|Δh\\| vs. rtol = atol = {tightest:g} |",
        "|---:|" + "---:|" * blocks + "---:|",
    ]
    for row in results["by_tolerance"]:
        evaluations = " | ".join(f"{value:.0f}" for value in row["nfe_per_block"])
        lines.append(f"| {row['rtol_atol']:g} | {evaluations} | {row['max_abs_error_vs_tight']:.1e} |")
    model = results.get("model", {})
    steps = results.get("pretraining", {}).get("schedule_steps")
    about = (
        f"{model.get('num_hidden_layers', '?')} blocks, hidden {model.get('hidden_size', '?')}, "
        f"`hidden_act={model.get('hidden_act', '?')}`" + (f", pretrained {steps} steps" if steps else "")
        + f"; {results['texts']} texts, `{results['method']}`; commit `{results.get('commit', '?')}`"
    )
    return "\n".join(lines) + f"\n\n({about}.)\n"


def startup_table(results_file: Path) -> str:
    """How long each command takes to start (the startup benchmark): median wall and CPU time, and each command's
    time against the import it is measured by."""

    results = json.loads(results_file.read_text(encoding="utf-8"))
    lines = ["| Command | Median wall time | Median CPU time |", "|---|---:|---:|"]
    for name, median in results["medians"].items():
        command = name if name.startswith("hf-variants") else f'python -c "{name}"'
        lines.append(f"| `{command}` | {median['wall_seconds']:.2f} s | {median['cpu_seconds']:.2f} s |")
    ratios = "; ".join(f"`{name}` starts in {entry['wall_ratio']:.2f} × the wall time of `{entry['reference']}` "
                       f"({entry['cpu_ratio']:.2f} × its CPU time)" for name, entry in results["targets"].items())
    return "\n".join(lines) + f"\n\n{ratios}. Medians of {results['rounds_measured']} interleaved rounds.\n"
