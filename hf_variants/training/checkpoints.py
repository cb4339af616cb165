"""Run folders and checkpoints that cannot go silently wrong.

* **One run per folder.** :class:`OutputDirLock` holds an exclusive ``flock`` on the output folder for
  the life of the process (the kernel releases it when the process dies, ``kill -9`` included); a
  second run is refused with the holder's PID. :func:`check_output_dir` refuses a non-empty folder that
  holds another run, unless ``--overwrite_output_dir``, and a folder no run of the package wrote, always;
  :func:`claim_output_dir` records the run's *fingerprint* (:mod:`.run_identity`: every argument but those
  without effect, data and weights by content, the tokenizer's whole definition, library versions) in
  ``run_fingerprint.json`` when training starts, after removing a replaced run's files: the checkpoints
  it marked, the files its manifest lists, and nothing else (a user's own files stay, whatever their
  names). Every path removed is checked to lie inside the resolved folder (:func:`.files.inside`).
* **A finished run is finished.** :func:`finished_run` returns the record of a run whose manifest is
  written and intact: the same command again changes nothing.
* **Final folders carry a manifest.** :func:`write_manifest` records every file a run or an export wrote
  (size and SHA-256) in ``hf_variants_manifest.json``; :func:`verify_manifest` checks them before the
  package loads a folder (:func:`load_pretrained`) and in ``hf-variants verify``.
* **Checkpoints and bookkeeping are atomic.** :func:`write_checkpoint` writes into
  ``.checkpoint-N.partial`` and renames it to ``checkpoint-N`` only after ``checkpoint_complete.json``
  (every file with its size and SHA-256) is written; :func:`latest_checkpoint` picks the newest complete
  one and names the ones it skipped; :func:`rotate_checkpoints` removes old ones only once a newer one is
  complete. Every JSON file is written by one rename (:func:`.files.write_json`).
* **No pickles.** Tensors are stored as safetensors, everything else as JSON; loading never calls
  ``pickle``/``torch.load``. A missing, truncated or altered file is an error naming it.

``HF_VARIANTS_FAILPOINT=<name>@<step>`` makes the process kill itself with SIGKILL at a named point
(:func:`failpoint`; ``<name>@<step>:SIGTERM`` sends that signal instead), which is how
``tests/test_faults.py`` interrupts runs at exact places.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from .files import (
    STAGING_FOLDER,
    CheckpointError,
    failpoint,
    fsync_directory,
    inside,
    is_link,
    is_regular_file,
    is_temporary,
    open_lock_file,
    regular_files,
    remove_path,
    rename_folder,
    target_inside,
    write_json,
)
from .record_schema import ANY_OBJECT, MANIFEST_SCHEMA, MARKER_SCHEMA, PENDING_SCHEMA, parse_record
from .record_schema import load_json as load_json  # the engines' and the lab's reader of JSON records
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
#: The folders :func:`write_checkpoint` writes before its one rename.
PARTIAL_CHECKPOINT_PATTERN = re.compile(r"^\.checkpoint-\d+\.(partial|stale)$")
#: Files of checkpoints written by other tools (or by v0.1.0 through ``accelerator.save_state``) that
#: would need unpickling: never loaded.
PICKLE_SUFFIXES = (".pkl", ".bin", ".pt", ".pth", ".pickle")


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
        folder.mkdir(parents=True, exist_ok=True)
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
            self.path.unlink()  # still locked: no other run can have taken the folder meanwhile
            with contextlib.suppress(OSError):  # another run's lock file appeared since: its folder now
                folder.rmdir()
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
    folder.mkdir(parents=True, exist_ok=True)
    write_json(fingerprint_file, fingerprint)


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
        remove_path(path, folder)
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
    write_json(folder / MANIFEST_FILE, manifest)
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
# ------------------------------------------------------------------------------------------------
def load_pretrained(load: Callable[..., Any], source: str, **kwargs: Any) -> Any:
    """``load(source, **kwargs)`` (a ``from_pretrained``) after checking a local folder's manifest
    (:func:`verify_manifest`), with a damaged weight file named: safetensors' own message (e.g.
    "invalid header length") does not say which file it read."""
    if Path(source).is_dir():
        verify_manifest(Path(source))
    try:
        return load(source, **kwargs)
    except SafetensorError as error:
        folder = Path(source)
        for path in sorted(folder.glob("*.safetensors")) if folder.is_dir() else []:
            try:
                with safe_open(str(path), "pt"):
                    pass
            except (SafetensorError, OSError) as damaged:
                raise CheckpointError(
                    f"{path} is not a readable safetensors file ({damaged}): the file is damaged or truncated."
                ) from None
        raise CheckpointError(f"{source}: a weight file is not readable ({error}).") from None


#: Task heads a fine-tuning run may start fresh (the pooler too: MLM pretraining does not train it).
TASK_HEADS = ("classifier.", "score.", "qa_outputs.", "pooler.")
#: Heads a checkpoint may hold that the loaded model does not use (its pretraining or an old task).
UNUSED_HEADS = (*TASK_HEADS, "lm_head.", "cls.")


def check_backbone_loaded(model: Any, loading: dict[str, Any], source: str,
                          new_heads: tuple[str, ...] = TASK_HEADS) -> None:  # fmt: skip
    """Every weight must come from the checkpoint except the heads in ``new_heads`` (fine-tuning: the new
    task head; pretraining: none — a bare-encoder folder or ``tie_word_embeddings=False`` would start a
    fresh MLM head). Missing, unexpected (a changed ``num_hidden_layers``) or resized weights are an error.
    ``loading`` is ``from_pretrained``'s loading info."""
    prefix = f"{model.base_model_prefix}."
    fresh = (*new_heads, *(prefix + head for head in new_heads))
    unused = (*UNUSED_HEADS, *(prefix + head for head in UNUSED_HEADS))

    def outside(names: Any, allowed: tuple[str, ...]) -> list[str]:
        names = [entry[0] if isinstance(entry, (tuple, list)) else entry for entry in names]
        return sorted(name for name in names if not name.startswith(allowed))

    problems = {
        "missing from the checkpoint": outside(loading.get("missing_keys", []), fresh),
        "in the checkpoint but not in this model": outside(loading.get("unexpected_keys", []), unused),
        "of another shape in the checkpoint": outside(loading.get("mismatched_keys", []), fresh),
    }
    problems = {what: names for what, names in problems.items() if names}
    if problems:
        described = "; ".join(f"{len(names)} {what} (e.g. {', '.join(names[:3])})" for what, names in problems.items())
        raise ValueError(
            f"{source} does not hold every weight of this model: {described}. Those weights would be freshly "
            "initialised and training would start from random weights. Check --config_overrides (num_hidden_layers, "
            "tie_word_embeddings, ...) and the checkpoint (pretraining continues from a masked-LM checkpoint, not a "
            "bare encoder). To start from fresh weights on purpose: run_glue --random_init, or run_mlm --model_type / "
            "--config_name."
        )


#: Config fields of any model that change how it trains, what its forward returns or which task head
#: it carries, not the function of the checkpoint's weights (any ``*dropout*`` field too). An
#: hf-variants config adds its own and its ideas' (``EncoderConfig.training_only_fields``).
TRAINING_ONLY_CONFIG_FIELDS = frozenset({
    "output_attentions", "output_hidden_states", "use_cache", "return_dict", "dtype", "torch_dtype",
    "num_labels", "id2label", "label2id", "problem_type", "finetuning_task", "architectures", "initializer_range",
    "transformers_version", "_name_or_path", "tokenizer_vocabulary_sha256",
})  # fmt: skip
FUNCTION_CHANGE_FLAG = "--allow_function_changes"


def function_changes(saved: Any, config: Any) -> list[str]:
    """``field: saved → new`` for every config field whose change alters what a checkpoint's weights
    compute (identity by exclusion: every field but the training-only ones)."""
    allowed = TRAINING_ONLY_CONFIG_FIELDS | getattr(config, "training_only_fields", frozenset)()
    before, after = saved.to_dict(), config.to_dict()
    names = sorted(set(before) | set(after))
    return [
        f"{name}: {before.get(name)!r} → {after.get(name)!r}"
        for name in names
        if name not in allowed and "dropout" not in name and before.get(name) != after.get(name)
    ]


def check_function_kept(saved: Any, config: Any, source: str, allowed: bool) -> None:
    """Refuse config changes that make a pretrained checkpoint compute another function (an MGK
    checkpoint fine-tuned as MLK, ``hidden_act=relu`` on GELU weights) unless ``allowed``
    (:data:`FUNCTION_CHANGE_FLAG`); then they are announced."""
    changes = function_changes(saved, config)
    if not changes:
        return
    described = "; ".join(changes[:6])
    if not allowed:
        raise ValueError(
            f"--config_overrides/--config_name change what {source}'s weights compute ({described}): they were "
            f"trained for the checkpoint's values. Pass {FUNCTION_CHANGE_FLAG} to train them under the new values "
            "on purpose, or start from fresh weights (run_glue --random_init, run_mlm --model_type)."
        )
    logger.warning("%s: %s changes what the pretrained weights compute (%s).", source, FUNCTION_CHANGE_FLAG, described)


# ------------------------------------------------------------------------------------------------
# Checkpoint folders
# ------------------------------------------------------------------------------------------------
def checkpoint_step(path: Path) -> int | None:
    match = CHECKPOINT_PATTERN.match(path.name)
    return int(match.group(1)) if match else None


def latest_checkpoint(folder: Path) -> tuple[Path | None, list[Path]]:
    """The newest ``checkpoint-N`` with a valid completeness marker, and the newer ones skipped. A checkpoint
    name that is a symbolic link is never resumed from (the package writes checkpoints, not links)."""
    links = sorted(path.name for path in folder.iterdir() if is_link(path) and checkpoint_step(path) is not None) \
        if folder.is_dir() else []  # fmt: skip
    if links:
        logger.warning("Not resuming from %s in %s: a symbolic link is never resumed from.", ", ".join(links), folder)
    candidates = sorted(
        (path for path in folder.iterdir()
         if path.is_dir() and not is_link(path) and checkpoint_step(path) is not None),
        key=checkpoint_step,
        reverse=True,
    ) if folder.is_dir() else []  # fmt: skip
    pending = pending_checkpoint(folder) if folder.is_dir() else None
    skipped = []
    for path in candidates:
        try:
            if path.name == pending and not (path / COMPLETE_MARKER).is_file():
                raise CheckpointError("the run stopped while it was being written")
            verify_checkpoint(path)
        except CheckpointError as error:
            logger.warning("Not resuming from %s: it is incomplete or damaged (%s).", path, error)
            skipped.append(path)
            continue
        return path, skipped
    return None, skipped


def rotate_checkpoints(folder: Path, limit: int | None, keep: str | Path | None = None) -> list[str]:
    """Remove the oldest complete checkpoints the package wrote in ``folder`` beyond the newest ``limit``
    (``save_total_limit``), keeping ``keep`` (the best model's) too; called only after the newest one is
    marked complete, so that a kill at any instant leaves at least one complete checkpoint. Checkpoints
    without the package's marker (another tool's, or one left half-written) are not counted or removed."""
    if not limit or limit <= 0 or not folder.is_dir():
        return []
    complete = sorted(
        (path for path in folder.iterdir() if written_by_the_package(path, None) and checkpoint_step(path) is not None),
        key=checkpoint_step,
    )  # fmt: skip
    kept = set(complete[-limit:])
    if keep is not None:
        kept.add(Path(folder) / Path(keep).name)
    removed = [path for path in complete if path not in kept]
    for path in removed:
        remove_path(path, folder)
    return [path.name for path in removed]


def finished_run(folder: Path, record: str = "results.json") -> dict[str, Any] | None:
    """The record of a finished run in ``folder`` (its manifest written, every file it lists intact), or
    ``None`` when the run has not finished. A finished run whose files were altered is an error naming the
    file: re-running it would not give back what was recorded."""
    if not (folder / MANIFEST_FILE).is_file():
        return None
    manifest = verify_manifest(folder)
    if record not in manifest["files"]:
        return None
    return parse_record(folder / record, ANY_OBJECT)


def checkpoint_to_resume(asked: str | None, folder: Path, fingerprint: dict[str, Any]) -> Path | None:
    """The checkpoint a run continues from: ``asked`` when it is a path, else — ``"latest"`` or nothing — the
    newest complete checkpoint in ``folder`` (announced at WARNING); ``None`` to start afresh. Either way it must
    be complete and belong to this run (:func:`check_checkpoint_owner`)."""
    if asked and asked != "latest":
        path = Path(asked)
        verify_checkpoint(path)
        check_checkpoint_owner(path, fingerprint)
        return path
    latest, skipped = latest_checkpoint(folder)
    if latest is not None:
        check_checkpoint_owner(latest, fingerprint)
        logger.warning("Resuming this run from %s (its newest complete checkpoint).", latest)
    elif skipped:
        logger.warning("%s has no complete checkpoint (%s skipped, see above): this run starts from step 0.", folder,
                       ", ".join(path.name for path in skipped))  # fmt: skip
    elif asked == "latest":
        logger.warning("--resume_from_checkpoint latest: %s has no complete checkpoint; starting afresh.", folder)
    return latest


def check_checkpoint_owner(path: Path, fingerprint: dict[str, Any]) -> None:
    """Refuse a checkpoint whose own recorded fingerprint is another run's (copied in from elsewhere, or left by
    a run this folder no longer holds): resuming from it would continue someone else's training."""
    recorded = path / FINGERPRINT_FILE
    if not recorded.is_file():
        raise CheckpointError(f"{path} records no {FINGERPRINT_FILE}: it cannot be told to belong to this run, so it "
                              "is not resumed from. Remove it, or give another --output_dir.")  # fmt: skip
    saved = parse_record(recorded, ANY_OBJECT)
    differences = fingerprint_differences(saved, fingerprint)
    if differences:
        raise CheckpointError(f"{path} belongs to another run ({'; '.join(differences[:6])}): it is not resumed from. "
                              "Remove it, or give another --output_dir.")  # fmt: skip
    announce_version_changes(saved, fingerprint, path)


def write_checkpoint(final: Path, write_files: Callable[[Path], None], step: int) -> None:
    """Write a checkpoint atomically: ``write_files(partial_folder)``, then the completeness marker,
    then one rename. A crash at any point leaves either the old state or the complete checkpoint."""
    partial = final.with_name(f".{final.name}.partial")
    remove_path(partial, final.parent)
    partial.mkdir(parents=True)
    write_files(partial)
    failpoint("checkpoint_files_written", step)
    mark_complete(partial)
    if final.exists() or is_link(final):  # the same step written again (a resumed run): replace it whole
        stale = final.with_name(f".{final.name}.stale")
        remove_path(stale, final.parent)
        rename_folder(final, stale)
        rename_folder(partial, final)
        remove_path(stale, final.parent)
    else:
        rename_folder(partial, final)
    fsync_directory(final.parent)


def mark_complete(folder: Path) -> None:
    """Write the completeness marker of a fully written checkpoint folder (every file's size and
    SHA-256) and flush the folder to disk."""
    files = [p.relative_to(folder).as_posix() for p in regular_files(folder) if p.name != COMPLETE_MARKER]
    write_json(folder / COMPLETE_MARKER, {"files": record_files(folder, files)})
    _fsync_tree(folder)


def verify_checkpoint(folder: Path) -> dict[str, Any]:
    """Check the completeness marker and every file it lists (size and SHA-256); returns the marker."""
    marker_path = folder / COMPLETE_MARKER
    if not marker_path.is_file():
        pickled = sorted(p.name for p in folder.glob("*") if p.suffix in PICKLE_SUFFIXES)
        if pickled:
            raise CheckpointError(
                f"{folder} holds pickled state ({', '.join(pickled)}) and no {COMPLETE_MARKER}: it was written by "
                "an older version or another tool and is not loaded (unpickling can run code)."
            )
        raise CheckpointError(f"{folder} has no {COMPLETE_MARKER}: the checkpoint was not completely written.")
    marker = parse_record(marker_path, MARKER_SCHEMA)
    written = set(marker["files"]) | {COMPLETE_MARKER}
    present = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or is_link(p))
    unexpected = [name for name in present if name not in written]
    if unexpected:
        raise CheckpointError(
            f"{folder / unexpected[0]} was not written with this checkpoint (not in {COMPLETE_MARKER}); a checkpoint "
            "is loaded only as it was written."
        )
    check_recorded_files(folder, marker["files"], marker_path)
    return marker


def _fsync_tree(folder: Path) -> None:
    for path in regular_files(folder):
        with path.open("rb") as handle:
            os.fsync(handle.fileno())
    fsync_directory(folder)


# ------------------------------------------------------------------------------------------------
# Files: JSON and safetensors only
# ------------------------------------------------------------------------------------------------
def save_tensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """safetensors needs distinct, contiguous storages (tied weights share one): clone each tensor."""
    save_file({name: tensor.detach().clone().contiguous().cpu() for name, tensor in tensors.items()}, str(path))


def load_tensors(path: Path) -> dict[str, torch.Tensor]:
    if not path.is_file():
        raise CheckpointError(f"{path} is missing.")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as error:
        raise CheckpointError(f"{path} is not a readable safetensors file ({error}): the file is damaged.") from None


def optimizer_state_to_files(state_dict: dict[str, Any]) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """An optimizer ``state_dict`` as (safetensors tensors, JSON metadata)."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, values in state_dict["state"].items():
        for key, value in values.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state.{index}.{key}"] = value
            else:
                scalars.setdefault(str(index), {})[key] = value
    return tensors, {"param_groups": state_dict["param_groups"], "scalars": scalars}


def optimizer_state_from_files(tensors: dict[str, torch.Tensor], metadata: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for name, tensor in tensors.items():
        _, index, key = name.split(".", 2)
        state.setdefault(int(index), {})[key] = tensor
    for index, values in metadata["scalars"].items():
        state.setdefault(int(index), {}).update(values)
    return {"state": state, "param_groups": metadata["param_groups"]}


def rng_state_to_files(
    torch_states: list[torch.Tensor], cuda_states: list[torch.Tensor] | None
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The random states of a run as (tensors, JSON): torch's CPU generator of every process (rank
    order), each process's CUDA generator when on GPUs, and this process's Python and NumPy states."""
    import random

    import numpy as np

    tensors = {f"torch_cpu_rank{rank}": state for rank, state in enumerate(torch_states)}
    for rank, state in enumerate(cuda_states or []):
        tensors[f"torch_cuda_rank{rank}"] = state
    kind, keys, position, has_gauss, cached = np.random.get_state()
    tensors["numpy_keys"] = torch.from_numpy(np.asarray(keys, dtype=np.int64))
    python_version, python_state, python_gauss = random.getstate()
    metadata = {
        "processes": len(torch_states),
        "cuda": cuda_states is not None,
        "python": [python_version, list(python_state), python_gauss],
        "numpy": [kind, int(position), int(has_gauss), float(cached)],
    }
    return tensors, metadata


def restore_rng_state(
    tensors: dict[str, torch.Tensor], metadata: dict[str, Any], source: Path, rank: int, processes: int
) -> None:
    """Restore the states saved by :func:`rng_state_to_files` for process ``rank``; a state that is not
    there (another number of processes, CPU vs GPU) is an error: resuming would not be exact."""
    import random

    import numpy as np

    if metadata.get("processes") != processes:
        raise CheckpointError(
            f"{source} holds the random states of {metadata.get('processes')} process(es); this run has {processes}. "
            "Resume with the same number of processes."
        )
    needed = [f"torch_cpu_rank{rank}", "numpy_keys"] + ([f"torch_cuda_rank{rank}"] if metadata.get("cuda") else [])
    missing = [name for name in needed if name not in tensors]
    if missing or "python" not in metadata or "numpy" not in metadata:
        what = missing or "python/numpy"
        raise CheckpointError(f"{source} lacks the random state {what}: resuming would not be exact.")
    if metadata.get("cuda") != torch.cuda.is_available():
        where = "on" if metadata.get("cuda") else "without"
        raise CheckpointError(f"{source} was written {where} CUDA; this run is not.")
    torch.set_rng_state(tensors[f"torch_cpu_rank{rank}"])
    if metadata.get("cuda"):
        torch.cuda.set_rng_state(tensors[f"torch_cuda_rank{rank}"])
    version, state, gauss = metadata["python"]
    random.setstate((version, tuple(state), gauss))
    kind, position, has_gauss, cached = metadata["numpy"]
    np.random.set_state((kind, tensors["numpy_keys"].numpy().astype(np.uint32), position, has_gauss, cached))


def recorded_arguments(
    results: Mapping[str, Any], record: Path, parse: Callable[[list[str]], dict[str, Any]], engine: str
) -> dict[str, Any]:
    """The settings an engine's ``results.json`` (``record``) says its run was made with: its ``arguments``,
    or, in a record written before they were recorded, its ``command`` read by ``parse`` (the engine's own
    command-line parser). A record with neither, or a command the parser refuses, is an error naming it."""
    if results.get("arguments") is not None:
        return results["arguments"]
    if not isinstance(results.get("command"), str):
        raise CheckpointError(f"{record} records neither the run's arguments nor its command.")
    try:
        return parse(shlex.split(results["command"])[1:])
    except SystemExit:  # argparse has printed why
        raise CheckpointError(f"{record}: {engine} cannot read its command (see above).") from None
