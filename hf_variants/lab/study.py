"""A study as a data file, handed to the lab's grid driver (:class:`~hf_variants.lab.grid.Grid`), as nanoGPT's
experiments are config files: the models, tasks, budgets and conditions of a comparison, declared once, read and
checked here, so that a new study is a file (``hf_variants/lab/studies/<name>.toml`` or any path).

The file's fields are :class:`~hf_variants.lab.grid.GridSettings`' (every task shares the top-level ones), with
three tables::

    [sizes]                  the model sizes every model of the grid has (GridSettings.sizes)
    [tasks.<task>]           one per task: its own fields (max_length, steps, max_train, ...)
    [pretraining]            optional: self-pretraining (hf_variants.lab.grid.SelfPretraining)
    [conditions.<name>]      optional: several grids, each these fields changed (its results under <name>/)

``extends = "<study>"`` starts from another study's fields (tables merged key by key): a shipped study's name, or a
``.toml`` path read beside the file that names it. Every value goes through
the field's declared check (:class:`~hf_variants.settings.study.GridSettings`: type, range, model specs — the same
check as the flag that replaces it); an unknown field, task or condition, a private or special name, a value out of
range, a file too large or nested too deeply is one error naming the file, the table and the key, before anything
runs or is written.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import sys
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..core.overrides import check_model_spec
from ..settings.arguments import checked_value
from ..settings.study import ROLES, GridSettings, SelfPretraining, build_parser, parse_args
from ..storage.files import path_component, require_regular_file
from ..training.memory import limit_address_space
from .grid import Grid, check_models, load_grid
from .grid_evidence import calibration_summary
from .text_classification import GRID_TASKS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: The studies the package ships (``load_study("never_from_scratch")``).
STUDIES_FOLDER = Path(__file__).parent / "studies"
#: Fields of a study file that are not GridSettings' own.
STUDY_FIELDS = frozenset({"description", "extends", "sizes", "tasks", "pretraining", "conditions"})
#: The largest study file read (a study is a few dozen lines).
LARGEST_STUDY_BYTES = 256 * 1024
#: The deepest nesting of tables and arrays a study file holds (``[conditions.<name>.pretraining]`` is 3 deep).
DEEPEST_NESTING = 4
#: A condition's name: also the name of its results folder.
CONDITION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class Study:
    """A study file read: its grids, one per (condition, task), and where each one's results go."""

    name: str
    description: str
    path: Path
    grids: tuple[tuple[str, GridSettings], ...]  # (results sub-folder, settings); "" without conditions

    def tasks(self) -> list[str]:
        return list(dict.fromkeys(settings.task for _, settings in self.grids))


def study_path(name_or_path: str | Path, beside: Path | None = None) -> Path:
    """A study file: a path (a ``.toml`` name, or a file that is there), else the package's study of that name — a
    folder of that name is not a study, so it never hides one. ``beside``: the folder a relative path is read from
    (an ``extends`` is read beside the file that names it, wherever the command runs)."""
    path = Path(name_or_path)
    if beside is not None and not path.is_absolute():
        path = beside / path
    if path.suffix == ".toml" or path.is_file():
        return path
    shipped = STUDIES_FOLDER / f"{name_or_path}.toml"
    if not shipped.is_file():
        names = ", ".join(sorted(p.stem for p in STUDIES_FOLDER.glob("*.toml")))
        raise FileNotFoundError(f"No study {name_or_path!r}: give a .toml file or one of the package's: {names}.")
    return shipped


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes``, tables merged key by key."""
    result = dict(base)
    for key, value in changes.items():
        result[key] = merged(result[key], value) if isinstance(value, dict) and isinstance(result.get(key), dict) \
            else value
    return result


def read_fields(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The file's fields, ``extends`` resolved (a cycle is an error); its size, nesting and names checked
    (:func:`check_shape`) before any value is read."""
    if path.resolve() in seen:
        raise ValueError(f"{path}: extends itself through {' → '.join(p.name for p in seen)}.")
    try:
        require_regular_file(path, "The study file")
    except FileNotFoundError:
        raise FileNotFoundError(f"The study file {path} does not exist.") from None
    except (IsADirectoryError, ValueError) as error:
        raise ValueError(str(error)) from None
    if path.stat().st_size > LARGEST_STUDY_BYTES:
        raise ValueError(f"{path}: {path.stat().st_size:,} bytes; a study file is at most {LARGEST_STUDY_BYTES:,}.")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid TOML ({error}).") from None
    except RecursionError:
        raise ValueError(f"{path}: nests arrays or tables more than {DEEPEST_NESTING} deep.") from None
    check_shape(path, data)
    parent = data.pop("extends", None)
    if parent is not None and not isinstance(parent, str):
        raise ValueError(f"{path}: extends = {parent!r} is not the name or path of a study.")
    if parent is None:
        return data
    return merged(read_fields(study_path(parent, beside=path.parent), (*seen, path.resolve())), data)


def check_shape(path: Path, value: Any, where: str = "", depth: int = 0) -> None:
    """Refuse a study file nested more than :data:`DEEPEST_NESTING` deep, or with a private or special key
    (``_x``, ``__class__``) in any table: such a name is never a field."""
    if depth > DEEPEST_NESTING:
        raise ValueError(f"{path}: {where or 'a value'} nests arrays or tables more than {DEEPEST_NESTING} deep.")
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and key.startswith("_"):
            raise ValueError(f"{path}: {where + '.' if where else ''}{key} is a private or special name, never a "
                             "field of a study.")  # fmt: skip
        check_shape(path, item, f"{where}.{key}" if where else str(key), depth + 1)


def checked(path: Path, where: str, values: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    unknown = sorted(set(values) - allowed)
    if unknown:
        raise ValueError(f"{path}: {where} has no field {unknown[0]!r}; its fields are {', '.join(sorted(allowed))}.")
    return values


def fits(value: Any, annotation: Any) -> bool:
    """Whether a TOML value fits a dataclass field's annotation (``int``, ``float``, ``str``, ``dict``,
    ``tuple[X, ...]`` as an array, ``X | None``, ``Any``); an integer fits a float, a boolean fits neither."""
    if annotation is Any:
        return True
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, argument) for argument in arguments)
    if origin is tuple:
        return isinstance(value, list) and all(fits(item, arguments[0]) for item in value)
    if origin is dict or annotation is dict:
        return isinstance(value, dict)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is type(None):
        return value is None
    return isinstance(value, annotation)


def typed(path: Path, where: str, values: dict[str, Any], settings: type) -> dict[str, Any]:
    """``values`` after checking each against its field of the dataclass ``settings``: its type (a wrong one is
    named), then the field's declared check (:func:`~hf_variants.settings.arguments.checked_value`: its range, a
    model spec's fields), the same check as the flag that sets it."""
    hints = typing.get_type_hints(settings)
    checked_values = {}
    for name, value in values.items():
        if name in hints and not fits(value, hints[name]):
            hint = hints[name]
            expected = hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")
            raise ValueError(f"{path}: {where}: {name} = {value!r} is not {expected}.")
        try:
            checked_values[name] = checked_value(settings, name, value) if name in hints else value
        except ValueError as error:
            raise ValueError(f"{path}: {where}: {name} = {value!r}: {str(error).rstrip('.')}.") from None
    return checked_values


def grid_settings(path: Path, task: str, study: dict[str, Any]) -> GridSettings:
    """One task's settings: the shared fields, then the task's own; a wrong value is named with its field."""
    settings_fields = {f.name for f in fields(GridSettings)} - {"task", "pretraining"}
    shared = {key: value for key, value in study.items() if key not in STUDY_FIELDS}
    checked(path, "a study", shared, settings_fields - {"sizes"})
    own = checked(path, f"[tasks.{task}]", study["tasks"][task], settings_fields - {"pairs", "sizes"})
    values = {**typed(path, "a study", shared, GridSettings), **typed(path, f"[tasks.{task}]", own, GridSettings),
              **typed(path, "[sizes]", {"sizes": study.get("sizes", {})}, GridSettings)}  # fmt: skip
    pretraining = study.get("pretraining")
    if pretraining is not None:
        checked(path, "[pretraining]", pretraining, {f.name for f in fields(SelfPretraining)})
        try:
            values["pretraining"] = SelfPretraining(**typed(path, "[pretraining]", pretraining, SelfPretraining))
        except TypeError as error:
            raise ValueError(f"{path}: [pretraining] misses a field: {error}.") from None
    for name in ("pairs", "learning_rates", "seeds"):
        if name in values:
            values[name] = tuple(values[name])
    try:
        settings = GridSettings(task=task, **values)
        check_models(settings)
    except TypeError as error:
        raise ValueError(f"{path}: [tasks.{task}] misses a field: {error}.") from None
    except ValueError as error:
        raise ValueError(f"{path}: [tasks.{task}] (with the study's fields): {str(error).rstrip('.')}.") from None
    return settings


def load_study(name_or_path: str | Path, replace: dict[str, Any] | None = None) -> Study:
    """The study file (a path, or the name of one the package ships) as its grids, checked; ``replace``: fields
    that replace the file's in every grid (the command line's ``--pairs``, ``--seeds``, ``--learning_rates``),
    checked with them."""
    path = study_path(name_or_path)
    study = read_fields(path)
    checked(path, "a study", study, STUDY_FIELDS | {f.name for f in fields(GridSettings)})
    tasks = study.get("tasks") or {}
    unknown = sorted(set(tasks) - set(GRID_TASKS)) if isinstance(tasks, dict) else ["<task>"]
    if not tasks or unknown:
        raise ValueError(f"{path}: [tasks.{unknown[0] if unknown else '<task>'}]: choose tasks among "
                         f"{', '.join(GRID_TASKS)}.")  # fmt: skip
    conditions = study.pop("conditions", None) or {"": {}}
    grids = []
    for condition, changes in conditions.items():
        where = f"[conditions.{condition}]"
        if condition and not CONDITION_NAME.fullmatch(path_component(condition, f"{path}: {where}")):
            raise ValueError(f"{path}: {where}: a condition's name is letters, digits, '_', '.' and '-', as its "
                             "results folder's.")  # fmt: skip
        checked(path, where, changes, {f.name for f in fields(GridSettings)} - {"task"})
        typed(path, where, {key: value for key, value in changes.items() if key != "pretraining"}, GridSettings)
        for task in tasks:
            grids.append((condition, replaced(path, grid_settings(path, task, merged(study, changes)), replace)))
    return Study(path.stem, study.get("description", ""), path, tuple(grids))


def replaced(path: Path, settings: GridSettings, replace: dict[str, Any] | None) -> GridSettings:
    """``settings`` with the fields of ``replace`` (the command line's), which win over the file's at every level
    (a task's or a condition's own ``seeds`` too), checked as the file's are."""
    if not replace:
        return settings
    try:
        settings = dataclasses.replace(settings, **{name: tuple(value) for name, value in replace.items()})
        check_models(settings)
    except ValueError as error:
        flags = ", ".join(f"--{name}" for name in replace)
        raise ValueError(f"{path}: [tasks.{settings.task}] with {flags}: {str(error).rstrip('.')}.") from None
    return settings


def check_selection(
    study: Study, *, tasks: Sequence[str] | None, conditions: Sequence[str] | None, roles: Sequence[str] | None
) -> None:
    """A ``ValueError`` naming the option when ``tasks``, ``conditions`` or ``roles`` ask for what the study lacks."""
    offered = {"tasks": study.tasks(), "conditions": list(dict.fromkeys(condition for condition, _ in study.grids)),
               "roles": list(ROLES)}  # fmt: skip
    for name, asked in (("tasks", tasks), ("conditions", conditions), ("roles", roles)):
        if asked and set(asked) - set(offered[name]):
            raise ValueError(f"argument --{name}: {study.path.name} has the {name} {', '.join(offered[name]) or 'none'}"
                             f", not {', '.join(asked)}")  # fmt: skip


def run_study(
    study: Study, data_dir: Path, output_dir: Path, work_dir: Path, *, tasks: Sequence[str] | None = None,
    conditions: Sequence[str] | None = None, roles: Sequence[str] | None = None,
    on_record: Callable[[Path], None] | None = None, overwrite: bool = False,
) -> list[Path]:
    """Run every grid of ``study`` (only ``tasks`` / ``conditions`` when given, only the cells of ``roles``, e.g.
    the cheap controls first), each resumable, results under
    ``output_dir/<condition>/<task>``, a self-pretraining grid's models under ``work_dir/<condition>``; the folders
    of the grids run. ``on_record(cell folder)`` follows each run and choice written into a (pair, role) cell, e.g.
    to report progress or copy the cell elsewhere (:meth:`Grid.run`). ``overwrite``: replace the records of another
    grid in a task's folder (:meth:`Grid.replace_another_grid`)."""
    check_selection(study, tasks=tasks, conditions=conditions, roles=roles)
    folders = []
    for condition, settings in study.grids:
        if (tasks and settings.task not in tasks) or (conditions and condition not in conditions):
            continue
        grid = Grid(settings, data_dir, output_dir / condition, work_dir / condition)
        grid.run(on_record=on_record, roles=roles or ROLES, overwrite=overwrite)
        folders.append(output_dir / condition / settings.task)
    return folders


def main(argv: list[str] | None = None) -> list[Path]:
    """``hf-variants study``: the study of the command line run (:func:`run_study`); the grid folders run. A
    mistake in the command line, the study file or the selection is a usage error before anything runs."""
    args = parse_args(argv)
    for pair in args.pairs or []:  # the check of every model spec (with the study's sizes, again, below)
        try:
            check_model_spec(pair)
        except ValueError as error:
            build_parser().error(f"argument --pairs: {error}")
    try:
        study = load_study(args.study, replace=args.replaced_fields())
    except (ValueError, FileNotFoundError) as error:
        build_parser().error(f"argument STUDY: {error}")
    try:
        check_selection(study, tasks=args.tasks, conditions=args.conditions, roles=args.roles)
    except ValueError as error:
        build_parser().error(str(error))
    if args.memory_limit_gib is not None:
        limit_address_space(args.memory_limit_gib)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    folders = run_study(study, args.data_dir, args.output_dir, args.work_dir, tasks=args.tasks,
                        conditions=args.conditions, roles=args.roles, overwrite=args.overwrite_output_dir)  # fmt: skip
    for folder in folders:  # whether each task's pairs can get a verdict (its calibration controls')
        grid = load_grid(folder)
        if grid["calibration"]:
            passed, said = calibration_summary(grid)
            print(f"{folder}: {'calibrated' if passed else 'not calibrated'} ({said})")
    return folders
