"""Hub export: a folder that loads with ``trust_remote_code=True`` on a machine without hf_variants.

:func:`export_for_hub` writes

* ``config.json`` with an ``auto_map`` entry for ``AutoConfig`` and **every** Auto head class (a
  plain ``save_pretrained`` maps only the class that was saved),
* the weights as ``model.safetensors``,
* the variant's code, flattened: its configuration and modeling files plus the core files they
  import, with ``from ..core.x import`` rewritten to ``from .x import`` (transformers copies a
  remote-code module together with its same-folder relative imports),
* the tokenizer files when a tokenizer is given,
* ``README.md``, the model card rendered from ``model_cards/<model_type>.md`` with YAML metadata
  (``library_name``, tags incl. ``custom_code``, ``pipeline_tag``, datasets, ``model-index``).

:func:`push_folder_to_hub` uploads such a folder in one commit through ``huggingface_hub.HfApi``
(not ``PreTrainedModel.push_to_hub``, which would replace the card with a generated one).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import huggingface_hub
import jinja2
import transformers
from huggingface_hub import CommitOperationAdd, EvalResult, ModelCard, ModelCardData
from transformers import PreTrainedModel

from .core.registration import VARIANTS, Variant

PACKAGE_DIR = Path(__file__).resolve().parent
#: Templates of the model cards, one per model_type (the repository's ``model_cards/`` folder).
MODEL_CARD_DIR = PACKAGE_DIR.parent / "model_cards"

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
tokenizer = AutoTokenizer.from_pretrained("{repo_id}")
encoded = tokenizer("Where was Ada Lovelace born?", "Ada Lovelace was born in London.", return_tensors="pt")
with torch.no_grad():
    output = model(**encoded)
start, end = int(output.start_logits.argmax()), int(output.end_logits.argmax())
print(tokenizer.decode(encoded["input_ids"][0, start : max(start, end) + 1]))""",
    "AutoModelForMultipleChoice": """import torch
from transformers import AutoModelForMultipleChoice, AutoTokenizer

model = AutoModelForMultipleChoice.from_pretrained("{repo_id}", trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained("{repo_id}")
prompt, choices = "The sky on a clear day is", ["blue.", "made of cheese."]
encoded = tokenizer([prompt] * len(choices), choices, padding=True, return_tensors="pt")
with torch.no_grad():
    logits = model(**{{name: tensor.unsqueeze(0) for name, tensor in encoded.items()}}).logits
print(choices[int(logits.argmax())])""",
}

_RELATIVE_IMPORT = re.compile(r"^(\s*from\s+)(\.+)([\w.]*)(\s+import\b)", re.MULTILINE)


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


# --------------------------------------------------------------------------------------------
# Code flattening
# --------------------------------------------------------------------------------------------
def _module_file(module_name: str) -> Path:
    relative = module_name.split(".", 1)[1].replace(".", "/") if "." in module_name else ""
    return PACKAGE_DIR / f"{relative}.py"


def _resolve_relative(module_name: str, dots: str, target: str) -> str:
    package = module_name.rsplit(".", len(dots))[0]
    return f"{package}.{target}" if target else package


def flattened_code_files(variant: Variant) -> dict[str, str]:
    """``{file name: source}`` of every hf_variants module the variant's classes need, flattened into
    one folder with relative imports rewritten to same-folder imports.

    Raises ``ValueError`` if two needed modules share a file name, or a module imports a package
    ``__init__`` (which cannot be flattened).
    """
    roots = [variant.config_class.__module__, *(cls.__module__ for cls in variant.models.values())]
    files: dict[str, str] = {}
    seen: set[str] = set()
    pending = list(dict.fromkeys(roots))
    while pending:
        module_name = pending.pop()
        if module_name in seen:
            continue
        seen.add(module_name)
        path = _module_file(module_name)
        if not path.is_file():
            raise ValueError(f"Cannot flatten {module_name}: {path} is not a module file (package __init__?).")
        source = path.read_text(encoding="utf-8")

        def rewrite(match: re.Match[str], module_name: str = module_name) -> str:
            target = _resolve_relative(module_name, match.group(2), match.group(3))
            pending.append(target)
            return f"{match.group(1)}.{target.rsplit('.', 1)[-1]}{match.group(4)}"

        flat_source = _RELATIVE_IMPORT.sub(rewrite, source)
        ast.parse(flat_source)  # the rewrite must keep the file valid Python
        name = path.name
        if name in files:
            raise ValueError(f"Two modules flatten to the same file name {name!r}.")
        files[name] = flat_source
    return files


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
    template_dir: Path | None = None,
    license: str = "apache-2.0",
    head: str = "AutoModelForMaskedLM",
) -> ModelCard:
    """Render ``model_cards/<model_type>.md`` with YAML metadata and optional results; the usage
    snippet is the one of ``head`` (the Auto class of the saved model).

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
    defaults = variant.config_class()
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template_dir)), keep_trailing_newline=True, undefined=jinja2.StrictUndefined
    )
    content = environment.get_template(template_name).render(
        card_data=card_data.to_yaml(),
        model_name=model_name,
        repo_id=repo_id or f"your-name/{model_name}",
        usage=USAGE_BY_AUTO_CLASS[head].format(repo_id=repo_id or f"your-name/{model_name}"),
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
        hf_variants_version=_package_version(),
    )
    return ModelCard(content)


def _package_version() -> str:
    from . import __version__

    return __version__


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
    pipeline_tag: str | None = None,
) -> Path:
    """Write a self-contained Hub folder for ``model`` (any registered hf_variants model).

    Returns the folder. Any Auto class of the variant loads it with ``trust_remote_code=True``;
    weights the saved head does not have (e.g. a classifier when exporting an MLM) are initialised
    as usual by the loading head.
    """
    model_type = getattr(model.config, "model_type", None)
    if model_type not in VARIANTS:
        raise ValueError(f"{type(model).__name__} (model_type={model_type!r}) is not an hf_variants model.")
    variant = VARIANTS[model_type]
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)

    model.save_pretrained(output_dir, safe_serialization=True)
    config_path = output_dir / "config.json"
    config_dict = json.loads(config_path.read_text(encoding="utf-8"))
    config_dict["auto_map"] = auto_map(variant)
    config_path.write_text(json.dumps(config_dict, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    for name, source in flattened_code_files(variant).items():
        (output_dir / name).write_text(source, encoding="utf-8")
    if tokenizer is not None:
        tokenizer.save_pretrained(output_dir)

    saved_head = next((name for name, cls in variant.models.items() if isinstance(model, cls)), "AutoModel")
    card = render_model_card(
        variant,
        model.config,
        repo_id=repo_id,
        pipeline_tag=pipeline_tag or PIPELINE_TAG_BY_AUTO_CLASS[saved_head],
        datasets=datasets,
        results=results,
        training_summary=training_summary,
        head=saved_head,
    )
    card.save(output_dir / "README.md")
    return output_dir


def push_folder_to_hub(
    folder: str | Path,
    repo_id: str,
    *,
    token: str | None = None,
    private: bool = False,
    commit_message: str = "Upload hf-variants model",
    api: huggingface_hub.HfApi | None = None,
) -> str:
    """Create ``repo_id`` if needed and upload every file of ``folder`` in one commit.

    ``api`` defaults to ``huggingface_hub.HfApi(token=token)``; tests pass an offline fake that
    implements ``create_repo`` and ``create_commit``. Returns the repo id the Hub reports.
    """
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(f"{folder} has no config.json; create it with export_for_hub first.")
    api = api or huggingface_hub.HfApi(token=token)
    repo = api.create_repo(repo_id=repo_id, private=private, exist_ok=True, repo_type="model")
    operations = [
        CommitOperationAdd(path_in_repo=path.relative_to(folder).as_posix(), path_or_fileobj=str(path))
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and not path.name.startswith(".")
    ]
    api.create_commit(repo_id=repo.repo_id, operations=operations, commit_message=commit_message, repo_type="model")
    return repo.repo_id
