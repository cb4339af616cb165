"""Hub export: a folder that loads with ``trust_remote_code=True`` on a machine without hf_variants.

:func:`export_for_hub` writes

* ``config.json`` with an ``auto_map`` entry for ``AutoConfig`` and **every** Auto head class (a
  plain ``save_pretrained`` maps only the class that was saved),
* the weights as ``model.safetensors``,
* the variant's code, flattened into one folder by :mod:`hf_variants.export_code` (the generated step
  that moves each relative import to its same-folder form and lists the pair's modules): its
  configuration and modeling files, the core files they import and the spec and modeling modules of the
  checkpoint's pair (token mixer and layer scheme) — no other idea's code; a config imports the specs
  only (transformers copies a remote-code module together with its same-folder relative imports, and
  checks their third-party imports, such as ``torchdiffeq``, naming any that is missing with its pip
  command; for a folder on disk an N-ODE block names a missing ``torchdiffeq`` when it is built),
* the tokenizer files when a tokenizer is given,
* ``README.md``, the model card rendered from ``hf_variants/model_cards/<model_type>.md`` with YAML metadata
  (``library_name``, tags incl. ``custom_code``, ``pipeline_tag``, ``base_model``, ``language``,
  datasets, ``model-index``), the training hyperparameters, the framework versions and the
  requirements.

:func:`export_for_hub` owns its output folder as the engines own theirs: it locks it, refuses a folder that
hf-variants did not write or that holds a training run, replaces its own previous export only when asked
(``overwrite``), writes everything into a staging folder of its own and moves each file into place (a link
in the folder is replaced, never written through), manifest first.

:func:`push_folder_to_hub` uploads exactly the files the export's manifest lists, each checked first (present,
inside, a regular file, its size and SHA-256), in one commit with ``HfApi.create_commit`` (not
``PreTrainedModel.push_to_hub``, which would replace the card with a generated one); any other file in the
folder is named and refused. :class:`LocalHub` is the same commit into a local folder, for machines without the
Hub.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import huggingface_hub
import jinja2
import transformers
from huggingface_hub import CommitOperationAdd, EvalResult, ModelCard, ModelCardData
from huggingface_hub.utils import validate_repo_id
from transformers import PreTrainedModel

from .core.compatibility import supported_range
from .core.composition import lora_target_modules, pair_modules, parametrization_owners, static_graph_error
from .core.registration import VARIANTS, Variant
from .export_code import flatten_modules, registered_imports
from .storage.files import (
    STAGING_FOLDER,
    CheckpointError,
    copy_file,
    failpoint,
    inside,
    is_link,
    make_folder,
    move_into,
    regular_files,
    remove_path,
    target_inside,
    write_bytes_atomic,
    write_text_atomic,
)
from .storage.record_schema import ANY_OBJECT, parse_record
from .storage.run_folder import (
    FINGERPRINT_FILE,
    LOCK_FILE,
    MANIFEST_FILE,
    OutputDirLock,
    manifest_entries,
    remove_entries,
    verify_manifest,
    write_manifest,
)

logger = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent
#: Templates of the model cards, one per model_type (package data: installed with the wheel).
MODEL_CARD_DIR = PACKAGE_DIR / "model_cards"

PIPELINE_TAG_BY_AUTO_CLASS = {
    "AutoModel": "feature-extraction",
    "AutoModelForMaskedLM": "fill-mask",
    "AutoModelForSequenceClassification": "text-classification",
    "AutoModelForTokenClassification": "token-classification",
    "AutoModelForQuestionAnswering": "question-answering",
    "AutoModelForMultipleChoice": "multiple-choice",
}

#: The card's usage snippet per saved head: the pipeline of its ``pipeline_tag`` (transformers 5 has no
#: question-answering or multiple-choice pipeline: those models are called directly). ``{repo_id}`` is
#: filled in; each runs on an exported folder that has a tokenizer (tests/test_hub.py runs them).
USAGE_BY_AUTO_CLASS = {
    "AutoModel": """from transformers import pipeline

extractor = pipeline("feature-extraction", model="{repo_id}", trust_remote_code=True)
features = extractor("Paris is the capital of France.")  # [1][tokens][hidden_size]
print(len(features[0]), "token vectors of size", len(features[0][0]))""",
    "AutoModelForMaskedLM": """from transformers import pipeline

fill = pipeline("fill-mask", model="{repo_id}", trust_remote_code=True)
print(fill(f"Paris is the {{fill.tokenizer.mask_token}} of France."))""",
    "AutoModelForSequenceClassification": """from transformers import pipeline

classify = pipeline("text-classification", model="{repo_id}", trust_remote_code=True)
print(classify(["a gripping, beautifully shot film", "a dull and lifeless script"]))""",
    "AutoModelForTokenClassification": """from transformers import pipeline

tag = pipeline("token-classification", model="{repo_id}", trust_remote_code=True)
print(tag("Ada Lovelace was born in London."))""",
    "AutoModelForQuestionAnswering": """import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

model = AutoModelForQuestionAnswering.from_pretrained("{repo_id}", trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)
encoded = tokenizer("Where was Ada Lovelace born?", "Ada Lovelace was born in London.", return_tensors="pt")
with torch.no_grad():
    output = model(**encoded)
start, end = int(output.start_logits.argmax()), int(output.end_logits.argmax())
print(tokenizer.decode(encoded["input_ids"][0, start : max(start, end) + 1]))""",
    "AutoModelForMultipleChoice": """import torch
from transformers import AutoModelForMultipleChoice, AutoTokenizer

model = AutoModelForMultipleChoice.from_pretrained("{repo_id}", trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained("{repo_id}", trust_remote_code=True)
prompt, choices = "The sky on a clear day is", ["blue.", "made of cheese."]
encoded = tokenizer([prompt] * len(choices), choices, padding=True, return_tensors="pt")
with torch.no_grad():
    logits = model(**{{name: tensor.unsqueeze(0) for name, tensor in encoded.items()}}).logits
print(choices[int(logits.argmax())])""",
}

#: Third-party packages a shipped module imports (beyond torch and transformers), by module file.
REQUIREMENTS_BY_FILE = {"modeling_ode.py": "torchdiffeq>=0.2.5,<0.3"}
#: The package's own bookkeeping in an export folder, neither listed in its manifest nor uploaded.
EXPORT_BOOKKEEPING = (LOCK_FILE, STAGING_FOLDER)


@dataclass(frozen=True)
class TaskResult:
    """One measured result for the card's ``model-index`` (e.g. GLUE SST-2 dev accuracy)."""

    task_type: str  # e.g. "text-classification"
    dataset_type: str  # e.g. "nyu-mll/glue"
    dataset_name: str  # e.g. "GLUE SST-2"
    metric_type: str  # e.g. "accuracy"
    metric_value: float
    dataset_config: str | None = None  # e.g. "sst2"
    dataset_split: str | None = None  # e.g. "validation"
    metric_name: str | None = None


#: The scores a run on the user's own files reports (run_glue's metric_function), as its card's model-index lists them.
USER_DATA_METRICS = ("accuracy", "f1", "exact_match", "mse")


def evaluation_results(results: dict[str, Any], metrics: Sequence[str], dataset_type: str, dataset_name: str,
                       dataset_config: str | None = None) -> list[TaskResult]:  # fmt: skip
    """Each of ``metrics`` a fine-tuning run's ``results.json`` holds for an evaluated split, as ``model-index``
    entries of the card."""
    return [TaskResult("text-classification", dataset_type, dataset_name, metric, float(scores[metric]),
                       dataset_config=dataset_config, dataset_split=split)
            for split, scores in results.get("eval", {}).items() for metric in metrics if metric in scores]  # fmt: skip


def user_data_results(data_file: str, results: dict[str, Any]) -> list[TaskResult]:
    """The evaluation of a fine-tuning run on the user's own file (``--train_file``): the dataset is that file, named
    as such (never GLUE)."""
    kind = Path(data_file).suffix.lstrip(".").lower() or "local"
    return evaluation_results(results, USER_DATA_METRICS, kind, Path(data_file).name)


def glue_task_results(task_name: str | None, results: dict[str, Any]) -> list[TaskResult]:
    """The dev metrics of a GLUE fine-tuning run's ``results.json`` as ``model-index`` entries of the card."""
    from .tasks import get_glue_task

    if task_name is None:
        return []
    task = get_glue_task(task_name)
    return evaluation_results(results, task.metrics, "nyu-mll/glue", f"GLUE {task.folder}", task.hub_config)


# --------------------------------------------------------------------------------------------
# Code flattening
# --------------------------------------------------------------------------------------------
def flattened_code_files(variant: Variant, config: transformers.PretrainedConfig | None = None) -> dict[str, str]:
    """``{file name: source}`` of every hf_variants module the variant's classes need for ``config``'s
    pair (default: the variant's own pair), flattened into one folder by :mod:`hf_variants.export_code`.

    The registries import an idea's modules by name, so the export's generated ``registered_*`` modules list
    the pair's — and those of the model type's default pair, which transformers builds (``config_class()``)
    whenever it logs or saves a config, to diff it against the defaults. Raises ``ValueError`` if two needed
    modules share a file name, or a module imports a package ``__init__`` (which cannot be flattened).
    """
    default = variant.config_class()
    config = config if config is not None else default
    pairs = list(dict.fromkeys([(config.attention_type, config.layer_scheme),
                                (default.attention_type, default.layer_scheme)]))  # fmt: skip
    for attention_type, layer_scheme in pairs:
        pair_modules(attention_type, layer_scheme)  # a clear error for an unregistered name
    roots = [variant.config_class.__module__, *(cls.__module__ for cls in variant.models.values())]
    return flatten_modules(roots, generated=registered_imports(pairs))


def requirements(files: Iterable[str]) -> list[str]:
    """The pip requirements a folder with these code files needs, with the versions the code is tested at
    (:data:`~hf_variants.core.compatibility.SUPPORTED_VERSIONS`, which the shipped code itself checks when it is
    imported): torch and transformers, plus any that a shipped module imports (:data:`REQUIREMENTS_BY_FILE`)."""
    extra = {REQUIREMENTS_BY_FILE[name] for name in files if name in REQUIREMENTS_BY_FILE}
    return [supported_range("torch"), supported_range("transformers"), *sorted(extra)]


def auto_map(variant: Variant) -> dict[str, str]:
    """``auto_map`` of config.json: ``{"AutoConfig": "configuration_x.XConfig", "AutoModel": ...}``."""

    def ref(cls: type) -> str:
        return f"{cls.__module__.rsplit('.', 1)[-1]}.{cls.__name__}"

    mapping = {"AutoConfig": ref(variant.config_class)}
    mapping.update({auto_name: ref(cls) for auto_name, cls in variant.models.items()})
    return mapping


# --------------------------------------------------------------------------------------------
# Model cards
# --------------------------------------------------------------------------------------------
def render_model_card(
    variant: Variant,
    config: transformers.PretrainedConfig,
    *,
    repo_id: str | None = None,
    pipeline_tag: str | None = None,
    datasets: Sequence[str] | None = None,
    results: Iterable[TaskResult] = (),
    training_summary: str | None = None,
    hyperparameters: dict[str, Any] | None = None,
    base_model: str | None = None,
    language: str | Sequence[str] | None = "en",
    code_files: Iterable[str] | None = None,
    template_dir: Path | None = None,
    license: str = "apache-2.0",
    head: str = "AutoModelForMaskedLM",
) -> ModelCard:
    """Render ``model_cards/<model_type>.md`` with YAML metadata and optional results; the usage
    snippet is the one of ``head`` (the Auto class of the saved model), the requirements those of
    ``code_files`` (the shipped modules; default: the variant's own pair).

    Templates are Jinja; each variant's extends ``_common.md`` (usage, checkpoint, results and
    config sections) and fills its own blocks (description, paper-vs-code switches, citation).
    """
    template_dir = template_dir or MODEL_CARD_DIR
    template_name = f"{variant.model_type}.md"
    if not (template_dir / template_name).is_file():
        raise FileNotFoundError(
            f"No model-card template for {variant.model_type!r}: expected {template_dir / template_name}."
        )
    if head not in USAGE_BY_AUTO_CLASS:
        raise ValueError(f"head must be one of {', '.join(USAGE_BY_AUTO_CLASS)}; got {head!r}.")
    model_name = repo_id.split("/")[-1] if repo_id else f"{variant.model_type}-model"
    eval_results = [
        EvalResult(
            task_type=r.task_type,
            dataset_type=r.dataset_type,
            dataset_name=r.dataset_name,
            dataset_config=r.dataset_config,
            dataset_split=r.dataset_split,
            metric_type=r.metric_type,
            metric_value=float(r.metric_value),
            metric_name=r.metric_name,
        )
        for r in results
    ]
    card_data = ModelCardData(
        library_name="transformers",
        license=license,
        language=language,
        base_model=base_model,
        tags=["hf-variants", variant.model_type, "custom_code"],
        pipeline_tag=pipeline_tag,
        datasets=list(datasets) if datasets else None,
        model_name=model_name if eval_results else None,
        eval_results=eval_results or None,
    )
    sizes = {
        key: getattr(config, key)
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
        if hasattr(config, key)
    }
    if code_files is None:
        code_files = flattened_code_files(variant, config)
    defaults = variant.config_class()
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)), keep_trailing_newline=True, undefined=jinja2.StrictUndefined
    )
    usage_repo = repo_id or f"your-name/{model_name}"
    content = environment.get_template(template_name).render(
        card_data=card_data.to_yaml(),
        model_name=model_name,
        repo_id=usage_repo,
        usage=USAGE_BY_AUTO_CLASS[head].format(repo_id=usage_repo),
        head=head,
        model_type=variant.model_type,
        attention_type=config.attention_type,
        layer_scheme=config.layer_scheme,
        default_attention_type=defaults.attention_type,
        default_layer_scheme=defaults.layer_scheme,
        config_json=json.dumps(config.to_diff_dict(), indent=2, sort_keys=True, default=str),
        sizes=sizes,
        results=list(results),
        training_summary=training_summary,
        hyperparameters=dict(hyperparameters or {}),
        requirements=requirements(code_files),
        code_file_names=sorted(code_files),
        lora_targets=lora_target_modules(config),
        static_graph_error=static_graph_error(config),
        parametrized=bool(parametrization_owners(config.attention_type, config.layer_scheme)),
        framework_versions=framework_versions(),
        hf_variants_version=_distribution_version("hf-variants"),
        repository_url=project_url("Repository"),
        documentation_url=project_url("Documentation"),
    )
    return ModelCard(content)


def _distribution_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return "unknown"


def framework_versions() -> dict[str, str]:
    """The versions a card reports (as the Trainer's cards do)."""
    return {name: _distribution_version(name) for name in ("hf-variants", "transformers", "torch", "tokenizers")}


def project_url(label: str) -> str:
    """A ``[project.urls]`` entry of pyproject.toml, read from the installed package's metadata."""
    try:
        entries = metadata.metadata("hf-variants").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:  # pragma: no cover
        entries = []
    urls = dict(entry.split(", ", 1) for entry in entries)
    url = urls.get(label, urls.get("Homepage", ""))
    return url if url.endswith("/") or label != "Documentation" else url + "/"


# --------------------------------------------------------------------------------------------
# Export and push
# --------------------------------------------------------------------------------------------
def export_for_hub(
    model: PreTrainedModel,
    output_dir: str | Path,
    tokenizer: Any | None = None,
    *,
    repo_id: str | None = None,
    datasets: Sequence[str] | None = None,
    results: Iterable[TaskResult] = (),
    training_summary: str | None = None,
    hyperparameters: dict[str, Any] | None = None,
    base_model: str | None = None,
    language: str | Sequence[str] | None = "en",
    pipeline_tag: str | None = None,
    overwrite: bool = False,
    max_seq_length: int | None = None,
) -> Path:
    """Write a self-contained Hub folder for ``model`` (any registered hf_variants model).

    Returns the folder. Any Auto class of the variant loads it with ``trust_remote_code=True``;
    weights the saved head does not have (e.g. a classifier when exporting an MLM) are initialised
    as usual by the loading head. The folder holds the code of the model's own pair and of its model
    type's default pair only (:func:`flattened_code_files`), and the card lists its requirements.

    ``output_dir`` must be new, empty, or a previous export (replaced only with ``overwrite``); a folder that
    hf-variants did not write, or that holds a training run, is refused (:func:`check_export_folder`).

    The folder is also a sentence-transformers model (:func:`sentence_transformers_files`): mean pooling over the
    attention mask, at ``max_seq_length`` tokens (the length the model was trained at; default: its position
    table's), so ``SentenceTransformer(folder, trust_remote_code=True)`` loads it as it is.
    """
    model_type = getattr(model.config, "model_type", None)
    if model_type not in VARIANTS:
        raise ValueError(f"{type(model).__name__} (model_type={model_type!r}) is not an hf_variants model.")
    variant = VARIANTS[model_type]
    code_files = flattened_code_files(variant, model.config)
    saved_head = next((name for name, cls in variant.models.items() if isinstance(model, cls)), "AutoModel")
    card = render_model_card(  # before anything is written: a card that cannot be rendered leaves no folder
        variant,
        model.config,
        repo_id=repo_id,
        pipeline_tag=pipeline_tag or PIPELINE_TAG_BY_AUTO_CLASS[saved_head],
        datasets=datasets,
        results=results,
        training_summary=training_summary,
        hyperparameters=hyperparameters,
        base_model=base_model,
        language=language,
        code_files=code_files,
        head=saved_head,
    )
    output_dir = Path(output_dir)
    lock = OutputDirLock(output_dir)  # refuses a non-empty folder hf-variants did not write
    try:
        previous = check_export_folder(output_dir, overwrite)
        staging = output_dir / STAGING_FOLDER
        remove_path(staging, within=output_dir)  # left by a killed export
        make_folder(staging, within=output_dir)
        model.save_pretrained(staging, safe_serialization=True)
        config_dict = json.loads((staging / "config.json").read_text(encoding="utf-8"))
        config_dict["auto_map"] = auto_map(variant)
        write_text_atomic(staging / "config.json", json.dumps(config_dict, indent=2, sort_keys=True) + "\n",
                          within=staging)
        for name, source in code_files.items():
            write_text_atomic(staging / name, source, within=staging)
        if tokenizer is not None:
            tokenizer.save_pretrained(staging)
        for name, text in sentence_transformers_files(model.config, max_seq_length).items():
            make_folder((staging / name).parent, within=staging)
            write_text_atomic(staging / name, text, within=staging)
        write_text_atomic(staging / "README.md", str(card), within=staging)
        manifest = write_manifest(staging, {}, "export")
        move_export_into_place(output_dir, staging, manifest["files"], previous)
    finally:
        lock.release()
    return output_dir


#: sentence-transformers' pooling settings of an export: the mean of the token embeddings over the attention mask.
MEAN_POOLING = {"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
                "pooling_mode_lasttoken": False, "include_prompt": True}  # fmt: skip


def sentence_transformers_files(config: Any, max_seq_length: int | None = None) -> dict[str, str]:
    """The files that make a model folder a sentence-transformers model, as every embedding repository on the Hub
    has them: ``modules.json`` (the transformer, then pooling), ``sentence_bert_config.json`` (``max_seq_length``:
    the length given, else the position table's) and ``1_Pooling/config.json`` (mean pooling, :data:`MEAN_POOLING`)."""
    length = max_seq_length or getattr(config, "max_position_embeddings", None) or 512
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    return {
        "modules.json": json.dumps(modules, indent=2) + "\n",
        "sentence_bert_config.json": json.dumps({"max_seq_length": length, "do_lower_case": False}, indent=2) + "\n",
        "1_Pooling/config.json": json.dumps({"word_embedding_dimension": config.hidden_size, **MEAN_POOLING},
                                            indent=2) + "\n",
    }


def check_export_folder(folder: Path, overwrite: bool) -> list[Path]:
    """The files of the previous export in ``folder`` that a new export replaces (``overwrite``); refuses a
    folder that holds a training run, and a previous export without ``overwrite``. Called under the folder's
    lock, which has already refused a non-empty folder that hf-variants did not write."""
    folder = folder.resolve()
    if (folder / FINGERPRINT_FILE).exists():
        raise CheckpointError(f"--output_dir {folder} holds a training run ({FINGERPRINT_FILE}): an export writes a "
                              "folder of its own. Give another --output_dir.")  # fmt: skip
    if not (folder / MANIFEST_FILE).exists() and not is_link(folder / MANIFEST_FILE):
        return []
    if not overwrite and (folder / STAGING_FOLDER).is_dir() and not export_complete(folder):
        logger.warning("%s holds an export that was stopped while it was moved into place: this export replaces "
                       "it.", folder)  # fmt: skip
        return manifest_entries(folder)
    if not overwrite:
        raise CheckpointError(f"--output_dir {folder} holds a previous export: pass --overwrite_output_dir "
                              "(export_for_hub(..., overwrite=True)) to replace it, or give another "
                              "--output_dir.")  # fmt: skip
    return manifest_entries(folder)  # each checked to lie inside; a damaged manifest names none (warned)


def export_complete(folder: Path) -> bool:
    """Whether ``folder``'s manifest verifies (every file it lists present and intact)."""
    try:
        return verify_manifest(folder) is not None
    except CheckpointError:
        return False


def move_export_into_place(folder: Path, staging: Path, files: dict[str, Any], previous: list[Path]) -> None:
    """Replace the previous export's files by the staged ones: refuse first a staged name that would replace a
    file the previous export did not write; then remove the previous files, move the manifest in (so that at any
    instant the folder's manifest names every file of an export in it) and then each file, and remove the
    staging folder. A link at a target is replaced itself, never written through."""
    folder = folder.resolve()
    replaced = {path.relative_to(folder).as_posix() for path in previous}
    foreign = [name for name in files if name not in replaced and ((folder / name).exists() or is_link(folder / name))]
    if foreign:
        raise CheckpointError(f"{folder / foreign[0]} was not written by a previous export: the export would replace "
                              "it. Move it out of the folder, or give another --output_dir.")  # fmt: skip
    remove_entries(folder, previous)
    move_into(staging / MANIFEST_FILE, folder / MANIFEST_FILE, within=folder)
    failpoint("export_moved", MANIFEST_FILE)
    for name in files:
        move_into(staging / name, folder / name, within=folder)
        failpoint("export_moved", name)
    remove_path(staging, within=folder)


def export_checkpoint(
    checkpoint: str | Path, output_dir: str | Path, *, repo_id: str | None = None, recorded: dict | None = None,
    overwrite: bool = False,
) -> Path:
    """Export a checkpoint folder (``save_pretrained``, run_mlm or run_glue output) with the Auto class
    of its saved head, its tokenizer if saved beside it, and — from the run's ``results.json``
    (``recorded``) and ``run_fingerprint.json`` — its results, training summary and hyperparameters."""
    import hf_variants  # noqa: F401  (registers the variants)

    checkpoint = Path(checkpoint)
    source, target = checkpoint.resolve(), Path(output_dir).resolve()
    if source == target or source in target.parents or target in source.parents:
        raise CheckpointError(f"--output_dir {output_dir} and the checkpoint {checkpoint} overlap: an export never "
                              "writes into its own input. Give another --output_dir.")  # fmt: skip
    verify_manifest(checkpoint)
    config = transformers.AutoConfig.from_pretrained(checkpoint)
    if config.model_type not in VARIANTS:
        raise ValueError(f"{checkpoint} holds a {config.model_type!r} model, not an hf-variants model.")
    architecture = (getattr(config, "architectures", None) or [""])[0]
    models = VARIANTS[config.model_type].models
    auto_name = next((auto for auto, cls in models.items() if cls.__name__ == architecture), "AutoModel")
    model = getattr(transformers, auto_name).from_pretrained(checkpoint)
    tokenizer = None
    if (checkpoint / "tokenizer.json").is_file() or (checkpoint / "tokenizer_config.json").is_file():
        tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    results, datasets, summary, base_model = [], None, None, None
    recorded = recorded or {}
    if recorded.get("task"):
        results, datasets = glue_task_results(recorded["task"], recorded), ["nyu-mll/glue"]
        summary = f"Fine-tuned on GLUE {recorded['task']}."
        source = recorded.get("model_name_or_path")
        base_model = source if isinstance(source, str) and _is_hub_id(source) else None
    elif "perplexity" in recorded:
        summary = (
            f"Pretrained with masked-language modelling for {recorded['steps']} steps; validation perplexity "
            f"{recorded['perplexity']:.2f}."
        )
    fingerprint_file = checkpoint / FINGERPRINT_FILE
    hyperparameters = card_hyperparameters(parse_record(fingerprint_file, ANY_OBJECT)) if fingerprint_file.is_file() \
        else None  # fmt: skip
    trained_length = (hyperparameters or {}).get("max_seq_length")  # the sentence-transformers length
    return export_for_hub(model, output_dir, tokenizer, repo_id=repo_id, datasets=datasets, results=results,
                          training_summary=summary, hyperparameters=hyperparameters, base_model=base_model,
                          overwrite=overwrite, max_seq_length=trained_length)  # fmt: skip


def _is_hub_id(name: str) -> bool:
    """``owner/name`` that is not a local path (a card's ``base_model`` must be a Hub repository)."""
    return re.fullmatch(r"[\w.-]+/[\w.-]+", name) is not None and not Path(name).exists()


def card_hyperparameters(fingerprint: dict[str, Any]) -> dict[str, Any]:
    """A run's settings for the card: scalars that were set, without local paths, hashes or versions.
    A fine-tuning fingerprint (model/data/training sections) shows its model and data arguments and the
    training arguments that differ from ``TrainingArguments``' defaults."""
    hidden = {"output_dir", "logging_dir", "train_file", "validation_file", "test_file", "glue_dir", "tokenizer_sha256"}
    settings = {key: value for key, value in fingerprint.items() if key not in ("model", "data", "training")}
    if isinstance(fingerprint.get("training"), dict):
        defaults = transformers.TrainingArguments(output_dir="unused").to_dict()
        changed = {key: value for key, value in fingerprint["training"].items() if defaults.get(key, value) != value}
        settings.update({**fingerprint.get("model", {}), **fingerprint.get("data", {}), **changed})
    return {
        key: value
        for key, value in sorted(settings.items())
        if isinstance(value, (bool, int, float, str)) and value != "" and key not in hidden
    }


class LocalHub:
    """The two ``HfApi`` calls a push makes, into a local folder: ``ROOT/<repo_id>/`` receives what the
    Hub would (each file of the commit), and loads with ``from_pretrained("ROOT/<repo_id>",
    trust_remote_code=True)``. For machines without the Hub. Every file it writes is checked to lie inside
    ``ROOT/<repo_id>`` and replaces a link there rather than writing through it."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def repo_folder(self, repo_id: str) -> Path:
        """``ROOT/<repo_id>``, for a valid Hub id only, and checked to lie inside ``ROOT`` (symlinks included)."""
        validate_repo_id(repo_id)
        return inside(self.root, repo_id, "--repo_id")

    def create_repo(self, repo_id: str, *, private: bool = False, exist_ok: bool = False, repo_type: str = "model",
                    **_: Any) -> huggingface_hub.RepoUrl:  # fmt: skip
        folder = self.repo_folder(repo_id)
        if folder.exists() and not exist_ok:
            raise FileExistsError(f"{folder} exists.")
        make_folder(folder, within=self.root)
        return huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}")

    def create_commit(self, *, repo_id: str, operations: Iterable[CommitOperationAdd], commit_message: str,
                      repo_type: str = "model", **_: Any) -> str:  # fmt: skip
        target = self.repo_folder(repo_id)
        for operation in operations:
            # its folder checked before any folder is made; a link at the file's own name is replaced, not followed
            destination = target_inside(target, operation.path_in_repo, "the uploaded file")
            make_folder(destination.parent, within=target)
            if isinstance(operation.path_or_fileobj, bytes):  # a file re-rendered for this repository (the card)
                write_bytes_atomic(destination, operation.path_or_fileobj, within=target)
            else:
                copy_file(Path(operation.path_or_fileobj), destination, within=target)
        return str(target)


#: The repository a card's usage names before it is pushed (``your-name/<model name>``): the push names its own.
REPO_PLACEHOLDER = re.compile(r"your-name/[A-Za-z0-9_.-]+")


def with_card_for(repo_id: str, folder: Path, operations: list[CommitOperationAdd]) -> list[CommitOperationAdd]:
    """``operations`` with the card's usage naming ``repo_id`` where the export left its placeholder
    (:data:`REPO_PLACEHOLDER`), so that the usage on the Hub runs as pasted, and with the manifest's entry of the card
    re-computed for the card uploaded (the uploaded folder verifies); the export folder itself is left as it is."""
    names = [operation.path_in_repo for operation in operations]
    if "README.md" not in names or MANIFEST_FILE not in names:
        return operations
    card = (folder / "README.md").read_text(encoding="utf-8")
    rendered = REPO_PLACEHOLDER.sub(repo_id, card).encode("utf-8")
    if rendered == card.encode("utf-8"):
        return operations
    manifest = parse_record(folder / MANIFEST_FILE, ANY_OBJECT)
    manifest["files"]["README.md"] = {"size": len(rendered), "sha256": hashlib.sha256(rendered).hexdigest()}
    replaced = {"README.md": rendered, MANIFEST_FILE: (json.dumps(manifest, indent=1) + "\n").encode("utf-8")}
    return [CommitOperationAdd(path_in_repo=operation.path_in_repo, path_or_fileobj=replaced[operation.path_in_repo])
            if operation.path_in_repo in replaced else operation for operation in operations]


def files_to_upload(folder: Path, unverified: bool = False) -> list[str]:
    """The files a push uploads: those the export's manifest lists (and the manifest), each checked first
    (:func:`verify_manifest`: present, inside, a regular file, its size and SHA-256). A folder holding any other
    file, or a link, is refused naming it; one without an export's manifest is refused unless ``unverified``,
    which uploads its regular files as they are (no link, no hidden file)."""
    folder = folder.resolve()
    try:
        manifest = verify_manifest(folder)
    except CheckpointError:
        if unverified and not (folder / MANIFEST_FILE).exists():
            manifest = None
        else:
            raise
    if manifest is None:
        if not unverified:
            raise CheckpointError(f"{folder} has no {MANIFEST_FILE}: push uploads what `hf-variants export` wrote and "
                                  "checked. Export it first, or pass --unverified_folder to upload its files as they "
                                  "are.")  # fmt: skip
        return [path.relative_to(folder).as_posix() for path in regular_files(folder)
                if not any(part.startswith(".") or part == "__pycache__" for part in path.relative_to(folder).parts)]
    if not manifest["written_by"].endswith(" export"):
        raise CheckpointError(f"{folder} was written by `{manifest['written_by']}`, not by `hf-variants export`: "
                              "export it first (hf-variants export FOLDER --output_dir HUB_FOLDER).")  # fmt: skip
    check_nothing_unlisted(folder, manifest)
    return [*manifest["files"], MANIFEST_FILE]


def check_nothing_unlisted(folder: Path, manifest: dict[str, Any]) -> None:
    """Refuse an export folder that holds a file or link its manifest does not list: an export is exactly what
    ``export`` wrote (what ``push`` uploads and ``verify`` passes; one rule for both)."""
    listed = [*manifest["files"], MANIFEST_FILE]
    entries = (path.relative_to(folder) for path in Path(folder).rglob("*") if path.is_file() or is_link(path))
    present = sorted(entry.as_posix() for entry in entries if not set(entry.parts) & set(EXPORT_BOOKKEEPING))
    unlisted = [name for name in present if name not in listed]
    if unlisted:
        raise CheckpointError(f"{folder} holds {len(unlisted)} file(s) or link(s) its {MANIFEST_FILE} does not list "
                              f"({', '.join(unlisted[:4])}): an export is exactly what `hf-variants export` wrote, "
                              "which push uploads. Move them out of the folder, or export again into a new one.")


def push_folder_to_hub(
    folder: str | Path,
    repo_id: str,
    *,
    token: str | None = None,
    private: bool = False,
    commit_message: str = "Upload hf-variants model",
    api: huggingface_hub.HfApi | LocalHub | None = None,
    unverified: bool = False,
) -> str:
    """Create ``repo_id`` if needed and upload the export in ``folder`` in one commit (``HfApi.create_commit``):
    exactly the files its manifest lists, each checked first (:func:`files_to_upload`).

    ``api`` defaults to ``huggingface_hub.HfApi(token=token)``; :class:`LocalHub` writes to a local
    folder instead. Returns the repo id the Hub reports.
    """
    folder = Path(folder)
    validate_repo_id(repo_id)  # before anything is created, on the Hub or in a local hub
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} has no config.json; create it with export_for_hub first.")
    files = files_to_upload(folder, unverified)  # before anything is created
    api = api or huggingface_hub.HfApi(token=token)
    repo = api.create_repo(repo_id=repo_id, private=private, exist_ok=True, repo_type="model")
    operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(folder / name)) for name in files]
    operations = with_card_for(repo.repo_id, folder, operations)
    api.create_commit(repo_id=repo.repo_id, operations=operations, commit_message=commit_message, repo_type="model")
    return repo.repo_id
