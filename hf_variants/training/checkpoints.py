"""Checkpoints that cannot go silently wrong.

The run folder itself (its lock, fingerprint, one-run rule and manifest) is
:mod:`hf_variants.storage.run_folder`'s; this module adds what the engines write into it.

* **A finished run is finished.** :func:`finished_run` returns the record of a run whose manifest is
  written and intact: the same command again changes nothing; :func:`load_pretrained` checks a folder's
  manifest before the package loads it.
* **Checkpoints and bookkeeping are atomic.** :func:`write_checkpoint` writes into
  ``.checkpoint-N.partial`` and renames it to ``checkpoint-N`` only after ``checkpoint_complete.json``
  (every file with its size and SHA-256) is written; :func:`latest_checkpoint` picks the newest complete
  one and names the ones it skipped; :func:`rotate_checkpoints` removes old ones only once a newer one is
  complete. Every JSON file is written by one rename (:func:`hf_variants.storage.files.write_json`).
* **No pickles.** Tensors are stored as safetensors, everything else as JSON; loading never calls
  ``pickle``/``torch.load``. A missing, truncated or altered file is an error naming it.

``HF_VARIANTS_FAILPOINT=<name>@<step>`` makes the process kill itself with SIGKILL at a named point
(:func:`failpoint`; ``<name>@<step>:SIGTERM`` sends that signal instead), which is how
``tests/test_faults.py`` interrupts runs at exact places.
"""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from ..storage.files import (
    CheckpointError,
    failpoint,
    fsync_directory,
    is_link,
    make_folder,
    regular_files,
    remove_path,
    rename_folder,
    write_json,
)
from ..storage.record_schema import ANY_OBJECT, MARKER_SCHEMA, parse_record
from ..storage.run_folder import (
    COMPLETE_MARKER,
    FINGERPRINT_FILE,
    MANIFEST_FILE,
    check_recorded_files,
    checkpoint_step,
    pending_checkpoint,
    record_files,
    verify_manifest,
    written_by_the_package,
)
from ..storage.run_identity import announce_version_changes, fingerprint_differences

logger = logging.getLogger(__name__)

#: Files of checkpoints written by other tools (or by v0.1.0 through ``accelerator.save_state``) that
#: would need unpickling: never loaded.
PICKLE_SUFFIXES = (".pkl", ".bin", ".pt", ".pth", ".pickle")


# ------------------------------------------------------------------------------------------------
# Loading what a run wrote
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
def check_position_table(config: Any, max_seq_length: int) -> None:
    """Refuse a ``--max_seq_length`` past the model's learned position table (its inputs would index past it); a
    model with rotary positions (``position_embedding_type="rotary"``) has no table to run past."""
    positions = getattr(config, "max_position_embeddings", None)
    if getattr(config, "position_embedding_type", "absolute") == "rotary" or positions is None:
        return
    if max_seq_length > positions:
        raise ValueError(
            f"--max_seq_length {max_seq_length} exceeds the model's position table (max_position_embeddings="
            f"{positions}); lower --max_seq_length to at most {positions}."
        )


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
        remove_path(path, within=folder)
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


def write_checkpoint(final: Path, write_files: Callable[[Path], None], step: int, *, within: Path) -> None:
    """Write a checkpoint atomically inside the run folder ``within``: ``write_files(partial_folder)``, then the
    completeness marker, then one rename. A crash at any point leaves either the old state or the complete
    checkpoint."""
    partial = final.with_name(f".{final.name}.partial")
    remove_path(partial, within=within)
    make_folder(partial, within=within)
    write_files(partial)
    failpoint("checkpoint_files_written", step)
    mark_complete(partial)
    if final.exists() or is_link(final):  # the same step written again (a resumed run): replace it whole
        stale = final.with_name(f".{final.name}.stale")
        remove_path(stale, within=within)
        rename_folder(final, stale, within=within)
        rename_folder(partial, final, within=within)
        remove_path(stale, within=within)
    else:
        rename_folder(partial, final, within=within)
    fsync_directory(final.parent)


def mark_complete(folder: Path) -> None:
    """Write the completeness marker of a fully written checkpoint folder (every file's size and
    SHA-256) and flush the folder to disk."""
    files = [p.relative_to(folder).as_posix() for p in regular_files(folder) if p.name != COMPLETE_MARKER]
    write_json(folder / COMPLETE_MARKER, {"files": record_files(folder, files)}, within=folder)
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
