"""The resumable comparison grid on one task: every variant and its matched control, a learning-rate
sweep on a held-out slice of the training split, then several seeds at the chosen rate on the test split.

Layout of ``output_dir/<task>/`` (small JSON files, written as each run finishes)::

    run_fingerprint.json                     the settings; another grid in this folder is refused
    <pair>/<role>/sweep-lr<lr>.json          role = variant | control; trained on the training split
                                             without its held-out slice, scored on the slice (seed 0)
    <pair>/<role>/seed<s>.json               trained on the whole training split at the chosen rate,
                                             scored on the test split

The chosen rate is the protocol's (:func:`~.verdicts.choose_learning_rate`: the best held-out accuracy
among runs that learned, ties to the smaller rate, the smallest when every run failed); the test split is
never seen before the choice. A run's file is written only when it ends (the lab's one resume record,
:mod:`.records`), so a killed grid
restarts its unfinished run from scratch and skips every finished one; a finished seed whose rate is
not the sweep's choice is refused. A cell whose model an earlier cell trains (the same config but for its
class's name and unused fields: MGK-BERT's control is post-LN Macaron-BERT's) copies that cell's records, each
marked ``same_model_as``, instead of training the same runs twice. Each run is trained by the fine-tuning engine
(:mod:`.grid_training`), which the fingerprint names: a folder made by another engine is another grid.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..core.composition import NAMING_FIELDS, idea_field_names, model_identity
from ..settings.study import ROLES
from ..storage.files import CheckpointError, write_text_atomic
from ..storage.record_schema import load_json
from ..storage.run_folder import OutputDirLock, prepare_output_dir
from ..tokenization import train_wordpiece_tokenizer
from .execution import console_to_file, quiet_libraries
from .grid_training import ENGINE, EncodedSplit, RunSettings, stop_status, stop_summary, train_and_evaluate
from .outcomes import GRID_RUN, read_outcome
from .records import write_record
from .spec import ModelSpec, spec_folder
from .statistics import majority_share
from .text_classification import TextClassificationData, load_task
from .verdicts import HeldOutRun, RunOutcome, choose_learning_rate

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SelfPretraining:
    """Masked-LM pretraining of every run's model on that run's own training inputs before it is fine-tuned —
    self-pretraining (Amos, Berant & Gupta, ICLR 2024: no data beyond the task's, a denoising objective) — on
    the pretraining engine (:func:`hf_variants.training.run_mlm.run`, accelerate), with the grid's tokenizer.

    A held-out run is pretrained on the training split *without* its held-out slice (the slice that chooses the
    rate is never seen by pretraining), a final run at seed s on the whole training split at seed s; the test
    split never. The texts are one example per line (``line_by_line``), at the grid's length and batch size, so
    pretraining costs ``steps / grid steps`` times the fine-tuning's compute (:meth:`compute_multiple`).
    """

    steps: int
    learning_rate: float = 1e-3
    warmup_ratio: float = 0.1
    mlm_probability: float = 0.15
    #: Share of the pretraining texts held out for its validation loss (training inputs all the same).
    validation_percentage: float = 5.0
    #: The MLM decoder only at the masked positions (the config's ``sparse_prediction``): the same loss at a
    #: fraction of the decoder's cost, which dominates a small model's MLM step (docs "Benchmarks", sparse MLM).
    sparse_prediction: bool = False

    def compute_multiple(self, fine_tuning_steps: int) -> float:
        """Pretraining compute as a multiple of one fine-tuning run's (same batch, same length)."""
        return self.steps / fine_tuning_steps


@dataclass(frozen=True)
class GridSettings:
    """Everything that determines a grid's results (its fingerprint)."""

    task: str
    pairs: tuple[str, ...]
    sizes: dict[str, Any]
    learning_rates: tuple[float, ...]
    seeds: tuple[int, ...]
    steps: int
    batch_size: int
    max_length: int
    warmup_ratio: float = 0.1
    sweep_seed: int = 0
    heldout_fraction: float = 0.15
    max_train: int | None = None
    max_test: int | None = None
    vocab_size: int = 8000
    extra: dict[str, Any] = field(default_factory=dict)
    #: What trains each run: a grid folder made by another engine is another grid (its results stay records).
    engine: str = ENGINE
    #: None: every run from random initialisation; else each run's model is self-pretrained first.
    pretraining: SelfPretraining | None = None

    def fingerprint(self) -> dict[str, Any]:
        """The settings as JSON; a from-scratch grid's is what it was before self-pretraining existed (no
        ``pretraining`` key), so its folders resume."""
        fingerprint = json.loads(json.dumps(asdict(self)))
        if self.pretraining is None:
            del fingerprint["pretraining"]
        elif not self.pretraining.sparse_prediction:  # as before the switch existed, so those folders resume
            del fingerprint["pretraining"]["sparse_prediction"]
        return fingerprint


#: How a run's error begins when its self-pretraining stopped (no fine-tuning ran).
PRETRAINING_STOPPED = "self-pretraining: "


def run_outcome(record: dict[str, Any], data: dict[str, Any] | None = None) -> RunOutcome:
    """A run's record as the protocol's verdicts read it (:data:`~.outcomes.GRID_RUN`), with the size and
    majority share of the split the run was scored on from its task folder's ``data.json`` (``data``; without
    it no at-chance test). The grid records its loss curve but declares no plateau test, for two reasons. The
    at-chance test asks the question directly for an accuracy metric: did the run beat a constant guess on
    the split it was scored on. And :func:`~.verdicts.stayed_on_plateau`'s loss ratio misreads a task whose
    best loss is close to its first: on ListOps (ten classes, first loss ln 10 ≈ 2.30) eight of the
    from-scratch final trainings scored 16.9–23.5% against a guessing bound of 13.0% on 2,000 examples while
    their last-quarter loss was still 0.90–0.96 of their first. The price: a run that barely moved on a
    two-class task can pass the guessing bound and count (SST-2's self-pretrained TransJect control,
    54.5–57.1% at 96–97% of ln 2; the results page says so beside its numbers)."""
    split = "held_out" if record.get("phase") == "sweep" else "test"
    data = data or {}
    return read_outcome(record, GRID_RUN, chance=data.get(f"{split}_majority_share"),
                        examples=data.get(f"{split}_examples"))  # fmt: skip


def held_out_run(record: dict[str, Any]) -> HeldOutRun:
    """A sweep record as the protocol's learning-rate choice sees it."""
    return run_outcome(record).held_out()


class Grid:
    """One task's grid in ``output_dir/<task>``; :meth:`run` does every run that is not yet on disk."""

    def __init__(self, settings: GridSettings, data_dir: Path, output_dir: Path, work_dir: Path | None = None) -> None:
        """``work_dir``: where a self-pretraining grid keeps its pretrained models and corpora (large files, not
        results: never inside the committed ``output_dir``)."""
        if settings.pretraining is not None and work_dir is None:
            raise ValueError("A self-pretraining grid needs a work_dir for its pretrained models.")
        self.settings = settings
        self.data_dir = data_dir
        self.folder = output_dir / settings.task
        self.work = None if work_dir is None else work_dir / settings.task
        self.data: TextClassificationData | None = None
        self.tokenizer = None  # trained on the task's training split by prepare_data
        self.encoded: dict[str, EncodedSplit] = {}

    # ---------------------------------------------------------------- data
    def prepare_data(self) -> None:
        s = self.settings
        data = load_task(s.task, self.data_dir, s.max_train, s.max_test)
        (fit_texts, _), (_, held_labels) = data.held_out(s.heldout_fraction)
        # The tokenizer sees only the training split (deterministic: same texts, same vocabulary).
        tokenizer = train_wordpiece_tokenizer(data.train_texts, vocab_size=s.vocab_size)
        self.tokenizer = tokenizer
        self.vocab_size = len(tokenizer)
        train = EncodedSplit.encode(tokenizer, data.train_texts, data.train_labels, s.max_length)
        cut = len(fit_texts)  # the held-out slice is the training split's tail: encode once, slice
        self.encoded = {
            "fit": EncodedSplit(train.input_ids[:cut], train.labels[:cut]),
            "held_out": EncodedSplit(train.input_ids[cut:], train.labels[cut:]),
            "train": train,
            "test": EncodedSplit.encode(tokenizer, data.test_texts, data.test_labels, s.max_length),
        }
        self.data = data
        self.texts = {"fit": fit_texts, "train": data.train_texts}  # what a run may pretrain on
        lengths = [len(ids) for ids in self.encoded["train"].input_ids]
        self.data_summary = {
            "split": data.split,
            "num_labels": data.num_labels,
            "train_examples": len(data.train_labels),
            "held_out_examples": len(held_labels),
            "test_examples": len(data.test_labels),
            "tokenizer_vocab_size": self.vocab_size,
            "truncated_train_share": sum(n == s.max_length for n in lengths) / len(lengths),
            "test_majority_share": majority_share(data.test_labels),
            "held_out_majority_share": majority_share(held_labels),
        }

    def config(self, spec: str, role: str):
        variant = ModelSpec.from_text(spec)
        return (variant.control() if role == "control" else variant).config(
            self.settings.sizes,
            vocab_size=self.vocab_size,
            num_labels=self.data.num_labels,
            max_position_embeddings=self.settings.max_length,
            pad_token_id=self.tokenizer.pad_token_id,
        )

    def twins(self) -> dict[tuple[str, str], tuple[str, str]]:
        """``{(pair, role): (earlier pair, role)}`` for each cell whose model an earlier cell of the grid already
        trains (:func:`~hf_variants.core.composition.model_identity`; e.g. MGK-BERT's control is post-LN
        Macaron-BERT's). Same model, data, rate and seed make the same run, so the grid copies its twin's records
        instead of training it again."""
        first: dict[str, tuple[str, str]] = {}
        twins = {}
        for spec in self.settings.pairs:
            for role in ROLES:
                identity = json.dumps(model_identity(self.config(spec, role)), sort_keys=True)
                if identity in first:
                    twins[spec, role] = first[identity]
                first.setdefault(identity, (spec, role))
        return twins

    # ---------------------------------------------------------------- runs
    def run_one(self, path: Path, spec: str, role: str, phase: str, learning_rate: float, seed: int,
                twin: tuple[str, str] | None = None) -> dict:  # fmt: skip
        """The run's record: the file on disk, else its twin's (the same model's run, on disk) as this cell's,
        else a run trained now."""
        twin_file = None if twin is None else self.folder / spec_folder(twin[0]) / twin[1] / path.name
        if not path.is_file() and twin_file is not None and twin_file.is_file():
            record, not_shared = load_json(twin_file), NAMING_FIELDS | idea_field_names()  # the twin's may differ
            own = {name: value for name, value in self.config(spec, role).to_diff_dict().items() if name in not_shared}
            config = {name: value for name, value in record["config"].items() if name not in not_shared} | own
            write_record(path, record | {"pair": spec, "role": role, "model_type": own["model_type"], "config": config,
                                         "same_model_as": " ".join(twin)})  # fmt: skip
        if path.is_file():
            record = load_json(path)
            if record.get("learning_rate") != learning_rate:  # a re-run sweep chose another rate
                raise CheckpointError(
                    f"{path} was trained at learning rate {record.get('learning_rate')}, but the sweep now "
                    f"chooses {learning_rate:g}; remove that cell's seed files to run them at the chosen rate."
                )
            return record
        s = self.settings
        train, evaluation = (self.encoded["fit"], self.encoded["held_out"]) if phase == "sweep" else (
            self.encoded["train"], self.encoded["test"])  # fmt: skip
        config = self.config(spec, role)
        started = time.time()
        pretrained, pretraining, result = None, {}, None
        if s.pretraining is not None:
            corpus = "fit" if phase == "sweep" else "train"
            pretrained, pretraining, result = self.pretrain(spec, role, corpus, seed, config)
        if result is None:
            result = train_and_evaluate(config, self.tokenizer, train, evaluation, RunSettings(
                learning_rate=learning_rate, warmup_ratio=s.warmup_ratio, steps=s.steps, batch_size=s.batch_size,
                seed=seed,
            ), initial_weights=pretrained)  # fmt: skip
        record = {
            "task": s.task, "pair": spec, "role": role, "phase": phase, "learning_rate": learning_rate,
            "warmup_ratio": s.warmup_ratio, "seed": seed, "steps": s.steps, "batch_size": s.batch_size,
            "evaluated_on": "held-out slice of the training split" if phase == "sweep" else "test split",
            "model_type": config.model_type, "attention_type": config.attention_type,
            "layer_scheme": config.layer_scheme, "config": config.to_diff_dict(), **pretraining, **result,
            "wall_seconds": round(time.time() - started, 1),
        }  # fmt: skip
        write_record(path, record)
        shown = f"{result['accuracy']:.3f}" if result["status"] == "finished" else result["status"]
        logger.warning("%s %s %s %s lr=%g seed=%d: %s", s.task, spec, role, phase, learning_rate, seed, shown)
        return record

    def pretrain(
        self, spec: str, role: str, corpus: str, seed: int, config: Any
    ) -> tuple[Path | None, dict[str, Any], dict[str, Any] | None]:
        """The run's model self-pretrained on ``corpus`` (``"fit"``: the training split without its held-out
        slice; ``"train"``: all of it) at ``seed`` (:class:`SelfPretraining`), what the record keeps of it, and
        ``None`` — or, when the pretraining stopped on a non-finite step or a solver failure, ``(None, {}, the
        run's outcome)``. The engine resumes its own run folder, and returns a finished one's results without
        training; a stopped one's outcome is kept beside its folder (``…-stopped.json``), so the held-out runs
        that share it (one per rate) and a re-run grid do not pay for it again. Its loss every ``logging_steps``
        goes to the folder's ``metrics.csv`` as it trains, its printed lines to ``….log`` beside it."""
        from ..settings.pretraining import PretrainingArguments
        from ..training import run_mlm

        s, p = self.settings, self.settings.pretraining
        corpus_file = self.work / f"corpus-{corpus}.txt"
        if not corpus_file.is_file():  # one example per line; the same texts give the same file
            corpus_file.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(corpus_file, "".join(" ".join(text.split()) + "\n" for text in self.texts[corpus]))
        tokenizer_dir = self.work / "tokenizer"
        if not (tokenizer_dir / "tokenizer.json").is_file():
            self.tokenizer.save_pretrained(tokenizer_dir)
        folder = self.work / spec_folder(spec) / role / f"pretrained-{corpus}-seed{seed}"
        config_dir = folder.with_name(folder.name + "-config")
        config = copy.deepcopy(config)
        config.sparse_prediction = p.sparse_prediction
        config.save_pretrained(config_dir)
        arguments = PretrainingArguments(
            config_name=str(config_dir), tokenizer_name=str(tokenizer_dir), train_file=str(corpus_file),
            validation_split_percentage=p.validation_percentage, line_by_line=True, max_seq_length=s.max_length,
            mlm_probability=p.mlm_probability, per_device_train_batch_size=s.batch_size, learning_rate=p.learning_rate,
            lr_scheduler_type="linear", num_warmup_steps=p.warmup_ratio, max_train_steps=p.steps, seed=seed,
            logging_steps=max(1, p.steps // 20), max_eval_samples=512, output_dir=folder, disable_tqdm=True,
            report_to=["csv"],  # the loss every logging_steps in metrics.csv: a long pretraining's progress
        )  # fmt: skip
        # A stopped pretraining's outcome, kept for the runs that share it while its run is the same (the engine's
        # fingerprint of it, paths left out): a changed setting or config trains again, as the engine would.
        stopped = folder.with_name(folder.name + "-stopped.json")
        this_run = json.loads(json.dumps(run_mlm.run_fingerprint(arguments, self.tokenizer) | {
            "max_train_steps": p.steps, "locations": None}, default=str))  # fmt: skip
        if stopped.is_file() and (record := load_json(stopped)).get("pretraining_run") == this_run:
            return None, {}, record["outcome"]
        try:
            with console_to_file(folder.with_name(folder.name + ".log"), quiet=True), quiet_libraries():  # to a log
                results = run_mlm.run(arguments)
        except Exception as error:  # the run's outcome, as in fine-tuning
            if (status := stop_status(error)) is None:
                raise
            outcome = {"status": status, "error": f"{PRETRAINING_STOPPED}{stop_summary(error)}"}
            write_record(stopped, {"outcome": outcome, "pretraining_run": this_run})
            return None, {}, outcome
        summary = {key: results.get(key) for key in ("steps", "eval_loss", "final_train_loss", "train_seconds",
                                                     "train_tokens")}  # fmt: skip
        summary |= {"corpus": corpus, "examples": len(self.texts[corpus]),
                    "compute_multiple": p.compute_multiple(s.steps)}  # fmt: skip
        return folder, {"pretraining": summary}, None

    def run(self, on_record: Callable[[Path], None] | None = None, roles: Sequence[str] = ROLES) -> None:
        """Every (pair, role) cell (only ``roles``' cells when narrowed: the grid and its fingerprint stay the
        same, so a later run fills in the rest): the sweep, the choice, the seeds. ``on_record(cell folder)`` is called
        after each run trained (or copied from its twin) now, not for those a resumed grid finds on disk: e.g. to
        copy the cell to storage that outlives the machine (the choice goes with its first seed), since one seed of a
        self-pretraining grid can take over an hour."""
        s = self.settings

        def run_and_record(path: Path, *arguments: Any) -> dict:  # on_record only for a file written now
            written = not path.is_file()
            record = self.run_one(path, *arguments)
            if written and on_record is not None:
                on_record(path.parent)
            return record

        lock = OutputDirLock(self.folder)
        try:
            prepare_output_dir(self.folder, s.fingerprint(), overwrite=False, replaced_by=None)
            self.prepare_data()
            write_record(self.folder / "data.json", self.data_summary)
            twins = self.twins()
            for spec in s.pairs:
                for role in (role for role in ROLES if role in roles):
                    cell, twin = self.folder / spec_folder(spec) / role, twins.get((spec, role))
                    sweep = {
                        lr: run_and_record(cell / f"sweep-lr{lr:g}.json", spec, role, "sweep", lr, s.sweep_seed, twin)
                        for lr in s.learning_rates
                    }
                    chosen = choose_learning_rate({lr: held_out_run(record) for lr, record in sweep.items()})
                    write_record(cell / "choice.json", {"chosen_learning_rate": chosen})
                    for seed in s.seeds:
                        run_and_record(cell / f"seed{seed}.json", spec, role, "final", chosen, seed, twin)
        finally:
            lock.release()


def load_grid(folder: Path) -> dict[str, Any]:
    """The results of one task folder: ``{"settings", "data", "cells": {pair: {role: {"sweep", "chosen",
    "seeds", "planned_seeds"}}}}`` (only what is on disk, and how many seeds the grid's settings run)."""
    settings_file = folder / "run_fingerprint.json"
    if not settings_file.is_file():
        raise CheckpointError(f"{folder} holds no grid ({settings_file.name} is missing).")
    settings = load_json(settings_file)
    cells: dict[str, dict[str, Any]] = {}
    for spec in settings["pairs"]:
        for role in ROLES:
            cell = folder / spec_folder(spec) / role
            sweep = {float(p.stem.removeprefix("sweep-lr")): load_json(p) for p in sorted(cell.glob("sweep-lr*.json"))}
            seeds = {int(p.stem.removeprefix("seed")): load_json(p) for p in sorted(cell.glob("seed*.json"))}
            choice = load_json(cell / "choice.json") if (cell / "choice.json").is_file() else {}
            cells.setdefault(spec, {})[role] = {
                "sweep": sweep,
                "chosen_learning_rate": choice.get("chosen_learning_rate"),
                "seeds": seeds,
                "planned_seeds": len(settings["seeds"]),
            }
    data = load_json(folder / "data.json") if (folder / "data.json").is_file() else {}
    return {"settings": settings, "data": data, "cells": cells}
