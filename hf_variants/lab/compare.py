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
import csv
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
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
from .spec import EXTERNAL_REFERENCE, ModelSpec, with_matched_controls
from .statistics import Interval, mean_interval, paired_difference_if_any

#: The baseline of the calibration controls (:func:`with_calibration_controls`).
BASELINE = "bert_control"
#: Embedded tasks that a model without token mixing cannot solve: the positive control is judged on them.
NEEDS_TOKEN_MIXING = frozenset({"attractor_number", "agreement"})

DATA_ENV = compare_settings.DATA_ENV
#: The embedded default's fine-tuning task when no data is given (see :func:`embedded_tasks`).
SYNTHETIC_TASK = "attractor_number"
#: Solver steps per N-ODE block and forward in the comparison (healthy runs take a handful at rtol 1e-3).
NODE_MAX_STEPS = 50


@dataclass
class DataSource:
    """Where the corpus and the tasks come from, as the engines' settings: ``corpus`` holds fields of
    ``PretrainingArguments`` (``train_file`` and ``validation_file``, or ``dataset_name`` and
    ``dataset_config_name``), ``tasks`` per task fields of run_glue's ``DataTrainingArguments``."""

    kind: str  # "data_dir", "env", "hub" or "synthetic"
    description: str
    corpus: dict[str, str]
    tasks: dict[str, dict[str, str]] = field(default_factory=dict)
    glue_dir: Path | None = None  # local GLUE folder (data_dir / env)
    synthetic_dir: Path | None = None  # folder of the embedded default

    def input_files(self, task: str | None = None) -> list[Path]:
        """The local files the corpus (``task=None``) or a task is read from (none for Hub data)."""
        settings = self.corpus if task is None else self.tasks[task]
        files = [Path(value) for name, value in settings.items() if name.endswith("_file")]
        if task is not None and self.glue_dir is not None:
            from ..glue import get_task

            files += sorted((self.glue_dir / get_task(task).folder).glob("*.tsv"))
        return files

    def dev_split(self, task: str) -> tuple[list[str], list[str] | None, np.ndarray]:
        """The dev set of ``task``: first texts, second texts (pairs) or None, labels."""
        from datasets import load_dataset

        from ..glue import get_task, load_glue

        if self.kind == "synthetic":
            files = {"validation": str(self.synthetic_dir / f"{task}_dev.csv")}
            dev = load_dataset("csv", data_files=files)["validation"]
            return list(dev["sentence"]), None, np.asarray(dev["label"])
        dev = load_glue(task, self.glue_dir)["validation"]
        keys = get_task(task).keys
        second = list(dev[keys[1]]) if len(keys) > 1 else None
        return list(dev[keys[0]]), second, np.asarray(dev["label"])


# --------------------------------------------------------------------------------------------
# Data resolution
# --------------------------------------------------------------------------------------------
def local_source(kind: str, folder: Path, tasks: Sequence[str]) -> DataSource:
    """A data folder; raises naming what is missing (corpus file or task folder)."""
    from ..glue import get_task

    corpus = folder / "wikitext-2"
    for name in ("train.txt", "valid.txt"):
        if not (corpus / name).is_file():
            raise FileNotFoundError(f"{folder} has no corpus file wikitext-2/{name} (expected {corpus / name}).")
    task_data = {}
    for task_name in tasks:
        task = get_task(task_name)
        task_folder = folder / "glue" / task.folder
        if not (task_folder / "train.tsv").is_file() or not (task_folder / "dev.tsv").is_file():
            raise FileNotFoundError(
                f"{folder} has no GLUE task {task.name}: expected {task_folder}/train.tsv and dev.tsv."
            )
        task_data[task.name] = {"task_name": task.name, "glue_dir": str(folder / "glue")}
    origin = "--data_dir" if kind == "data_dir" else f"${DATA_ENV}"
    return DataSource(
        kind,
        f"{origin} {folder}: WikiText-2 for MLM, GLUE {', '.join(task_data)} for fine-tuning",
        {"train_file": str(corpus / "train.txt"), "validation_file": str(corpus / "valid.txt")},
        task_data,
        glue_dir=folder / "glue",
    )


def hub_reachable(timeout: float = 10.0) -> bool:
    """False when offline (``HF_HUB_OFFLINE``) or when the Hub does not answer."""
    import huggingface_hub

    if huggingface_hub.constants.HF_HUB_OFFLINE:
        return False
    try:
        huggingface_hub.HfApi().dataset_info("nyu-mll/glue", timeout=timeout)
    except Exception:  # any failure (network, HTTP, timeout) means: not usable now
        return False
    return True


def embedded_tasks() -> dict[str, Callable[..., list[tuple[str, int]]]]:
    """The tasks of the embedded default, name → generator of ``(sentence, label)`` rows (``count``,
    ``seed=``, ``attractors=``)."""
    from .. import synthetic

    def fixed(generator: Callable[..., list[tuple[str, int]]]) -> Callable[..., list[tuple[str, int]]]:
        return lambda count, seed, attractors: generator(count, seed=seed)  # no difficulty knob

    return {
        "attractor_number": synthetic.synthetic_attractor_number,
        "subject_number": fixed(synthetic.synthetic_subject_number),
        "agreement": fixed(synthetic.synthetic_acceptability),
    }


def synthetic_corpus(count: int, seed: int, attractors: int) -> list[str]:
    """The MLM corpus of the embedded default: the synthetic language's simple sentences alternating with
    sentences with attractor phrases (:func:`~hf_variants.synthetic.attractor_sentence`)."""
    import random

    from ..synthetic import attractor_sentence, synthetic_sentence

    rng = random.Random(seed)
    return [attractor_sentence(rng, attractors)[0] if index % 2 else synthetic_sentence(rng) for index in range(count)]


def synthetic_source(
    folder: Path, seed: int, tasks: Sequence[str] = (SYNTHETIC_TASK,), attractors: int = DEFAULT_ATTRACTORS
) -> DataSource:
    """Write the embedded default data into ``folder``: the synthetic corpus (:func:`synthetic_corpus`,
    MLM) and each of ``tasks`` (CSV with ``sentence``/``label``: 2,000 training and 400 dev rows, from
    disjoint seeds; a dev sentence that also occurs in training is replaced, so that no dev example was
    trained on)."""
    generators = embedded_tasks()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train.txt").write_text("\n".join(synthetic_corpus(6000, seed, attractors)) + "\n")
    (folder / "valid.txt").write_text("\n".join(synthetic_corpus(600, seed + 1, attractors)) + "\n")
    task_data = {}
    for task in tasks:
        train = generators[task](2000, seed=seed + 2, attractors=attractors)
        seen = {sentence for sentence, _ in train}
        dev = [row for row in generators[task](4000, seed=seed + 3, attractors=attractors) if row[0] not in seen][:400]
        for split, rows in (("train", train), ("dev", dev)):
            with (folder / f"{task}_{split}.csv").open("w", newline="", encoding="utf-8") as handle:
                csv.writer(handle, lineterminator="\n").writerows([("sentence", "label"), *rows])
        task_data[task] = {"train_file": str(folder / f"{task}_train.csv"),
                           "validation_file": str(folder / f"{task}_dev.csv")}  # fmt: skip
    described = {"attractor_number": f"attractor number (is the subject plural, past up to {attractors} phrases "
                                      "with nouns of either number?)",
                 "subject_number": "subject number (is the subject plural? the verb's form is no clue)",
                 "agreement": "subject–verb agreement (is the verb form right for the subject's number?)"}  # fmt: skip
    return DataSource(
        "synthetic",
        f"embedded default in {folder}: the package's synthetic language for MLM and its "
        f"{' and '.join(described[task] for task in tasks)} task{'s' if len(tasks) > 1 else ''} for fine-tuning",
        {"train_file": str(folder / "train.txt"), "validation_file": str(folder / "valid.txt")},
        task_data,
        synthetic_dir=folder,
    )


def resolve_data(
    data_dir: Path | None, tasks: Sequence[str] | None, output_dir: Path, seed: int, from_hub: bool = False,
    attractors: int = DEFAULT_ATTRACTORS,
) -> DataSource:
    """The data a user asked for — ``data_dir``, else ``$HF_VARIANTS_DATA``, else the Hub with
    ``from_hub`` — or the embedded default; tasks of the embedded default (:func:`embedded_tasks`) are
    always taken from it. Whether the Hub answers never changes the choice: asked for and unreachable
    is an error, not asked for is never tried, so one command line is one experiment on every machine."""
    if tasks and set(tasks) <= embedded_tasks().keys():
        return synthetic_source(output_dir / "data", seed, list(dict.fromkeys(tasks)), attractors)
    glue_tasks = list(tasks) if tasks else ["sst2"]
    if data_dir is not None:
        return local_source("data_dir", Path(data_dir), glue_tasks)
    if os.environ.get(DATA_ENV):
        return local_source("env", Path(os.environ[DATA_ENV]), glue_tasks)
    if from_hub:
        if not hub_reachable():
            raise ConnectionError(
                "--from_hub: the Hub is not reachable (or HF_HUB_OFFLINE is set); give a local copy with "
                f"--data_dir or ${DATA_ENV}, or leave both out for the embedded tasks."
            )
        return DataSource(
            "hub",
            f"the Hub: wikitext/wikitext-2-raw-v1 for MLM, nyu-mll/glue {', '.join(glue_tasks)} for fine-tuning",
            {"dataset_name": "wikitext", "dataset_config_name": "wikitext-2-raw-v1"},
            {task: {"task_name": task} for task in glue_tasks},
        )
    if tasks:
        raise FileNotFoundError(
            f"--tasks {' '.join(tasks)}: GLUE tasks need data: --data_dir, ${DATA_ENV} or --from_hub. "
            f"The embedded tasks are {', '.join(sorted(embedded_tasks()))}."
        )
    return synthetic_source(output_dir / "data", seed, attractors=attractors)


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
    with executor(args) as pool:
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


def die_with(parent_pid: int) -> None:
    """On Linux, have this process killed when ``parent_pid`` (the comparison) ends, even by SIGKILL:
    an orphaned worker would keep training and hold its run folder's lock against the re-run."""
    import ctypes
    import signal

    if not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the comparison ended before the request took effect
        os._exit(1)


class InlineExecutor(Executor):
    """Runs each submitted call at once, in this process (``--workers 1``)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # handed to the caller by future.result(), as a pool would
            future.set_exception(error)
        return future


def executor(args: CompareArguments) -> Executor:
    """``--workers`` processes sharing this process's CPU threads, or :class:`InlineExecutor` for one."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if args.workers == 1:
        return InlineExecutor()
    threads = max(1, torch.get_num_threads() // args.workers)
    return ProcessPoolExecutor(args.workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=start_worker, initargs=(threads, os.getpid()))  # fmt: skip


def start_worker(threads: int, comparison_pid: int) -> None:
    """A worker process: it dies with the comparison (below), takes its share of the threads, and has
    the libraries' bars off as in the main process."""
    import datasets
    from transformers.utils import logging as transformers_logging

    die_with(comparison_pid)
    torch.set_num_threads(threads)
    datasets.disable_progress_bars()
    transformers_logging.disable_progress_bar()


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


def run_outcome(record: dict[str, Any]) -> verdicts.RunOutcome:
    """A final run's record (:func:`final_run`) as the protocol's verdicts read it."""
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


def _setting(value: Any) -> Any:
    """A command-line setting as JSON: paths as text, model specs by name."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list) and value and isinstance(value[0], ModelSpec):
        return [spec.name for spec in value]
    return value


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
    conclusions = []
    for variant, control in pairs:
        for task in tasks:
            v, c = models[variant]["fine_tuning"][task], models[control]["fine_tuning"][task]
            verdict = verdicts.pair_verdict(run_outcomes(v["runs"]), run_outcomes(c["runs"]))
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
            if verdict.difference is None:
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
              "at their spread (the paired t-test's minimum detectable difference). A run that failed, predicted "
              "one class (≥ 99% of dev predictions), stayed on its "
              f"starting loss (last quarter of its logged losses ≥ {verdicts.PLATEAU_SHARE:.0%} of the first) or "
              "scored below chance (the dev majority share plus 1.96 binomial standard errors) is named and left "
              "out. Each model's learning rate was chosen per task by its score on a held-out slice of the training "
              "split; the dev set was seen only by the final runs.", "",
              "What to conclude:", "", *conclusions, ""]  # fmt: skip
    return lines


def calibration_checks(results: dict[str, Any]) -> list[tuple[str, str, bool, str]]:
    """The calibration controls' verdicts (:func:`with_calibration_controls`): ``(control, task, passed,
    verdict text)``; the positive control counts every finished run (a model that cannot learn the task is
    what it shows), the negative control the runs that learned, as every verdict does."""
    calibration, models = results.get("calibration") or {}, results["models"]
    if not calibration:
        return []
    baseline = models[calibration["baseline"]]["fine_tuning"]
    checks = []
    for task in calibration.get("positive_tasks", []):
        positive = run_outcomes(models[calibration["positive"]]["fine_tuning"][task]["runs"])
        verdict = verdicts.pair_verdict(positive, run_outcomes(baseline[task]["runs"]), verdicts.finished_values)
        found = verdict.difference is not None and verdict.difference.excludes_zero and verdict.difference.mean < 0
        checks.append(("positive", task, found, verdict.text))
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
