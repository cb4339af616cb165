"""``hf-variants``: the compare pipeline on the embedded default (report numbers recomputed from the
saved models), data resolution order, clear errors for incomplete data folders, info and export."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

from hf_variants.cli import main as cli_main
from hf_variants.core.encoder_layers import MatchedSize
from hf_variants.core.overrides import format_overrides, parse_overrides
from hf_variants.lab import compare
from hf_variants.lab.spec import ModelSpec
from hf_variants.training import checkpoints
from hf_variants_cli.compare import DEFAULT_MODELS

from .helpers import REPO_ROOT

CLI = Path(sys.executable).parent / "hf-variants"
#: The control, the external reference, a mixed model (Macaron layer with MGK attention) and two variants.
MODELS = ["bert_control", "bert", "macaron_bert:attention_type=mgk", "transject", "node_transformer"]
#: With each variant's matched control added after it (the default).
RUN_MODELS = [
    "bert_control", "bert", "macaron_bert:attention_type=mgk", "control of macaron_bert:attention_type=mgk",
    "transject", "control of transject", "node_transformer", "control of node_transformer",
]  # fmt: skip
MIXED_FOLDER = "macaron_bert__attention_type-mgk"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The console script on the embedded default at a tiny budget (offline, no data folder)."""
    output = tmp_path_factory.mktemp("compare")
    env = {k: v for k, v in os.environ.items() if k != compare.DATA_ENV}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    command = [
        str(CLI), "compare", "--output_dir", str(output), "--models", *MODELS, "--hidden_size", "32",
        "--head_size", "16", "--num_layers", "2", "--pretrain_steps", "6", "--finetune_steps", "6",
        "--pretrain_batch_size", "8", "--finetune_batch_size", "8", "--max_seq_length", "32",
        "--analysis_sentences", "3", "--disable_tqdm",
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "Data: embedded default" in completed.stdout
    return output


def test_report_is_complete(report: Path) -> None:
    results = json.loads((report / "results.json").read_text())
    assert results["data"]["kind"] == "synthetic" and results["tasks"] == [compare.SYNTHETIC_TASK]
    assert list(results["models"]) == RUN_MODELS
    text = (report / "report.md").read_text()
    for name in RUN_MODELS:
        assert f"| {name} |" in text or f"| {name} (transformers BERT, external reference) |" in text
    assert results["models"]["macaron_bert:attention_type=mgk"]["attention_type"] == "mgk"
    assert results["models"]["macaron_bert:attention_type=mgk"]["layer_scheme"] == "strang"
    expected = {
        f"figures/{name}.png"
        for name in ("learning_curves", "attention_rank", "distance_ratios", "nfe_node_transformer",
                     "attention_bert", "attention_bert_control", "attention_macaron_bert_attention_type_mgk")
    }  # fmt: skip
    paths = [figure["path"] for figure in results["figures"]]
    assert expected <= set(paths)
    assert "figures/attention_transject.png" not in paths  # no attention matrices in TransJect
    assert "No attention maps or ranks for transject:" in text  # named, not silently left out
    for figure in results["figures"]:
        assert (report / figure["path"]).read_bytes()[:8] == PNG_MAGIC, figure
        assert f"]({figure['path']})" in text and f"*{figure['caption']}*" in text
    assert "hf-variants compare --output_dir" in text
    assert text.index("## Answer") < text.index("## All models") < text.index("## Figures")
    assert "depend on the\nmachine's load" in text


def test_each_variant_is_paired_with_its_matched_control(report: Path) -> None:
    """The control has the variant's sizes (MGK's half heads and head width included) and only its idea
    turned off; the answer table pairs them."""
    results = json.loads((report / "results.json").read_text())
    models = results["models"]
    expected_pairs = {
        "macaron_bert:attention_type=mgk": ("softmax", "lie_trotter", {}),
        "transject": ("softmax", "lie_trotter", {}),
        "node_transformer": ("softmax", "ode", {"block_type": "vanilla"}),
    }
    changes_shown = {
        "macaron_bert:attention_type=mgk": "`attention_type=softmax`, `layer_scheme=lie_trotter`",
        "transject": "`attention_type=softmax`, `layer_scheme=lie_trotter`",
        "node_transformer": "`block_type=vanilla`",
    }
    text = (report / "report.md").read_text()
    for variant, (attention, scheme, extra) in expected_pairs.items():
        control = models[f"control of {variant}"]
        assert control["control_of"] == variant and control["model_type"] == models[variant]["model_type"]
        assert (control["attention_type"], control["layer_scheme"]) == (attention, scheme)
        sizes = {k: v for k, v in models[variant]["config_overrides"].items() if k not in ("attention_type",)}
        assert sizes.items() <= control["config_overrides"].items()
        assert extra.items() <= control["config_overrides"].items()
        assert f"| {variant} | {changes_shown[variant]} | agreement |" in text
    mixed = models["control of macaron_bert:attention_type=mgk"]["config_overrides"]
    assert mixed["num_attention_heads"] == 1 and mixed["head_dim"] == 16  # the MGK model's heads, not BERT's 2
    assert models["bert_control"]["control_of"] is None and "control of bert_control" not in models


def test_report_numbers_match_the_saved_models(report: Path) -> None:
    results = json.loads((report / "results.json").read_text())
    dev = [line.rsplit(",", 1) for line in (report / "data" / "agreement_dev.csv").read_text().splitlines()[1:]]
    sentences, labels = [s for s, _ in dev], np.asarray([int(label) for _, label in dev])
    tokenizer = AutoTokenizer.from_pretrained(report / "tokenizer")
    for name, entry in results["models"].items():
        folder = report / "models" / ModelSpec.parse(name).folder
        mlm = AutoModelForMaskedLM.from_pretrained(folder / "mlm")
        assert entry["parameters"] == sum(p.numel() for p in mlm.parameters())
        assert (
            entry["pretraining"]["perplexity"]
            == json.loads((folder / "mlm" / "results.json").read_text())["perplexity"]
        )
        classifier = AutoModelForSequenceClassification.from_pretrained(folder / "agreement").eval()
        with torch.no_grad():
            batch = tokenizer(sentences, padding=True, truncation=True, max_length=32, return_tensors="pt")
            predicted = classifier(**batch).logits.argmax(-1).numpy()
        tuned = entry["fine_tuning"]["agreement"]
        assert tuned["value"] == pytest.approx(float((predicted == labels).mean())), name
        one_class = np.bincount(predicted, minlength=2).max() >= 0.99 * len(predicted)
        assert tuned["did_not_learn"] == one_class, name
        chance = np.bincount(labels).max() / len(labels)
        guessing = tuned["value"] < chance + 1.96 * (chance * (1 - chance) / len(labels)) ** 0.5
        shown = f"did not learn (chance {100 * chance:.1f})" if one_class else (
            f"{100 * tuned['value']:.1f}" + (f" (at chance {100 * chance:.1f})" if guessing else ""))  # fmt: skip
        assert f"| {shown} |" in (report / "report.md").read_text(), name
    nfe = results["models"]["node_transformer"]["analysis"]["nfe_per_block"]
    assert len(nfe) == 3 and all(len(row) == 2 and min(row) >= 6 for row in nfe)  # dopri5: ≥ 6 per step
    assert results["models"]["bert_control"]["analysis"]["attention_rank_fraction"]["mean"] <= 1.0
    assert len(results["models"]["transject"]["analysis"]["distance_ratio"]) == 2


def fine_tuning(value: float, did_not_learn: bool = False) -> dict:
    """One model's fine-tuning entry as ``compare`` records it: accuracy on 400 dev examples, half positive."""
    return {"metric": "accuracy", "value": value, "did_not_learn": did_not_learn, "chance": 0.5,
            "dev_examples": 400, "learning_rate": 1e-3,
            "heldout_scores_by_learning_rate": {"0.0003": 0.5, "0.001": 0.55, "0.003": 0.5}}  # fmt: skip


@pytest.mark.parametrize(
    ("variant", "control", "variant_shown", "conclusion"),
    [
        # 0.5 + 1.96 · √(0.25 / 400) = 0.549: 54.5% on 400 examples is a guessing model's score, 56% is not
        (0.545, 1.0, "54.5 (at chance 50.0)", "mgk_bert scored no better than chance at this budget"),
        (0.43, 0.9, "43.0 (at chance 50.0)", "mgk_bert scored no better than chance at this budget"),
        (0.56, 1.0, "56.0", "mgk_bert below its control by 44.0 points — one seed, so no interval."),
        (0.97, 0.99, "97.0", "below its control by 2.0 points — one seed, so no interval: differences of a few"),
        (0.99, 0.99, "99.0", "mgk_bert equal to its control — one seed"),
    ],
)
def test_answer_marks_scores_at_chance_and_words_differences_by_size(variant, control, variant_shown, conclusion):
    results = {"tasks": ["agreement"], "models": {
        "mgk_bert": {"control_of": None, "fine_tuning": {"agreement": fine_tuning(variant)}},
        "control of mgk_bert": {"control_of": "mgk_bert", "control_changes": {"attention_type": "softmax"},
                                "fine_tuning": {"agreement": fine_tuning(control)}},
    }}  # fmt: skip
    text = "\n".join(compare.answer_lines(results))
    assert f"| agreement | {variant_shown} | {100 * control:.1f} |" in text
    assert conclusion in text
    if "chance" in conclusion:
        assert "(0.0003, 0.001, 0.003), so this run says nothing about mgk_bert's idea" in text
        assert "within seed-to-seed spread" not in text


def test_learning_rate_is_chosen_on_held_out_training_data(report: Path) -> None:
    """Every model's fine-tuning rate is the best of the sweep on a held-out tenth of the training split
    (those runs never evaluate dev); only the final run at that rate is scored on dev."""
    results = json.loads((report / "results.json").read_text())
    for name, entry in results["models"].items():
        tuned = entry["fine_tuning"]["agreement"]
        scores = {float(rate): score for rate, score in tuned["heldout_scores_by_learning_rate"].items()}
        assert sorted(scores) == [3e-4, 1e-3, 3e-3]
        assert tuned["learning_rate"] == min(r for r, v in scores.items() if v == max(scores.values())), name
        folder = report / "models" / ModelSpec.parse(name).folder
        for rate, score in scores.items():
            sweep = json.loads((folder / f"agreement-sweep-lr{rate:g}" / "results.json").read_text())
            assert sweep["evaluated_on"].startswith("held-out 0.1 of the training split")
            assert sweep["eval"]["validation"]["samples"] == 200  # a tenth of the 2,000 training rows, not dev's 400
            assert sweep["eval"]["validation"]["accuracy"] == score
        final = json.loads((folder / "agreement" / "results.json").read_text())
        assert final["evaluated_on"] == "dev set" and final["eval"]["validation"]["samples"] == 400


def test_export_writes_a_card_with_the_fine_tuning_result(report: Path, tmp_path: Path) -> None:
    import shutil

    checkpoint = tmp_path / "edited"  # a copy edited by hand: its manifest would refuse the edit, so it goes
    shutil.copytree(report / "models" / MIXED_FOLDER / "agreement", checkpoint)
    (checkpoint / checkpoints.MANIFEST_FILE).unlink()
    (checkpoint / "results.json").write_text(json.dumps({**json.loads((checkpoint / "results.json").read_text()),
                                                         "task": "cola"}))  # fmt: skip
    cli_main(["export", str(checkpoint), "--output_dir", str(tmp_path / "hub"), "--repo_id", "me/mgk"])
    card = (tmp_path / "hub" / "README.md").read_text()
    metadata = yaml.safe_load(card.split("---")[1])
    assert metadata["pipeline_tag"] == "text-classification"
    assert 'attention_type="mgk"` × layer scheme\n`layer_scheme="strang"`' in card and "**mixed**" in card
    config = json.loads((tmp_path / "hub" / "config.json").read_text())
    assert config["architectures"] == ["MacaronBertForSequenceClassification"] and "auto_map" in config
    assert config["attention_type"] == "mgk" and config["num_key_components"] == 2


def test_model_specs_parse_and_unknown_names_are_refused() -> None:
    spec = ModelSpec.parse("node_transformer:attention_type=mlk,rtol=1e-4")
    assert spec.name == "node_transformer:attention_type=mlk,rtol=1e-4" and spec.pair() == ("mlk", "ode")
    assert "/" not in spec.folder and ":" not in spec.folder
    control = ModelSpec.parse("control of mgk_bert")
    assert control.name == "control of mgk_bert" and control.pair() == ("softmax", "lie_trotter")
    assert control.control_of == ModelSpec("mgk_bert") and " " not in control.folder
    with pytest.raises(Exception, match="no matched control"):
        ModelSpec.parse("control of bert_control")
    for text, message in (
        ("bert_kontrol", "unknown model type 'bert_kontrol'"),
        ("macaron_bert:attention_type=performer", "attention_type must be one of"),
        ("macaron_bert:attention_type=mgk,num_key_component=3", "num_key_component is not a field of macaron_bert"),
        ("bert:attention_type=mgk", "use bert_control"),
    ):
        with pytest.raises(Exception, match=message):
            ModelSpec.parse(text)


def test_default_models_keep_their_sizes_and_specs_add_theirs() -> None:
    """The defaults give the sizes the recorded reports used (each idea derives its own from the shared
    size); a switched axis brings its own size rule; a control takes its variant's sizes."""
    size = MatchedSize(128, 2, head_size=32, solver_tolerance=1e-3, max_solver_steps=50)
    sizes = {name: compare.matched_fields(ModelSpec(name), size) for name in DEFAULT_MODELS}
    shared = {"hidden_size": 128, "num_hidden_layers": 2}
    assert sizes == {
        "bert_control": {**shared, "intermediate_size": 512, "num_attention_heads": 4},
        "macaron_bert": {**shared, "intermediate_size": 512, "num_attention_heads": 4},
        "mgk_bert": {**shared, "intermediate_size": 512, "num_attention_heads": 2, "head_dim": 32},
        "transject": {**shared, "num_attention_heads": 1, "num_experts": 4},
        "node_transformer": {**shared, "intermediate_size": 512, "num_attention_heads": 4,
                             "rtol": 1e-3, "atol": 1e-3, "max_num_steps": 50},
    }  # fmt: skip
    mixed = compare.matched_fields(ModelSpec.parse("macaron_bert:attention_type=mgk"), size)
    assert mixed == {**sizes["mgk_bert"], "attention_type": "mgk"}
    own = compare.matched_fields(ModelSpec.parse("mgk_bert:num_attention_heads=1"), size)
    assert own == {**sizes["mgk_bert"], "num_attention_heads": 1}
    control = compare.matched_fields(ModelSpec("transject").control(), size)
    assert control == {**sizes["transject"], "attention_type": "softmax", "layer_scheme": "lie_trotter"}
    for name, fields in sizes.items():  # every size builds, at the shared width and depth
        config = ModelSpec(name).config(fields)
        assert (config.hidden_size, config.num_hidden_layers) == (128, 2)
        assert parse_overrides(format_overrides(fields)) == fields  # what --config_overrides carries


def test_overwrite_reaches_both_training_scripts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Re-running compare with other settings into one folder is refused by run_mlm/run_glue (another
    run's folder) unless --overwrite_output_dir, which compare passes on to both."""
    from hf_variants.training import run_glue, run_mlm

    seen: dict[str, list[str]] = {}
    monkeypatch.setattr(run_mlm, "main", lambda argv: seen.setdefault("mlm", argv))
    monkeypatch.setattr(run_glue, "main", lambda argv: seen.setdefault("glue", argv))
    source = compare.synthetic_source(tmp_path / "data", seed=0)
    for flag, expected_glue in (([], "false"), (["--overwrite_output_dir"], "true")):
        seen.clear()
        args = compare.parse_args(["--output_dir", str(tmp_path), *flag])
        compare.pretrain(args, source, "tok", ModelSpec("bert_control"))
        compare.fine_tune(args, source, ModelSpec("bert_control"), compare.SYNTHETIC_TASK, 1e-3, "run")
        assert ("--overwrite_output_dir" in seen["mlm"]) == bool(flag)
        glue = seen["glue"]
        assert glue[glue.index("--overwrite_output_dir") + 1] == expected_glue


def test_info_lists_every_model_type() -> None:
    completed = subprocess.run([str(CLI), "info"], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    for name in ("bert_control", "macaron_bert", "mgk_bert", "transject", "node_transformer"):
        assert name in completed.stdout
    assert "transformers 5." in completed.stdout and "device:" in completed.stdout


# ------------------------------------------------------------------------------------------------
# Data resolution
# ------------------------------------------------------------------------------------------------
def make_data_dir(root: Path, tasks: tuple[str, ...] = ("SST-2",), corpus: bool = True) -> Path:
    if corpus:
        (root / "wikitext-2").mkdir(parents=True)
        for name in ("train.txt", "valid.txt"):
            (root / "wikitext-2" / name).write_text("a line of text\n")
    for folder in tasks:
        (root / "glue" / folder).mkdir(parents=True)
        for name in ("train.tsv", "dev.tsv"):
            (root / "glue" / folder / name).write_text("sentence\tlabel\nfine .\t1\n")
    return root


def test_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    given, from_env = make_data_dir(tmp_path / "given"), make_data_dir(tmp_path / "env")
    monkeypatch.setattr(compare, "hub_reachable", lambda timeout=10.0: True)
    monkeypatch.setenv(compare.DATA_ENV, str(from_env))
    source = compare.resolve_data(given, None, tmp_path / "out", seed=0)
    assert source.kind == "data_dir" and str(given) in source.corpus_args[1]
    source = compare.resolve_data(None, None, tmp_path / "out", seed=0)
    assert source.kind == "env" and str(from_env) in source.corpus_args[1]
    assert source.task_args["sst2"] == ["--task_name", "sst2", "--glue_dir", str(from_env / "glue")]
    monkeypatch.delenv(compare.DATA_ENV)
    source = compare.resolve_data(None, None, tmp_path / "out", seed=0)
    assert source.kind == "hub" and source.corpus_args[:2] == ["--dataset_name", "wikitext"]
    monkeypatch.setattr(compare, "hub_reachable", lambda timeout=10.0: False)
    source = compare.resolve_data(None, None, tmp_path / "out", seed=0)
    assert source.kind == "synthetic" and (tmp_path / "out" / "data" / "agreement_train.csv").is_file()


def test_offline_hub_is_not_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert compare.hub_reachable() is False


def test_incomplete_data_dir_errors_name_what_is_missing(tmp_path: Path) -> None:
    no_corpus = make_data_dir(tmp_path / "a", corpus=False)
    with pytest.raises(FileNotFoundError, match=r"no corpus file wikitext-2/train.txt"):
        compare.resolve_data(no_corpus, None, tmp_path / "out", seed=0)
    no_task = make_data_dir(tmp_path / "b")
    with pytest.raises(FileNotFoundError, match=r"no GLUE task cola: expected .*CoLA/train.tsv"):
        compare.resolve_data(no_task, ["cola"], tmp_path / "out", seed=0)
    with pytest.raises(ValueError, match=r"Unknown GLUE task 'nope'"):
        compare.resolve_data(no_task, ["nope"], tmp_path / "out", seed=0)


def test_glue_tasks_without_any_data_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(compare.DATA_ENV, raising=False)
    with pytest.raises(FileNotFoundError, match=r"embedded default has only the synthetic task 'agreement'"):
        compare.resolve_data(None, ["sst2"], tmp_path, seed=0, use_hub=False)


def test_synthetic_agreement_labels_follow_subject_verb_number() -> None:
    from hf_variants.synthetic import synthetic_acceptability

    examples = synthetic_acceptability(200, seed=1)
    assert sum(label for _, label in examples) == 100
    for sentence, label in examples:
        subject, verb = sentence.split()[2], sentence.split()[3]
        plural_subject, singular_verb = subject.endswith("s"), verb.endswith("s")
        assert label == int(plural_subject != singular_verb), sentence


def test_console_shows_progress_bars_not_log_lines(tmp_path: Path) -> None:
    """Without --disable_tqdm: one bar for the run and one per stage; the Trainer's log dicts, metric
    tables and dataset bars stay off the console (the stage's printed output goes to its log file)."""
    env = {k: v for k, v in os.environ.items() if k != compare.DATA_ENV}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    command = [
        str(CLI), "compare", "--output_dir", str(tmp_path), "--models", "bert_control", "--hidden_size", "32",
        "--head_size", "16", "--num_layers", "1", "--pretrain_steps", "4", "--finetune_steps", "12",
        "--pretrain_batch_size", "8", "--finetune_batch_size", "8", "--max_seq_length", "32",
        "--analysis_sentences", "2",
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    console = completed.stdout + completed.stderr
    assert "compare (all models): 100%" in console and "MLM: 100%" in console
    for noise in ("{'loss'", "'grad_norm'", "***** train metrics", "Casting", "Map:", "Loading weights"):
        assert noise not in console, noise
    assert "train_loss" in (tmp_path / "models" / "bert_control" / "agreement.log").read_text()
    history = json.loads((tmp_path / "models" / "bert_control" / "agreement" / "trainer_state.json").read_text())
    assert [e["step"] for e in history["log_history"] if "loss" in e] == [5, 10]  # logged, not printed


def test_a_failing_learning_rate_is_recorded_and_not_chosen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An N-ODE run whose solver gives up at one rate scores None there; the best finished rate is
    chosen; when every rate fails, the error names the model, the task and each failure."""
    from hf_variants.core.ode_layer import ODESolverError

    def fake_fine_tune(args, source, spec, task, rate, name, heldout=False):
        assert heldout and name == f"{task}-sweep-lr{rate:g}"
        if rate in failing:
            raise ODESolverError(f"N-ODE block 0: the dopri5 solver failed at lr {rate:g}")
        return {"eval": {"validation": {"accuracy": {3e-4: 0.6, 1e-3: 0.7, 3e-3: 0.9}[rate]}}}

    monkeypatch.setattr(compare, "fine_tune", fake_fine_tune)
    args = compare.parse_args(["--output_dir", str(tmp_path)])
    spec = ModelSpec("node_transformer")
    failing = {3e-3}
    chosen, scores = compare.choose_learning_rate(args, None, spec, compare.SYNTHETIC_TASK, tmp_path, quiet=True)
    assert chosen == 1e-3 and scores == {3e-4: 0.6, 1e-3: 0.7, 3e-3: None}
    failing = {3e-4, 1e-3, 3e-3}
    with pytest.raises(RuntimeError, match=r"node_transformer on agreement: every learning rate failed.*lr 0.001"):
        compare.choose_learning_rate(args, None, spec, compare.SYNTHETIC_TASK, tmp_path, quiet=True)
    assert compare.matched_fields(spec, compare.matched_size(args))["max_num_steps"] == 50


TINY_COMPARE = ["--models", "bert_control", "--hidden_size", "32", "--head_size", "16", "--num_layers", "1",
                "--pretrain_steps", "4", "--finetune_steps", "6", "--finetune_learning_rates", "1e-3",
                "--pretrain_batch_size", "8", "--finetune_batch_size", "8", "--max_seq_length", "32",
                "--analysis_sentences", "2", "--disable_tqdm"]  # fmt: skip


def run_compare(output: Path, *extra: str, failpoint: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != compare.DATA_ENV}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if failpoint is not None:
        env["HF_VARIANTS_FAILPOINT"] = failpoint
    command = [str(CLI), "compare", "--output_dir", str(output), *TINY_COMPARE, *extra]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600)


def test_compare_owns_its_folder_and_reuses_finished_stages_after_a_kill(tmp_path: Path) -> None:
    """Killed after its pretraining stage, a re-run takes that stage's result instead of training again;
    another comparison in the folder is refused before it writes anything; a folder in use is refused;
    a stage whose files were altered is named instead of reused."""
    output = tmp_path / "compare"
    killed = run_compare(output, failpoint="compare:bert_control/mlm@0")
    assert killed.returncode == -9, killed.stderr[-2000:]
    weights = output / "models" / "bert_control" / "mlm" / "model.safetensors"
    written = weights.stat().st_mtime_ns
    finished = run_compare(output)
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert weights.stat().st_mtime_ns == written  # the finished pretraining was reused, not redone
    results = json.loads((output / "results.json").read_text())
    assert results["models"]["bert_control"]["pretraining"]["steps"] == 4
    assert checkpoints.verify_manifest(output) is not None

    tokenizer_files = {path.name: path.read_bytes() for path in (output / "tokenizer").iterdir()}
    other = run_compare(output, "--vocab_size", "150")
    assert other.returncode == 1 and "holds another run" in other.stderr and "vocab_size" in other.stderr
    assert {path.name: path.read_bytes() for path in (output / "tokenizer").iterdir()} == tokenizer_files

    holder = checkpoints.OutputDirLock(output)
    try:
        with pytest.raises(checkpoints.CheckpointError, match="is in use by another run"):
            compare.main(["--output_dir", str(output), *TINY_COMPARE])
    finally:
        holder.release()

    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    altered = run_compare(output)
    assert altered.returncode == 1 and "model.safetensors does not match the SHA-256" in altered.stderr
