"""Hub export and push, offline: flattened code, auto_map, model card, fake push, remote load."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import torch
import yaml

import hf_variants
from hf_variants.core.registration import VARIANTS
from hf_variants.hub import (
    PIPELINE_TAG_BY_AUTO_CLASS,
    LocalHub,
    TaskResult,
    auto_map,
    export_checkpoint,
    export_for_hub,
    flattened_code_files,
    push_folder_to_hub,
)
from hf_variants.tokenization import train_wordpiece_tokenizer

from .common import (
    HEADS,
    REMOTE_LOAD_SCRIPT,
    WITHOUT_PACKAGE,
    make_inputs,
    make_multiple_choice_inputs,
    perturb_parameters,
)
from .helpers import REPO_ROOT, files_below, run_python

CORPUS = [
    "the cat sat on the mat .",
    "the dog sat on the log .",
    "a cat and a dog played in the garden .",
    "paris is the capital of france .",
] * 20


class RecordingHub(LocalHub):
    """The local Hub, recording each commit's arguments (what the real ``HfApi.create_commit`` gets)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.uploads: list[dict] = []

    def create_commit(self, **kwargs):
        self.uploads.append(kwargs)
        return super().create_commit(**kwargs)


def small_mlm(seed: int = 0, vocab_size: int = 99) -> hf_variants.MacaronBertForMaskedLM:
    torch.manual_seed(seed)
    config = hf_variants.MacaronBertConfig(
        vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    return hf_variants.MacaronBertForMaskedLM(config).eval()


def read_card_metadata(readme: Path) -> dict:
    text = readme.read_text()
    match = re.match(r"^---\n(.*?)\n---\n", text, re.DOTALL)
    assert match, "model card has no YAML front matter"
    return yaml.safe_load(match.group(1))


@pytest.mark.parametrize("model_type", sorted(VARIANTS))
def test_flattened_code_has_only_same_folder_imports(model_type: str) -> None:
    files = flattened_code_files(VARIANTS[model_type])
    assert f"configuration_{model_type}.py" in files and f"modeling_{model_type}.py" in files
    for name, source in files.items():
        assert not re.search(r"^\s*from\s+\.\.", source, re.MULTILINE), name
        assert not re.search(r"^\s*(from|import)\s+hf_variants", source, re.MULTILINE), name
        for target in re.findall(r"^\s*from\s+\.(\w+)\s+import", source, re.MULTILINE):
            assert f"{target}.py" in files, f"{name} imports .{target}, which is not exported"


def test_auto_map_names_every_head() -> None:
    mapping = auto_map(VARIANTS["macaron_bert"])
    assert mapping["AutoConfig"] == "configuration_macaron_bert.MacaronBertConfig"
    assert mapping["AutoModelForSequenceClassification"] == (
        "modeling_macaron_bert.MacaronBertForSequenceClassification"
    )
    assert set(mapping) == {"AutoConfig", *HEADS}


def test_model_card_metadata_and_results(tmp_path: Path) -> None:
    result = TaskResult(
        task_type="text-classification",
        dataset_type="nyu-mll/glue",
        dataset_name="GLUE SST-2",
        dataset_config="sst2",
        dataset_split="validation",
        metric_type="accuracy",
        metric_value=0.8125,
    )
    folder = export_for_hub(small_mlm(), tmp_path / "with", repo_id="me/mac", datasets=["wikitext"], results=[result])
    meta = read_card_metadata(folder / "README.md")
    assert meta["library_name"] == "transformers"
    assert "custom_code" in meta["tags"] and "macaron_bert" in meta["tags"]
    assert meta["pipeline_tag"] == "fill-mask"
    assert meta["datasets"] == ["wikitext"]
    (entry,) = meta["model-index"]
    assert entry["name"] == "mac"
    (scored,) = entry["results"]
    assert scored["dataset"]["config"] == "sst2" and scored["metrics"][0]["value"] == pytest.approx(0.8125)
    body = (folder / "README.md").read_text()
    assert "| GLUE SST-2 | validation | accuracy | 0.8125 |" in body
    assert 'pipeline("fill-mask", model="me/mac", trust_remote_code=True)' in body

    plain = export_for_hub(small_mlm(), tmp_path / "without")
    assert "model-index" not in read_card_metadata(plain / "README.md")


#: Each head's card snippet runs on an exported folder; together the cases cover every variant.
SNIPPET_CASES = {
    "AutoModel": "transject",
    "AutoModelForMaskedLM": "macaron_bert",
    "AutoModelForSequenceClassification": "node_transformer",
    "AutoModelForTokenClassification": "mgk_bert",
    "AutoModelForQuestionAnswering": "bert_control",
    "AutoModelForMultipleChoice": "transject",
}


@pytest.mark.parametrize("head", sorted(SNIPPET_CASES))
def test_every_exported_cards_usage_snippet_runs_on_its_folder(head: str, tmp_path: Path) -> None:
    """The card shows the usage of the exported head (a classifier's card is not a fill-mask one), and
    that code runs on the folder, without the package, with the head's weights all loaded."""
    model_type = SNIPPET_CASES[head]
    extra = {"transject": {"num_experts": 2, "num_attention_heads": 1}, "mgk_bert": {"num_attention_heads": 2}}
    config = VARIANTS[model_type].config_class(
        **{
            "vocab_size": 60, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
            "intermediate_size": 32, "max_position_embeddings": 64, "num_labels": 2, **extra.get(model_type, {}),
        }
    )  # fmt: skip
    model = VARIANTS[model_type].models[head](config).eval()
    tokenizer = train_wordpiece_tokenizer(CORPUS, vocab_size=60, min_frequency=1)
    folder = export_for_hub(model, tmp_path / "export", tokenizer, repo_id="me/model")
    card = (folder / "README.md").read_text()
    assert read_card_metadata(folder / "README.md")["pipeline_tag"] == PIPELINE_TAG_BY_AUTO_CLASS[head]
    (snippet,) = re.findall(r"```python\n(.*?)```", card, flags=re.DOTALL)
    assert '"me/model"' in snippet
    script = WITHOUT_PACKAGE + snippet.replace('"me/model"', repr(str(folder)))
    result = run_python(script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip(), "the snippet printed nothing"
    # every weight of the saved head was found in the folder (a mismatched snippet reports MISSING keys)
    assert "MISSING" not in result.stdout + result.stderr


def test_export_rejects_foreign_models(tmp_path: Path) -> None:
    from transformers import BertConfig, BertModel

    bert = BertModel(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64))
    with pytest.raises(ValueError, match="not an hf_variants model"):
        export_for_hub(bert, tmp_path)


def test_push_with_fake_hub_then_remote_load_without_package(tmp_path: Path) -> None:
    """export → push (fake Hub writing to a local folder) → load every head in a fresh interpreter
    that cannot import hf_variants; the MLM head and backbone reproduce the original outputs."""
    model = small_mlm()
    perturb_parameters(model)
    folder = export_for_hub(model, tmp_path / "export")
    (folder / ".hf_variants.lock").write_text("")  # the package's bookkeeping stays behind
    api = RecordingHub(tmp_path / "hub")
    repo_id = push_folder_to_hub(folder, "someone/macaron-tiny", api=api, commit_message="first")
    pushed = tmp_path / "hub" / repo_id
    assert api.uploads[0]["commit_message"] == "first" and api.uploads[0]["repo_id"] == repo_id
    listed = json.loads((folder / "hf_variants_manifest.json").read_text())["files"]
    assert files_below(pushed) == sorted([*listed, "hf_variants_manifest.json"])

    inputs = make_inputs(model.config)
    with torch.no_grad():
        outputs = {
            "AutoModelForMaskedLM": model(**inputs).logits,
            "AutoModel": model.base_model(**inputs).last_hidden_state,
        }
    reference = tmp_path / "reference.pt"
    torch.save(
        {"heads": HEADS, "inputs": inputs, "inputs_mc": make_multiple_choice_inputs(model.config), "outputs": outputs},
        reference,
    )
    result = run_python(REMOTE_LOAD_SCRIPT, str(pushed), str(reference), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["AutoModelForMaskedLM"][2] == 0.0 and report["AutoModel"][2] == 0.0
    assert all(finite for _, finite, _ in report.values())


FILL_MASK_SCRIPT = WITHOUT_PACKAGE + textwrap.dedent(
    """
    from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline
    folder = sys.argv[1]
    model = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    predictions = pipeline("fill-mask", model=model, tokenizer=tokenizer)("the cat sat on the [MASK] .")
    print(json.dumps([p["token_str"] for p in predictions]))
    """
)


def test_exported_checkpoint_with_tokenizer_pushes_and_fills_masks(tmp_path: Path) -> None:
    tokenizer = train_wordpiece_tokenizer(CORPUS, vocab_size=60, min_frequency=1)
    model = small_mlm(vocab_size=len(tokenizer))
    checkpoint = tmp_path / "checkpoint"
    model.save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)

    folder = export_checkpoint(checkpoint, tmp_path / "export", repo_id="me/tiny")
    assert push_folder_to_hub(folder, "me/tiny", api=LocalHub(tmp_path / "hub")) == "me/tiny"
    pushed = tmp_path / "hub" / "me" / "tiny"
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= {p.name for p in pushed.iterdir()}
    assert read_card_metadata(pushed / "README.md")["pipeline_tag"] == "fill-mask"

    result = run_python(FILL_MASK_SCRIPT, str(pushed), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    tokens = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(tokens) == 5 and all(isinstance(t, str) for t in tokens)


def test_push_requires_an_exported_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="export_for_hub"):
        push_folder_to_hub(tmp_path, "me/nothing", api=LocalHub(tmp_path / "hub"))


def idea_files(*keys: str) -> set[str]:
    """The spec and modeling files of the ideas ``keys`` (each idea's folder holds these two)."""
    return {f"{kind}_{key}.py" for key in keys for kind in ("configuration", "modeling")}


#: The module files of every idea.
IDEA_FILES = idea_files("softmax", "mgk", "orthogonal", "lie_trotter", "strang", "ode", "vanilla", "injective")


@pytest.mark.parametrize(
    ("model_type", "overrides", "keys"),
    [
        ("bert_control", {}, {"softmax", "lie_trotter"}),
        ("mgk_bert", {}, {"mgk", "lie_trotter"}),  # MGK's classes extend the core's attention, not softmax's folder
        ("node_transformer", {}, {"ode", "softmax"}),
        ("macaron_bert", {"attention_type": "mgk", "num_attention_heads": 2}, {"strang", "mgk", "softmax"}),
        ("transject", {}, {"orthogonal", "injective"}),  # the orthogonal weights they share: the core's
        # another pair: its modules and the model type's default pair's (transformers builds the default config)
        ("node_transformer", {"attention_type": "mlk", "layer_scheme": "lie_trotter", "num_attention_heads": 2},
         {"mgk", "lie_trotter", "ode", "softmax"}),  # MLK is MGK's linear form, in MGK's files
    ],
)  # fmt: skip
def test_an_export_ships_the_code_of_its_own_pair_only(model_type, overrides, keys) -> None:
    config = VARIANTS[model_type].config_class(**overrides)
    files = flattened_code_files(VARIANTS[model_type], config)
    assert set(files) & IDEA_FILES == idea_files(*keys)


@pytest.mark.parametrize("model_type", sorted(VARIANTS))
def test_an_exported_config_loads_without_any_modeling_code(model_type: str, tmp_path: Path) -> None:
    """AutoConfig of an export imports its pair's specs only: no modeling file, no torchdiffeq, no flex
    attention (transformers' remote-code loader copies what the config module imports, and nothing else)."""
    variant = VARIANTS[model_type]
    config = variant.config_class(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                  intermediate_size=16)  # fmt: skip
    folder = export_for_hub(variant.models["AutoModelForMaskedLM"](config), tmp_path / "export")
    script = WITHOUT_PACKAGE + textwrap.dedent(
        """
        import transformers
        config = transformers.AutoConfig.from_pretrained(sys.argv[1], trust_remote_code=True)
        built = type(config)(hidden_size=48)  # building a config, as transformers does to diff against defaults
        loaded = sorted(name.rsplit(".", 1)[-1] for name in sys.modules if name.startswith("transformers_modules"))
        print(json.dumps({"loaded": loaded, "hidden_size": built.hidden_size, "pair": [config.attention_type,
                          config.layer_scheme], "torchdiffeq": "torchdiffeq" in sys.modules,
                          "flex": "torch.nn.attention.flex_attention" in sys.modules}))
        """
    )  # fmt: skip
    result = run_python(script, str(folder), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["pair"] == [config.attention_type, config.layer_scheme] and report["hidden_size"] == 48
    assert not report["torchdiffeq"] and not report["flex"]
    specs = {f"configuration_{config.attention_type}", f"configuration_{config.layer_scheme}"}
    assert specs | {f"configuration_{model_type}"} <= set(report["loaded"]), report["loaded"]
    assert not [name for name in report["loaded"] if name.startswith("modeling")], report["loaded"]


def test_a_missing_requirement_is_named_when_the_export_loads(tmp_path: Path) -> None:
    """transformers' remote-code check names torchdiffeq with its pip command (the card lists it too)."""
    config = hf_variants.NodeTransformerConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                               num_attention_heads=2, intermediate_size=16)  # fmt: skip
    folder = export_for_hub(hf_variants.NodeTransformerForMaskedLM(config), tmp_path / "export")
    assert "pip install 'torch>=2.13.0,<3' 'transformers>=5.17.0,<6' 'torchdiffeq>=0.2.5,<0.3'" in (
        folder / "README.md").read_text()  # fmt: skip
    script = WITHOUT_PACKAGE + textwrap.dedent(
        """
        class WithoutTorchdiffeq(importlib.abc.MetaPathFinder):  # as if it were not installed
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "torchdiffeq":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        sys.meta_path.insert(0, WithoutTorchdiffeq())
        import transformers
        try:
            transformers.AutoModel.from_pretrained(sys.argv[1], trust_remote_code=True)
        except ImportError as error:
            print(json.dumps(str(error)))
        """
    )  # fmt: skip
    result = run_python(script, str(folder), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    message = json.loads(result.stdout.strip().splitlines()[-1])
    assert "requires the following packages" in message and "pip install torchdiffeq" in message


def test_an_export_of_another_pair_saves_its_config_without_the_package(tmp_path: Path) -> None:
    """Saving (or logging) a config makes transformers build the model type's default config to diff
    against: an N-ODE model type exported with an MGK × Lie–Trotter pair must ship the default pair too."""
    config = hf_variants.NodeTransformerConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                               num_attention_heads=2, intermediate_size=16, attention_type="mgk",
                                               layer_scheme="lie_trotter")  # fmt: skip
    folder = export_for_hub(hf_variants.NodeTransformerForMaskedLM(config), tmp_path / "export")
    script = WITHOUT_PACKAGE + textwrap.dedent(
        """
        import transformers
        model = transformers.AutoModelForMaskedLM.from_pretrained(sys.argv[1], trust_remote_code=True)
        model.save_pretrained(sys.argv[2])
        print(json.dumps(transformers.AutoConfig.from_pretrained(sys.argv[2], trust_remote_code=True).attention_type))
        """
    )
    result = run_python(script, str(folder), str(tmp_path / "saved"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == "mgk"


def test_another_pair_on_an_exported_config_is_a_clear_error(tmp_path: Path) -> None:
    folder = export_for_hub(small_mlm(), tmp_path / "export")
    script = WITHOUT_PACKAGE + textwrap.dedent(
        """
        import transformers
        config = transformers.AutoConfig.from_pretrained(sys.argv[1], trust_remote_code=True)
        config.attention_type = "mlk"
        try:
            transformers.AutoModel.from_config(config, trust_remote_code=True)
        except ImportError as error:
            print(json.dumps(str(error)))
        """
    )
    result = run_python(script, str(folder), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    message = json.loads(result.stdout.strip().splitlines()[-1])
    assert "attention_type='mlk' needs configuration_mgk.py" in message and "pip install hf-variants" in message


def test_the_supported_versions_are_the_packages_own() -> None:
    """The range the exported code checks and its card prints is the one pyproject.toml declares (CI tests both
    ends): torch, transformers and, for N-ODE, torchdiffeq."""
    from hf_variants.core.compatibility import SUPPORTED_VERSIONS
    from hf_variants.hub import REQUIREMENTS_BY_FILE
    from hf_variants.lab.study import tomllib  # tomllib, or tomli on Python 3.10

    declared = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for name, (low, high) in SUPPORTED_VERSIONS.items():
        assert f"{name}>={low},<{high}" in declared
    assert set(REQUIREMENTS_BY_FILE.values()) <= set(declared)


@pytest.mark.parametrize(("name", "installed"), [("transformers", "4.57.1"), ("transformers", "6.0.0"),
                                                 ("torch", "2.12.1")])  # fmt: skip
def test_an_export_refuses_an_unsupported_version_in_one_line(name: str, installed: str, tmp_path: Path) -> None:
    """Loaded without the package beside a transformers or torch outside the tested range (the installed
    distribution's version as importlib reports it), the export's own code refuses in one line naming both."""
    config = hf_variants.MacaronBertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                           intermediate_size=16)  # fmt: skip
    folder = export_for_hub(hf_variants.MacaronBertModel(config), tmp_path / "export")
    script = WITHOUT_PACKAGE + textwrap.dedent(
        f"""
        import importlib.metadata
        reported = importlib.metadata.version
        importlib.metadata.version = lambda name: {installed!r} if name == {name!r} else reported(name)
        import transformers
        try:
            transformers.AutoConfig.from_pretrained(sys.argv[1], trust_remote_code=True)
        except ImportError as error:
            print(json.dumps(str(error)))
        """
    )
    result = run_python(script, str(folder), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    message = json.loads(result.stdout.strip().splitlines()[-1])
    low, high = {"transformers": ("5.17.0", "6"), "torch": ("2.13.0", "3")}[name]
    assert message == (f"This hf-variants model's code supports {name}>={low},<{high}, but {name} {installed} is "
                       f"installed: pip install '{name}>={low},<{high}'.")
