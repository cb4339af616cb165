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
record written when the stage finished (:func:`finished_stage`), when its settings, the content of its
inputs and its folder are unchanged. Each stage is an engine called as a function with typed settings
(``run_mlm.run``, ``run_glue.run``, ``train_tokenizer.train_tokenizer``); only ``main`` parses a command
line.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..core.ideas import MatchedSize
from ..core.overrides import format_overrides
from ..settings import compare as compare_settings
from ..settings.compare import CompareArguments
from ..synthetic import DEFAULT_ATTRACTORS
from ..training import checkpoints, run_identity
from . import verdicts
from .data_sources import DataSource, embedded_tasks, resolve_data
from .execution import executor
from .report import report_markdown, run_outcome, run_outcomes
from .spec import EXTERNAL_REFERENCE, ModelSpec, with_matched_controls

#: The baseline of the calibration controls (:func:`with_calibration_controls`).
BASELINE = "bert_control"
#: Embedded tasks that a model without token mixing cannot solve: the positive control is judged on them.
NEEDS_TOKEN_MIXING = frozenset({"attractor_number", "agreement"})

DATA_ENV = compare_settings.DATA_ENV
#: Solver steps per N-ODE block and forward in the comparison (healthy runs take a handful at rtol 1e-3).
NODE_MAX_STEPS = 50
















# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------
def matched_size(args: CompareArguments) -> MatchedSize:
    """The size every model of this comparison shares (``--hidden_size``, ``--num_layers``,
    ``--head_size``, ``--node_tolerance``; at most :data:`NODE_MAX_STEPS` solver steps)."""
    return MatchedSize(args.hidden_size, args.num_layers, args.head_size, args.node_tolerance, NODE_MAX_STEPS)


def matched_fields(spec: ModelSpec, size: MatchedSize) -> dict[str, Any]:
    """The spec's config fields at the matched ``size``: what each idea of the variant's pair derives
    from the size (:func:`~hf_variants.core.composition.matched_size_fields`), then the spec's own
    overrides, which win; a matched control takes its variant's fields and then the changes that turn
    the variant's idea off."""
    from ..core.composition import matched_size_fields

    variant = spec.control_of or spec
    return spec.fields(matched_size_fields(*variant.pair(), size))


def headline_metric(task: str) -> str:
    """The name of the task's headline metric (accuracy for the embedded tasks)."""
    from ..glue import get_task

    return "accuracy" if task in embedded_tasks() else get_task(task).headline_metric


def headline(task: str, metrics: dict[str, float]) -> tuple[str, float]:
    """The task's headline metric and its value."""
    name = headline_metric(task)
    return name, metrics[name]


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
    return args


def train_or_take_tokenizer(args: CompareArguments, source: DataSource) -> str:
    from ..settings.tokenizer import TokenizerArguments
    from ..training import train_tokenizer

    if args.tokenizer:
        return args.tokenizer
    vocab_size = args.vocab_size or (200 if source.kind == "synthetic" else 8000)
    corpus = {name: value for name, value in source.corpus.items() if name != "validation_file"}  # training text
    settings = TokenizerArguments(**corpus, vocab_size=vocab_size, output_dir=args.output_dir / "tokenizer")
    return str(train_tokenizer.train_tokenizer(settings))


def pretrain(
    args: CompareArguments, source: DataSource, tokenizer: str, spec: ModelSpec, seed: int
) -> dict[str, Any]:
    """The model's MLM pretraining at ``seed`` into ``models/<spec>/mlm-seed<seed>`` on the pretraining engine."""
    from ..settings.pretraining import PretrainingArguments
    from ..training import run_mlm

    settings = PretrainingArguments(
        model_type=spec.model_type, config_overrides=format_overrides(matched_fields(spec, matched_size(args))),
        **source.corpus, tokenizer_name=tokenizer, max_seq_length=args.max_seq_length,
        per_device_train_batch_size=args.pretrain_batch_size, learning_rate=args.pretrain_learning_rate,
        num_warmup_steps=0.1, max_train_steps=args.pretrain_steps, max_eval_samples=args.max_pretrain_eval_samples,
        logging_steps=5, seed=seed, output_dir=args.output_dir / "models" / spec.folder / f"mlm-seed{seed}",
        time_budget_seconds=args.pretrain_seconds, overwrite_output_dir=args.overwrite_output_dir,
        disable_tqdm=not stage_bars(args),
    )  # fmt: skip
    inputs = [*source.input_files(), *sorted(Path(tokenizer).glob("*"))]
    return finished_stage(settings.output_dir, run_mlm.requested_arguments(settings), inputs,
                          lambda: run_mlm.run(settings))  # fmt: skip


def stage_bars(args: CompareArguments) -> bool:
    """Whether each stage shows its own progress bar: only when runs go one after another on a console
    (side by side, their bars would overwrite each other; the run's own bar remains)."""
    return not args.disable_tqdm and args.workers == 1


def fine_tune(
    args: CompareArguments, source: DataSource, spec: ModelSpec, task: str, learning_rate: float,
    output_name: str, seed: int, heldout: bool = False,
) -> dict[str, Any]:
    """One fine-tuning run on the fine-tuning engine into ``models/<spec>/<output_name>``, from the model's
    pretraining at the same ``seed``; with ``heldout`` it trains on the training split without a held-out
    slice and is scored on that slice, never on dev."""
    from transformers import TrainingArguments

    from ..settings.finetuning import DataTrainingArguments, ModelArguments, RunArguments
    from ..training import run_glue

    pretrained = args.output_dir / "models" / spec.folder / f"mlm-seed{seed}"
    held_out = {"heldout_fraction": args.heldout_fraction, "heldout_seed": 0} if heldout else {}
    settings = (
        ModelArguments(model_name_or_path=str(pretrained)),
        DataTrainingArguments(
            **source.tasks[task], max_train_samples=args.finetune_steps * args.finetune_batch_size,
            max_seq_length=args.max_seq_length, pad_to_max_length=False, **held_out,
        ),
        TrainingArguments(
            output_dir=str(args.output_dir / "models" / spec.folder / output_name), do_train=True, do_eval=True,
            max_steps=args.finetune_steps, per_device_train_batch_size=args.finetune_batch_size,
            per_device_eval_batch_size=64, learning_rate=learning_rate, warmup_steps=0.1, seed=seed, logging_steps=5,
            save_strategy="no", report_to="none", log_level="error", dataloader_pin_memory=False,
            disable_tqdm=not stage_bars(args),
        ),
        RunArguments(print_logs=False, overwrite_output_dir=args.overwrite_output_dir),
    )  # fmt: skip
    inputs = [*source.input_files(task), pretrained / checkpoints.MANIFEST_FILE]
    return finished_stage(Path(settings[2].output_dir), run_glue.requested_arguments(*settings), inputs,
                          lambda: run_glue.run(*settings))  # fmt: skip


STAGE_RECORD_SUFFIX = ".finished.json"


def finished_stage(folder: Path, arguments: dict[str, Any], inputs: Sequence[Path],
                   run_stage: Callable[[], dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """``run_stage()`` (a pretraining or fine-tuning run writing ``folder``, whose settings are the engine's
    ``requested_arguments``), recorded next to the folder when it finishes. A re-run after a kill takes the
    recorded result instead when the settings and the content of ``inputs`` are the same and the folder is
    what the stage wrote (its manifest verifies: an altered file is an error naming it)."""
    record = folder.with_name(folder.name + STAGE_RECORD_SUFFIX)
    identity = {"arguments": arguments, "inputs": run_identity.describe_files(inputs)[0]}
    if record.is_file():
        saved = json.loads(record.read_text(encoding="utf-8"))
        if {key: saved.get(key) for key in identity} == identity and checkpoints.verify_manifest(folder) is not None:
            return saved["result"]
    result = run_stage()
    record.parent.mkdir(parents=True, exist_ok=True)
    partial = record.with_name(record.name + ".partial")
    partial.write_text(json.dumps({**identity, "result": result}, indent=1) + "\n", encoding="utf-8")
    os.replace(partial, record)
    checkpoints.failpoint(f"compare:{folder.parent.name}/{folder.name}", 0)  # tests kill here
    return result


@dataclass(frozen=True)
class Run:
    """One training run of the comparison: a model's MLM pretraining at one seed (no ``task``), a held-out
    run for choosing the learning rate (at the model's first seed), or a final fine-tuning run at one seed,
    from the pretraining at that seed (so each seed is a whole pretrain-and-fine-tune replicate)."""

    spec: ModelSpec
    task: str | None = None
    learning_rate: float | None = None
    seed: int | None = None
    heldout: bool = False

    @property
    def folder_name(self) -> str:
        """Its folder (and ``.log`` file) under ``models/<spec>/``."""
        if self.task is None:
            return f"mlm-seed{self.seed}"
        return f"{self.task}-sweep-lr{self.learning_rate:g}" if self.heldout else f"{self.task}-seed{self.seed}"


def train(args: CompareArguments, source: DataSource, tokenizer: str, run: Run) -> dict[str, Any]:
    """The run's stage (in a worker or in this process), what it prints going to its log file. A
    fine-tuning run that the N-ODE solver or the non-finite check stops is an outcome, recorded as
    ``{"failed": "<error>"}``; a pretraining that stops ends the comparison."""
    from ..core.schemes.ode.modeling_ode import ODESolverError

    quiet = not args.disable_tqdm or args.workers > 1  # beside bars, or side by side: to the log file only
    with console_to_file(args.output_dir / "models" / run.spec.folder / f"{run.folder_name}.log", quiet):
        if run.task is None:
            return pretrain(args, source, tokenizer, run.spec, run.seed)
        try:
            return fine_tune(args, source, run.spec, run.task, run.learning_rate, run.folder_name, run.seed,
                             heldout=run.heldout)  # fmt: skip
        except (ODESolverError, FloatingPointError) as error:
            return {"failed": f"{type(error).__name__}: {error}"}


def choose_learning_rate(task: str, outcomes: dict[float, dict[str, Any]]) -> tuple[float, dict[float, float | None]]:
    """The protocol's choice (:func:`~.verdicts.choose_learning_rate`) among the held-out runs, and every
    rate's score (None for a run that failed, which is never chosen)."""
    sweep = {
        rate: verdicts.HeldOutRun(None) if "failed" in result else verdicts.HeldOutRun(
            headline(task, result["eval"]["validation"])[1], verdicts.collapsed(result["eval"]["validation"]),
            result["eval"]["validation"].get("loss"))
        for rate, result in sorted(outcomes.items())
    }  # fmt: skip
    return verdicts.choose_learning_rate(sweep), {rate: run.score for rate, run in sweep.items()}


def fine_tuning_seeds(args: CompareArguments) -> list[int]:
    """``--seed``, ``--seed + 1``, … (``--num_seeds`` of them)."""
    return [args.seed + offset for offset in range(args.num_seeds)]


def train_all(
    args: CompareArguments, source: DataSource, tokenizer: str, specs: Sequence[ModelSpec], tasks: Sequence[str],
    finished: Callable[[Run], None],
) -> tuple[dict[Run, dict[str, Any]], dict[tuple[str, str], tuple[float, dict[float, float | None]]]]:
    """Every run of the comparison, ``--workers`` at a time: each model's pretraining at every seed; from
    the first seed's, per task its held-out runs (one per rate, when there are several); then per seed
    its final run at the chosen rate, from that seed's pretraining. Returns each run's result and, per
    (model name, task), the chosen rate with every held-out rate's score (:func:`choose_learning_rate`);
    ``finished`` is called as each run ends."""
    from concurrent.futures import FIRST_COMPLETED, wait

    results: dict[Run, dict[str, Any]] = {}
    choices: dict[tuple[str, str], tuple[float, dict[float, float | None]]] = {}
    rates = sorted(args.finetune_learning_rates)

    def seeds(spec: ModelSpec) -> list[int]:
        return [seed + spec.seed_offset for seed in fine_tuning_seeds(args)]

    def final_runs(spec: ModelSpec, task: str, choice: tuple[float, dict[float, float | None]]) -> list[Run]:
        """The final runs once the rate is chosen, for the seeds whose pretraining has finished (the others
        follow their pretraining)."""
        choices[spec.name, task] = choice
        return [Run(spec, task, choice[0], seed) for seed in seeds(spec) if Run(spec, seed=seed) in results]

    def runs_after(run: Run) -> list[Run]:
        if run.task is None:  # pretrained at one seed: its final runs where the rate is chosen, and at the
            follow = []  # first seed the held-out runs (with one rate: the choice, so the final runs)
            for task in tasks:
                if (run.spec.name, task) in choices:
                    follow.append(Run(run.spec, task, choices[run.spec.name, task][0], run.seed))
                elif run.seed == seeds(run.spec)[0]:
                    follow += (final_runs(run.spec, task, (rates[0], {})) if len(rates) == 1
                               else [Run(run.spec, task, rate, run.seed, heldout=True) for rate in rates])  # fmt: skip
            return follow
        if run.heldout:
            sweep = {rate: results.get(Run(run.spec, run.task, rate, run.seed, heldout=True)) for rate in rates}
            if all(result is not None for result in sweep.values()):
                return final_runs(run.spec, run.task, choose_learning_rate(run.task, sweep))
        return []

    # every model's first seed first: its held-out runs can start while the other seeds pretrain
    pretrainings = [Run(spec, seed=seeds(spec)[index]) for index in range(args.num_seeds) for spec in specs]
    with executor(args.workers) as pool:
        pending = {pool.submit(train, args, source, tokenizer, run): run for run in pretrainings}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    run = pending.pop(future)
                    results[run] = future.result()
                    finished(run)
                    for follow in runs_after(run):
                        pending[pool.submit(train, args, source, tokenizer, follow)] = follow
        except BaseException:  # runs not started yet are dropped; those training finish and are recorded
            for future in pending:
                future.cancel()
            raise
    return results, choices


def with_calibration_controls(
    specs: Sequence[ModelSpec], tasks: Sequence[str], off: bool = False
) -> tuple[list[ModelSpec], dict[str, Any]]:
    """``specs`` with the two models that show what this comparison can see, and which they are: the
    BERT control under other seeds (:meth:`~.spec.ModelSpec.replica`, the *negative* control: its verdict
    against the BERT control must hold 0) and, when a task needs token mixing (:data:`NEEDS_TOKEN_MIXING`),
    the BERT control without token mixing (:meth:`~.spec.ModelSpec.without_token_mixing`, the *positive*
    control: its verdict must lie below 0). The BERT control is added first when ``specs`` lacks it."""
    if off:
        return list(specs), {}
    baseline = ModelSpec(BASELINE)
    positive_tasks = [task for task in tasks if task in NEEDS_TOKEN_MIXING]
    calibration: dict[str, Any] = {"baseline": baseline.name, "negative": baseline.replica().name}
    added = [baseline.replica()]
    if positive_tasks:
        calibration |= {"positive": baseline.without_token_mixing().name, "positive_tasks": positive_tasks}
        added.insert(0, baseline.without_token_mixing())
    return [*([] if baseline in specs else [baseline]), *specs, *added], calibration


def heldout_left_out(sweep: dict[float, dict[str, Any]]) -> dict[str, str]:
    """Rate → why the held-out run at that rate was not a candidate for the choice: it failed (with
    the error's first clause and step) or predicted one class on the held-out slice."""
    left_out = {}
    for rate, result in sweep.items():
        if "failed" in result:
            left_out[f"{rate:g}"] = verdicts.reason(verdicts.RunOutcome(None, failed=result["failed"]))
        elif verdicts.collapsed(result["eval"]["validation"]):
            left_out[f"{rate:g}"] = f"{verdicts.ONE_CLASS} (one class on the held-out slice)"
    return left_out










def recomputed_metric(
    model, tokenizer, source: DataSource, task: str, max_length: int
) -> tuple[dict[str, float], np.ndarray, np.ndarray]:
    """The dev metrics of a reloaded classifier, computed here (batch by batch, no Trainer), with its
    predictions and the dev labels."""
    from ..glue import compute_glue_metrics

    first, second, labels = source.dev_split(task)
    predictions = []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(first), 64):
            texts = (first[start : start + 64],) + ((second[start : start + 64],) if second else ())
            batch = tokenizer(*texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            logits = model(**batch).logits.float()
            predictions.append(logits[:, 0] if model.config.num_labels == 1 else logits.argmax(-1))
    predicted = torch.cat(predictions).numpy()
    if source.kind == "synthetic":
        return {"accuracy": float((predicted == labels).mean())}, predicted, labels
    return compute_glue_metrics(task, predicted, labels), predicted, labels


def learning_verdict(model, predicted: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """Whether a classifier "did not learn" (≥ 99% of its dev predictions one class, or one constant
    regression score) and the chance score it then has (the dev majority share)."""
    from .statistics import majority_share, predicts_one_class

    if model.config.num_labels == 1:
        return {"did_not_learn": bool(np.ptp(predicted) == 0), "chance": None}
    counts = np.bincount(predicted.astype(int), minlength=model.config.num_labels).tolist()
    return {"did_not_learn": predicts_one_class(counts), "chance": majority_share(labels.tolist()),
            "prediction_counts": counts, "dev_examples": len(labels)}  # fmt: skip


def control_changes(spec: ModelSpec) -> dict[str, Any] | None:
    """For a matched control, the config changes that turned its variant's idea off."""
    from ..core.composition import matched_control_overrides

    return None if spec.control_of is None else matched_control_overrides(spec.control_of.config())


def analysis_has_attention(spec: ModelSpec) -> bool:
    """Whether the spec's model returns attention probabilities (TransJect's does not)."""
    from ..core.composition import has_attention_probabilities

    return spec.model_type == EXTERNAL_REFERENCE or has_attention_probabilities(spec.config())


def analyse(model, tokenizer, sentences: list[str], max_length: int) -> dict[str, Any]:
    """Attention maps (first sentence), attention ranks, NFE per block and distance ratios."""
    from . import analysis

    encodings = [tokenizer(s, truncation=True, max_length=max_length, return_tensors="pt") for s in sentences]
    outputs = analysis.encoder_outputs(model, encodings, attentions=True)
    ratios = analysis.distance_ratios(outputs)["distance_ratio"]
    return {
        "attention_sentence": tokenizer.convert_ids_to_tokens(encodings[0]["input_ids"][0].tolist()),
        "attention_maps": analysis.attention_maps(outputs[0]),
        "attention_rank_fraction": analysis.attention_rank_fractions(outputs),
        "nfe_per_block": analysis.function_evaluations(outputs),
        "distance_ratio": [analysis.summarise(values) for values in ratios],
    }


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    with quiet_libraries():
        return run(args, argv)


@contextlib.contextmanager
def quiet_libraries():
    """No dataset-casting or weight-loading bars while the comparison runs: the console shows one bar per
    stage (pretraining, fine-tuning) and one for the whole run."""
    import datasets
    from transformers.utils import logging as transformers_logging

    datasets_were_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers_logging.enable_progress_bar()
        if datasets_were_enabled:
            datasets.enable_progress_bars()


@contextlib.contextmanager
def console_to_file(path: Path, quiet: bool):
    """With ``quiet``, what a stage prints to stdout (metric tables, result dicts) goes to ``path``
    instead of the console, where only the progress bars (stderr) remain."""
    if not quiet:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle, contextlib.redirect_stdout(handle):
        yield


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
        "locations": {name: settings[name] for name in sorted(by_location)},
        "versions": run_identity.library_versions(),
    }


def run(args: CompareArguments, argv: Sequence[str] | None) -> dict[str, Any]:
    """The comparison, inside the report folder's lock."""
    lock = checkpoints.OutputDirLock(args.output_dir)
    try:
        return compare_models(args, argv)
    finally:
        lock.release()


def compare_models(args: CompareArguments, argv: Sequence[str] | None) -> dict[str, Any]:
    from tqdm.auto import tqdm
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    import hf_variants  # noqa: F401  (registers the variants)

    from . import figures

    started = time.perf_counter()
    checkpoints.prepare_output_dir(args.output_dir, comparison_fingerprint(args), args.overwrite_output_dir)
    if args.overwrite_output_dir:  # every stage runs again
        for record in (args.output_dir / "models").glob(f"*/*{STAGE_RECORD_SUFFIX}"):
            record.unlink()
    files_before = {name: state for name, state in checkpoints.file_states(args.output_dir).items()
                    if not name.startswith(OWNED_FOLDERS)}  # fmt: skip
    attractors = DEFAULT_ATTRACTORS if args.attractors is None else args.attractors
    source = resolve_data(args.data_dir, args.tasks, args.output_dir, args.seed, args.from_hub, attractors)
    tasks = list(source.tasks)
    print(f"[hf-variants compare] Data: {source.description}.", flush=True)
    tokenizer_name = train_or_take_tokenizer(args, source)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_name)
    sentences = source.dev_split(tasks[0])[0][: args.analysis_sentences]

    specs = list(args.models) if args.no_matched_controls else with_matched_controls(args.models)
    specs, calibration = with_calibration_controls(specs, tasks, args.no_calibration_controls)
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"--models names a model twice: {names}")
    sweep_runs = len(args.finetune_learning_rates) if len(args.finetune_learning_rates) > 1 else 0
    runs_per_model = args.num_seeds + len(tasks) * (sweep_runs + args.num_seeds)  # pretrainings, held-out, final
    overall = tqdm(total=len(specs) * runs_per_model, desc="compare (all models)",
                   position=0, disable=args.disable_tqdm, unit="run")  # fmt: skip

    def finished(run: Run) -> None:
        what = f"MLM pretraining, seed {run.seed}" if run.task is None else run.folder_name
        if args.disable_tqdm:
            print(f"[hf-variants compare] finished {run.spec.name}: {what}", flush=True)
        else:
            overall.set_postfix_str(f"{run.spec.name}: {what}")
        overall.update()

    training_started = time.perf_counter()
    outcomes, choices = train_all(args, source, tokenizer_name, specs, tasks, finished)
    overall.close()
    training_seconds = time.perf_counter() - training_started

    models: dict[str, dict[str, Any]] = {}
    analyses: dict[str, dict[str, Any]] = {}
    for spec in specs:
        model_dir = args.output_dir / "models" / spec.folder
        pretrainings = {seed: outcomes[Run(spec, seed=seed + spec.seed_offset)] for seed in fine_tuning_seeds(args)}
        mlm, first_mlm = pretrainings[args.seed], model_dir / f"mlm-seed{args.seed + spec.seed_offset}"
        reloaded_mlm = AutoModelForMaskedLM.from_pretrained(first_mlm)
        attention_type, layer_scheme = spec.pair()
        entry: dict[str, Any] = {
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
        for task in tasks:
            rate, scores = choices[spec.name, task]
            sweep = {r: outcomes[Run(spec, task, r, args.seed + spec.seed_offset, heldout=True)] for r in scores}
            runs = {str(seed): final_run(args, source, tokenizer, spec, Run(spec, task, rate, seed + spec.seed_offset),
                                         outcomes) for seed in fine_tuning_seeds(args)}  # fmt: skip
            interval = verdicts.summary(run_outcomes(runs))
            entry["fine_tuning"][task] = {
                "metric": headline_metric(task),
                "learning_rate": rate,
                "heldout_scores_by_learning_rate": {f"{r:g}": score for r, score in scores.items()},
                "heldout_losses_by_learning_rate": {f"{r:g}": result["eval"]["validation"].get("loss")
                                                    for r, result in sweep.items() if "failed" not in result},
                "heldout_left_out": heldout_left_out(sweep),
                "runs": runs,
                "learned": None if interval is None else {"mean": interval.mean, "half_width": interval.half_width,
                                                          "seeds": interval.n},
            }  # fmt: skip
        analysed = next((name for task in tasks[:1] for name, run in entry["fine_tuning"][task]["runs"].items()
                         if "failed" not in run), None)  # fmt: skip
        if analysed is not None:
            analyses[spec.name] = analyse(
                classifier_from(model_dir / f"{tasks[0]}-seed{int(analysed) + spec.seed_offset}",
                                attn_implementation="eager"),
                tokenizer, sentences, args.max_seq_length,
            )
        entry["training_seconds"] = sum(result["train_seconds"] for result in pretrainings.values()) + sum(
            run.get("train_seconds", 0.0) for task in tasks for run in entry["fine_tuning"][task]["runs"].values()
        )
        summary = analyses.get(spec.name)
        if summary is not None:
            entry["analysis"] = {k: v for k, v in summary.items() if k not in ("attention_maps", "attention_sentence")}
            if summary["attention_rank_fraction"] is not None:
                entry["analysis"]["attention_rank_fraction"] = {
                    "mean": float(np.mean(summary["attention_rank_fraction"])),
                    "values": summary["attention_rank_fraction"],
                }
        models[spec.name] = entry

    figure_files = figures.write_all(args.output_dir, models, analyses, tasks[0])
    results = {
        "command": " ".join(["hf-variants compare", *(argv if argv is not None else sys.argv[2:])]),
        "data": {"kind": source.kind, "description": source.description},
        "tasks": tasks,
        "calibration": calibration,
        "settings": {k: _setting(v) for k, v in vars(args).items()},
        "tokenizer": tokenizer_name,
        "models": models,
        "figures": figure_files,
        "training_wall_seconds": training_seconds,
        "wall_seconds": time.perf_counter() - started,
    }
    (args.output_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.output_dir / "report.md").write_text(report_markdown(results))
    checkpoints.write_manifest(args.output_dir, files_before, "compare")
    print(f"[hf-variants compare] Report: {args.output_dir / 'report.md'} ({results['wall_seconds']:.0f} s).")
    return results


def classifier_from(folder: Path, **kwargs: Any):
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(folder, **kwargs)


def final_run(
    args: CompareArguments, source: DataSource, tokenizer, spec: ModelSpec, run: Run,
    outcomes: dict[Run, dict[str, Any]],
) -> dict[str, Any]:
    """One final fine-tuning run's record: its dev score, recomputed from the model reloaded with
    ``AutoModelForSequenceClassification`` (an error when the two differ), whether it learned
    (:func:`~hf_variants.lab.verdicts.run_status`), its training curve; or the error that stopped it."""
    result = outcomes[run]
    if "failed" in result:
        return {"failed": result["failed"], "status": verdicts.FAILED}
    folder = args.output_dir / "models" / spec.folder / run.folder_name
    classifier = classifier_from(folder)
    recomputed, predicted, labels = recomputed_metric(classifier, tokenizer, source, run.task, args.max_seq_length)
    reported = result["eval"]["validation"]
    metric, value = headline(run.task, reported)
    if abs(recomputed[metric] - value) > 1e-6:
        raise RuntimeError(
            f"{spec.name}/{run.folder_name}: the reloaded model scores {metric}={recomputed[metric]:.6f}, the run "
            f"reported {value:.6f}: the saved model is not the evaluated one."
        )
    state = json.loads((folder / "trainer_state.json").read_text())
    record = {
        "metric": metric,
        "value": value,
        "metrics": {k: v for k, v in reported.items() if k not in ("runtime", "samples_per_second",
                                                                   "steps_per_second", "epoch")},
        "recomputed_after_reload": recomputed[metric],
        **learning_verdict(classifier, predicted, labels),
        "train_seconds": result["train"]["train_runtime"],
        "curve": [{"step": e["step"], "loss": e["loss"]} for e in state["log_history"] if "loss" in e],
    }  # fmt: skip
    return {**record, "status": verdicts.run_status(run_outcome(record))}






def _setting(value: Any) -> Any:
    """A command-line setting as JSON: paths as text, model specs by name."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list) and value and isinstance(value[0], ModelSpec):
        return [spec.name for spec in value]
    return value
















