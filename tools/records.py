#!/usr/bin/env python
"""A study's records as the repository keeps them: one JSON-lines file per top-level folder of the study's output
(a condition, or a task for a study without conditions), one line per record file::

    {"path": "ag_news/mgk_bert/control/seed1.json", "record": {...the file's JSON...}}

A study writes one small JSON file per run into the folder it is given (``hf-variants study``, the drivers under
``experiments/``); ``pack`` turns that folder into ``experiments/<study>/records/*.jsonl`` to commit, and
``unpack`` turns the committed lines back into the same folder, which the lab's readers and the same study command
(resuming it) read as they read any output folder. Other files of the folder (a study file, a note) are not
records: they are kept beside the JSON-lines files, not in them.

    python tools/records.py pack OUTPUT_DIR experiments/my_study        # OUTPUT_DIR's records → records/*.jsonl
    python tools/records.py unpack experiments/my_study OUTPUT_DIR      # and back, e.g. to resume the study

Every line read back is checked: an object with a relative ``path`` to a ``.json`` file inside the folder (no
``..``, no absolute path) and a ``record`` object; anything else is an error naming the file and the line.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

#: The folder of a study's JSON-lines files, inside its folder under experiments/.
RECORDS = "records"
#: The JSON-lines file of the records directly in the study's output folder (not in a sub-folder).
TOP_LEVEL = "_top"


class RecordsError(ValueError):
    """A JSON-lines file that does not hold records as :func:`pack` writes them; the message names file and line."""


def record_files(output_dir: Path) -> Iterator[Path]:
    """The JSON files of a study's output folder, in a stable order; a link is refused, never followed."""
    for path in sorted(output_dir.rglob("*")):
        if path.is_symlink():
            raise RecordsError(f"{path}: a link in a study's output; records are regular files")
        if path.is_file() and path.suffix == ".json":
            yield path


def pack(output_dir: Path, study_dir: Path) -> list[Path]:
    """Write ``output_dir``'s records as ``study_dir/records/<top folder>.jsonl``; the files written."""
    groups: dict[str, list[str]] = {}
    for path in record_files(output_dir):
        relative = path.relative_to(output_dir)
        group = relative.parts[0] if len(relative.parts) > 1 else TOP_LEVEL
        record = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(record, dict):
            raise RecordsError(f"{path}: not a JSON object")
        groups.setdefault(group, []).append(json.dumps({"path": relative.as_posix(), "record": record}))
    folder = study_dir / RECORDS
    if folder.is_symlink():
        raise RecordsError(f"{folder}: a link; the records folder must be a folder of its own")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for group, lines in groups.items():
        target = folder / f"{group}.jsonl"
        if target.is_symlink():
            raise RecordsError(f"{target}: a link; refusing to write through it")
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written.append(target)
    return written


def read_lines(path: Path) -> Iterator[tuple[PurePosixPath, dict]]:
    """The (relative path, record) of each line of a JSON-lines file, checked."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        where = f"{path}, line {number}"
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as error:
            raise RecordsError(f"{where}: not JSON ({error.msg})") from None
        if not isinstance(entry, dict) or set(entry) != {"path", "record"}:
            raise RecordsError(f"{where}: expected an object with exactly 'path' and 'record'")
        relative = PurePosixPath(entry["path"]) if isinstance(entry["path"], str) else None
        if relative is None or relative.is_absolute() or ".." in relative.parts or relative.suffix != ".json":
            raise RecordsError(f"{where}: 'path' must be a relative path to a .json file inside the study, "
                               f"got {entry['path']!r}")  # fmt: skip
        if not isinstance(entry["record"], dict):
            raise RecordsError(f"{where}: 'record' must be a JSON object")
        yield relative, entry["record"]


def unpack(study_dir: Path, output_dir: Path) -> Path:
    """Write ``study_dir``'s committed records back as the files of a study's output folder, under ``output_dir``
    (which must not hold a file of the same name); ``output_dir``."""
    jsonl = sorted((study_dir / RECORDS).glob("*.jsonl"))
    if not jsonl:
        raise RecordsError(f"{study_dir / RECORDS}: no *.jsonl records")
    root = output_dir.resolve()
    for path in jsonl:
        for relative, record in read_lines(path):
            target = root.joinpath(*relative.parts)
            if any(parent.is_symlink() for parent in (target, *target.parents) if parent != root.parent):
                raise RecordsError(f"{target}: a link on the way; refusing to write through it")
            if target.exists():
                raise RecordsError(f"{path}: {relative} is there twice, or {output_dir} already holds it")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return output_dir


#: The temporary folders of :func:`unpacked`, removed when the process ends.
_UNPACKED: list[tempfile.TemporaryDirectory] = []


@functools.cache
def unpacked(study_dir: Path) -> Path:
    """``study_dir``'s records unpacked into a temporary folder that lives as long as this process (read-only use:
    the renderers and the tests read committed studies through it)."""
    _UNPACKED.append(tempfile.TemporaryDirectory(prefix=f"{study_dir.name}-records-"))
    return unpack(study_dir, Path(_UNPACKED[-1].name))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    packing = commands.add_parser("pack", help="a study's output folder → STUDY_DIR/records/*.jsonl")
    packing.add_argument("output_dir", type=Path)
    packing.add_argument("study_dir", type=Path)
    unpacking = commands.add_parser("unpack", help="STUDY_DIR/records/*.jsonl → a study's output folder")
    unpacking.add_argument("study_dir", type=Path)
    unpacking.add_argument("output_dir", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "pack":
            for path in pack(args.output_dir, args.study_dir):
                print(path)
        else:
            print(unpack(args.study_dir, args.output_dir))
    except (RecordsError, OSError) as error:
        sys.exit(f"records.py {args.command}: error: {error}")


if __name__ == "__main__":
    main()
