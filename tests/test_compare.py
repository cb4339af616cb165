"""``hf-variants``: the compare pipeline on the embedded default (report numbers recomputed from the
saved models), data resolution order, clear errors for incomplete data folders, info and export."""

from __future__ import annotations

import csv
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
from hf_variants.core.ideas import MatchedSize
from hf_variants.core.overrides import format_overrides, parse_overrides
from hf_variants.lab import compare, data_sources, evidence, protocol, stages, statistics
from hf_variants.lab import report as report_writer
from hf_variants.lab.spec import SHARED_DATA_RULE, ModelSpec
from hf_variants.settings.compare import DEFAULT_MARGIN_DECLARED, DEFAULT_MARGIN_REASON, DEFAULT_MODELS, DEFAULT_SEEDS
from hf_variants.storage import run_folder
from hf_variants.storage.files import CheckpointError

from .helpers import REPO_ROOT

CLI = Path(sys.executable).parent / "hf-variants"
#: The control, the external reference, a mixed model (Macaron layer with MGK attention) and two variants.
MODELS = ["bert_control", "bert", "macaron_bert:attention_type=mgk", "transject", "node_transformer"]
#: With each variant's matched control added after it (the default).
RUN_MODELS = [
    "bert_control", "bert", "macaron_bert:attention_type=mgk", "control of macaron_bert:attention_type=mgk",
    "transject", "control of transject", "node_transformer", "control of node_transformer",
    "bert_control:attention_type=mean", "bert_control (other seeds)",  # the calibration controls
]  # fmt: skip
MIXED_FOLDER = "macaron_bert__attention_type-mgk"
TASK = data_sources.SYNTHETIC_TASK
SEEDS = ["42", "43", "44"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The console script on the embedded default at a tiny budget with two learning rates (offline, no data
    folder)."""
    output = tmp_path_factory.mktemp("compare")
    env = {k: v for k, v in os.environ.items() if k != compare.DATA_ENV}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    command = [
        str(CLI), "compare", "--output_dir", str(output), "--models", *MODELS, "--hidden_size", "32",
        "--head_size", "16", "--num_layers", "2", "--pretrain_steps", "6", "--finetune_steps", "6",
        "--pretrain_batch_size", "8", "--finetune_batch_size", "8", "--max_seq_length", "32",
        "--analysis_sentences", "3", "--finetune_learning_rates", "1e-3", "3e-3", "--num_seeds", "3", "--disable_tqdm",
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "Data: embedded default" in completed.stdout
    return output


def test_report_is_complete(report: Path) -> None:
    results = json.loads((report / "results.json").read_text())
    assert results["data"]["kind"] == "synthetic" and results["tasks"] == [TASK]
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
    assert "No attention maps or ranks for transject, bert_control:attention_type=mean:" in text  # named
    for figure in results["figures"]:
        assert (report / figure["path"]).read_bytes()[:8] == PNG_MAGIC, figure
        assert f"]({figure['path']})" in text and f"*{figure['caption']}*" in text
    assert "hf-variants compare --output_dir" in text
    assert text.index("## Calibration") < text.index("## Answer") < text.index("## Runs left out")
    assert text.index("## Runs left out") < text.index("## All models") < text.index("## Figures")
    assert "depend on the machine's load" in text


def test_each_variant_is_paired_with_its_matched_control(report: Path) -> None:
    """The control has the variant's sizes (MGK's half heads and head width included) and only its idea
    turned off; the answer table pairs them."""
    results = json.loads((report / "results.json").read_text())
    models = results["models"]
    expected_pairs = {
        "macaron_bert:attention_type=mgk": ("softmax", "lie_trotter", {}),
        "transject": ("softmax", "lie_trotter", {}),
        "node_transformer": ("softmax", "vanilla", {"layer_scheme": "vanilla"}),
    }
    changes_shown = {
        "macaron_bert:attention_type=mgk": "`attention_type=softmax`, `layer_scheme=lie_trotter`",
        "transject": "`attention_type=softmax`, `layer_scheme=lie_trotter`",
        "node_transformer": "`layer_scheme=vanilla`",
    }
    text = (report / "report.md").read_text()
    for variant, (attention, scheme, extra) in expected_pairs.items():
        control = models[f"control of {variant}"]
        assert control["control_of"] == variant and control["model_type"] == models[variant]["model_type"]
        assert (control["attention_type"], control["layer_scheme"]) == (attention, scheme)
        sizes = {k: v for k, v in models[variant]["config_overrides"].items() if k not in ("attention_type",)}
        assert sizes.items() <= control["config_overrides"].items()
        assert extra.items() <= control["config_overrides"].items()
        assert f"| {variant} | {changes_shown[variant]} | {TASK} |" in text
    mixed = models["control of macaron_bert:attention_type=mgk"]["config_overrides"]
    assert mixed["num_attention_heads"] == 1 and mixed["head_dim"] == 16  # the MGK model's heads, not BERT's 2
    assert models["bert_control"]["control_of"] is None and "control of bert_control" not in models


def test_report_numbers_match_the_saved_models(report: Path) -> None:
    """Every seed's dev score and verdict, recomputed here from the saved classifier and the dev file."""
    results = json.loads((report / "results.json").read_text())
    with (report / "data" / f"{TASK}_dev.csv").open(newline="") as handle:
        dev = list(csv.DictReader(handle))
    sentences, labels = [row["sentence"] for row in dev], np.asarray([int(row["label"]) for row in dev])
    tokenizer = AutoTokenizer.from_pretrained(report / "tokenizer")
    for name, entry in results["models"].items():
        spec = ModelSpec.parse(name)
        folder = report / "models" / spec.folder
        mlm = AutoModelForMaskedLM.from_pretrained(folder / f"mlm-seed{42 + spec.seed_offset}")
        assert entry["parameters"] == sum(p.numel() for p in mlm.parameters())
        for seed in SEEDS:  # one pretraining per seed: each seed is a whole replicate
            pretrained = json.loads((folder / f"mlm-seed{int(seed) + spec.seed_offset}" / "results.json").read_text())
            assert entry["pretraining_runs"][seed]["eval_loss"] == pretrained["eval_loss"]
            assert pretrained["arguments"]["seed"] == int(seed) + spec.seed_offset
            assert pretrained["arguments"]["data_seed"] == int(seed)  # every model of the replicate: its data
        assert len({run["eval_loss"] for run in entry["pretraining_runs"].values()}) == len(SEEDS)
        runs = entry["fine_tuning"][TASK]["runs"]
        assert sorted(runs) == SEEDS
        for seed, run in runs.items():
            trained = folder / f"{TASK}-seed{int(seed) + spec.seed_offset}"  # a replica's seeds are shifted
            classifier = AutoModelForSequenceClassification.from_pretrained(trained).eval()
            with torch.no_grad():
                batch = tokenizer(sentences, padding=True, truncation=True, max_length=32, return_tensors="pt")
                predicted = classifier(**batch).logits.argmax(-1).numpy()
            assert run["value"] == pytest.approx(float((predicted == labels).mean())), name
            one_class = np.bincount(predicted, minlength=2).max() >= 0.99 * len(predicted)
            assert run["did_not_learn"] == one_class, name
            assert run["status"] == ("did not learn" if one_class else run["status"])
            assert json.loads((trained / "results.json").read_text())["seed"] == int(seed) + spec.seed_offset
    nfe = results["models"]["node_transformer"]["analysis"]["nfe_per_block"]
    assert len(nfe) == 3 and all(len(row) == 2 and min(row) >= 6 for row in nfe)  # dopri5: ≥ 6 per step
    assert results["models"]["bert_control"]["analysis"]["attention_rank_fraction"]["mean"] <= 1.0
    assert len(results["models"]["transject"]["analysis"]["distance_ratio"]) == 2


def seed_runs(values: list[float], statuses: list[str] | None = None) -> dict:
    """Runs as ``compare`` records them: accuracy on 400 dev examples, half positive, a falling loss
    curve unless a status says otherwise."""
    runs = {}
    for index, value in enumerate(values):
        status = (statuses or ["learned"] * len(values))[index]
        curve = [0.69] * 8 if status == "stayed on the plateau" else [0.69, 0.5, 0.3, 0.2, 0.1, 0.05, 0.02, 0.01]
        logged = [{"step": 5 * (i + 1), "loss": loss} for i, loss in enumerate(curve)]
        runs[str(42 + index)] = {"metric": "accuracy", "value": value, "status": status, "curve": logged,
                                 "did_not_learn": status == "did not learn", "chance": 0.5, "dev_examples": 400}
    return runs


@pytest.mark.parametrize(
    ("variant", "control", "statuses", "difference", "conclusion"),
    [
        # differences 0.02, 0.03, 0.01: mean 0.02, s = 0.01, t(0.975, 2) = 4.303 → ± 2.48 points; p = 0.074
        ([0.92, 0.93, 0.91], [0.90, 0.90, 0.90], None, "+2.0 [-0.5, +4.5]",
         "not resolved: +2.0 [-0.5, +4.5] points over 3 seeds (p = 0.074); the data still allow anything from -0.5 "
         "to +4.5 points"),
        # differences 0.09, 0.07, 0.09: s = 0.0115 → ± 4.303 · 0.0115 / √3 = 2.87 points; bold: excludes 0;
        # t = 12.5: p = 1 − 12.5 / √158.25 = 0.0063 (n = 3 has a closed form)
        ([0.99, 0.98, 0.99], [0.90, 0.91, 0.90], None, "**+8.3 [+5.5, +11.2]**",
         "above its control: **+8.3 [+5.5, +11.2]** points over 3 seeds (p = 0.006)"),
        # seed 44: the variant stayed on the plateau; paired over 42 and 43 only (t(0.975, 1) = 12.706)
        ([0.80, 0.82, 0.55], [0.90, 0.91, 0.90], ["learned", "learned", "stayed on the plateau"],
         "**-9.5 [-15.9, -3.1]**", "Left out: variant seed 44: stayed on the plateau."),
        # counting every run, the two that did not learn at the guessing level 0.5: -40, -40, -20 → below
        ([0.5, 0.5, 0.7], [0.9, 0.9, 0.9], ["did not learn", "did not learn", "learned"], "—",
         "not comparable: fewer than 2 seeds where both learned; learned 1/3 against 3/3 (Fisher's exact p = 0.40); "
         "counting every run, one that did not learn at the guessing level 50.0: below its control: "
         "**-33.3 [-62.0, -4.6]** points over 3 seeds (p = 0.038); the two readings disagree"),
    ],
)  # fmt: skip
def test_answer_gives_paired_verdicts_over_seeds_and_names_runs_left_out(
    variant, control, statuses, difference, conclusion
):
    results = {"tasks": [TASK], "data": {"kind": "synthetic"}, "settings": {}, "models": {
        "mgk_bert": {"control_of": None, "fine_tuning": {TASK: {"metric": "accuracy", "learning_rate": 1e-3,
                                                                "runs": seed_runs(variant, statuses)}}},
        "control of mgk_bert": {"control_of": "mgk_bert", "control_changes": {"attention_type": "softmax"},
                                "fine_tuning": {TASK: {"metric": "accuracy", "learning_rate": 1e-3,
                                                       "runs": seed_runs(control)}}},
    }}  # fmt: skip
    text = "\n".join(report_writer.answer_lines(results))
    row = next(line for line in text.splitlines() if line.startswith("| mgk_bert |"))
    assert f"| {difference} |" in row, row
    assert conclusion in text
    assert "±2.0 points on " + TASK in text and "made before margins were declared" in text  # the margin, said
    if difference.startswith("+2.0"):  # not resolved: what more seeds would do, and the verdict at other margins
        needed = statistics.seeds_for_equivalence(0.01, 0.02, 0.8)
        assert (f"Its 3 seeds find a difference of {100 * statistics.detectable_difference(0.01, 3):.1f} points with "
                f"80% power; at its spread (1.0 points per seed) {needed} seeds would call it equivalent within ±2.0 "
                "with 80% probability if nothing differed.") in text  # fmt: skip
        assert "At ±1 / ±2 / ±3: not resolved / not resolved / not resolved." in text
    if difference == "—":
        assert "| 1/3, 3/3 |" in row and "| **-33.3 [-62.0, -4.6]** |" in row


def test_different_learning_rates_are_said_with_the_held_out_margin_that_chose_them() -> None:
    """The two sides of a pair chose different rates: the conclusion names each choice and the held-out scores
    that decided it."""
    def tuned(rate: float, scores: dict[str, float]) -> dict:
        return {"metric": "accuracy", "learning_rate": rate, "heldout_scores_by_learning_rate": scores,
                "runs": seed_runs([0.9, 0.91, 0.92])}  # fmt: skip

    results = {"tasks": [TASK], "data": {"kind": "synthetic"}, "settings": {"equivalence_margin": ["3"]}, "models": {
        "mgk_bert": {"control_of": None, "fine_tuning": {TASK: tuned(1e-3, {"0.001": 0.87, "0.003": 0.865})}},
        "control of mgk_bert": {"control_of": "mgk_bert", "control_changes": {"attention_type": "softmax"},
                                "fine_tuning": {TASK: tuned(3e-3, {"0.001": 0.84, "0.003": 0.845})}},
    }}  # fmt: skip
    text = "\n".join(report_writer.answer_lines(results))
    assert ("mgk_bert chose 0.001 (held-out 87.0 against 86.5 at 0.003); control of mgk_bert chose 0.003 (held-out "
            "84.5 against 84.0 at 0.001)") in text  # fmt: skip
    assert "±3.0 points on " + TASK in text and "given with `--equivalence_margin`" in text


def test_learning_rate_is_chosen_at_each_seed_on_held_out_training_data(report: Path) -> None:
    """Each seed chooses each model's fine-tuning rate as the best of the sweep on its own held-out tenth of the
    training split (those runs never evaluate dev; the slice is drawn with the seed); only that seed's final run
    at its chosen rate is scored on dev."""
    results = json.loads((report / "results.json").read_text())
    for name, entry in results["models"].items():
        tuned = entry["fine_tuning"][TASK]
        assert tuned["rate_choice"] == "each seed" and set(tuned["learning_rates"]) == set(SEEDS)
        spec = ModelSpec.parse(name)
        folder = report / "models" / spec.folder
        slices = set()
        for seed in SEEDS:
            seed_run = int(seed) + spec.seed_offset
            scores = {float(rate): score for rate, score in tuned["heldout_scores"][seed].items()}
            assert sorted(scores) == [1e-3, 3e-3]  # the fixture's rates
            held_out = {}
            for rate, score in scores.items():
                sweep = json.loads((folder / f"{TASK}-sweep-lr{rate:g}-seed{seed_run}" / "results.json").read_text())
                held_out[rate] = (score, sweep["eval"]["validation"]["loss"])
                assert sweep["evaluated_on"] == f"held-out 0.1 of the training split (seed {seed})"  # the replicate's
                assert sweep["eval"]["validation"]["samples"] == 200  # a tenth of the 2,000 training rows, not dev
                assert sweep["eval"]["validation"]["accuracy"] == score and sweep["seed"] == seed_run
                slices.add(sweep["evaluated_on"])
            # the best score among the runs that learned (else among all); a tie goes to the lower held-out loss
            learned = {rate: run for rate, run in held_out.items()
                       if f"{rate:g}, seed {seed}" not in tuned["heldout_left_out"]}  # fmt: skip
            candidates = learned or held_out
            best = max(score for score, _ in candidates.values())
            tied = [(loss, rate) for rate, (score, loss) in candidates.items() if score == best]
            assert tuned["learning_rates"][seed] == min(tied)[1], (name, seed)
            final = json.loads((folder / f"{TASK}-seed{seed_run}" / "results.json").read_text())
            assert final["evaluated_on"] == "dev set"
            assert final["eval"]["validation"]["samples"] == data_sources.DEV_EXAMPLES
            # the engine, called as a function (no command line)
            assert final["seed"] == seed_run and final["command"] is None
            assert final["arguments"]["training"]["learning_rate"] == tuned["learning_rates"][seed]
            assert final["arguments"]["training"]["data_seed"] == int(seed)  # the replicate's data order
            assert tuned["runs"][seed]["learning_rate"] == tuned["learning_rates"][seed]
        assert len(slices) == len(SEEDS)  # each seed its own held-out slice
    assert results["calibration"]["negative_shares"] == SHARED_DATA_RULE  # the record says what its A/A shares


def test_export_writes_a_card_with_the_fine_tuning_result(report: Path, tmp_path: Path) -> None:
    import shutil

    checkpoint = tmp_path / "edited"  # a copy edited by hand: its manifest would refuse the edit, so it is
    shutil.copytree(report / "models" / MIXED_FOLDER / f"{TASK}-seed42", checkpoint)  # recorded again
    (checkpoint / run_folder.MANIFEST_FILE).unlink()
    (checkpoint / "results.json").write_text(json.dumps({**json.loads((checkpoint / "results.json").read_text()),
                                                         "task": "cola"}))  # fmt: skip
    run_folder.write_manifest(checkpoint, {}, "finetune")
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
        ("macaron_bert:attention_type=mgk,num_key_component=3", "MacaronBertConfig has no field 'num_key_component'"),
        ("bert:attention_type=mgk", "use bert_control"),
    ):
        with pytest.raises(Exception, match=message):
            ModelSpec.parse(text)


def test_default_models_keep_their_sizes_and_specs_add_theirs() -> None:
    """The defaults give the sizes the recorded reports used (each idea derives its own from the shared
    size); a switched axis brings its own size rule; a control takes its variant's sizes."""
    size = MatchedSize(128, 2, head_size=32, solver_tolerance=1e-3, max_solver_steps=50)
    sizes = {name: stages.matched_fields(ModelSpec(name), size) for name in DEFAULT_MODELS}
    shared = {"hidden_size": 128, "num_hidden_layers": 2}
    assert sizes == {
        "bert_control": {**shared, "intermediate_size": 512, "num_attention_heads": 4},
        "macaron_bert": {**shared, "intermediate_size": 512, "num_attention_heads": 4},
        "mgk_bert": {**shared, "intermediate_size": 512, "num_attention_heads": 2, "head_dim": 32},
        "transject": {**shared, "num_attention_heads": 1, "num_experts": 4},
        "node_transformer": {**shared, "intermediate_size": 512, "num_attention_heads": 4,
                             "rtol": 1e-3, "atol": 1e-3, "max_num_steps": 50},
    }  # fmt: skip
    mixed = stages.matched_fields(ModelSpec.parse("macaron_bert:attention_type=mgk"), size)
    assert mixed == {**sizes["mgk_bert"], "attention_type": "mgk"}
    own = stages.matched_fields(ModelSpec.parse("mgk_bert:num_attention_heads=1"), size)
    assert own == {**sizes["mgk_bert"], "num_attention_heads": 1}
    control = stages.matched_fields(ModelSpec("transject").control(), size)
    assert control == {**sizes["transject"], "attention_type": "softmax", "layer_scheme": "lie_trotter"}
    for name, fields in sizes.items():  # every size builds, at the shared width and depth
        config = ModelSpec(name).config(fields)
        assert (config.hidden_size, config.num_hidden_layers) == (128, 2)
        assert parse_overrides(format_overrides(fields)) == fields  # what --config_overrides carries


def test_overwrite_reaches_both_training_scripts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Re-running compare with other settings into one folder is refused by run_mlm/run_glue (another
    run's folder) unless --overwrite_output_dir, which compare passes on to both engines' typed settings."""
    from hf_variants.training import run_glue, run_mlm

    seen: dict[str, object] = {}
    monkeypatch.setattr(run_mlm, "run", lambda settings: seen.setdefault("mlm", settings) and {})
    monkeypatch.setattr(run_glue, "run", lambda *settings: seen.setdefault("glue", settings) and {})
    source = data_sources.synthetic_source(tmp_path / "data", seed=0, within=tmp_path)
    for flag, overwrite in (([], False), (["--overwrite_output_dir"], True)):
        seen.clear()
        args = compare.parse_args(["--output_dir", str(tmp_path), *flag])
        stages.pretrain(args, source, "tok", ModelSpec("bert_control"), seed=1)
        stages.fine_tune(args, source, ModelSpec("bert_control"), data_sources.SYNTHETIC_TASK, 1e-3, "run", seed=1)
        assert seen["mlm"].overwrite_output_dir is overwrite
        assert seen["mlm"].train_file == source.corpus["train_file"] and seen["mlm"].tokenizer_name == "tok"
        model, data, training, run = seen["glue"]
        assert run.overwrite_output_dir is overwrite and training.learning_rate == 1e-3 and training.seed == 1
        assert model.model_name_or_path == str(seen["mlm"].output_dir)  # the pretrained model of that seed
        assert seen["mlm"].seed == 1 and seen["mlm"].output_dir.name == "mlm-seed1"
        assert data.train_file == source.tasks[data_sources.SYNTHETIC_TASK]["train_file"]
        assert data.heldout_fraction is None


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


@pytest.mark.parametrize("reachable", [True, False])
def test_resolution_order_is_the_same_with_and_without_the_hub(
    reachable: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Data asked for wins in order (--data_dir, $HF_VARIANTS_DATA, --from_hub); without any, the embedded
    default, whether the Hub answers or not: one command line, one experiment."""
    given, from_env = make_data_dir(tmp_path / "given"), make_data_dir(tmp_path / "env")
    asked: list[bool] = []
    monkeypatch.setattr(data_sources, "hub_reachable", lambda timeout=10.0: asked.append(True) or reachable)
    monkeypatch.setenv(compare.DATA_ENV, str(from_env))
    source = data_sources.resolve_data(given, None, tmp_path / "out", seed=0, from_hub=True)
    assert source.kind == "data_dir" and str(given) in source.corpus["train_file"]
    source = data_sources.resolve_data(None, None, tmp_path / "out", seed=0, from_hub=True)
    assert source.kind == "env" and str(from_env) in source.corpus["train_file"]
    assert source.tasks["sst2"] == {"task_name": "sst2", "glue_dir": str(from_env / "glue")}
    monkeypatch.delenv(compare.DATA_ENV)
    source = data_sources.resolve_data(None, None, tmp_path / "out", seed=0)
    assert source.kind == "synthetic" and list(source.tasks) == [TASK] and not asked  # the Hub was never tried
    assert (tmp_path / "out" / "data" / f"{TASK}_train.csv").is_file()
    if reachable:
        source = data_sources.resolve_data(None, None, tmp_path / "out", seed=0, from_hub=True)
        assert source.kind == "hub" and source.corpus["dataset_name"] == "wikitext"
    else:
        with pytest.raises(ConnectionError, match="--from_hub: the Hub is not reachable"):
            data_sources.resolve_data(None, None, tmp_path / "out", seed=0, from_hub=True)
    source = data_sources.resolve_data(given, ["agreement"], tmp_path / "out", seed=0)  # an embedded task, by name
    assert source.kind == "synthetic" and list(source.tasks) == ["agreement"]


def test_the_default_command_is_one_experiment_with_and_without_the_hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default data of ``hf-variants compare`` (the parsed command line, resolved) is byte for byte the
    same whether the reachability check says yes or no."""
    monkeypatch.delenv(compare.DATA_ENV, raising=False)
    written = {}
    for reachable in (True, False):
        monkeypatch.setattr(data_sources, "hub_reachable", lambda timeout=10.0, answer=reachable: answer)
        args = compare.parse_args(["--output_dir", str(tmp_path / str(reachable))])
        source = data_sources.resolve_data(args.data_dir, args.tasks, args.output_dir, args.seed, args.from_hub)
        written[reachable] = {path.name: path.read_bytes() for path in sorted((args.output_dir / "data").iterdir())}
        assert source.kind == "synthetic"
    assert written[True] == written[False] and f"{TASK}_dev.csv" in written[True]


def test_offline_hub_is_not_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert data_sources.hub_reachable() is False


def test_incomplete_data_dir_errors_name_what_is_missing(tmp_path: Path) -> None:
    no_corpus = make_data_dir(tmp_path / "a", corpus=False)
    with pytest.raises(FileNotFoundError, match=r"no corpus file wikitext-2/train.txt"):
        data_sources.resolve_data(no_corpus, None, tmp_path / "out", seed=0)
    no_task = make_data_dir(tmp_path / "b")
    with pytest.raises(FileNotFoundError, match=r"no GLUE task cola: expected .*CoLA/train.tsv"):
        data_sources.resolve_data(no_task, ["cola"], tmp_path / "out", seed=0)
    with pytest.raises(ValueError, match=r"Unknown GLUE task 'nope'"):
        data_sources.resolve_data(no_task, ["nope"], tmp_path / "out", seed=0)


def test_glue_tasks_without_any_data_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(compare.DATA_ENV, raising=False)
    monkeypatch.setattr(data_sources, "hub_reachable", lambda timeout=10.0: True)  # reachable, but not asked for
    with pytest.raises(FileNotFoundError, match=r"--tasks sst2: GLUE tasks need data: --data_dir, .* or --from_hub"):
        data_sources.resolve_data(None, ["sst2"], tmp_path, seed=0)


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
        "--analysis_sentences", "2", "--num_seeds", "1", "--finetune_learning_rates", "1e-3", "--workers", "1",
        "--no_calibration_controls",
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    console = completed.stdout + completed.stderr
    assert "compare (all models): 100%" in console and "MLM: 100%" in console
    for noise in ("{'loss'", "'grad_norm'", "***** train metrics", "Casting", "Map:", "Loading weights"):
        assert noise not in console, noise
    assert "train_loss" in (tmp_path / "models" / "bert_control" / f"{TASK}-seed42.log").read_text()
    history = json.loads((tmp_path / "models" / "bert_control" / f"{TASK}-seed42" / "trainer_state.json").read_text())
    assert [e["step"] for e in history["log_history"] if "loss" in e] == [5, 10]  # logged, not printed


def test_a_failing_learning_rate_is_recorded_and_not_chosen() -> None:
    """An N-ODE run whose solver gives up at one rate scores None there and the best finished rate is
    chosen; when every rate fails, the smallest is taken (its final runs show the failure over seeds)."""
    scored = {3e-4: 0.6, 1e-3: 0.7, 3e-3: 0.9}

    def outcomes(failing: set[float]) -> dict:
        return {rate: {"failed": f"ODESolverError: the dopri5 solver failed at lr {rate:g}"} if rate in failing
                else {"eval": {"validation": {"accuracy": score}}} for rate, score in scored.items()}  # fmt: skip

    def choose(results: dict) -> tuple:
        return protocol.choose({rate: compare.held_out(TASK, result) for rate, result in results.items()})

    chosen, scores = choose(outcomes({3e-3}))
    assert chosen == 1e-3 and scores == {3e-4: 0.6, 1e-3: 0.7, 3e-3: None}
    assert choose(outcomes(set()))[0] == 3e-3
    assert choose(outcomes(set(scored))) == (3e-4, dict.fromkeys(scored))
    args = compare.parse_args(["--output_dir", "unused"])
    assert stages.matched_fields(ModelSpec("node_transformer"), stages.matched_size(args))["max_num_steps"] == 50


TINY_COMPARE = ["--models", "bert_control", "--hidden_size", "32", "--head_size", "16", "--num_layers", "1",
                "--pretrain_steps", "4", "--finetune_steps", "6", "--finetune_learning_rates", "1e-3",
                "--pretrain_batch_size", "8", "--finetune_batch_size", "8", "--max_seq_length", "32",
                "--analysis_sentences", "2", "--num_seeds", "1", "--workers", "1", "--disable_tqdm",
                "--no_calibration_controls"]  # fmt: skip


def run_compare(output: Path, *extra: str, failpoint: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != compare.DATA_ENV}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if failpoint is not None:
        env["HF_VARIANTS_FAILPOINT"] = failpoint
    command = [str(CLI), "compare", "--output_dir", str(output), *TINY_COMPARE, *extra]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600)


def test_the_margin_is_declared_before_the_first_run_and_a_resume_under_another_is_refused(tmp_path: Path) -> None:
    """The margin and its reason are in the report folder's fingerprint before any model trains; killed after its
    first pretraining, the comparison will not continue under another margin (one line naming it), and continues
    under its own, recording each task's margin with its reason and the day it was declared."""
    output = tmp_path / "compare"
    killed = run_compare(output, failpoint="compare:bert_control/mlm-seed42@0")
    assert killed.returncode == -9, killed.stderr[-2000:]
    fingerprint = json.loads((output / run_folder.FINGERPRINT_FILE).read_text())
    assert fingerprint["equivalence_margin"] == ["2"] and fingerprint["margin_reason"] == DEFAULT_MARGIN_REASON
    moved = run_compare(output, "--equivalence_margin", "3")
    assert moved.returncode != 0 and "equivalence_margin" in moved.stderr.strip().splitlines()[-1]
    assert "Traceback" not in moved.stderr
    finished = run_compare(output)
    assert finished.returncode == 0, finished.stderr[-4000:]
    margins = json.loads((output / "results.json").read_text())["margins"]
    assert margins == {TASK: {"points": 2.0, "reason": DEFAULT_MARGIN_REASON, "declared": DEFAULT_MARGIN_DECLARED}}


def test_compare_owns_its_folder_and_reuses_finished_stages_after_a_kill(tmp_path: Path) -> None:
    """Killed after its pretraining stage, a re-run takes that stage's result instead of training again;
    another comparison in the folder is refused before it writes anything; a folder in use is refused;
    a stage whose files were altered is named instead of reused."""
    output = tmp_path / "compare"
    killed = run_compare(output, failpoint="compare:bert_control/mlm-seed42@0")
    assert killed.returncode == -9, killed.stderr[-2000:]
    weights = output / "models" / "bert_control" / "mlm-seed42" / "model.safetensors"
    written = weights.stat().st_mtime_ns
    finished = run_compare(output)
    assert finished.returncode == 0, finished.stderr[-4000:]
    assert weights.stat().st_mtime_ns == written  # the finished pretraining was reused, not redone
    results = json.loads((output / "results.json").read_text())
    assert results["models"]["bert_control"]["pretraining"]["steps"] == 4
    assert run_folder.verify_manifest(output) is not None

    tokenizer_files = {path.name: path.read_bytes() for path in (output / "tokenizer").iterdir()}
    other = run_compare(output, "--vocab_size", "150")
    assert other.returncode == 1 and "holds another run" in other.stderr and "vocab_size" in other.stderr
    assert {path.name: path.read_bytes() for path in (output / "tokenizer").iterdir()} == tokenizer_files

    holder = run_folder.OutputDirLock(output)
    try:
        with pytest.raises(CheckpointError, match="is in use by another run"):
            compare.main(["--output_dir", str(output), *TINY_COMPARE])
    finally:
        holder.release()

    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    altered = run_compare(output)
    assert altered.returncode == 1 and "model.safetensors does not match the SHA-256" in altered.stderr


def test_presets_set_the_budget_and_flags_on_the_command_line_win(capsys: pytest.CaptureFixture) -> None:
    from hf_variants.settings.compare import PRESETS

    default = compare.parse_args([])
    assert default.preset == "minutes"
    assert {name: getattr(default, name) for name in PRESETS["minutes"]} == PRESETS["minutes"]
    full = compare.parse_args(["--preset", "full", "--finetune_steps", "7"])
    assert full.finetune_steps == 7 and full.pretrain_steps == PRESETS["full"]["pretrain_steps"] == 200
    for argv, named in ((["--num_seeds", "0"], "argument --num_seeds"), (["--workers", "0"], "argument --workers"),
                        (["--preset", "huge"], "argument --preset"),
                        (["--finetune_learning_rates", "1e-3", "1e-3"], "argument --finetune_learning_rates"),
                        (["--finetune_learning_rates", "0"], "argument --finetune_learning_rates")):  # fmt: skip
        with pytest.raises(SystemExit):
            compare.parse_args(argv)
        assert named in capsys.readouterr().err


def test_synthetic_subject_number_labels_the_subject_and_the_verb_is_no_clue() -> None:
    from hf_variants.synthetic import _SUBJECTS, synthetic_subject_number

    examples = synthetic_subject_number(400, seed=3)
    singular_nouns = {noun for nouns in _SUBJECTS.values() for noun in nouns}
    verb_is_plural_form = []
    for sentence, label in examples:
        words = sentence.split()
        assert label == int(words[2] not in singular_nouns), sentence
        verb_is_plural_form.append((label, not words[3].endswith("s")))
    for label in (0, 1):  # the verb's form agrees with the subject in about half of each class
        agreeing = [plural_verb == bool(label) for lab, plural_verb in verb_is_plural_form if lab == label]
        assert 0.4 < sum(agreeing) / len(agreeing) < 0.6
    assert 0.4 < sum(label for _, label in examples) / len(examples) < 0.6


#: A task and budget at which the Macaron pair learns (every seed, in seconds): so its verdict is a real one,
#: not "no verdict".
LEARNING_TASK = "subject_number"
LEARNING_COMPARE = ["--models", "macaron_bert", "--hidden_size", "32", "--head_size", "16", "--pretrain_steps", "20",
                    "--finetune_steps", "60", "--finetune_learning_rates", "3e-3", "--num_seeds", "2",
                    "--analysis_sentences", "2", "--disable_tqdm", "--tasks", LEARNING_TASK,
                    "--no_calibration_controls"]  # fmt: skip


def learning_compare(tmp_path_factory, threads: str, workers: str) -> dict:
    """The small learning comparison run by the command line with ``threads`` OpenMP threads per run and
    ``workers`` runs side by side: its results and the conclusions of its report."""
    output = tmp_path_factory.mktemp("threads")
    env = {k: v for k, v in os.environ.items() if k != compare.DATA_ENV}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS=threads)
    command = [str(CLI), "compare", "--output_dir", str(output), *LEARNING_COMPARE, "--workers", workers]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600)
    assert completed.returncode == 0, completed.stderr[-4000:]
    report = (output / "report.md").read_text()
    return {"results": json.loads((output / "results.json").read_text()),
            "conclusions": report.split("What to conclude:")[1].split("## Runs left out")[0]}  # fmt: skip


@pytest.fixture(scope="module")
def thread_runs(tmp_path_factory) -> dict[str, dict]:
    """The same comparison two ways: one run at a time with 1 thread, and two runs side by side."""
    return {"1 thread": learning_compare(tmp_path_factory, "1", "1"),
            "side by side": learning_compare(tmp_path_factory, "1", "2")}  # fmt: skip


@pytest.mark.full  # a third whole comparison: in the full suite (CI)
def test_the_verdict_is_the_same_with_one_or_two_threads(thread_runs: dict[str, dict], tmp_path_factory) -> None:
    """Two threads change the digits of the runs, not what the report concludes."""
    one, two = thread_runs["1 thread"], learning_compare(tmp_path_factory, "2", "1")
    for results in (one["results"], two["results"]):
        for entry in results["models"].values():
            assert {run["status"] for run in entry["fine_tuning"][LEARNING_TASK]["runs"].values()} == {"learned"}
    outcomes = ("not resolved:", "equivalent within", "its control:")  # a verdict, not "not comparable"
    assert any(outcome in one["conclusions"] for outcome in outcomes)
    assert one["conclusions"] == two["conclusions"]


def test_runs_side_by_side_are_the_runs_one_after_another(thread_runs: dict[str, dict]) -> None:
    """``--workers 2`` trains the same runs as ``--workers 1`` at the same thread count: equal curves and
    scores, and the same pretraining."""
    alone, pooled = thread_runs["1 thread"]["results"]["models"], thread_runs["side by side"]["results"]["models"]
    assert list(alone) == list(pooled) == ["macaron_bert", "control of macaron_bert"]
    for name in alone:
        assert alone[name]["pretraining"]["eval_loss"] == pooled[name]["pretraining"]["eval_loss"]
        for seed, run in alone[name]["fine_tuning"][LEARNING_TASK]["runs"].items():
            other = pooled[name]["fine_tuning"][LEARNING_TASK]["runs"][seed]
            assert (run["curve"], run["value"]) == (other["curve"], other["value"]), (name, seed)


def children(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (from ``/proc/<pid>/stat``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == parent:
                found.append(int(stat.parent.name))
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue  # ended while the folder was read
    return found


def process_state(pid: int) -> str | None:
    """The state letter of a process (``Z`` for a zombie), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers die with the comparison on Linux")
def test_a_killed_comparison_takes_its_side_by_side_runs_with_it(tmp_path: Path) -> None:
    """kill -9 of ``compare --workers 2`` while its workers train: no worker lives on (it would keep
    training and hold its run folder's lock against the re-run), and the re-run finishes."""
    import signal
    import time

    output = tmp_path / "compare"
    env = {k: v for k, v in os.environ.items() if k != compare.DATA_ENV}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    command = [str(CLI), "compare", "--output_dir", str(output), *TINY_COMPARE, "--workers", "2",
               "--pretrain_steps", "400"]  # fmt: skip
    process = subprocess.Popen(command, env=env, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: list[int] = []
    deadline = time.monotonic() + 300
    while not workers and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
        if (output / "models" / "bert_control" / "mlm-seed42").is_dir():
            workers = [pid for pid in children(process.pid)
                       if "spawn_main" in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")]  # fmt: skip
    assert workers, "no worker was training before the deadline"
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 30
    while any(process_state(pid) not in (None, "Z") for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert all(process_state(pid) in (None, "Z") for pid in workers)
    rerun = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-4000:]


def test_self_pretraining_reads_only_the_tasks_training_inputs(tmp_path: Path) -> None:
    """``--pretrain_on task``: each model's MLM pretraining (and the tokenizer) reads the task's training inputs
    without the slice held out for choosing the rate — never a dev, test or held-out sentence, never a label — and
    the comparison runs end to end from there."""
    data = make_data_dir(tmp_path / "data")
    sst2 = data / "glue" / "SST-2"
    train = [f"train sentence {index} was {'good' if index % 2 else 'bad'} ." for index in range(120)]
    sst2.joinpath("train.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{i % 2}\n" for i, s in enumerate(train)))
    sst2.joinpath("dev.tsv").write_text("sentence\tlabel\n" + "".join(f"devonly {i} .\t{i % 2}\n" for i in range(20)))
    sst2.joinpath("test.tsv").write_text("index\tsentence\n" + "".join(f"{i}\ttestonly {i} .\n" for i in range(20)))
    output = tmp_path / "compare"
    finished = run_compare(output, "--pretrain_on", "task", "--data_dir", str(data), "--tasks", "sst2",
                           "--finetune_learning_rates", "1e-3", "3e-3", "--heldout_fraction", "0.25")  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-4000:]
    corpus = (output / "data" / "task-inputs.txt").read_text().splitlines()
    assert set(corpus) < set(train) and len(corpus) == len(train) - 30  # the held-out quarter left out
    stage = json.loads((output / "models" / "bert_control" / "mlm-seed42.finished.json").read_text())
    assert stage["arguments"]["train_file"] == str(output / "data" / "task-inputs.txt")
    sweep_folder = output / "models" / "bert_control" / "sst2-sweep-lr0.001-seed42"
    sweep = json.loads((sweep_folder / "results.json").read_text())
    assert sweep["eval"]["validation"]["samples"] == 30  # the slice pretraining never read is what chose the rate
    vocabulary = json.loads((output / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
    assert not {"devonly", "testonly"} & set(vocabulary) and {"train", "sentence"} <= set(vocabulary)
    results = json.loads((output / "results.json").read_text())
    assert "training inputs" in results["data"]["description"]


@pytest.mark.parametrize(
    ("margins", "problem"),
    [(["=2"], "names no task"), (["0"], "greater than 0"), (["x"], "not a number"),
     (["2", "3"], "twice"), (["recall=2", "recall=3"], "twice")],
)  # fmt: skip
def test_a_bad_equivalence_margin_is_a_one_line_error(margins: list[str], problem: str, capsys) -> None:
    with pytest.raises(SystemExit):
        compare.parse_args(["--equivalence_margin", *margins])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --equivalence_margin" in error and problem in error


@pytest.mark.parametrize(
    ("models", "twice"),
    [(["macaron_bert", "macaron_bert"], "control of macaron_bert, macaron_bert"),
     (["mgk_bert", "control of mgk_bert"], "control of mgk_bert")],
)  # fmt: skip
def test_a_model_named_twice_is_refused_before_anything_is_written(
    models: list[str], twice: str, tmp_path: Path, capsys
) -> None:
    with pytest.raises(SystemExit):
        compare.main(["--models", *models, "--output_dir", str(tmp_path / "out")])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "argument --models" in error and f"names {twice} twice" in error
    assert not (tmp_path / "out").exists()
    if len(set(models)) == len(models):  # without the controls it adds, a variant beside its control is two models
        parsed = compare.parse_args(["--models", *models, "--no_matched_controls"])
        assert [spec.name for spec in parsed.models] == models


def test_a_model_that_is_a_calibration_control_is_refused_before_the_tokenizer(tmp_path: Path) -> None:
    """The calibration controls depend on the tasks (known once the data is): a model that is one of them is refused
    as soon as they are, before a tokenizer or a model is trained."""
    with pytest.raises(ValueError, match="names bert_control:attention_type=mean, which the comparison adds as a cal"):
        compare.main(["--models", "bert_control:attention_type=mean", "--output_dir", str(tmp_path / "out")])
    assert not (tmp_path / "out" / "tokenizer").exists() and not (tmp_path / "out" / "models").exists()


def test_the_equivalence_margin_is_per_task_with_one_for_every_task() -> None:
    args = compare.parse_args(["--equivalence_margin", "3", "recall=5"])
    assert (args.margin("recall"), args.margin("attractor_number")) == (5.0, 3.0)
    assert compare.parse_args([]).margin("recall") == 2.0


def test_the_power_preset_runs_16_seeds_without_n_ode_and_final_runs_at_every_rate() -> None:
    from hf_variants.settings.compare import DEFAULT_MODELS, POWER_MODELS

    power = compare.parse_args(["--preset", "power"])
    assert power.num_seeds >= 16 and power.final_runs_at_every_rate
    assert [spec.name for spec in power.models] == list(POWER_MODELS)
    assert "node_transformer" not in POWER_MODELS and "mgk_bert:attention_type=mlk" in POWER_MODELS
    chosen = compare.parse_args(["--preset", "power", "--models", "macaron_bert", "--num_seeds", "4"])
    assert [spec.name for spec in chosen.models] == ["macaron_bert"] and chosen.num_seeds == 4
    default = compare.parse_args([])
    assert [spec.name for spec in default.models] == list(DEFAULT_MODELS) and not default.final_runs_at_every_rate


def every_rate_record() -> dict:
    """A record with final runs at both rates: Macaron chose 0.003 and its control 0.001; the BERT control and its
    replicate over six seeds, the replicate's first three seeds 10 points above at 0.001."""
    def tuned(chosen: float, at: dict[float, list[float]]) -> dict:
        other = {f"{rate:g}": seed_runs(values) for rate, values in at.items() if rate != chosen}
        return {"metric": "accuracy", "learning_rate": chosen, "runs": seed_runs(at[chosen]),
                "runs_at_other_rates": other}  # fmt: skip

    steps = [0.0, 0.01, 0.02] * 2
    return {"tasks": [TASK], "data": {"kind": "synthetic"},
            "settings": {"final_runs_at_every_rate": True, "finetune_learning_rates": [1e-3, 3e-3]},
            "calibration": {"baseline": "bert_control", "negative": "bert_control (other seeds)"},
            "models": {
                "bert_control": {"control_of": None, "fine_tuning": {TASK: tuned(
                    1e-3, {1e-3: [0.8] * 6, 3e-3: [0.85] * 6})}},
                "macaron_bert": {"control_of": None, "fine_tuning": {TASK: tuned(
                    3e-3, {1e-3: [0.7 + s for s in steps], 3e-3: [0.9 + s for s in steps]})}},
                "control of macaron_bert": {"control_of": "macaron_bert", "control_changes": {"layer_scheme": "x"},
                                            "fine_tuning": {TASK: tuned(1e-3, {1e-3: [0.8] * 6, 3e-3: [0.9] * 6})}},
                "bert_control (other seeds)": {"control_of": None, "fine_tuning": {TASK: tuned(1e-3, {
                    1e-3: [0.9, 0.91, 0.89, 0.8, 0.801, 0.8], 3e-3: [0.85, 0.851, 0.85, 0.849, 0.85, 0.851]})}},
            }}  # fmt: skip


def test_each_pair_is_compared_at_every_common_rate_beside_its_chosen_rates() -> None:
    """The answer pairs each side's chosen rate (0.003 against 0.001: +11.0 points); the every-rate table pairs
    the two sides at the same rate: −9.0 at 0.001 (differences −10, −9, −8, twice: half-width t₅·s/√6 = 0.94) and
    +1.0 at 0.003."""
    results = every_rate_record()
    answer = next(line for line in report_writer.answer_lines(results) if line.startswith("| macaron_bert |"))
    assert "+11.0 [+10.1, +11.9]" in answer
    table = [line for line in report_writer.every_rate_lines(results) if line.startswith("| macaron_bert |")]
    assert len(table) == 2
    assert "| 0.001 |" in table[0] and "-9.0 [-9.9, -8.1]" in table[0]
    assert "| 0.003 |" in table[1] and "+1.0 [+0.1, +1.9]" in table[1]
    assert report_writer.every_rate_lines({**results, "settings": {"finetune_learning_rates": [1e-3, 3e-3]}}) == []


def test_the_aa_check_counts_how_often_a_default_size_comparison_says_above_or_below() -> None:
    """Six seeds at two rates make four groups of three: the replicate's first group at 0.001 is 10 points above
    (above), the others within a tenth of a point (equivalent): 1 in 4, 25% [0.6%, 81%] (Clopper–Pearson)."""
    results = every_rate_record()
    counted = evidence.aa_outcomes(results)
    assert counted == {"above its control": 1, "equivalent": 3}
    text = "\n".join(report_writer.aa_check_lines(results))
    assert "*Above* or *below* said 1 times in 4: 25% [1%, 81%]" in text and "nominal 5%" in text
    fewer = every_rate_record()
    for entry in fewer["models"].values():
        tuned = entry["fine_tuning"][TASK]
        tuned["runs"] = dict(list(tuned["runs"].items())[:5])
        tuned["runs_at_other_rates"] = {}
    fewer["settings"]["final_runs_at_every_rate"] = False
    assert report_writer.aa_check_lines(fewer) == []  # five seeds: fewer than two groups of three
    pairs = every_rate_record()  # a record made when a default comparison had two seeds: groups of two
    pairs["default_seeds"] = 2
    assert sum(evidence.aa_outcomes(pairs).values()) == 6 and "into 6 disjoint groups of 2 seeds" in "\n".join(
        report_writer.aa_check_lines(pairs))


def test_aa_records_of_other_data_draws_pool_their_disjoint_groups() -> None:
    """Two records (another ``--seed``: other data, no run shared) pool their groups: the four groups of three above
    (one said *above*) and a record whose six seeds at two rates all agree to a tenth of a point (four groups, none
    said) give 1 in 8. Records whose default sizes differ are refused: their groups are not one comparison's size."""
    results, quiet = every_rate_record(), every_rate_record()
    replica = quiet["models"]["bert_control (other seeds)"]["fine_tuning"][TASK]
    baseline = quiet["models"]["bert_control"]["fine_tuning"][TASK]
    others = zip(replica["runs_at_other_rates"].values(), baseline["runs_at_other_rates"].values(), strict=True)
    for runs, base in ((replica["runs"], baseline["runs"]), *others):
        for seed, run in runs.items():
            run["value"] = base[seed]["value"] + (0.001 if int(seed) % 2 else -0.001)
    assert evidence.aa_false_positives([quiet]) == (0, 4)
    assert evidence.aa_false_positives([results, quiet]) == (1, 8)
    with pytest.raises(ValueError, match=r"differ in size \(\[2, 3\] seeds\)"):
        evidence.aa_false_positives([results, {**quiet, "default_seeds": 2}])


def test_the_resampled_aa_rate_is_the_share_of_all_groups_a_t_test_calls_different() -> None:
    """Groups of three drawn at random from six seeds at each rate: the share said *above* or *below* is, within the
    draw's error, the share of all 20 three-seed subsets whose paired differences a t-test (scipy) finds different
    at p < 0.05 — counted here over every subset at both rates."""
    from itertools import combinations

    from scipy import stats

    results = every_rate_record()
    models = results["models"]
    different = total = 0
    for rate in ("0.001", "0.003"):
        def at(name: str, rate: str = rate) -> list[float]:
            tuned = models[name]["fine_tuning"][TASK]
            runs = tuned["runs"] if rate == f"{tuned['learning_rate']:g}" else tuned["runs_at_other_rates"][rate]
            return [runs[seed]["value"] for seed in sorted(runs, key=int)]

        differences = [r - b for r, b in zip(at("bert_control (other seeds)"), at("bert_control"), strict=True)]
        for group in combinations(differences, 3):
            p = stats.ttest_1samp(group, 0.0).pvalue
            different += bool(p < 0.05)  # nan (no spread) is not a difference
            total += 1
    rate, seeds = evidence.aa_resampled_rate(results)
    assert seeds == 6 and abs(rate - different / total) < 0.03, (rate, different, total)
    assert f"{100 * rate:.1f}% of the time" in "\n".join(report_writer.aa_check_lines(results))


def test_a_slow_model_runs_its_own_seeds_with_its_control_and_the_report_says_so(tmp_path: Path) -> None:
    """``--model_seeds macaron_bert=2`` over three seeds: Macaron and its matched control pretrain and fine-tune at
    the first two seeds only (nothing is trained at the third), the other pair at all three, and the report's table
    states the pair's own budget; a user's entry for a model not compared, or under two seeds, is one line."""
    output = tmp_path / "compare"
    completed = run_compare(output, "--models", "macaron_bert", "mgk_bert", "--num_seeds", "3",
                            "--model_seeds", "macaron_bert=2")  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-4000:]
    results = json.loads((output / "results.json").read_text())
    for name, seeds in (("macaron_bert", ["42", "43"]), ("control of macaron_bert", ["42", "43"]),
                        ("mgk_bert", SEEDS), ("control of mgk_bert", SEEDS)):  # fmt: skip
        entry = results["models"][name]
        assert sorted(entry["pretraining_runs"]) == sorted(entry["fine_tuning"][TASK]["runs"]) == seeds, name
    folder = output / "models" / ModelSpec.parse("macaron_bert").folder
    assert not (folder / "mlm-seed44").exists() and not (folder / f"{TASK}-seed44").exists()
    assert "(3 seeds; macaron_bert and its control: 2 seeds, their own budget (`--model_seeds`);" in (
        output / "report.md").read_text()
    for argv, said in ((["--models", "bert_control", "--model_seeds", "mgk_bert=3"], "names no model of --models"),
                       (["--model_seeds", "node_transformer=1"], "at least 2 seeds")):  # fmt: skip
        refused = run_compare(tmp_path / "refused", *argv)
        assert refused.returncode == 2 and "argument --model_seeds: " in refused.stderr and said in refused.stderr
    default = compare.parse_args(["--models", "bert_control"])  # the preset's N-ODE entry: inert without N-ODE
    assert default.model_seeds is None and default.seeds_of("bert_control") == default.num_seeds
    assert compare.parse_args([]).seeds_of("node_transformer") < compare.parse_args([]).num_seeds


def test_final_runs_at_every_rate_train_every_seed_at_every_rate(tmp_path: Path) -> None:
    """With ``--final_runs_at_every_rate`` each seed's final runs are made at both rates from that seed's
    pretraining (folders named by rate), the record holds every rate's runs and each seed's run at the rate it
    chose, and the report pairs the two sides at each rate."""
    output = tmp_path / "compare"
    completed = run_compare(output, "--final_runs_at_every_rate", "--finetune_learning_rates", "1e-3", "3e-3",
                            "--models", "macaron_bert", "--num_seeds", "2")  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-4000:]
    results = json.loads((output / "results.json").read_text())
    assert results["default_seeds"] == DEFAULT_SEEDS  # the A/A check's group size, as the record was made
    for name in ("macaron_bert", "control of macaron_bert"):
        tuned = results["models"][name]["fine_tuning"][TASK]
        at_rate = tuned["runs_at_every_rate"]
        assert set(at_rate) == {"0.001", "0.003"} and all(set(runs) == {"42", "43"} for runs in at_rate.values())
        for seed, run in tuned["runs"].items():  # each seed's run at its chosen rate is that rate's run
            assert run == at_rate[f"{tuned['learning_rates'][seed]:g}"][seed]
    folder = output / "models" / ModelSpec.parse("macaron_bert").folder
    assert {path.name for path in folder.iterdir() if path.is_dir() and path.name.startswith(f"{TASK}-lr")} == {
        f"{TASK}-lr{rate}-seed{seed}" for rate in ("0.001", "0.003") for seed in (42, 43)}
    report = (output / "report.md").read_text()
    assert "## Each pair at every learning rate" in report
    assert report.count("| macaron_bert | attractor_number | 0.00") == 2
