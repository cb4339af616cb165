"""``hf-variants compare``: pretrain every chosen variant and BERT at one matched size with MLM,
fine-tune each on classification tasks, reload everything through the Auto classes, measure, and
write a report folder (``report.md``, ``results.json``, PNG figures).

It runs the library's own pipeline: :mod:`hf_variants.training.train_tokenizer`,
:mod:`~hf_variants.training.run_mlm` and :mod:`~hf_variants.training.run_glue`, then
:mod:`hf_variants.lab.analysis` on the reloaded models and :mod:`hf_variants.lab.figures`.

Data: the embedded default — the package's synthetic language (:mod:`hf_variants.synthetic`) for MLM
and its attractor-number task for fine-tuning, generated from ``--seed`` — unless other data is asked
for, in this order (the report says which was used):

1. ``--data_dir``: a folder with ``wikitext-2/{train,valid}.txt`` and ``glue/`` in the GLUE TSV layout;
2. the ``HF_VARIANTS_DATA`` environment variable, a folder of the same layout;
3. ``--from_hub``: the Hub (``wikitext``/``wikitext-2-raw-v1`` and ``nyu-mll/glue``); an error when it
   does not answer. The Hub is never tried unless asked for, so a command is the same experiment with
   and without a network.

The report folder is owned like the engines' run folders (:mod:`hf_variants.training.checkpoints`): a
lock taken before anything is written, a fingerprint of the settings (another comparison in the folder
is refused before its tokenizer or data could replace this one's, unless ``--overwrite_output_dir``),
and a manifest of what it wrote. After a kill, a re-run takes each finished stage's result from the
record written when the stage finished (:func:`~hf_variants.lab.stages.finished_stage`), when its settings,
the content of its inputs and its folder are unchanged. Each stage is an engine called as a function with typed settings
(``run_mlm.run``, ``run_glue.run``, ``train_tokenizer.train_tokenizer``); only ``main`` parses a command
line.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..settings import compare as compare_settings
from ..settings.compare import CompareArguments
from ..storage import run_folder, run_identity
from ..storage.files import remove_path, write_text_atomic
from ..tasks import EmbeddedLevels, get_task
from . import verdicts
from .data_sources import DataSource, resolve_data
from .evidence import run_outcomes
from .execution import quiet_libraries
from .measurement import DevSet, analyse, classifier_from, dev_set, final_run, headline_metric
from .outcomes import ENGINE_RESULTS, read_outcome
from .protocol import RATE_CHOICE, Outcomes, Run, run_protocol
from .report import report_markdown
from .spec import EXTERNAL_REFERENCE, ModelSpec, with_calibration_controls, with_matched_controls
from .stages import (
    STAGE_RECORD_SUFFIX,
    folder_name,
    matched_fields,
    matched_size,
    train,
    train_or_take_tokenizer,
)

DATA_ENV = compare_settings.DATA_ENV


# --------------------------------------------------------------------------------------------
# Pipeline
# --------------------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None) -> CompareArguments:
    """The settings of ``hf-variants compare`` (:mod:`hf_variants.settings.compare`, ``--preset`` applied),
    with ``--models`` turned into checked :class:`ModelSpec` s here, where the registry is at hand."""
    parser = compare_settings.build_parser()
    args = compare_settings.parse_args(argv)
    try:
        args.models = [ModelSpec.parse(text) for text in args.models]
    except ValueError as error:
        parser.error(f"argument --models: {error}")
    if twice := named_twice(asked_models(args)):
        parser.error(f"argument --models: names {', '.join(twice)} twice (with the matched controls it adds)")
    return args


def asked_models(args: CompareArguments) -> list[ModelSpec]:
    """The models ``--models`` names, each with its matched control unless ``--no_matched_controls``."""
    return list(args.models) if args.no_matched_controls else with_matched_controls(args.models)


def named_twice(specs: Sequence[ModelSpec]) -> list[str]:
    """The names ``specs`` holds more than once, sorted."""
    names = [spec.name for spec in specs]
    return sorted({name for name in names if names.count(name) > 1})


def fine_tuning_seeds(args: CompareArguments, spec: ModelSpec | None = None) -> list[int]:
    """``--seed``, ``--seed + 1``, … (``--num_seeds`` of them; for a model that ``--model_seeds`` gives fewer, and
    its matched control, the first of them)."""
    count = args.num_seeds if spec is None else args.seeds_of((spec.control_of or spec).name)
    return [args.seed + offset for offset in range(count)]


def held_out(task: str, result: dict[str, Any]) -> verdicts.HeldOutRun:
    """A held-out run's engine result as the rate choice reads it."""
    return read_outcome(result, ENGINE_RESULTS, task).held_out()


def train_all(
    args: CompareArguments, source: DataSource, tokenizer: str, specs: Sequence[ModelSpec], tasks: Sequence[str],
    finished: Callable[[Run, dict[str, Any]], None],
) -> Outcomes:
    """Every run of the comparison through the lab's protocol (:func:`~.protocol.run_protocol`), ``--workers`` at a
    time: each model's pretraining at every seed; from each, per task, its held-out runs on that seed's held-out
    slice, then that seed's final run at the rate they chose (with ``--final_runs_at_every_rate``, its final runs
    at every rate). Seed by seed, every model: a seed's held-out runs start while the later seeds pretrain."""
    own = {spec: fine_tuning_seeds(args, spec) for spec in specs}
    replicates = [(spec, seed + spec.seed_offset) for seed in fine_tuning_seeds(args) for spec in specs
                  if seed in own[spec]]  # fmt: skip
    return run_protocol(replicates, tasks, args.finetune_learning_rates, partial(train, args, source, tokenizer),
                        held_out, pretrained=True, workers=args.workers,
                        every_rate=bool(args.final_runs_at_every_rate), finished=finished)  # fmt: skip


def heldout_left_out(task: str, sweep: dict[float, dict[str, Any]]) -> dict[str, str]:
    """Rate → why the held-out run at that rate was not a candidate for the choice: it failed (with
    the error's first clause and step) or predicted one class on the held-out slice."""
    left_out = {}
    for rate, result in sweep.items():
        run = read_outcome(result, ENGINE_RESULTS, task)
        if run.failed:
            left_out[f"{rate:g}"] = verdicts.reason(run)
        elif run.one_class:
            left_out[f"{rate:g}"] = f"{verdicts.ONE_CLASS} (one class on the held-out slice)"
    return left_out


def control_changes(spec: ModelSpec) -> dict[str, Any] | None:
    """For a matched control, the config changes that turned its variant's idea off."""
    from ..core.composition import matched_control_overrides

    return None if spec.control_of is None else matched_control_overrides(spec.control_of.config())


def analysis_has_attention(spec: ModelSpec) -> bool:
    """Whether the spec's model returns attention probabilities (TransJect's does not)."""
    from ..core.composition import has_attention_probabilities

    return spec.model_type == EXTERNAL_REFERENCE or has_attention_probabilities(spec.config())


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    with quiet_libraries():
        return run(args, argv)


#: Sub-folders of the report folder that only the comparison writes.
OWNED_FOLDERS = ("models/", "tokenizer/", "data/", "figures/")
#: Settings that do not change the comparison's results (left out of its fingerprint).
SETTINGS_WITHOUT_EFFECT = frozenset({"output_dir", "overwrite_output_dir", "disable_tqdm"})


def comparison_fingerprint(args: CompareArguments) -> dict[str, Any]:
    """The comparison's identity: every setting but those without effect; local data and tokenizer
    folders by location only (each stage fingerprints their content itself), library versions recorded."""
    by_location = {"data_dir", "tokenizer"}
    settings = {name: _setting(value) for name, value in vars(args).items()}
    return {
        **run_identity.arguments_with_effect(settings, SETTINGS_WITHOUT_EFFECT | by_location),
        "margin_reason": args.margin_reason(),  # a resume under another margin, or reason, is refused
        "locations": {name: settings[name] for name in sorted(by_location)},
        "versions": run_identity.library_versions(),
    }


def margins_of(args: CompareArguments, tasks: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Task → its margin (points, reason, the day it was declared), as the results record them: the default's
    declaration (:data:`~hf_variants.settings.compare.DEFAULT_MARGIN_DECLARED`), or for ``--equivalence_margin`` the
    day the report folder's fingerprint was written, before the first run."""
    written = (args.output_dir / run_folder.FINGERPRINT_FILE).stat().st_mtime
    return compare_settings.declared_margins(args, list(tasks), time.strftime("%Y-%m-%d", time.gmtime(written)))


def run(args: CompareArguments, argv: Sequence[str] | None) -> dict[str, Any]:
    """The comparison, inside the report folder's lock."""
    lock = run_folder.OutputDirLock(args.output_dir)
    try:
        return compare_models(args, argv)
    finally:
        lock.release()


def compare_models(args: CompareArguments, argv: Sequence[str] | None) -> dict[str, Any]:
    """The comparison in its steps: the report folder, the data, the tokenizer, the models with their controls,
    every run, each model's record, and the report."""
    from transformers import AutoTokenizer

    import hf_variants  # noqa: F401  (registers the variants)

    from . import figures

    started = time.perf_counter()
    knobs = {"attractors": args.attractors, "recall_pairs": args.recall_pairs}
    levels = EmbeddedLevels(**{name: level for name, level in knobs.items() if level is not None})  # checked first
    files_before = prepare_report_folder(args)
    source = prepare_data(args, levels)
    tasks = list(source.tasks)
    specs, calibration = models_to_compare(args, tasks)
    tokenizer_name = train_or_take_tokenizer(args, source)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_name)
    sentences = source.dev_split(tasks[0])[0][: args.analysis_sentences]

    training_started = time.perf_counter()
    outcomes = train_with_progress(args, source, tokenizer_name, specs, tasks)
    training_seconds = time.perf_counter() - training_started

    dev_sets = {task: dev_set(tokenizer, source, task, args.max_seq_length) for task in tasks}  # read once
    models: dict[str, dict[str, Any]] = {}
    analyses: dict[str, dict[str, Any]] = {}
    for spec in specs:
        entry = model_entry(args, spec, outcomes)
        for task in tasks:
            entry["fine_tuning"][task] = fine_tuning_entry(args, dev_sets[task], spec, outcomes, levels)
        entry["training_seconds"] = training_seconds_of(entry)
        summary = analysis_of(args, spec, entry, outcomes, tokenizer, sentences)
        if summary is not None:
            analyses[spec.name] = summary
            entry["analysis"] = analysis_entry(summary)
        models[spec.name] = entry

    results = {
        "command": " ".join(["hf-variants compare", *(argv if argv is not None else sys.argv[2:])]),
        "data": {"kind": source.kind, "description": source.description},
        "tasks": tasks,
        "calibration": calibration,
        "settings": {k: _setting(v) for k, v in vars(args).items()},
        "margins": margins_of(args, tasks),
        "default_seeds": compare_settings.DEFAULT_SEEDS,  # the size of the A/A check's groups
        "tokenizer": tokenizer_name,
        "models": models,
        "figures": figures.write_all(args.output_dir, models, analyses, tasks[0]),
        "training_wall_seconds": training_seconds,
        "wall_seconds": time.perf_counter() - started,
    }
    write_text_atomic(args.output_dir / "results.json", json.dumps(results, indent=2) + "\n", within=args.output_dir)
    write_text_atomic(args.output_dir / "report.md", report_markdown(results), within=args.output_dir)
    run_folder.write_manifest(args.output_dir, files_before, "compare")
    print(f"[hf-variants compare] Report: {args.output_dir / 'report.md'} ({results['wall_seconds']:.0f} s).")
    return results


def prepare_report_folder(args: CompareArguments) -> dict[str, Any]:
    """Step 1: refuse a folder that holds another comparison; with ``--overwrite_output_dir``, forget every
    finished stage. Returns the state of the files the comparison does not own (for its manifest)."""
    run_folder.prepare_output_dir(args.output_dir, comparison_fingerprint(args), args.overwrite_output_dir)
    if args.overwrite_output_dir:  # every stage runs again
        for record in (args.output_dir / "models").glob(f"*/*{STAGE_RECORD_SUFFIX}"):
            remove_path(record, within=args.output_dir)
    return {name: state for name, state in run_folder.file_states(args.output_dir).items()
            if not name.startswith(OWNED_FOLDERS)}  # fmt: skip


def prepare_data(args: CompareArguments, levels: EmbeddedLevels) -> DataSource:
    """Step 2: the data (module docstring); with ``--pretrain_on task``, the tasks' training inputs become the
    corpus."""
    source = resolve_data(args.data_dir, args.tasks, args.output_dir, args.seed, args.from_hub, levels)
    if args.pretrain_on == "task":  # self-pretraining: the tasks' training inputs are the corpus (and tokenizer's)
        source.corpus = source.task_inputs_corpus(list(source.tasks), args.heldout_fraction, args.output_dir / "data",
                                                     within=args.output_dir)
        source.description += "; MLM pretraining (and the tokenizer) on the tasks' own training inputs"
    print(f"[hf-variants compare] Data: {source.description}.", flush=True)
    return source


def models_to_compare(args: CompareArguments, tasks: Sequence[str]) -> tuple[list[ModelSpec], dict[str, Any]]:
    """Step 3: the models asked for, each with its matched control (unless ``--no_matched_controls``) and the
    calibration controls; refuses a model that is also a calibration control of these tasks (a model the command
    line names twice was refused in :func:`parse_args`)."""
    specs, calibration = with_calibration_controls(asked_models(args), tasks, args.no_calibration_controls)
    if twice := named_twice(specs):
        raise ValueError(f"--models names {', '.join(twice)}, which the comparison adds as a calibration control of "
                         "these tasks: leave it out, or pass --no_calibration_controls")  # fmt: skip
    return specs, calibration


def train_with_progress(
    args: CompareArguments, source: DataSource, tokenizer: str, specs: Sequence[ModelSpec], tasks: Sequence[str]
) -> Outcomes:
    """Step 4: every run (:func:`train_all`) under one progress bar over the comparison's runs."""
    from tqdm.auto import tqdm

    sweep_runs = len(args.finetune_learning_rates) if len(args.finetune_learning_rates) > 1 else 0
    final_rates = len(args.finetune_learning_rates) if args.final_runs_at_every_rate else 1
    # pretrainings; per seed and task its held-out runs and final runs
    runs_per_seed = 1 + len(tasks) * (sweep_runs + final_rates)
    runs = sum(len(fine_tuning_seeds(args, spec)) for spec in specs) * runs_per_seed
    overall = tqdm(total=runs, desc="compare (all models)", position=0, disable=args.disable_tqdm, unit="run")

    def finished(run: Run, result: dict[str, Any]) -> None:
        what = f"MLM pretraining, seed {run.seed}" if run.task is None else folder_name(run)
        if args.disable_tqdm:
            print(f"[hf-variants compare] finished {run.model.name}: {what}", flush=True)
        else:
            overall.set_postfix_str(f"{run.model.name}: {what}")
        overall.update()

    try:
        return train_all(args, source, tokenizer, specs, tasks, finished)
    finally:
        overall.close()


def model_entry(args: CompareArguments, spec: ModelSpec, outcomes: Outcomes) -> dict[str, Any]:
    """Step 5: a model's record — what it is, its size, its MLM pretraining at every seed — reloaded through the
    Auto classes; its fine-tuning is filled in per task (:func:`fine_tuning_entry`)."""
    from transformers import AutoModelForMaskedLM

    model_dir = args.output_dir / "models" / spec.folder
    pretrainings = {seed: outcomes.results[Run(spec, seed=seed + spec.seed_offset)]
                    for seed in fine_tuning_seeds(args, spec)}  # fmt: skip
    mlm, first_mlm = pretrainings[args.seed], model_dir / f"mlm-seed{args.seed + spec.seed_offset}"
    reloaded_mlm = AutoModelForMaskedLM.from_pretrained(first_mlm)
    attention_type, layer_scheme = spec.pair()
    return {
        "model_type": spec.model_type,
        "attention_type": attention_type,
        "layer_scheme": layer_scheme,
        "external_reference": spec.model_type == EXTERNAL_REFERENCE,
        "control_of": spec.control_of.name if spec.control_of is not None else None,
        "control_changes": control_changes(spec),
        "has_attention_probabilities": analysis_has_attention(spec),
        "config_overrides": matched_fields(spec, matched_size(args)),
        "parameters": sum(p.numel() for p in reloaded_mlm.parameters()),
        "pretraining": {key: mlm[key] for key in ("steps", "train_seconds", "train_tokens", "tokens_per_second",
                                                  "eval_loss", "perplexity", "final_train_loss")},
        "pretraining_runs": {str(seed): {key: result[key] for key in ("eval_loss", "perplexity", "train_seconds")}
                             for seed, result in pretrainings.items()},
        "pretraining_curve": json.loads((first_mlm / "train_history.json").read_text()),
        "fine_tuning": {},
    }  # fmt: skip


def fine_tuning_entry(
    args: CompareArguments, dev: DevSet, spec: ModelSpec, outcomes: Outcomes, levels: EmbeddedLevels
) -> dict[str, Any]:
    """Step 6: a model's fine-tuning on one task — per seed the rate its held-out runs chose, with every held-out
    rate's score and loss; the final runs at the chosen rates (measured on the task's dev split; with
    ``--final_runs_at_every_rate``, at every rate too) and what they learned over the seeds."""
    task = dev.task
    seeds = {str(seed): seed + spec.seed_offset for seed in fine_tuning_seeds(args, spec)}
    chosen = {name: outcomes.choices[spec, task, seed] for name, seed in seeds.items()}
    every_rate = bool(args.final_runs_at_every_rate)

    def measured(rate: float, seed: int) -> dict[str, Any]:
        run = Run(spec, task, rate, seed, every_rate=every_rate)
        return {**final_run(args, dev, spec, run, outcomes.results), "learning_rate": rate}

    if every_rate:
        at_rate = {f"{r:g}": {name: measured(r, seed) for name, seed in seeds.items()}
                   for r in sorted(args.finetune_learning_rates)}  # fmt: skip
        runs = {name: at_rate[f"{chosen[name][0]:g}"][name] for name in seeds}
    else:
        runs = {name: measured(chosen[name][0], seed) for name, seed in seeds.items()}
    sweeps = {name: outcomes.held_out_runs(spec, task, seed) for name, seed in seeds.items()}
    interval = verdicts.summary(run_outcomes(runs, task, get_task(task).guessing_level(levels)))
    return {
        "metric": headline_metric(task),
        "rate_choice": RATE_CHOICE,
        "learning_rates": {name: choice[0] for name, choice in chosen.items()},
        "heldout_scores": {name: {f"{r:g}": score for r, score in choice[1].items()}
                           for name, choice in chosen.items()},
        "heldout_losses": {name: {f"{r:g}": read_outcome(result, ENGINE_RESULTS, task).loss
                                  for r, result in sweep.items() if "failed" not in result}
                           for name, sweep in sweeps.items()},
        "heldout_left_out": {f"{rate}, seed {name}": why for name, sweep in sweeps.items()
                             for rate, why in heldout_left_out(task, sweep).items()},
        "runs": runs,
        **({"runs_at_every_rate": at_rate} if every_rate else {}),
        "learned": None if interval is None else {"mean": interval.mean, "half_width": interval.half_width,
                                                  "seeds": interval.n},
    }  # fmt: skip


def training_seconds_of(entry: dict[str, Any]) -> float:
    """A model's training time: its pretrainings and every fine-tuning run it recorded."""
    from .evidence import final_runs_by_rate

    fine_tuning = [run.get("train_seconds", 0.0) for task in entry["fine_tuning"].values()
                   for runs in final_runs_by_rate(task).values() for run in runs.values()]  # fmt: skip
    return sum(run["train_seconds"] for run in entry["pretraining_runs"].values()) + sum(fine_tuning)


def analysis_of(
    args: CompareArguments, spec: ModelSpec, entry: dict[str, Any],
    outcomes: Outcomes, tokenizer, sentences: Sequence[str],
) -> dict[str, Any] | None:  # fmt: skip
    """Step 7: the analysis (:func:`~hf_variants.lab.measurement.analyse`) of the model's first final run on the
    first task that did not fail; None when every one failed."""
    first_task = next(iter(entry["fine_tuning"]))
    analysed = next((name for name, run in entry["fine_tuning"][first_task]["runs"].items() if "failed" not in run),
                    None)  # fmt: skip
    if analysed is None:
        return None
    seed = int(analysed) + spec.seed_offset
    first = Run(spec, first_task, outcomes.choices[spec, first_task, seed][0], seed,
                every_rate=bool(args.final_runs_at_every_rate))  # fmt: skip
    model_dir = args.output_dir / "models" / spec.folder
    return analyse(classifier_from(model_dir / folder_name(first), attn_implementation="eager"), tokenizer,
                   sentences, args.max_seq_length)  # fmt: skip


def analysis_entry(summary: dict[str, Any]) -> dict[str, Any]:
    """The analysis as recorded in results.json: without the attention maps (figures), with the attention rank
    fraction's mean."""
    entry = {k: v for k, v in summary.items() if k not in ("attention_maps", "attention_sentence")}
    if summary["attention_rank_fraction"] is not None:
        entry["attention_rank_fraction"] = {
            "mean": float(np.mean(summary["attention_rank_fraction"])),
            "values": summary["attention_rank_fraction"],
        }
    return entry


def _setting(value: Any) -> Any:
    """A command-line setting as JSON: paths as text, model specs by name."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list) and value and isinstance(value[0], ModelSpec):
        return [spec.name for spec in value]
    return value
