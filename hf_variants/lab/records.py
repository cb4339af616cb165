"""The lab's one resume record: a finished run's (or stage's) small JSON file, from which a re-run takes its
result instead of running it again. Every study of the lab keeps its runs this way — the main job's stages
(:func:`~hf_variants.lab.stages.finished_stage`), the classification grid's runs
(:mod:`~hf_variants.lab.grid`) and the GLUE studies' runs:

* **Written whole or not at all**: :func:`write_record` goes through the package's atomic writer
  (:func:`hf_variants.storage.files.write_text_atomic`: a temporary file, flushed, renamed over the target), so
  a kill at any instant leaves the finished record or none, never half a file that a re-run would trust. A
  non-finite number an engine reported (a diverged loss) is kept as Python's JSON writes it, not refused: losing
  a finished run over it would be worse.
* **Taken only for the same settings**: :func:`record_for` returns a record when the settings it was made with
  (read by the study's ``settings_of``) equal the ones asked for, compared field by field, and otherwise
  raises :class:`OtherSettings` naming every differing field — the study decides whether that means "run it
  again" (the main job's stage, whose inputs changed) or "refuse" (a study re-run into a folder made with other
  settings). A study whose settings vary with the library versions (the fine-tuning engine's, which records
  transformers' ``TrainingArguments``) leaves out of the comparison the fields one side lacks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..storage.files import CheckpointError, make_folder, write_text_atomic
from ..storage.record_schema import ANY_OBJECT, parse_record


class OtherSettings(CheckpointError):
    """A record made with other settings than the ones asked for; ``differences`` names each field."""

    def __init__(self, path: Path, differences: list[str]) -> None:
        self.path, self.differences = path, differences
        super().__init__(
            f"{path} holds a run made with other settings:\n  " + "\n  ".join(differences)
            + "\nChoose another output folder for other settings, or delete that file to redo it."
        )  # fmt: skip


def write_record(path: Path, record: Mapping[str, Any], *, within: Path) -> None:
    """``record`` as JSON at ``path`` inside ``within`` (the study's folder), complete or not there at all."""
    make_folder(path.parent, within=within)
    write_text_atomic(path, json.dumps(dict(record), indent=1) + "\n", within=within)


def read_record(path: Path) -> dict[str, Any] | None:
    """The record at ``path``; None when there is none; a damaged one is an error naming it."""
    return parse_record(path, ANY_OBJECT) if path.is_file() else None


def differing_fields(
    recorded: Mapping[str, Any], expected: Mapping[str, Any], *, compare_missing: bool = True, prefix: str = ""
) -> list[str]:
    """``"group.field: recorded X, asked Y"`` for every field of ``expected`` that ``recorded`` holds with another
    value; unless not ``compare_missing``, also every field one side lacks; nested mappings field by field."""
    differences = [f"{prefix}{name}: recorded {value!r}, not asked" for name, value in recorded.items()
                   if compare_missing and name not in expected]  # fmt: skip
    for name, value in expected.items():
        if name not in recorded:
            if compare_missing:
                differences.append(f"{prefix}{name}: not recorded, asked {value!r}")
            continue
        if isinstance(value, Mapping) and isinstance(recorded[name], Mapping):
            differences += differing_fields(recorded[name], value, compare_missing=compare_missing,
                                            prefix=f"{prefix}{name}.")  # fmt: skip
        elif recorded[name] != value:
            differences.append(f"{prefix}{name}: recorded {recorded[name]!r}, asked {value!r}")
    return differences


def record_for(
    path: Path, expected: Mapping[str, Any], settings_of: Callable[[dict[str, Any]], Mapping[str, Any]], *,
    compare_missing: bool = True,
) -> dict[str, Any] | None:
    """The record at ``path`` when ``settings_of(record)`` holds ``expected``'s settings; None when there is no
    record; :class:`OtherSettings` when it was made with others (:func:`differing_fields`)."""
    record = read_record(path)
    if record is None:
        return None
    differences = differing_fields(settings_of(record), expected, compare_missing=compare_missing)
    if differences:
        raise OtherSettings(path, differences)
    return record
