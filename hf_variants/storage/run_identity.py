"""What makes two training runs the same run: identity by exclusion.

A run's *fingerprint* (``run_fingerprint.json``) holds every argument except those known not to change
the result (:func:`arguments_with_effect`: logging, output paths, dataloader workers, …), so an argument
added to transformers' ``TrainingArguments`` next release is covered without a change here. Inputs are
identified by what they are, not where they lie: data files and local weights by size and SHA-256
(:func:`describe_files`), the tokenizer by its whole serialised definition (:func:`tokenizer_sha256`).
Two sections are recorded but never compared (:data:`RECORDED_ONLY`): ``locations`` (paths: moving the
data keeps the run the same) and ``versions`` (:func:`library_versions`: a change is announced by
:func:`version_changes`, not refused — a resumed run may differ in its last digits, not in what it is).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Iterable, Mapping
from enum import Enum
from importlib import metadata
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

#: Fingerprint sections recorded for the reader, never compared.
RECORDED_ONLY = frozenset({"locations", "versions"})
#: The distributions whose versions a fingerprint records.
VERSIONED_DISTRIBUTIONS = (
    "hf-variants", "torch", "transformers", "accelerate", "tokenizers", "datasets", "safetensors", "torchdiffeq",
)  # fmt: skip


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def arguments_with_effect(values: Mapping[str, Any], without_effect: Collection[str]) -> dict[str, Any]:
    """Every argument except those named in ``without_effect`` (a name ending in ``*`` is a prefix), as
    JSON values: enums by their value, other objects by their text."""
    prefixes = tuple(name[:-1] for name in without_effect if name.endswith("*"))
    return {
        name: plain_value(value)
        for name, value in sorted(values.items())
        if name not in without_effect and not (prefixes and name.startswith(prefixes))
    }


def plain_value(value: Any) -> Any:
    """A JSON value for an argument (enums by their value, paths and other objects by their text)."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [plain_value(item) for item in value]
    if isinstance(value, dict):
        return {str(key): plain_value(item) for key, item in value.items()}
    return value if value is None or isinstance(value, (bool, int, float, str)) else str(value)


def describe_files(paths: Iterable[str | Path | None]) -> tuple[list[dict[str, Any]], list[str]]:
    """``(identities, locations)`` of the given files, in order (``None`` entries skipped): a local file
    is ``{"size", "sha256"}`` — its content, wherever it lies — and anything else (a Hub dataset name) its
    text; ``locations`` are the resolved paths, recorded but not compared."""
    identities, locations = [], []
    for path in paths:
        if path is None:
            continue
        path = Path(path)
        if path.is_file():
            identities.append({"size": path.stat().st_size, "sha256": file_sha256(path)})
            locations.append(str(path.resolve()))
        else:
            identities.append({"name": str(path)})
    return identities, locations


def local_model_files(name: str | None) -> list[Path] | None:
    """The files that define a local checkpoint or config (config and weights), or ``None`` for a Hub name."""
    if name is None:
        return None
    path = Path(name)
    if path.is_file():
        return [path]
    if path.is_dir():
        return [path / "config.json", *sorted(path.glob("*.safetensors"))]
    return None


def vocabulary_sha256(tokenizer: Any) -> str:
    """A fingerprint of a tokenizer's vocabulary: the same tokens with the same ids (what a pretrained
    checkpoint's embedding rows depend on; recorded in its config by ``pretrain``)."""
    items = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    return hashlib.sha256(json.dumps(items, ensure_ascii=False).encode("utf-8")).hexdigest()


def tokenizer_sha256(tokenizer: Any) -> str:
    """A fingerprint of a tokenizer's whole definition: for a fast tokenizer its serialised pipeline
    (normaliser, pre-tokeniser, model with its vocabulary, post-processor, added tokens) without the
    truncation and padding state a caller may set; for others the vocabulary. The special tokens are
    part of it either way. Two tokenizers with one vocabulary but other lower-casing are other runs."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        definition = json.loads(backend.to_str())
        definition.pop("truncation", None)
        definition.pop("padding", None)
    else:
        definition = {"vocabulary": sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])}
    definition["special_tokens"] = plain_value(tokenizer.special_tokens_map)
    text = json.dumps(definition, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def library_versions() -> dict[str, str]:
    """The installed versions of :data:`VERSIONED_DISTRIBUTIONS` (``"not installed"`` for a missing one)."""
    versions = {}
    for name in VERSIONED_DISTRIBUTIONS:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def fingerprint_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``key: saved → current`` for every compared field that differs (nested fields as ``group.key``);
    the :data:`RECORDED_ONLY` sections are left out."""
    saved = _flatten({key: value for key, value in saved.items() if key not in RECORDED_ONLY})
    current = _flatten({key: value for key, value in current.items() if key not in RECORDED_ONLY})
    keys = sorted(set(saved) | set(current))
    return [f"{key}: {saved.get(key)!r} → {current.get(key)!r}" for key in keys if saved.get(key) != current.get(key)]


def version_changes(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``name: saved → current`` for every library whose version differs from the saved fingerprint's."""
    before, now = saved.get("versions") or {}, current.get("versions") or {}
    changed = sorted(name for name in before if name in now and before[name] != now[name])
    return [f"{name} {before[name]} → {now[name]}" for name in changed]


def announce_version_changes(saved: dict[str, Any], current: dict[str, Any], where: Path) -> None:
    """A warning naming each library whose version changed since ``where``'s run was started."""
    changes = version_changes(saved, current)
    if changes:
        logger.warning(
            "%s was started with other library versions (%s): continuing the same run; numbers may differ in "
            "their last digits from an uninterrupted run on one version.",
            where,
            ", ".join(changes),
        )


def _flatten(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(item, dict):
            flat.update(_flatten(item, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = item
    return flat

