"""The two rules every file the package writes or removes goes through.

* **Containment.** :func:`inside` resolves a path the package is about to write, read as a record or
  remove — a manifest entry, a checkpoint name, a repository id under a local hub — and refuses it
  unless it lies inside the *resolved* folder the package owns. ``..``, an absolute path and a symlink
  that leads out are all the same case: the resolved path is outside.
* **Atomic bookkeeping.** :func:`write_text_atomic` writes a temporary file beside the target, flushes
  it to disk and renames it over the target (``os.replace``), as checkpoints are written: a kill at any
  instant leaves the old file or the new one, never an empty or half-written one.
"""

from __future__ import annotations

import glob
import json
import os
import signal
from pathlib import Path
from typing import Any

#: Temporary files of :func:`write_text_atomic`: ``.<name>.<pid>.tmp`` beside the target.
TEMPORARY_SUFFIX = ".tmp"
FAILPOINT_ENV = "HF_VARIANTS_FAILPOINT"


class CheckpointError(ValueError):
    """A checkpoint or run folder cannot be used as it is; the message names the file and why."""


def failpoint(name: str, where: int | str) -> None:
    """SIGKILL this process when ``$HF_VARIANTS_FAILPOINT`` is ``name@where`` (a step, or a file's name), or
    send it another signal with ``name@where:SIGTERM`` (tests only: how they interrupt runs at exact places)."""
    point, _, signal_name = os.environ.get(FAILPOINT_ENV, "").rpartition(":")
    if not signal_name.startswith("SIG"):  # no signal named (a point's name may hold colons)
        point, signal_name = os.environ.get(FAILPOINT_ENV, ""), "SIGKILL"
    if point == f"{name}@{where}":
        os.kill(os.getpid(), getattr(signal, signal_name))


def inside(folder: Path | str, entry: Path | str, what: str) -> Path:
    """``folder / entry`` resolved (symlinks followed), or a :class:`CheckpointError` naming ``what`` and
    ``entry`` when it is not strictly inside ``folder`` resolved (``..``, an absolute path, a symlink
    that leads out, or the folder itself)."""
    root = Path(folder).resolve()
    resolved = (root / entry).resolve()
    if root not in resolved.parents:
        raise CheckpointError(
            f"{what} {str(entry)!r} lies outside {root} (it resolves to {resolved}): hf-variants writes and removes "
            "files only inside the folder it owns, so it refuses this entry."
        )
    return resolved


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` (UTF-8) in one rename, after flushing the new content to disk."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}{TEMPORARY_SUFFIX}")
    try:
        with temporary.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        failpoint("atomic_write", path.name)
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()
    fsync_directory(path.parent)
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*{TEMPORARY_SUFFIX}"):  # left by a killed write
        if stale.name[len(path.name) + 2 : -len(TEMPORARY_SUFFIX)].isdigit():
            stale.unlink(missing_ok=True)


def is_temporary(name: str) -> bool:
    """Whether ``name`` is a temporary file of :func:`write_text_atomic` (left only by a kill)."""
    return name.startswith(".") and name.endswith(TEMPORARY_SUFFIX)


def write_json(path: Path, value: Any) -> None:
    """``value`` as JSON (NaN and infinity refused: they are not JSON), written atomically."""
    write_text_atomic(path, json.dumps(value, indent=1, allow_nan=False) + "\n")


def fsync_directory(folder: Path) -> None:
    """Flush a folder's entries (a rename in it) to disk; a no-op where folders cannot be opened (Windows)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
