"""The resumable comparison grid on one task: every variant and its matched control run through the lab's
protocol (:mod:`.protocol`): at each seed a learning-rate sweep on a held-out slice of the training split, then
that seed's final run at the rate its sweep chose, on the test split.

Layout of ``output_dir/<task>/`` (small JSON files, written as each run finishes)::

    run_fingerprint.json                     the settings; another grid in this folder is refused
    <pair>/<role>/sweep-lr<lr>-seed<s>.json  role = variant | control; trained on the training split
                                             without its held-out slice, scored on the slice
    <pair>/<role>/seed<s>.json               trained on the whole training split at the rate seed s's
                                             sweep chose, scored on the test split

Beside the study's pairs, a grid runs its calibration controls as two more pairs, under the same protocol
(:func:`~.spec.calibration_pairs`, unless its settings turn ``calibration`` off): the BERT control without token
mixing against the BERT control (the *positive* control: it must come out below), and the BERT control initialised
from other seeds, on the same data order, against the BERT control (the *negative*, A/A control: it must be
equivalent); their verdicts decide whether the task's pairs get one (:mod:`.grid_evidence`).

The chosen rate is the protocol's (:func:`~.verdicts.choose_learning_rate`: the best held-out accuracy
among runs that learned, ties to the smaller rate, the smallest when every run failed); the test split is
never seen before the choice. Grids recorded before the protocol chose once per cell (``sweep-lr<lr>.json`` at
one seed, ``choice.json``): :func:`load_grid` reads them under that rule (:data:`~.protocol.RATE_CHOSEN_ONCE`),
and a re-run refuses their folder as another grid's. A run's file is written only when it ends (the lab's one
resume record, :mod:`.records`), so a killed grid
restarts its unfinished run from scratch and skips every finished one; a finished seed whose rate is
not its sweep's choice is refused. A cell whose model an earlier cell trains (the same config but for its
class's name and unused fields: MGK-BERT's control is post-LN Macaron-BERT's) copies that cell's records, each
marked ``same_model_as``, instead of training the same runs twice. Each run is trained by the fine-tuning engine
(:mod:`.grid_training`), which the fingerprint names: a folder made by another engine is another grid.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..core.composition import NAMING_FIELDS, idea_field_names, model_identity
from ..core.overrides import check_model_spec, format_overrides
from ..settings.study import ROLES, GridSettings, SelfPretraining
from ..storage.files import (
    CheckpointError,
    make_folder,
    path_component,
    remove_empty_folder,
    remove_path,
    staged_into,
    write_json,
    write_text_atomic,
)
from ..storage.record_schema import (
    ANY_OBJECT,
    Schema,
    boolean,
    check_record,
    integer_at_least,
    list_of,
    nonempty_object,
    number_in,
    parse_record,
    text,
)
from ..storage.run_folder import FINGERPRINT_FILE, OutputDirLock, prepare_output_dir
from ..storage.run_identity import fingerprint_differences
from ..tokenization import train_wordpiece_tokenizer
from .execution import console_to_file, quiet_libraries
from .grid_training import EncodedSplit, RunSettings, stop_status, stop_summary, train_and_evaluate
from .outcomes import GRID_RUN, read_outcome
from .protocol import RATE_CHOICE, RATE_CHOSEN_ONCE, Run, choose, run_protocol
from .records import write_record
from .spec import ModelSpec, calibration_pairs, spec_folder
from .statistics import majority_share
from .text_classification import GRID_TASKS, TextClassificationData, load_task
from .verdicts import HeldOutRun, RunOutcome

__all__ = ["Grid", "GridSettings", "SelfPretraining", "check_models", "load_grid", "read_run"]

logger = logging.getLogger(__name__)


#: A run's record as the grid reads it back: what every run keeps, then what a finished run adds (its accuracy
#: inside [0, 1], finite). Anything else is one line naming the file and the field (:func:`read_run`).
RUN_RECORD: Schema = {"status": text, "learning_rate": number_in(0, float("inf"), low_open=True),
                      "seed": integer_at_least(0)}  # fmt: skip
FINISHED_RUN: Schema = {"accuracy": number_in(0, 1), "predicts_one_class": boolean}
CHOICE_RECORD: Schema = {"chosen_learning_rate": number_in(0, float("inf"), low_open=True)}
#: A task folder's ``data.json``: each of these it holds in range (the at-chance test reads them).
DATA_RECORD: Schema = {name: number_in(0, 1) for name in ("test_majority_share", "held_out_majority_share")} | {
    name: integer_at_least(1) for name in ("train_examples", "held_out_examples", "test_examples")}  # fmt: skip


def check_outcome(value: Any) -> str | None:
    """A stopped self-pretraining's recorded outcome: an object with the status it stopped with."""
    if not isinstance(value, dict) or not isinstance(value.get("status"), str) or value["status"] == "finished":
        return "must be a stopped run's outcome (an object with the status it stopped with)"
    return None


def check_calibration(value: Any) -> str | None:
    """A grid's recorded calibration controls: kind → its pair's spec."""
    if not isinstance(value, dict) or not value or not set(value) <= {"positive", "negative"} or not all(
            isinstance(spec, str) for spec in value.values()):  # fmt: skip
        return "must name the calibration controls' pairs (an object: positive and negative → a model spec)"
    return None


#: What :func:`load_grid` reads of a grid's saved settings: its model specs, seeds and rates, and its calibration
#: controls' pairs where it ran them.
SAVED_GRID: Schema = {"pairs": list_of(text), "seeds": list_of(integer_at_least(0)),
                      "learning_rates": list_of(number_in(0, float("inf"), low_open=True))}  # fmt: skip
#: A self-pretraining that stopped (kept beside its run folder): its outcome and the run it was.
STOPPED_PRETRAINING: Schema = {"outcome": check_outcome, "pretraining_run": nonempty_object}
#: The names of the records a grid writes in a cell (``<pair>/<role>/``): only these are ever replaced (``choice`` and
#: a sweep without its seed: the records of a grid that chose once per cell).
CELL_RECORD = re.compile(r"(sweep-lr[0-9.e+-]+?(-seed\d+)?|seed\d+|choice)\.json")
#: A held-out run's record: its rate, and its seed (none in a grid that chose once per cell).
SWEEP_RECORD = re.compile(r"sweep-lr(?P<rate>[0-9.e+-]+?)(-seed(?P<seed>\d+))?\.json")
#: What re-runs a damaged record.
REMEDY = "delete that file and run the same command: that run is trained again"


def check_models(settings: GridSettings) -> None:
    """Each pair a model spec at the grid's sizes — a registered model type, fields its config declares, values
    it accepts (:func:`~hf_variants.core.overrides.check_model_spec`, the check of every spec) — and one folder's
    name; a ``ValueError`` naming the pair, the size or the field."""
    for spec in settings.pairs:
        check_model_spec(spec)
        spec_folder(spec)
        if settings.sizes:  # the sizes are config fields of every pair's model, as the spec's own fields are
            sized = f"{spec}{',' if ':' in spec else ':'}{format_overrides(settings.sizes)}"
            try:
                check_model_spec(sized)
            except ValueError as error:
                raise ValueError(f"sizes of {spec!r}: {str(error).removeprefix(repr(sized) + ': ')}") from None


def read_run(path: Path, **expected: Any) -> dict[str, Any]:
    """The run record at ``path`` parsed, not trusted (:data:`RUN_RECORD`, and :data:`FINISHED_RUN` for a finished
    run; never through a link); each of ``expected`` (e.g. ``learning_rate=1e-3``) must be what it holds: a record of
    another run is refused. One line naming the file and the field, with what re-runs it."""
    record = parse_record(path, RUN_RECORD, fix=REMEDY)
    if record["status"] == "finished":
        check_record(record, FINISHED_RUN, path, fix=REMEDY)
    for name, value in expected.items():
        if record.get(name) != value:
            raise CheckpointError(f"{path}: field {name!r} holds {record.get(name)!r}, not this run's {value!r}: it is "
                                  f"another run's record; {REMEDY}.")  # fmt: skip
    return record


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


def cell_model(spec: str, role: str) -> ModelSpec:
    """The model of a grid's cell: the pair's spec (a calibration control's replica included,
    :meth:`~.spec.ModelSpec.replica`) as the variant, or its matched control."""
    variant = ModelSpec.parse(spec)
    return variant.control() if role == "control" else variant


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
        if settings.task not in GRID_TASKS:
            raise ValueError(f"task {settings.task!r}: choose one of {', '.join(GRID_TASKS)}.")
        check_models(settings)
        self.settings = settings
        #: kind → the calibration control's pair (:func:`~.spec.calibration_pairs`); run after the study's pairs
        self.calibration = calibration_pairs() if settings.calibration else {}
        self.pairs = list(dict.fromkeys([*settings.pairs, *self.calibration.values()]))
        self.overwrite = False  # set by run(overwrite=...): the self-pretraining runs of a replaced grid are replaced
        self.data_dir = data_dir
        self.output_dir, self.work_root = output_dir, work_dir
        self.folder = output_dir / path_component(settings.task, "the task")
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
        return cell_model(spec, role).config(
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
        for spec in self.pairs:
            for role in ROLES:  # the same model from other seeds (an A/A replica) is another model's runs
                identity = json.dumps([model_identity(self.config(spec, role)), cell_model(spec, role).seed_offset],
                                      sort_keys=True)  # fmt: skip
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
        if not exists(path) and twin_file is not None and exists(twin_file):
            record, not_shared = read_run(twin_file, seed=seed), NAMING_FIELDS | idea_field_names()  # twin's may differ
            own = {name: value for name, value in self.config(spec, role).to_diff_dict().items() if name in not_shared}
            config = {name: value for name, value in record.get("config", {}).items() if name not in not_shared} | own
            write_record(path, record | {"pair": spec, "role": role, "model_type": own["model_type"], "config": config,
                                         "same_model_as": " ".join(twin)}, within=self.folder)  # fmt: skip
        if exists(path):
            record = read_run(path, seed=seed)
            if record["learning_rate"] != learning_rate:  # a re-run sweep chose another rate
                raise CheckpointError(
                    f"{path} was trained at learning rate {record['learning_rate']}, but the sweep now "
                    f"chooses {learning_rate:g}; remove that cell's seed files to run them at the chosen rate."
                )
            return record
        s = self.settings
        train, evaluation = (self.encoded["fit"], self.encoded["held_out"]) if phase == "sweep" else (
            self.encoded["train"], self.encoded["test"])  # fmt: skip
        config = self.config(spec, role)
        initialisation_seed = seed + cell_model(spec, role).seed_offset  # the data order stays the seed's own
        started = time.time()
        pretrained, pretraining, result = None, {}, None
        if s.pretraining is not None:
            corpus = "fit" if phase == "sweep" else "train"
            pretrained, pretraining, result = self.pretrain(spec, role, corpus, seed, config, initialisation_seed)
        if result is None:
            result = train_and_evaluate(config, self.tokenizer, train, evaluation, RunSettings(
                learning_rate=learning_rate, warmup_ratio=s.warmup_ratio, steps=s.steps, batch_size=s.batch_size,
                seed=seed,
            ), initial_weights=pretrained, initialisation_seed=initialisation_seed)  # fmt: skip
        record = {
            "task": s.task, "pair": spec, "role": role, "phase": phase, "learning_rate": learning_rate,
            "warmup_ratio": s.warmup_ratio, "seed": seed, "steps": s.steps, "batch_size": s.batch_size,
            "evaluated_on": "held-out slice of the training split" if phase == "sweep" else "test split",
            "model_type": config.model_type, "attention_type": config.attention_type,
            "layer_scheme": config.layer_scheme, "config": config.to_diff_dict(), **pretraining, **result,
            "wall_seconds": round(time.time() - started, 1),
            **({"initialisation_seed": initialisation_seed} if initialisation_seed != seed else {}),
        }  # fmt: skip
        write_record(path, record, within=self.folder)
        shown = f"{result['accuracy']:.3f}" if result["status"] == "finished" else result["status"]
        logger.warning("%s %s %s %s lr=%g seed=%d: %s", s.task, spec, role, phase, learning_rate, seed, shown)
        return record

    def pretrain(
        self, spec: str, role: str, corpus: str, seed: int, config: Any, initialisation_seed: int
    ) -> tuple[Path | None, dict[str, Any], dict[str, Any] | None]:
        """The run's model self-pretrained on ``corpus`` (``"fit"``: the training split without its held-out
        slice; ``"train"``: all of it) at ``seed`` (its data order and masks; its weights from
        ``initialisation_seed``) (:class:`SelfPretraining`), what the record keeps of it, and
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
            make_folder(self.work, within=self.work_root)
            write_text_atomic(corpus_file, "".join(" ".join(line.split()) + "\n" for line in self.texts[corpus]),
                              within=self.work)  # fmt: skip
        tokenizer_dir = self.work / "tokenizer"
        if not (tokenizer_dir / "tokenizer.json").is_file():
            with staged_into(make_folder(tokenizer_dir, within=self.work)) as staging:  # never through a link
                self.tokenizer.save_pretrained(staging)
        folder = self.work / spec_folder(spec) / role / f"pretrained-{corpus}-seed{seed}"
        config_dir = folder.with_name(folder.name + "-config")
        config = copy.deepcopy(config)
        config.sparse_prediction = p.sparse_prediction
        with staged_into(make_folder(config_dir, within=self.work)) as staging:
            config.save_pretrained(staging)
        arguments = PretrainingArguments(
            config_name=str(config_dir), tokenizer_name=str(tokenizer_dir), train_file=str(corpus_file),
            validation_split_percentage=p.validation_percentage, line_by_line=True, max_seq_length=s.max_length,
            mlm_probability=p.mlm_probability, per_device_train_batch_size=s.batch_size, learning_rate=p.learning_rate,
            lr_scheduler_type="linear", num_warmup_steps=p.warmup_ratio, max_train_steps=p.steps,
            seed=initialisation_seed, data_seed=None if initialisation_seed == seed else seed,
            logging_steps=max(1, p.steps // 20), max_eval_samples=512, output_dir=folder, disable_tqdm=True,
            report_to=["csv"],  # the loss every logging_steps in metrics.csv: a long pretraining's progress
            overwrite_output_dir=self.overwrite,
        )  # fmt: skip
        # A stopped pretraining's outcome, kept for the runs that share it while its run is the same (the engine's
        # fingerprint of it, paths left out): a changed setting or config trains again, as the engine would.
        stopped = folder.with_name(folder.name + "-stopped.json")
        this_run = json.loads(json.dumps(run_mlm.run_fingerprint(arguments, self.tokenizer) | {
            "max_train_steps": p.steps, "locations": None}, default=str))  # fmt: skip
        if exists(stopped) and (record := parse_record(stopped, STOPPED_PRETRAINING, fix=REMEDY)).get(
                "pretraining_run") == this_run:  # fmt: skip
            return None, {}, record["outcome"]
        try:
            log = folder.with_name(folder.name + ".log")
            with console_to_file(log, quiet=True, within=self.work), quiet_libraries():  # what it prints, to a log
                results = run_mlm.run(arguments)
        except Exception as error:  # the run's outcome, as in fine-tuning
            if (status := stop_status(error)) is None:
                raise
            outcome = {"status": status, "error": f"{PRETRAINING_STOPPED}{stop_summary(error)}"}
            write_record(stopped, {"outcome": outcome, "pretraining_run": this_run}, within=self.work)
            return None, {}, outcome
        summary = {key: results.get(key) for key in ("steps", "eval_loss", "final_train_loss", "train_seconds",
                                                     "train_tokens")}  # fmt: skip
        summary |= {"corpus": corpus, "examples": len(self.texts[corpus]),
                    "compute_multiple": p.compute_multiple(s.steps)}  # fmt: skip
        return folder, {"pretraining": summary}, None

    def replace_another_grid(self, overwrite: bool) -> None:
        """Remove the records of another grid in this folder (other settings) when ``overwrite``, or when it wrote
        no run's record (a refused or failed study never blocks its correction, with a warning); else refuse it.
        Only the files a grid writes are removed (:func:`grid_records`), never anything else in the folder."""
        saved_file = self.folder / FINGERPRINT_FILE
        if not exists(saved_file):
            return
        saved = parse_record(saved_file, ANY_OBJECT, fix="--overwrite_output_dir replaces the grid in it")
        differences = fingerprint_differences(saved, self.fingerprint())
        if not differences:
            return
        records = grid_records(self.folder)
        runs = [path for path in records if path.name.startswith(("sweep-", "seed"))]
        if runs and not overwrite:
            raise CheckpointError(
                f"--output_dir {self.folder} holds another grid ({len(differences)} difference(s): "
                f"{'; '.join(differences[:6])}) with {len(runs)} run record(s). Give another --output_dir, or "
                "--overwrite_output_dir to replace its records."
            )  # fmt: skip
        if not runs:
            logger.warning("%s held a grid that recorded no run (%s): this grid replaces it.", self.folder,
                           "; ".join(differences[:6]))  # fmt: skip
        for path in records:
            remove_path(path, within=self.folder)
        for cell in {path.parent for path in records} - {self.folder}:  # <pair>/<role>/, then <pair>/, when empty
            if remove_empty_folder(cell, within=self.folder):
                remove_empty_folder(cell.parent, within=self.folder)
        write_json(saved_file, self.fingerprint(), within=self.folder)  # the folder is this grid's now

    def fingerprint(self) -> dict[str, Any]:
        """The grid's identity: its settings, its calibration controls' pairs and the protocol's rate rule (a grid
        recorded under another rule is another grid)."""
        calibration = {"calibration": self.calibration} if self.calibration else {}
        return self.settings.fingerprint() | calibration | {"rate_choice": RATE_CHOICE}

    def run(self, on_record: Callable[[Path], None] | None = None, roles: Sequence[str] = ROLES,
            overwrite: bool = False) -> None:  # fmt: skip
        """Every (pair, role) cell's runs through the lab's protocol (:func:`~.protocol.run_protocol`): per seed,
        the sweep, its choice, the final run (only ``roles``' cells when narrowed: the grid and its fingerprint stay
        the same, so a later run fills in the rest). ``on_record(cell folder)`` is called after each run trained (or
        copied from its twin) now, not for those a resumed grid finds on disk: e.g. to copy the cell to storage that
        outlives the machine, since one seed of a self-pretraining grid can take over an hour."""
        s = self.settings
        self.overwrite = overwrite
        lock = OutputDirLock(self.folder)
        try:
            self.replace_another_grid(overwrite)
            prepare_output_dir(self.folder, self.fingerprint(), overwrite=False, replaced_by="--overwrite_output_dir")
            self.prepare_data()
            write_record(self.folder / "data.json", self.data_summary, within=self.folder)
            twins = self.twins()

            def train(run: Run) -> dict:  # on_record only for a file written now
                spec, role = run.model
                path = self.folder / spec_folder(spec) / role / f"{run.name}.json"
                written = not exists(path)
                record = self.run_one(path, spec, role, "sweep" if run.heldout else "final", run.learning_rate,
                                      run.seed, twins.get((spec, role)))  # fmt: skip
                if written and on_record is not None:
                    on_record(path.parent)
                return record

            cells = [(spec, role) for spec in self.pairs for role in ROLES if role in roles]
            run_protocol([(cell, seed) for seed in s.seeds for cell in cells], [s.task], s.learning_rates, train,
                         lambda task, record: held_out_run(record), pretrained=False)  # fmt: skip
        finally:
            lock.release()


def exists(path: Path) -> bool:
    """Whether ``path`` is there, a symbolic link included (which :func:`read_run` then refuses, never follows)."""
    return path.is_file() or path.is_symlink()


def grid_records(folder: Path) -> list[Path]:
    """The records a grid wrote in ``folder``: ``data.json`` and each cell's (``<pair>/<role>/``, :data:`CELL_RECORD`);
    nothing else, whatever else the folder holds."""
    cells = [path for path in sorted(folder.glob("*/*/*.json")) if path.parent.name in ROLES
             and CELL_RECORD.fullmatch(path.name) and (path.is_file() or path.is_symlink())]  # fmt: skip
    return [*([folder / "data.json"] if exists(folder / "data.json") else []), *cells]


def load_grid(folder: Path) -> dict[str, Any]:
    """The results of one task folder: ``{"settings", "data", "calibration": {kind: pair}, "cells": {pair: {role:
    {"rate_choice", "sweeps", "chosen", "seeds", "planned_seeds"}}}}`` (the calibration controls' pairs among the
    cells, after the study's; none in a grid recorded without them) — only what is on disk: per seed its held-out
    runs by rate
    (``sweeps``) and the rate they chose (``chosen``, for a seed whose sweep is whole), its final run (``seeds``),
    and how many seeds the grid's settings run. A grid recorded under :data:`~.protocol.RATE_CHOSEN_ONCE` has one
    sweep, at its ``sweep_seed``, and its recorded choice stands for every seed. Every record is parsed through its
    schema (:func:`read_run`): a damaged one is an error naming the file and the field."""
    settings_file = folder / FINGERPRINT_FILE
    if not exists(settings_file):
        raise CheckpointError(f"{folder} holds no grid ({settings_file.name} is missing).")
    settings = parse_record(settings_file, SAVED_GRID)
    calibration = settings.get("calibration", {})
    if calibration:
        check_record(settings, {"calibration": check_calibration}, settings_file)
    rule = settings.get("rate_choice", RATE_CHOSEN_ONCE)  # absent: recorded before the rule was
    if rule not in (RATE_CHOICE, RATE_CHOSEN_ONCE):
        raise CheckpointError(f"{settings_file}: field 'rate_choice' holds {rule!r}, not {RATE_CHOICE!r}: the record "
                              "is damaged.")  # fmt: skip
    cells: dict[str, dict[str, Any]] = {}
    for spec in dict.fromkeys([*settings["pairs"], *calibration.values()]):
        for role in ROLES:
            cells.setdefault(spec, {})[role] = load_cell(folder / spec_folder(spec) / role, settings, rule)
    data = {}
    if exists(folder / "data.json"):
        data = parse_record(folder / "data.json", ANY_OBJECT, fix=REMEDY)
        check_record(data, {name: check for name, check in DATA_RECORD.items() if name in data}, folder / "data.json",
                     fix=REMEDY)  # fmt: skip
    return {"settings": settings, "data": data, "calibration": calibration, "cells": cells}


def load_cell(cell: Path, settings: dict[str, Any], rule: str) -> dict[str, Any]:
    """One (pair, role) cell of :func:`load_grid`."""
    sweeps: dict[int, dict[float, dict[str, Any]]] = {}
    for path in sorted(cell.glob("sweep-lr*.json")):
        if (name := SWEEP_RECORD.fullmatch(path.name)) is None:
            continue
        seed = int(name["seed"]) if name["seed"] is not None else settings.get("sweep_seed", 0)
        sweeps.setdefault(seed, {})[float(name["rate"])] = read_run(path, seed=seed)
    seeds = {int(p.stem.removeprefix("seed")): read_run(p, seed=int(p.stem.removeprefix("seed")))
             for p in sorted(cell.glob("seed*.json")) if p.stem.removeprefix("seed").isdigit()}  # fmt: skip
    if rule == RATE_CHOSEN_ONCE:
        choice = parse_record(cell / "choice.json", CHOICE_RECORD, fix=REMEDY) if exists(cell / "choice.json") else {}
        chosen = dict.fromkeys(settings["seeds"], choice["chosen_learning_rate"]) if choice else {}
    elif len(rates := settings["learning_rates"]) == 1:  # nothing to choose: no held-out runs
        chosen = dict.fromkeys(settings["seeds"], rates[0])
    else:
        chosen = {seed: choose({rate: held_out_run(record) for rate, record in sweep.items()})[0]
                  for seed, sweep in sweeps.items() if len(sweep) == len(rates)}  # fmt: skip
    return {"rate_choice": rule, "sweeps": sweeps, "chosen": chosen, "seeds": seeds,
            "planned_seeds": len(settings["seeds"])}  # fmt: skip
