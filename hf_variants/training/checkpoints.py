"""Run folders and checkpoints that cannot go silently wrong.

* **One run per folder.** :class:`OutputDirLock` holds an exclusive ``flock`` on the output folder for
  the life of the process (the kernel releases it when the process dies, ``kill -9`` included); a
  second run is refused with the holder's PID. :func:`prepare_output_dir` records the run's
  *fingerprint* (:mod:`.run_identity`: every argument but those without effect, data and weights by
  content, the tokenizer's whole definition, library versions) in ``run_fingerprint.json`` and refuses a
  non-empty folder that holds another run, unless
  ``--overwrite_output_dir`` (which removes the old run's checkpoints and the files its manifest lists,
  and nothing else: a user's own files in the folder stay).
* **Final folders carry a manifest.** :func:`write_manifest` records every file a run or an export wrote
  (size and SHA-256) in ``hf_variants_manifest.json``; :func:`verify_manifest` checks them before the
  package loads a folder (:func:`load_pretrained`) and in ``hf-variants verify``.
* **Checkpoints are atomic.** :func:`write_checkpoint` writes into ``.checkpoint-N.partial`` and
  renames it to ``checkpoint-N`` only after ``checkpoint_complete.json`` (every file with its size and
  SHA-256) is written; :func:`latest_checkpoint` picks the newest complete one and names the ones it
  skipped.
* **No pickles.** Tensors are stored as safetensors, everything else as JSON; loading never calls
  ``pickle``/``torch.load``. A missing, truncated or altered file is an error naming it.

``HF_VARIANTS_FAILPOINT=<name>@<step>`` makes the process kill itself with SIGKILL at a named point
(:func:`failpoint`), which is how ``tests/test_faults.py`` interrupts runs at exact places.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import signal
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

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
CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
#: Files of checkpoints written by other tools (or by v0.1.0 through ``accelerator.save_state``) that
#: would need unpickling: never loaded.
PICKLE_SUFFIXES = (".pkl", ".bin", ".pt", ".pth", ".pickle")
FAILPOINT_ENV = "HF_VARIANTS_FAILPOINT"


class CheckpointError(ValueError):
    """A checkpoint or run folder cannot be used as it is; the message names the file and why."""


# ------------------------------------------------------------------------------------------------
# Fault injection
# ------------------------------------------------------------------------------------------------
def failpoint(name: str, step: int) -> None:
    """SIGKILL this process when ``$HF_VARIANTS_FAILPOINT`` is ``name@step`` (tests only)."""
    if os.environ.get(FAILPOINT_ENV) == f"{name}@{step}":
        os.kill(os.getpid(), signal.SIGKILL)


# ------------------------------------------------------------------------------------------------
# The output folder: lock, fingerprint, non-empty rule
# ------------------------------------------------------------------------------------------------
class OutputDirLock:
    """An exclusive lock on ``folder`` held until :meth:`release` or the end of the process."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / LOCK_FILE
        self.handle = self.path.open("a+")
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
        if not self.handle.closed:
            if fcntl is not None:
                fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()


def prepare_output_dir(folder: Path, fingerprint: dict[str, Any], overwrite: bool) -> bool:
    """Apply the one-run-per-folder rule; returns whether the folder holds *this* run (to resume).

    * empty or new folder: the fingerprint is written, nothing to resume;
    * the same run (equal fingerprint): resume from its newest complete checkpoint;
    * anything else: ``CheckpointError`` listing what differs, unless ``overwrite`` — then the folder
      is emptied (all old checkpoints and outputs removed) and the run starts afresh.
    """
    contents = [path for path in folder.iterdir() if path.name != LOCK_FILE] if folder.is_dir() else []
    fingerprint_file = folder / FINGERPRINT_FILE
    if contents and not overwrite:
        if not fingerprint_file.is_file():
            raise CheckpointError(
                f"--output_dir {folder} is not empty and has no {FINGERPRINT_FILE}: it was not written by this "
                "run. Give another --output_dir, or --overwrite_output_dir to delete its contents."
            )
        saved = load_json(fingerprint_file)
        differences = fingerprint_differences(saved, fingerprint)
        if differences:
            raise CheckpointError(
                f"--output_dir {folder} holds another run ({len(differences)} difference(s): "
                + "; ".join(differences[:6])
                + "). Give another --output_dir, or --overwrite_output_dir to replace it."
            )
        announce_version_changes(saved, fingerprint, folder)
        return True
    if contents and overwrite:
        removed = remove_previous_run(folder)
        kept = len([path for path in folder.iterdir() if path.name != LOCK_FILE])
        logger.warning("--overwrite_output_dir: removed the previous run's %d entries from %s (kept %d others)",
                       len(removed), folder, kept)  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    write_json(fingerprint_file, fingerprint)
    return False


def remove_previous_run(folder: Path) -> list[str]:
    """Remove what a previous run left in ``folder``: its checkpoints (complete or partial), its
    fingerprint and the files its manifest lists. Files the package did not write are kept."""
    removed = []
    for path in sorted(folder.iterdir()):
        if checkpoint_step(path) is not None or path.name.startswith(".checkpoint-"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
            removed.append(path.name)
    removed += remove_recorded_files(folder)
    if (folder / FINGERPRINT_FILE).is_file():
        (folder / FINGERPRINT_FILE).unlink()
        removed.append(FINGERPRINT_FILE)
    return removed


# ------------------------------------------------------------------------------------------------
# Manifests of final folders
# ------------------------------------------------------------------------------------------------
def file_states(folder: Path) -> dict[str, tuple[int, int]]:
    """``{relative path: (size, mtime_ns)}`` of the files below ``folder``, without checkpoints, the lock
    and the manifest: compared before and after a write, it tells which files the write produced."""
    if not folder.is_dir():
        return {}
    states = {}
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        top = relative.parts[0]
        if checkpoint_step(Path(top)) is not None or top.startswith(".checkpoint-") or not path.is_file():
            continue
        if relative.name in (LOCK_FILE, MANIFEST_FILE):
            continue
        stat = path.stat()
        states[relative.as_posix()] = (stat.st_size, stat.st_mtime_ns)
    return states


def write_manifest(folder: Path, before: dict[str, tuple[int, int]], command: str) -> dict[str, Any]:
    """Record the files of ``folder`` written since ``before`` (:func:`file_states`) by ``hf-variants
    COMMAND``, with their sizes and SHA-256, in :data:`MANIFEST_FILE`; files recorded by an earlier
    manifest of the same folder that are still unchanged stay recorded (a resumed run rewrites only some)."""
    previous = load_json(folder / MANIFEST_FILE)["files"] if (folder / MANIFEST_FILE).is_file() else {}
    now = file_states(folder)
    names = sorted(name for name, state in now.items() if before.get(name) != state or name in previous)
    written_by = f"hf-variants {library_versions()['hf-variants']} {command}"
    manifest = {"written_by": written_by, "files": record_files(folder, names)}
    write_json(folder / MANIFEST_FILE, manifest)
    return manifest


def verify_manifest(folder: Path) -> dict[str, Any] | None:
    """Check every file the folder's manifest lists (present, same size, same SHA-256); ``None`` for a
    folder without a manifest (not written by this package, e.g. a Hub model)."""
    path = Path(folder) / MANIFEST_FILE
    if not path.is_file():
        return None
    manifest = load_json(path)
    check_recorded_files(Path(folder), manifest.get("files", {}), path)
    return manifest


def record_files(folder: Path, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``{name: {"size", "sha256"}}`` of files below ``folder`` (what a manifest or a marker lists)."""
    return {name: {"size": (folder / name).stat().st_size, "sha256": file_sha256(folder / name)} for name in names}


def check_recorded_files(folder: Path, files: dict[str, dict[str, Any]], listing: Path) -> None:
    """Every file ``listing`` recorded (:func:`record_files`) is present, with its size and SHA-256;
    otherwise a ``CheckpointError`` naming the file and what is wrong with it."""
    for name, expected in files.items():
        path = folder / name
        if not path.is_file():
            raise CheckpointError(f"{path} is missing (listed in {listing}).")
        if path.stat().st_size != expected["size"]:
            raise CheckpointError(
                f"{path} has {path.stat().st_size} bytes, {expected['size']} were written: the file was truncated "
                "or replaced."
            )
        if file_sha256(path) != expected["sha256"]:
            raise CheckpointError(f"{path} does not match the SHA-256 recorded when it was written: it was altered.")


def remove_recorded_files(folder: Path) -> list[str]:
    """Remove the files the folder's manifest lists, and the manifest (before a new write into the folder)."""
    path = folder / MANIFEST_FILE
    if not path.is_file():
        return []
    names = [name for name in load_json(path).get("files", {}) if (folder / name).is_file()]
    for name in names:
        (folder / name).unlink()
    path.unlink()
    return [*names, MANIFEST_FILE]


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
    """The newest ``checkpoint-N`` with a valid completeness marker, and the newer ones skipped."""
    candidates = sorted(
        (path for path in folder.iterdir() if path.is_dir() and checkpoint_step(path) is not None),
        key=checkpoint_step,
        reverse=True,
    ) if folder.is_dir() else []  # fmt: skip
    skipped = []
    for path in candidates:
        try:
            verify_checkpoint(path)
        except CheckpointError as error:
            logger.warning("Not resuming from %s: it is incomplete or damaged (%s).", path, error)
            skipped.append(path)
            continue
        return path, skipped
    return None, skipped


def checkpoint_to_resume(asked: str | None, folder: Path, fingerprint: dict[str, Any]) -> Path | None:
    """The checkpoint a run continues from: ``asked`` when it is a path (it must be complete and
    belong to this run), else — ``"latest"`` or nothing — the newest complete checkpoint in ``folder``
    (announced at WARNING); ``None`` to start afresh."""
    if asked and asked != "latest":
        path = Path(asked)
        verify_checkpoint(path)
        saved = load_json(path / FINGERPRINT_FILE)
        differences = fingerprint_differences(saved, fingerprint)
        if differences:
            raise CheckpointError(f"{path} belongs to another run: " + "; ".join(differences[:6]))
        announce_version_changes(saved, fingerprint, path)
        return path
    latest, _ = latest_checkpoint(folder)
    if latest is not None:
        logger.warning("Resuming this run from %s (its newest complete checkpoint).", latest)
    elif asked == "latest":
        logger.warning("--resume_from_checkpoint latest: %s has no complete checkpoint; starting afresh.", folder)
    return latest


def write_checkpoint(final: Path, write_files: Callable[[Path], None], step: int) -> None:
    """Write a checkpoint atomically: ``write_files(partial_folder)``, then the completeness marker,
    then one rename. A crash at any point leaves either the old state or the complete checkpoint."""
    partial = final.with_name(f".{final.name}.partial")
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir(parents=True)
    write_files(partial)
    failpoint("checkpoint_files_written", step)
    mark_complete(partial)
    if final.exists():  # the same step written again (a resumed run): replace it whole
        stale = final.with_name(f".{final.name}.stale")
        if stale.exists():
            shutil.rmtree(stale)
        os.replace(final, stale)
        os.replace(partial, final)
        shutil.rmtree(stale)
    else:
        os.replace(partial, final)
    _fsync_directory(final.parent)


def mark_complete(folder: Path) -> None:
    """Write the completeness marker of a fully written checkpoint folder (every file's size and
    SHA-256) and flush the folder to disk."""
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != COMPLETE_MARKER)
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
    marker = load_json(marker_path)
    written = set(marker.get("files", {})) | {COMPLETE_MARKER}
    unexpected = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    unexpected = [name for name in unexpected if name not in written]
    if unexpected:
        raise CheckpointError(
            f"{folder / unexpected[0]} was not written with this checkpoint (not in {COMPLETE_MARKER}); a checkpoint "
            "is loaded only as it was written."
        )
    check_recorded_files(folder, marker.get("files", {}), marker_path)
    return marker


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
    _fsync_directory(folder)


def _fsync_directory(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# ------------------------------------------------------------------------------------------------
# Files: JSON and safetensors only
# ------------------------------------------------------------------------------------------------
def write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=1, allow_nan=False) + "\n", encoding="utf-8")


def load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path} is not valid JSON ({error}): the file is damaged.") from None


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
