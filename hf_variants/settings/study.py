"""Settings of ``hf-variants study``, which runs a study file on the lab's grid
(:func:`hf_variants.lab.study.main`): one field per flag, declared once."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .arguments import Settings, argument_parser, parse_into, setting
from .checks import above, seed_range
from .compare import DATA_ENV

#: The two sides of a comparison: the variant, and its matched control (the same model with its idea turned off).
ROLES = ("variant", "control")

DESCRIPTION = f"""\
Run a study: every variant of the study file against its matched control on each of its text-classification
tasks, the learning rate chosen per model and task on a held-out tenth of the training split, then several
seeds scored on the test split; with [conditions], once per condition (e.g. from scratch and self-pretrained).

STUDY is the name of a study the package ships (classification_from_scratch, never_from_scratch) or the path of
a .toml file of your own (its fields: docs "Extending", a new study). The flags below narrow or replace its
fields. Records go to --output_dir/<condition>/<task>/<pair>/<role>/, one small JSON file per run; a
self-pretraining study's pretrained models go to --work_dir. The same command resumes: a finished run is read
back, not run again; a folder made with other settings is refused.

  hf-variants study classification_from_scratch --data_dir $DATA --output_dir my-study
  hf-variants study classification_from_scratch --data_dir $DATA --output_dir my-study --roles control

Data: --data_dir, else the {DATA_ENV} environment variable: the folder layout of docs "Data".
"""


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
    pairs: list[str] | None = setting(None, help="Replace the study's pairs (model specs, e.g. mgk_bert).")
    learning_rates: list[float] | None = setting(None, parse=above(0), help="Replace the study's learning rates.")
    seeds: list[int] | None = setting(None, parse=seed_range(), help="Replace the study's final seeds.")
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
