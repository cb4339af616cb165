"""A run folder the package owns: what it holds, who may write it, what a run left in it.

* **One run per folder.** :class:`OutputDirLock` holds an exclusive ``flock`` on the output folder for
  the life of the process (the kernel releases it when the process dies, ``kill -9`` included); a
  second run is refused with the holder's PID. :func:`check_output_dir` refuses a non-empty folder that
  holds another run, unless ``--overwrite_output_dir``, and a folder no run of the package wrote, always;
  :func:`claim_output_dir` records the run's *fingerprint* (:mod:`.run_identity`) in
  ``run_fingerprint.json`` when training starts, after removing a replaced run's files: the checkpoints
  it marked, the files its manifest lists, and nothing else (a user's own files stay, whatever their
  names). Every path removed is checked to lie inside the resolved folder (:func:`.files.inside`).
* **Final folders carry a manifest.** :func:`write_manifest` records every file a run or an export wrote
  (size and SHA-256) in ``hf_variants_manifest.json``; :func:`verify_manifest` checks them before the
  package loads a folder and in ``hf-variants verify``.

The engines (:mod:`hf_variants.training`) and the Hub export (:mod:`hf_variants.hub`) both build on this
module; it imports neither.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .files import (
    STAGING_FOLDER,
    CheckpointError,
    inside,
    is_link,
    is_regular_file,
    is_temporary,
    make_folder,
    open_lock_file,
    regular_files,
    remove_empty_folder,
    remove_path,
    target_inside,
    write_json,
)
from .record_schema import ANY_OBJECT, MANIFEST_SCHEMA, PENDING_SCHEMA, parse_record
from .run_identity import announce_version_changes, file_sha256, fingerprint_differences, library_versions

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

logger = logging.getLogger(__name__)

LOCK_FILE = ".hf_variants.lock"
FINGERPRINT_FILE = "run_fingerprint.json"
COMPLETE_MARKER = "checkpoint_complete.json"
MANIFEST_FILE = "hf_variants_manifest.json"
#: The Trainer checkpoint being written (its name), removed once the checkpoint is marked complete: a
#: checkpoint folder the package may remove although it holds no completeness marker yet.
PENDING_FILE = ".hf_variants_pending_checkpoint.json"
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
#: The folders the engines' :func:`~hf_variants.training.checkpoints.write_checkpoint` writes before its one rename.
PARTIAL_CHECKPOINT_PATTERN = re.compile(r"^\.checkpoint-\d+\.(partial|stale)$")


def checkpoint_step(path: Path) -> int | None:
    """The step ``N`` of a ``checkpoint-N`` folder; ``None`` for any other name."""
    match = CHECKPOINT_PATTERN.match(path.name)
    return int(match.group(1)) if match else None


# ------------------------------------------------------------------------------------------------
# The output folder: lock, fingerprint, non-empty rule
# ------------------------------------------------------------------------------------------------
class OutputDirLock:
    """An exclusive lock on ``folder`` held until :meth:`release` or the end of the process. A folder the
    lock created and that holds nothing but the lock file at :meth:`release` (a run refused before it wrote
    anything, e.g. for a missing input) is removed again: a mistake leaves no folder behind."""

    def __init__(self, folder: Path) -> None:
        refuse_foreign(folder)  # before the lock file is written into it
        self.created = not folder.exists()
        make_folder(folder, within=folder)
        self.path = folder / LOCK_FILE
        self.handle = open_lock_file(self.path)  # never through a link: a planted one is refused
        try:
            self._lock()
        except OSError:
            try:
                self.handle.seek(0)
                holder = self.handle.read().strip() or "unknown"
            except OSError:  # Windows: the holder's lock covers the bytes being read
                holder = "unknown"
            self.handle.close()
            raise CheckpointError(
                f"{folder} is in use by another run (PID {holder}); wait for it to finish or give another "
                "--output_dir."
            ) from None
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(str(os.getpid()))
        self.handle.flush()

    def _lock(self) -> None:
        if fcntl is not None:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:  # the first byte, non-blocking; released when the handle closes or the process ends
            self.handle.seek(0)
            msvcrt.locking(self.handle.fileno(), msvcrt.LK_NBLCK, 1)

    def release(self) -> None:
        if self.handle.closed:
            return
        folder = self.path.parent
        if self.created and [entry.name for entry in folder.iterdir()] == [LOCK_FILE]:
            remove_path(self.path, within=folder)  # still locked: no other run can have taken the folder meanwhile
            remove_empty_folder(folder, within=folder)  # kept when another run's lock file appeared since
        if fcntl is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def check_output_dir(folder: Path, fingerprint: dict[str, Any], overwrite: bool,
                     replaced_by: str | None = "--overwrite_output_dir", replace_unstarted: bool = False) -> bool:
    """The one-run-per-folder rule, checked before anything is written; returns whether the folder holds
    *this* run (to resume or, when finished, to leave as it is).

    * empty or new folder: a new run;
    * the same run (equal fingerprint): this run;
    * a folder of another run: ``CheckpointError`` listing what differs, unless ``overwrite`` — then
      :func:`claim_output_dir` removes that run's files when training starts;
    * a non-empty folder that no run of the package wrote (no fingerprint, no manifest), e.g. a user's
      folder behind a symlink: refused, ``overwrite`` or not — the package removes only what it recorded,
      and a new run would write over the user's files.

    ``replaced_by`` is the caller's flag that replaces a run, named in the refusal; ``None`` for a caller that
    only resumes (the lab's grid), whose refusal names only another folder. With ``replace_unstarted`` (the
    engines), a folder whose run stopped before its first checkpoint (:func:`holds_work`) is another run that
    the new one replaces, with a warning, instead of a refusal.
    """
    folder = folder.resolve()
    refuse_foreign(folder)
    remedy = f"Give another --output_dir, or {replaced_by} to replace it." if replaced_by else (
        "Give another --output_dir (this folder is resumed, never replaced).")  # fmt: skip
    contents = [path for path in folder.iterdir() if path.name != LOCK_FILE] if folder.is_dir() else []
    fingerprint_file = folder / FINGERPRINT_FILE
    if not contents or overwrite:
        return False
    if not fingerprint_file.is_file():  # a folder written by `hf-variants export`: another kind of folder
        raise CheckpointError(
            f"--output_dir {folder} holds files of another hf-variants command (a {MANIFEST_FILE} without "
            f"{FINGERPRINT_FILE}). {remedy}"
        )
    saved = parse_record(fingerprint_file, ANY_OBJECT, fix=f"{replaced_by} replaces the run in it" if replaced_by
                         else "give another --output_dir")  # fmt: skip
    differences = fingerprint_differences(saved, fingerprint)
    if differences and replace_unstarted and not holds_work(folder):
        logger.warning("--output_dir %s held a run that stopped before its first checkpoint (%s); this run replaces "
                       "it.", folder, "; ".join(differences[:6]))  # fmt: skip
        return False
    if differences:
        raise CheckpointError(
            f"--output_dir {folder} holds another run ({len(differences)} difference(s): "
            + "; ".join(differences[:6])
            + f"). {remedy}"
        )
    announce_version_changes(saved, fingerprint, folder)
    return True


def refuse_foreign(folder: Path) -> None:
    """Refuse a non-empty folder that no run of the package wrote (no fingerprint or manifest of its own),
    e.g. a user's folder behind a symlink: the package never removes or writes over files it did not write,
    ``--overwrite_output_dir`` included. Called before the lock file is written into the folder."""
    folder = folder.resolve()
    contents = sorted(path.name for path in folder.iterdir() if path.name != LOCK_FILE) if folder.is_dir() else []
    if contents and not {FINGERPRINT_FILE, MANIFEST_FILE, STAGING_FOLDER} & set(contents):
        raise CheckpointError(
            f"--output_dir {folder} is not empty and no hf-variants run wrote it (no {FINGERPRINT_FILE}; it holds "
            f"{', '.join(contents[:4])}{', ...' if len(contents) > 4 else ''}). hf-variants never removes or writes "
            "over files it did not write, --overwrite_output_dir included: give another --output_dir."
        )


def holds_work(folder: Path) -> bool:
    """Whether a run folder holds anything of its run's work: a manifest (the run finished) or a checkpoint
    folder (complete, being written or partial). A run that stopped before its first checkpoint (a refused
    setting met at step 2, a kill) holds none: its fingerprint alone never refuses the corrected command."""
    if (folder / MANIFEST_FILE).exists():
        return True
    return any(checkpoint_step(path) is not None or PARTIAL_CHECKPOINT_PATTERN.match(path.name)
               for path in folder.iterdir()) if folder.is_dir() else False  # fmt: skip


def claim_output_dir(folder: Path, fingerprint: dict[str, Any], overwrite: bool) -> None:
    """Make ``folder`` this run's when it starts training (not before: a run refused or failed while it
    was being set up leaves no fingerprint that would refuse the corrected command): with ``overwrite``, or
    in place of a run that stopped before its first checkpoint (:func:`holds_work`), the previous run's files
    are removed (:func:`remove_previous_run`); then the fingerprint is written, unless the folder already
    holds this run."""
    folder = folder.resolve()
    fingerprint_file = folder / FINGERPRINT_FILE
    replaced = overwrite
    if fingerprint_file.is_file() and not overwrite:
        if not fingerprint_differences(parse_record(fingerprint_file, ANY_OBJECT), fingerprint):
            return  # this run
        if holds_work(folder):  # check_output_dir refused it already; never replaced without the flag
            raise CheckpointError(f"--output_dir {folder} holds another run; give another --output_dir.")
        replaced = True
    contents = [path for path in folder.iterdir() if path.name != LOCK_FILE] if folder.is_dir() else []
    if contents and replaced:
        removed = remove_previous_run(folder)
        kept = len([path for path in folder.iterdir() if path.name != LOCK_FILE])
        logger.warning("Removed the previous run's %d entries from %s (kept %d others).", len(removed), folder, kept)
    make_folder(folder, within=folder)
    write_json(fingerprint_file, fingerprint, within=folder)


def prepare_output_dir(folder: Path, fingerprint: dict[str, Any], overwrite: bool,
                       replaced_by: str | None = "--overwrite_output_dir") -> bool:
    """:func:`check_output_dir` and, for a new run, :func:`claim_output_dir` at once (for callers that
    write nothing before their run starts, e.g. the lab's report folders)."""
    resume = check_output_dir(folder, fingerprint, overwrite, replaced_by)
    if not resume:
        claim_output_dir(folder, fingerprint, overwrite)
    return resume


def written_by_the_package(path: Path, pending: str | None) -> bool:
    """Whether the entry ``path`` of a run folder is one the package wrote and may remove: a checkpoint
    it marked complete (or the one it was writing, ``pending``), a partial checkpoint folder of
    :func:`write_checkpoint`, or a temporary file of an atomic write. Symlinks never are."""
    if path.is_symlink():
        return False
    if path.is_dir():
        marked = checkpoint_step(path) is not None and ((path / COMPLETE_MARKER).is_file() or path.name == pending)
        return marked or PARTIAL_CHECKPOINT_PATTERN.match(path.name) is not None
    return is_temporary(path.name)


def pending_checkpoint(folder: Path) -> str | None:
    """The name of the Trainer checkpoint that was being written when the run stopped, if any."""
    if not (folder / PENDING_FILE).is_file():
        return None
    try:
        return parse_record(folder / PENDING_FILE, PENDING_SCHEMA)["checkpoint"]
    except CheckpointError:
        return None


def previous_run_entries(folder: Path) -> list[Path]:
    """What a previous run of the package left in ``folder`` (resolved) and ``--overwrite_output_dir``
    removes: the checkpoints it wrote (complete, being written or partial), the files its manifest lists
    (each checked to lie inside the folder; one that escapes is an error naming it), its fingerprint and
    manifest. Nothing else, whatever its name: a user's own ``checkpoint-7/`` without the package's
    marker is not among them. A damaged manifest is listed alone (the files it listed can no longer be
    told from the user's, and are kept)."""
    folder = folder.resolve()
    pending = pending_checkpoint(folder)
    entries = [path for path in sorted(folder.iterdir()) if written_by_the_package(path, pending)]
    entries += manifest_entries(folder)
    bookkeeping = (FINGERPRINT_FILE, PENDING_FILE, MANIFEST_FILE)
    return [*entries, *(folder / name for name in bookkeeping if (folder / name).is_file())]


def remove_previous_run(folder: Path) -> list[str]:
    """Remove :func:`previous_run_entries` (all checked before the first is removed); returns their names."""
    return remove_entries(folder, previous_run_entries(folder))


def remove_entries(folder: Path, entries: list[Path]) -> list[str]:
    """Remove ``entries`` of ``folder`` (files or folders, already checked to be the package's and inside it);
    returns their names relative to the folder."""
    for path in entries:
        remove_path(path, within=folder)
    return [path.relative_to(folder.resolve()).as_posix() for path in entries]


def check_inputs_kept(folder: Path, inputs: Mapping[str, str | Path | None]) -> None:
    """With ``--overwrite_output_dir``: refuse a run that reads an input (``{flag: path}``) that the overwrite
    would remove — continuing in place, ``--model_name_or_path R --output_dir R``, would delete the weights it
    starts from. Inputs that are not local paths (Hub names) are skipped."""
    folder = folder.resolve()
    if not folder.is_dir():
        return
    removed = previous_run_entries(folder)
    for flag, value in inputs.items():
        if value is None or not Path(value).exists():
            continue
        path = Path(value).resolve()
        if any(path == entry or entry in path.parents or path in entry.parents for entry in removed):
            raise CheckpointError(
                f"{flag} {value} lies in --output_dir {folder}, whose previous run --overwrite_output_dir removes "
                "before training: the run would delete its own input. Give another --output_dir (or copy the input "
                "elsewhere first)."
            )


# ------------------------------------------------------------------------------------------------
# Manifests of final folders
# ------------------------------------------------------------------------------------------------
def file_states(folder: Path) -> dict[str, tuple[int, int]]:
    """``{relative path: (size, mtime_ns)}`` of the regular files below ``folder`` (links and what lies behind
    them never count), without checkpoints and the package's bookkeeping (lock, manifest, pending note,
    temporary files, an export being staged): compared before and after a write, it tells which files the
    write produced."""
    if not folder.is_dir():
        return {}
    states = {}
    for path in regular_files(folder):
        relative = path.relative_to(folder)
        top = relative.parts[0]
        if checkpoint_step(Path(top)) is not None or top.startswith(".checkpoint-") or STAGING_FOLDER in relative.parts:
            continue
        if relative.name in (LOCK_FILE, MANIFEST_FILE, PENDING_FILE) or is_temporary(relative.name):
            continue
        stat = path.lstat()
        states[relative.as_posix()] = (stat.st_size, stat.st_mtime_ns)
    return states


def write_manifest(folder: Path, before: dict[str, tuple[int, int]], command: str) -> dict[str, Any]:
    """Record the files of ``folder`` written since ``before`` (:func:`file_states`) by ``hf-variants
    COMMAND``, with their sizes and SHA-256, in :data:`MANIFEST_FILE`; files recorded by an earlier
    manifest of the same folder that are still unchanged stay recorded (a resumed run rewrites only some)."""
    previous = parse_record(folder / MANIFEST_FILE, MANIFEST_SCHEMA)["files"] if (folder / MANIFEST_FILE).is_file() \
        else {}
    now = file_states(folder)
    names = sorted(name for name, state in now.items() if before.get(name) != state or name in previous)
    written_by = f"hf-variants {library_versions()['hf-variants']} {command}"
    manifest = {"written_by": written_by, "files": record_files(folder, names)}
    write_json(folder / MANIFEST_FILE, manifest, within=folder)
    return manifest


def verify_manifest(folder: Path) -> dict[str, Any] | None:
    """Check every file the folder's manifest lists (present, inside the folder, same size, same SHA-256);
    ``None`` for a folder without a manifest that no run of the package wrote (e.g. a Hub model). A run
    folder of the package without its manifest (deleted, or the run never finished) is an error: its files
    could not be checked."""
    folder = Path(folder)
    path = folder / MANIFEST_FILE
    if not path.is_file():
        if (folder / FINGERPRINT_FILE).is_file():
            raise CheckpointError(
                f"{folder} holds an hf-variants run ({FINGERPRINT_FILE}) but no {MANIFEST_FILE}: the run did not "
                "finish or the manifest was removed, so its files cannot be checked. Run the command that wrote it "
                "again."
            )
        return None
    manifest = parse_record(path, MANIFEST_SCHEMA,
                            fix=f"run the command that wrote {folder} again with --overwrite_output_dir")  # fmt: skip
    check_recorded_files(folder, manifest["files"], path)
    return manifest


def record_files(folder: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{name: {"size", "sha256"}}`` of files below ``folder`` (what a manifest or a marker lists)."""
    return {name: {"size": (folder / name).stat().st_size, "sha256": file_sha256(folder / name)} for name in names}


def check_recorded_files(folder: Path, files: dict[str, dict[str, Any]], listing: Path) -> None:
    """Every file ``listing`` recorded (:func:`record_files`) is inside ``folder`` and present, with its size
    and SHA-256, a regular file and not a link; otherwise a ``CheckpointError`` naming the file and what is wrong
    with it."""
    for name, expected in files.items():
        path = inside(folder, name, f"{listing.name} entry")
        if is_link(target_inside(folder, name, f"{listing.name} entry")):
            raise CheckpointError(f"{folder / name} is a symbolic link (listed in {listing}): hf-variants lists and "
                                  "reads regular files only, never what a link points to.")  # fmt: skip
        if not path.exists():
            raise CheckpointError(f"{folder / name} is missing (listed in {listing}).")
        if not is_regular_file(path):
            raise CheckpointError(f"{folder / name} is not a regular file (listed in {listing}).")
        if path.stat().st_size != expected["size"]:
            raise CheckpointError(
                f"{folder / name} has {path.stat().st_size} bytes, {expected['size']} were written: the file was "
                "truncated or replaced."
            )
        if file_sha256(path) != expected["sha256"]:
            raise CheckpointError(
                f"{folder / name} does not match the SHA-256 recorded when it was written: it was altered."
            )


def manifest_entries(folder: Path) -> list[Path]:
    """The files ``folder``'s manifest lists, each checked to lie inside the folder (one that escapes, itself or
    through a link, is an error naming it); a link listed there is named by its own path, so that removing it
    removes the link, never what it points to. A damaged or malformed manifest (:data:`MANIFEST_SCHEMA`) lists
    nothing, with a warning: the files it listed can no longer be told from the user's, and are kept."""
    folder = folder.resolve()
    if not (folder / MANIFEST_FILE).is_file():
        return []
    try:
        listed = parse_record(folder / MANIFEST_FILE, MANIFEST_SCHEMA)["files"]
    except CheckpointError as error:
        logger.warning("%s; it is removed alone (the files it listed are kept).", error)
        return []
    what = f"{MANIFEST_FILE} entry"
    return [target_inside(folder, name, what) for name in listed if inside(folder, name, what)]


# ------------------------------------------------------------------------------------------------
# Pretrained weights
