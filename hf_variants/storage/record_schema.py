"""Records are parsed, not trusted: the one schema check every bookkeeping file goes through when it is read back.

A record the package wrote — a folder's manifest, a checkpoint's completeness marker, a run's fingerprint, the
pending-checkpoint note, a study's record — can have been altered, emptied or replaced since. :func:`parse_record`
reads it (:func:`load_json`: never through a symbolic link) and checks its shape against a :data:`Schema` (required
fields, their types and ranges — a score inside its range and finite —, non-empty file lists where the package always
writes some); anything else is a :class:`CheckpointError` of one line naming the file and the field, never an
``AttributeError`` or ``KeyError`` further on, and never a damaged record trusted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .files import CheckpointError, is_link

#: A field's check: ``None`` when the value is well-formed, else what is wrong with it (a phrase).
Check = Callable[[Any], "str | None"]
#: A record's schema: its required fields and their checks.
Schema = Mapping[str, Check]

SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: Longest file name a manifest entry may hold (Linux's PATH_MAX).
LONGEST_ENTRY = 4096


def json_type(value: Any) -> str:
    """The JSON name of ``value``'s type (``null``, ``array``, ``object``, ...), as a record's reader sees it."""
    names = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "an array", dict: "an object"}  # fmt: skip
    return names.get(type(value), type(value).__name__)


def text(value: Any) -> str | None:
    return None if isinstance(value, str) else f"must be a string, not {json_type(value)}"


def nonempty_object(value: Any) -> str | None:
    if not isinstance(value, dict):
        return f"must be an object, not {json_type(value)}"
    return None if value else "is empty"


def checkpoint_name(value: Any) -> str | None:
    if not isinstance(value, str) or re.fullmatch(r"checkpoint-\d+", value) is None:
        return f"must name a checkpoint (checkpoint-N), not {value!r}"[:200]
    return None


def file_entry_name(name: str) -> str | None:
    if not name:
        return "lists an empty file name"
    if "\0" in name:
        return f"lists a file name with a NUL byte ({name[:60]!r})"
    if len(name) > LONGEST_ENTRY:
        return f"lists a file name of {len(name):,} characters"
    return None


def file_list(value: Any) -> str | None:
    """A manifest's or marker's ``files``: a non-empty object of ``name: {"size": int ≥ 0, "sha256": hex}``."""
    problem = nonempty_object(value)
    if problem is not None:
        return problem
    for name, entry in value.items():
        problem = file_entry_name(name)
        if problem is not None:
            return problem
        if not isinstance(entry, dict):
            return f"entry {name[:80]!r} must be an object, not {json_type(entry)}"
        size, digest = entry.get("size"), entry.get("sha256")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            return f"entry {name[:80]!r} has no size in bytes (got {size!r})"
        if not isinstance(digest, str) or SHA256.fullmatch(digest) is None:
            return f"entry {name[:80]!r} has no SHA-256 (got {str(digest)[:80]!r})"
    return None


def boolean(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"must be true or false, not {str(value)[:60]!r}"


def number_in(low: float, high: float, *, low_open: bool = False) -> Check:
    """A finite number in ``[low, high]`` (``(low, high]`` when ``low_open``); a boolean is not a number."""

    def check(value: Any) -> str | None:
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            return f"must be a finite number, not {str(value)[:60]!r}"
        if value < low or value > high or (low_open and value == low):
            return f"must lie in {'(' if low_open else '['}{low:g}, {high:g}], not {value!r}"
        return None

    return check


def integer_at_least(minimum: int) -> Check:
    def check(value: Any) -> str | None:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            return f"must be an integer of at least {minimum}, not {str(value)[:60]!r}"
        return None

    return check


def list_of(item: Check) -> Check:
    """A list whose every item passes ``item``."""

    def check(value: Any) -> str | None:
        if not isinstance(value, list):
            return f"must be a list, not {str(value)[:60]!r}"
        return next((f"item {index} {problem}" for index, entry in enumerate(value)
                     if (problem := item(entry)) is not None), None)  # fmt: skip

    return check


MANIFEST_SCHEMA: Schema = {"written_by": text, "files": file_list}
MARKER_SCHEMA: Schema = {"files": file_list}
PENDING_SCHEMA: Schema = {"checkpoint": checkpoint_name}
#: A fingerprint or a result record: an object (its fields are compared, not trusted, by their readers).
ANY_OBJECT: Schema = {}


def load_json(path: Path, fix: str | None = None) -> Any:
    """A JSON file the package wrote; a missing, unreadable or damaged one is a ``CheckpointError`` naming it
    (and ``fix``, what recovers it, when given)."""
    suffix = f"; {fix}." if fix else "."
    if is_link(Path(path)):
        raise CheckpointError(f"{path} is a symbolic link, not the record hf-variants wrote: records are read back "
                              f"only from files the package wrote{suffix}")  # fmt: skip
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing.") from None
    except IsADirectoryError:
        raise CheckpointError(f"{path} is a directory, not the record hf-variants wrote{suffix}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path} is not valid JSON ({error}): the file is damaged{suffix}") from None


def check_record(value: Any, schema: Schema, path: Path, fix: str | None = None) -> dict[str, Any]:
    """``value`` (read from ``path``) when it is an object with every field of ``schema`` well-formed; else a
    ``CheckpointError`` naming the file and the first bad field."""
    suffix = f"; {fix}." if fix else "."
    if not isinstance(value, dict):
        raise CheckpointError(f"{path} must hold a JSON object, not {json_type(value)}: it is damaged{suffix}")
    for field, check in schema.items():
        problem = "is missing" if field not in value else check(value[field])
        if problem is not None:
            raise CheckpointError(f"{path}: field {field!r} {problem}: the record is damaged{suffix}")
    return value


def parse_record(path: Path, schema: Schema, fix: str | None = None) -> dict[str, Any]:
    """The record at ``path``, read and checked against ``schema`` (:func:`check_record`)."""
    return check_record(load_json(path, fix), schema, path, fix)
