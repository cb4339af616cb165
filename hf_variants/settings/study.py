"""Settings of ``hf-variants study``, which runs a study file on the lab's grid (:func:`hf_variants.lab.study.main`),
declared once: a grid's settings (:class:`GridSettings`, :class:`SelfPretraining`: the fields of a study file) and the
command line's (:class:`StudyArguments`: one field per flag). A value of a study file and the flag that replaces it
meet the same declared check (``seeds = [-1]`` and ``--seeds -1`` are one refusal)."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .arguments import Settings, argument_parser, parse_into, setting
from .checks import above, at_least, half_open_interval, open_interval, seed_range
from .compare import DATA_ENV

#: The two sides of a comparison: the variant, and its matched control (the same model with its idea turned off).
ROLES = ("variant", "control")

#: What trains each grid run (recorded in the grid's fingerprint: a folder made by another engine is another grid).
ENGINE = "transformers.Trainer (hf_variants.training.run_glue.GlueTrainer)"


@dataclass(frozen=True, kw_only=True)
class SelfPretraining(Settings):
    """Masked-LM pretraining of every run's model on that run's own training inputs before it is fine-tuned —
    self-pretraining (Amos, Berant & Gupta, ICLR 2024: no data beyond the task's, a denoising objective) — on
    the pretraining engine (:func:`hf_variants.training.run_mlm.run`, accelerate), with the grid's tokenizer.

    A held-out run is pretrained on the training split *without* its held-out slice (the slice that chooses the
    rate is never seen by pretraining), a final run at seed s on the whole training split at seed s; the test
    split never. The texts are one example per line (``line_by_line``), at the grid's length and batch size, so
    pretraining costs ``steps / grid steps`` times the fine-tuning's compute (:meth:`compute_multiple`).
    """

    steps: int = setting(help="Pretraining steps of every run's model.", parse=at_least(1))
    learning_rate: float = setting(1e-3, help="Pretraining's peak learning rate.", parse=above(0))
    warmup_ratio: float = setting(0.1, help="Share of the steps that warm up.", parse=half_open_interval(0, 1))
    mlm_probability: float = setting(0.15, help="Share of the tokens masked.", parse=open_interval(0, 1))
    validation_percentage: float = setting(
        5.0, help="Share of the pretraining texts held out for its validation loss.", parse=open_interval(0, 100)
    )
    sparse_prediction: bool = setting(
        False, help="The MLM decoder only at the masked positions (the config's sparse_prediction): the same loss at "
        "a fraction of the decoder's cost, which dominates a small model's MLM step (docs 'Benchmarks').",
    )  # fmt: skip

    def compute_multiple(self, fine_tuning_steps: int) -> float:
        """Pretraining compute as a multiple of one fine-tuning run's (same batch, same length)."""
        return self.steps / fine_tuning_steps


@dataclass(frozen=True, kw_only=True)
class GridSettings(Settings):
    """Everything that determines a grid's results (its fingerprint): the fields of a study file, each checked where
    it is declared, from a file, a flag or Python alike."""

    task: str = setting(help="The text-classification task (hf_variants.lab.text_classification.GRID_TASKS).")
    pairs: tuple[str, ...] = setting(help="Model specs, each run against its matched control (each checked with the "
                                     "sizes by the lab: hf_variants.lab.grid.check_models).")
    sizes: dict[str, Any] = setting(help="Config fields every model of the grid has (its size).")
    learning_rates: tuple[float, ...] = setting(help="The held-out sweep's rates.", parse=above(0))
    seeds: tuple[int, ...] = setting(help="The final runs' seeds.", parse=seed_range())
    steps: int = setting(help="Fine-tuning steps of every run.", parse=at_least(1))
    batch_size: int = setting(help="Examples per step.", parse=at_least(1))
    max_length: int = setting(help="Tokens per example (longer ones are cut).", parse=at_least(2))
    warmup_ratio: float = setting(0.1, help="Share of the steps that warm up.", parse=half_open_interval(0, 1))
    heldout_fraction: float = setting(
        0.15, help="Share of the training split held out to choose the rate.", parse=open_interval(0, 1)
    )
    max_train: int | None = setting(None, help="Training examples kept (a seeded subsample).", parse=at_least(2))
    max_test: int | None = setting(None, help="Test examples kept (a seeded subsample).", parse=at_least(1))
    vocab_size: int = setting(8000, help="The WordPiece tokenizer's vocabulary.", parse=at_least(32))
    extra: dict[str, Any] = setting(help="Free fields recorded in the fingerprint.", default_factory=dict)
    engine: str = setting(ENGINE, help="What trains each run: a folder made by another engine is another grid.")
    pretraining: SelfPretraining | None = setting(
        None, help="None: every run from random initialisation; else each run's model is self-pretrained first."
    )
    calibration: bool = setting(
        True, help="Run the calibration controls beside the pairs (hf_variants.lab.spec.calibration_pairs): the BERT "
        "control without token mixing (must come out below it) and from other seeds (must be equivalent); a task "
        "whose controls fail makes no verdict. false: none, and no verdict says it was calibrated.",
    )  # fmt: skip

    def problems(self) -> list[str]:
        if len(set(self.seeds)) != len(self.seeds) or len(set(self.learning_rates)) != len(self.learning_rates):
            return [f"seeds {list(self.seeds)} or learning_rates {list(self.learning_rates)} name a value twice"]
        return []

    def fingerprint(self) -> dict[str, Any]:
        """The settings as JSON; a from-scratch grid's is what it was before self-pretraining existed (no
        ``pretraining`` key), and one without calibration controls what it was before they existed, so their folders
        resume."""
        fingerprint = json.loads(json.dumps(dataclasses.asdict(self)))
        if not self.calibration:  # as before the controls existed, so those folders resume
            del fingerprint["calibration"]
        if self.pretraining is None:
            del fingerprint["pretraining"]
        elif not self.pretraining.sparse_prediction:  # as before the switch existed, so those folders resume
            del fingerprint["pretraining"]["sparse_prediction"]
        return fingerprint


DESCRIPTION = f"""\
Run a study: every variant of the study file against its matched control on each of its text-classification
tasks: at each seed, each model's learning rate chosen on a held-out slice of the training split, then that
seed's final run at it, scored on the test split; with [conditions], once per condition (e.g. from scratch and
self-pretrained). Each task also runs the two calibration controls (the BERT control without token mixing and from
other seeds, against the BERT control): a task they fail gives no pair a verdict.

STUDY is the name of a study the package ships (classification_from_scratch, never_from_scratch) or the path of
a .toml file of your own (its fields: docs "Extending", a new study). The flags below narrow or replace its
fields. Records go to --output_dir/<condition>/<task>/<pair>/<role>/, one small JSON file per run; a
self-pretraining study's pretrained models go to --work_dir. The same command resumes: a finished run is read
back, not run again; a folder made with other settings is refused.

  hf-variants study classification_from_scratch --data_dir $DATA --output_dir my-study
  hf-variants study classification_from_scratch --data_dir $DATA --output_dir my-study --roles control

Data: --data_dir, else the {DATA_ENV} environment variable: the folder layout of docs "Data".
"""


def grid_check(name: str) -> Any:
    """The declared check of :class:`GridSettings`' field ``name``: a flag that replaces a study file's field is
    checked by that field's own check."""
    return next(field for field in dataclasses.fields(GridSettings) if field.name == name).metadata["parse"]


@dataclass(kw_only=True)
class StudyArguments(Settings):
    """``hf-variants study``'s settings, typed: one field per flag; values set in Python meet the flags' checks."""

    study: str = setting(help="A shipped study's name or a study file (.toml).", positional=True, metavar="STUDY")
    output_dir: Path = setting(help="Folder the study's records go to (created; resumed when it holds them).")
    data_dir: Path | None = setting(None, help=f"The data folder (default: ${DATA_ENV}).")
    work_dir: Path | None = setting(
        None, help="Folder for a self-pretraining study's pretrained models (default: OUTPUT_DIR-models beside it)."
    )
    tasks: list[str] | None = setting(None, help="Only these of the study's tasks.")
    conditions: list[str] | None = setting(None, help="Only these of the study's conditions.")
    roles: list[str] | None = setting(
        None, choices=ROLES, help="Only these roles' runs (e.g. the cheap controls first, the rest later)."
    )
    pairs: list[str] | None = setting(
        None, help="Replace the study's pairs (model specs, e.g. mgk_bert; checked with the study's sizes)."
    )
    learning_rates: list[float] | None = setting(
        None, parse=grid_check("learning_rates"), help="Replace the study's learning rates."
    )
    seeds: list[int] | None = setting(None, parse=grid_check("seeds"), help="Replace the study's final seeds.")
    overwrite_output_dir: bool = setting(
        False, help="Replace the grids another study left in --output_dir (only the records a study writes)."
    )
    memory_limit_gib: float | None = setting(
        None, parse=above(0),
        help="Cap the address space: a run that needs more is recorded as out_of_memory instead of being killed.",
    )  # fmt: skip

    def __post_init__(self) -> None:
        if self.data_dir is None and os.environ.get(DATA_ENV):
            self.data_dir = Path(os.environ[DATA_ENV])
        if self.work_dir is None:
            self.work_dir = self.output_dir.with_name(self.output_dir.name + "-models")
        super().__post_init__()

    def problems(self) -> list[str]:
        if self.data_dir is None:
            return [f"argument --data_dir: required when ${DATA_ENV} is not set"]
        for name in ("pairs", "learning_rates", "seeds", "tasks", "conditions", "roles"):
            values = getattr(self, name) or []
            if len(set(values)) != len(values):
                return [f"argument --{name}: names a value twice: {values}"]
        return []

    def replaced_fields(self) -> dict[str, tuple]:
        """The study fields the command line replaces (``pairs``, ``learning_rates``, ``seeds``)."""
        return {name: tuple(value) for name in ("pairs", "learning_rates", "seeds") if (value := getattr(self, name))}


def build_parser(prog: str = "hf-variants study"):
    """The command line, generated from :class:`StudyArguments`."""
    return argument_parser(StudyArguments, prog, DESCRIPTION)


def parse_args(argv: list[str] | None = None) -> StudyArguments:
    """The command line as typed settings; every mistake is named in one usage error."""
    return parse_into(StudyArguments, build_parser(), argv)
