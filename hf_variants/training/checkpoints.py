"""Run folders and checkpoints that cannot go silently wrong.

* **One run per folder.** :class:`OutputDirLock` holds an exclusive ``flock`` on the output folder for
  the life of the process (the kernel releases it when the process dies, ``kill -9`` included); a
  second run is refused with the holder's PID. :func:`prepare_output_dir` records the run's
  *fingerprint* (model, data files with sizes and SHA-256, tokenizer, every argument that changes the
  result) in ``run_fingerprint.json`` and refuses a non-empty folder that holds another run, unless
  ``--overwrite_output_dir`` (which empties it first, so no old checkpoint survives).
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

import hashlib
import json
import logging
import os
import re
import shutil
import signal
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None
    import msvcrt

logger = logging.getLogger(__name__)

LOCK_FILE = ".hf_variants.lock"
FINGERPRINT_FILE = "run_fingerprint.json"
COMPLETE_MARKER = "checkpoint_complete.json"
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


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def describe_files(paths: Iterable[str | Path | None]) -> list[dict[str, Any]]:
    """``[{"path", "size", "sha256"}]`` of the given local files (``None`` entries skipped)."""
    described = []
    for path in paths:
        if path is None:
            continue
        path = Path(path)
        if path.is_file():
            described.append({"path": str(path.resolve()), "size": path.stat().st_size, "sha256": file_sha256(path)})
        else:
            described.append({"path": str(path)})
    return described


def vocabulary_sha256(tokenizer: Any) -> str:
    """A fingerprint of a tokenizer's vocabulary: the same tokens with the same ids."""
    items = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    return hashlib.sha256(json.dumps(items, ensure_ascii=False).encode("utf-8")).hexdigest()


def fingerprint_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``key: saved → current`` for every field that differs (nested fields as ``group.key``)."""
    saved, current = _flatten(saved), _flatten(current)
    keys = sorted(set(saved) | set(current))
    return [f"{key}: {saved.get(key)!r} → {current.get(key)!r}" for key in keys if saved.get(key) != current.get(key)]


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict):
            flat.update(_flatten(item, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = item
    return flat


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
                + "). Give another --output_dir, or --overwrite_output_dir to delete it."
            )
        return True
    if contents and overwrite:
        logger.warning("--overwrite_output_dir: deleting the %d entries of %s", len(contents), folder)
        for path in contents:
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    folder.mkdir(parents=True, exist_ok=True)
    write_json(fingerprint_file, fingerprint)
    return False


# ------------------------------------------------------------------------------------------------
# Pretrained weights
# ------------------------------------------------------------------------------------------------
def load_pretrained(load: Callable[..., Any], source: str, **kwargs: Any) -> Any:
    """``load(source, **kwargs)`` (a ``from_pretrained``) with a damaged weight file named: safetensors'
    own message (e.g. "invalid header length") does not say which file it read."""
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


def check_backbone_loaded(model: Any, loading: dict[str, Any], source: str) -> None:
    """Every backbone weight must come from the checkpoint: only the task head (and the pooler, which
    MLM pretraining does not train) may be new. Missing, unexpected (a changed ``num_hidden_layers``)
    or resized backbone weights are an error. ``loading`` is ``from_pretrained``'s loading info."""
    pooler = f"{model.base_model_prefix}.pooler."
    heads = ("classifier.", "score.", "qa_outputs.", "lm_head.", "cls.", "pooler.", pooler)

    def backbone(names: Any) -> list[str]:
        names = [entry[0] if isinstance(entry, (tuple, list)) else entry for entry in names]
        return sorted(name for name in names if not name.startswith(heads))

    problems = {
        "missing from the checkpoint": backbone(loading.get("missing_keys", [])),
        "in the checkpoint but not in this model": backbone(loading.get("unexpected_keys", [])),
        "of another shape in the checkpoint": backbone(loading.get("mismatched_keys", [])),
    }
    problems = {what: names for what, names in problems.items() if names}
    if problems:
        described = "; ".join(f"{len(names)} {what} (e.g. {', '.join(names[:3])})" for what, names in problems.items())
        raise ValueError(
            f"{source} does not hold this model's backbone: {described}. Its weights would be freshly initialised "
            "and training would start from random weights. Check --config_overrides (num_hidden_layers, "
            "layer_norm_position, ...) and the checkpoint. To start from fresh weights on purpose: run_glue "
            "--random_init, or run_mlm --model_type / --config_name."
        )


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
        differences = fingerprint_differences(load_json(path / FINGERPRINT_FILE), fingerprint)
        if differences:
            raise CheckpointError(f"{path} belongs to another run: " + "; ".join(differences[:6]))
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
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != COMPLETE_MARKER)
    marker = {
        "files": {str(p.relative_to(folder)): {"size": p.stat().st_size, "sha256": file_sha256(p)} for p in files}
    }
    write_json(folder / COMPLETE_MARKER, marker)
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
    for name, expected in marker.get("files", {}).items():
        path = folder / name
        if not path.is_file():
            raise CheckpointError(f"{path} is missing (listed in {marker_path}).")
        if path.stat().st_size != expected["size"]:
            raise CheckpointError(
                f"{path} has {path.stat().st_size} bytes, {expected['size']} were written: the file was truncated "
                "or replaced."
            )
        if file_sha256(path) != expected["sha256"]:
            raise CheckpointError(f"{path} does not match the SHA-256 recorded when it was written: it was altered.")
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
