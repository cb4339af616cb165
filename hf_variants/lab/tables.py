"""Markdown tables of the comparison grids, computed only from their result files.

Each row answers one question — does the variant's idea change accuracy against its matched control? —
with both means and their 95% intervals, the paired difference by seed with its interval (bold where
it excludes 0), the learning rates the held-out sweep chose, "did not learn" wherever a run predicted one
class and "at chance" wherever it scored below a guessing model's 95% bound (such runs are left out of means and
pairs, never averaged in).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from . import verdicts
from .grid import ROLES, load_grid, run_outcome
from .statistics import mean_interval, paired_difference_if_any

#: What each pair compares, in words (the control is the same model with the idea turned off).
PAIR_LABELS = {
    "macaron_bert": "Macaron layer (pre-LN) vs BERT layer (pre-LN)",
    "macaron_bert:layer_norm_position=post": "Macaron layer (post-LN) vs BERT layer (post-LN)",
    "mgk_bert": "MGK attention vs softmax (same heads, head_dim)",
    "transject": "TransJect (orthogonal attention + injective layers) vs softmax BERT layers, same embeddings",
    "node_transformer": "N-ODE blocks vs vanilla eq. (1) blocks (same modules)",
}
#: The pairs every comparison runs: each variant at its default (paper) settings, and Macaron at both
#: LayerNorm placements; each is compared with its matched control (``core.composition.matched_control``).
PAIRS = tuple(PAIR_LABELS)
#: The papers' numbers for the same comparison, where they report one (accuracy %, theirs vs their baseline).
PAPER_NUMBERS = {
    ("mgk_bert", "listops"): "LRA ListOps (2K tokens): MGK 2 heads 36.88 vs softmax 2 heads 36.76 (Table 1)",
    ("mgk_bert", "imdb"): "LRA Text (byte-level IMDb, 4K): MGK 2 heads 65.37 vs softmax 2 heads 64.90 (Table 1)",
    ("transject", "imdb"): "IMDb (512 tokens): TransJect 88.1 vs Transformer 81.3 (Table 2)",
    ("transject", "ag_news"): "AG News (256 tokens): TransJect 88.8 vs Transformer 88.8 (Table 2)",
    ("transject", "listops"): "ListOps (1024 tokens): TransJect 48.3 vs Transformer 36.4 (Table 3)",
}


def summarize_role(role: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """Accuracies of the seeds that learned (:func:`~.verdicts.run_status`), and the seeds that did not: one
    class, at chance (below a guessing model's 95% bound on the test split, whose size and majority share
    ``data`` gives: the task folder's ``data.json``), or failed (a non-finite stop or a solver failure) and
    named by their record's status. A role with fewer seed records than its grid runs (``planned_seeds``, from
    :func:`~.grid.load_grid`) is a cell still running: its text says how many seeds it reads so far."""
    seeds = {seed: run_outcome(record, data) for seed, record in role["seeds"].items()}
    statuses = {seed: verdicts.run_status(outcome) for seed, outcome in seeds.items()}
    learned = {s: outcome.value for s, outcome in seeds.items() if statuses[s] == verdicts.LEARNED}
    failed = sorted(s for s in seeds if s not in learned)
    crashed = [s for s in failed if statuses[s] == verdicts.FAILED]
    # why the other runs do not count, in the order run_status tests them; with none learned, the first leads
    reasons = [r for r in (verdicts.ONE_CLASS, verdicts.ON_PLATEAU, verdicts.AT_CHANCE) if r in statuses.values()]
    if learned:
        text, notes = mean_interval(list(learned.values())).mean_text(100), reasons
    else:
        chance = data.get("test_majority_share", math.nan)
        text, notes = (f"{reasons[0]} (chance {100 * chance:.1f})", reasons[1:]) if reasons else ("", [])
    text += "".join(f" ({list(statuses.values()).count(r)}/{len(seeds)} seeds {r})" for r in notes)
    if crashed:
        statuses_text = f"{len(crashed)}/{len(seeds)} seeds {', '.join(sorted({seeds[s].failed for s in crashed}))}"
        text = f"{text} ({statuses_text})" if text else statuses_text
    if len(seeds) < role["planned_seeds"]:
        text += f" ({len(seeds)} of {role['planned_seeds']} seeds so far)"
    return {"learned": learned, "failed": failed, "text": text}


def difference_text(variant: dict[int, float], control: dict[int, float]) -> str:
    interval = paired_difference_if_any(variant, control)
    return "—" if interval is None else interval.difference_text(100)


def task_grids(grid_dir: Path, tasks: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """``(task, load_grid(...))`` for each task that has a grid folder, in ``tasks`` order."""
    present = [task for task in tasks if (grid_dir / task / "run_fingerprint.json").is_file()]
    return [(task, load_grid(grid_dir / task)) for task in present]


def rate_text(chosen: float, swept: list[float]) -> str:
    """The chosen learning rate, marked when it is at an edge of the sweep (``*`` the largest, ``†`` the
    smallest), where a rate beyond the sweep might have scored higher."""
    mark = "*" if chosen == max(swept) else "†" if chosen == min(swept) else ""
    return f"{chosen:g}{mark}"


def comparison_table(grid_dir: Path, tasks: list[str]) -> str:
    """The answer table: one row per task and pair."""
    lines = [
        "| task | comparison | variant acc. % | control acc. % | variant − control (paired, 95% CI) | chosen lr "
        "(variant / control) | paper (their setting) |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for task, grid in task_grids(grid_dir, tasks):
        for spec, roles in grid["cells"].items():
            if not roles["variant"]["seeds"] or not roles["control"]["seeds"]:
                lines.append(f"| {task} | {PAIR_LABELS.get(spec, spec)} | not run yet | not run yet | — | | |")
                continue
            variant, control = (summarize_role(roles[r], grid["data"]) for r in ROLES)
            swept = grid["settings"]["learning_rates"]
            rates = " / ".join(rate_text(roles[r]["chosen_learning_rate"], swept) for r in ROLES)
            lines.append(
                f"| {task} | {PAIR_LABELS.get(spec, spec)} | {variant['text']} | {control['text']} | "
                f"{difference_text(variant['learned'], control['learned'])} | {rates} | "
                f"{PAPER_NUMBERS.get((spec.partition(':')[0], task), '—')} |"
            )
    lines += ["", "\\* the largest learning rate swept: a larger one might have scored higher on the held-out slice; "
              "† the smallest: a smaller one might have."]
    return "\n".join(lines) + "\n"


def sweep_table(grid_dir: Path, tasks: list[str]) -> str:
    """Held-out accuracy of every swept learning rate (the chosen one in bold), and the training speed."""
    lines = [
        "| task | comparison | role | held-out acc. % by learning rate | median train tokens/s (load-dependent) |",
        "|---|---|---|---|---:|",
    ]
    for task, grid in task_grids(grid_dir, tasks):
        for spec, roles in grid["cells"].items():
            for role_name, role in roles.items():
                if not role["sweep"]:
                    continue
                cells = []
                for lr, record in sorted(role["sweep"].items()):
                    score = f"{100 * record['accuracy']:.1f}" if record["status"] == "finished" else record["status"]
                    cell = f"{lr:g}: {score}"
                    cells.append(f"**{cell}**" if lr == role["chosen_learning_rate"] else cell)
                finished = [r for r in role["seeds"].values() if r["status"] == "finished"]
                speeds = sorted(r["train_tokens_per_second"] for r in finished)
                speed = f"{speeds[len(speeds) // 2]:,.0f}" if speeds else "—"
                lines.append(f"| {task} | {spec} | {role_name} | {'; '.join(cells)} | {speed} |")
    return "\n".join(lines) + "\n"


def settings_text(grid_dir: Path, tasks: list[str]) -> str:
    """One line per task: data split, budget, sizes, swept rates and seeds, from the grid's fingerprint."""
    lines = []
    for task, grid in task_grids(grid_dir, tasks):
        s, d = grid["settings"], grid["data"]
        sizes = ", ".join(f"{k} {v}" for k, v in s["sizes"].items())
        lines.append(
            f"- **{task}**: {d.get('split')}; {d.get('held_out_examples')} training examples held out for the "
            f"learning-rate sweep; {s['max_length']} tokens ({100 * d.get('truncated_train_share', 0):.0f}% of "
            f"training texts truncated), WordPiece vocabulary {d.get('tokenizer_vocab_size')} trained on the "
            f"training split; {s['steps']} steps of {s['batch_size']}, AdamW, warmup {s['warmup_ratio']:g} then "
            f"linear decay; learning rates {', '.join(f'{x:g}' for x in s['learning_rates'])} swept at seed "
            f"{s['sweep_seed']}; seeds {', '.join(map(str, s['seeds']))}; {sizes}; chance (majority class of the "
            f"test split) {100 * d.get('test_majority_share', math.nan):.1f}%."
        )
    return "\n".join(lines) + "\n"


def transject_bounds_table(results_file: Path) -> str:
    """The layer-wise distance ratios of ``scripts/transject_bounds.py`` with the trained α_l and the dev
    accuracy with every α_l set to 0 (what the layers contribute; recorded since the sigmoid rows)."""
    import json

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
    """PARITY (``scripts/parity.py``): per (d, N), the mean best training accuracy of the kept runs of vanilla
    and N-ODE blocks beside the paper's Table 1, the mean wall time to first reach it and the N-ODE blocks'
    function evaluations per forward. A cell whose runs stopped (non-finite values, solver failures) says
    how many, and one with no finished run gives no numbers."""
    import json

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
    change of the last hidden state against a solve 100× tighter than the tightest (``scripts/node_nfe.py``),
    with the model and commit it was measured on."""
    import json

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
    """How long each command takes to start (``scripts/startup_benchmark.py``): median wall and CPU time, the
    targets with their measured ratios, and the machine's load around the measurement."""
    import json

    results = json.loads(results_file.read_text(encoding="utf-8"))
    lines = ["| Command | Median wall time | Median CPU time |", "|---|---:|---:|"]
    for name, median in results["medians"].items():
        command = name if name.startswith("hf-variants") else f'python -c "{name}"'
        lines.append(f"| `{command}` | {median['wall_seconds']:.2f} s | {median['cpu_seconds']:.2f} s |")
    targets = "; ".join(
        f"`{name}` ≤ {entry['target']:g} × `{entry['reference']}` (measured {entry['wall_ratio']:.2f} × wall, "
        f"{entry['cpu_ratio']:.2f} × CPU: {'met' if entry['met'] else 'not met'})"
        for name, entry in results["targets"].items()
    )
    machine = results["machine"]
    before, after = machine["load_average_before"][0], machine["load_average_after"][0]
    return (
        "\n".join(lines) + f"\n\nTargets: {targets}. Median of {results['rounds_measured']} interleaved rounds on "
        f"{machine['cpus']} CPUs (load average {before:.2f} before, {after:.2f} after).\n"
    )
