"""GLUE after pretraining (``experiments/glue_after_pretraining/glue_study.py``): checkpoint export,
learning-rate choice on held-out runs, "did not learn" handling, the budget study's paired verdict and
its table, and committing result files one by one."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModelForMaskedLM

from hf_variants.core.overrides import parse_overrides
from hf_variants.lab import protocol
from hf_variants.lab.spec import ModelSpec
from hf_variants.lab.tables import PAIRS
from hf_variants.storage.files import CheckpointError
from hf_variants.training import run_mlm

from .helpers import REPO_ROOT as ROOT
from .helpers import load_script
from .mlm_helpers import mlm_args
from .test_run_glue import checkpoints, glue_dir  # noqa: F401  (fixtures: tiny models, GLUE files)

glue_study = load_script("experiments/glue_after_pretraining/glue_study")
Cell = glue_study.Cell
FineTuning = glue_study.FineTuning
ModelToTune = glue_study.ModelToTune
budget_study_table = glue_study.budget_study_table
budget_table = glue_study.budget_table
cell_from_runs = glue_study.cell_from_runs
export_checkpoint_model = glue_study.export_checkpoint_model
fine_tune = glue_study.fine_tune
finished_run = glue_study.finished_run
pair_overrides = glue_study.pair_overrides
pair_table = glue_study.pair_table
recorded_cells = glue_study.recorded_cells
smallest_helpful_budget = glue_study.smallest_helpful_budget


def result(task: str, value: float, share: float = 0.6, std: float = 0.5) -> dict:
    """A ``run_glue`` results dict as the study reads it (metric as a fraction, collapse measures)."""
    metric = {"sst2": "accuracy", "cola": "matthews_correlation", "stsb": "pearson"}[task]
    return {"eval": {"validation": {metric: value, "largest_class_share": share, "prediction_std": std}}}


def test_an_exported_checkpoint_is_the_model_at_that_step(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "mlm"
    run_mlm.main(mlm_args(corpus, tokenizer_dir, run, "macaron_bert", "--max_train_steps", "8",
                          "--checkpointing_steps", "4"))  # fmt: skip
    last = export_checkpoint_model(run / "checkpoint-8", run, tmp_path / "step8")
    final, exported = load_file(run / "model.safetensors"), load_file(last / "model.safetensors")
    assert final.keys() == exported.keys() and all(torch.equal(final[k], exported[k]) for k in final)
    early = load_file(export_checkpoint_model(run / "checkpoint-4", run, tmp_path / "step4") / "model.safetensors")
    assert any(not torch.equal(early[k], final[k]) for k in final)  # four more steps moved the weights
    assert (tmp_path / "step4" / "tokenizer.json").is_file()

    other = tmp_path / "other"  # another width: its weights cannot fit
    run_mlm.main(mlm_args(corpus, tokenizer_dir, other, "bert", "--max_train_steps", "1"))
    with pytest.raises(CheckpointError, match="checkpoint-4: its weights do not fit"):
        export_checkpoint_model(run / "checkpoint-4", other, tmp_path / "wrong")


def test_a_record_of_other_settings_is_refused_naming_the_fields(tmp_path: Path) -> None:
    """A study's finished run is recognised by its typed settings (``run_glue.requested_arguments``), in a
    record that holds them or, for an older record, in its command line; other settings are refused by name."""
    from hf_variants.training import run_glue

    protocol = FineTuning()
    settings = protocol.run_settings(Path("glue"), Path("m"), "sst2", 1e-3, 1, tmp_path / "w", random_init=False,
                                     heldout=True)  # fmt: skip
    record = tmp_path / "sweep.json"
    assert finished_run(record, settings) is None
    record.write_text(json.dumps({"arguments": run_glue.requested_arguments(*settings), "x": 1}))
    assert finished_run(record, settings)["x"] == 1
    other = protocol.run_settings(Path("glue"), Path("m"), "sst2", 3e-4, 2, tmp_path / "elsewhere", random_init=False,
                                  heldout=True)  # fmt: skip
    with pytest.raises(CheckpointError, match=r"(?s)sweep\.json holds a run made with other settings:\n"
                       r"  data\.heldout_seed: recorded 1, asked 2\n"
                       r"  training\.learning_rate: recorded 0\.001, asked 0\.0003\n  training\.seed: recorded 1"):
        finished_run(record, other)  # the output folder has no effect: not named
    command = ("run_glue.py --glue_dir glue --model_name_or_path m --task_name SST-2 --do_train --do_eval "
               "--max_train_samples 8000 --max_seq_length 64 --no_pad_to_max_length --per_device_train_batch_size 32 "
               "--per_device_eval_batch_size 128 --learning_rate 0.001 --num_train_epochs 3 --warmup_steps 0.1 "
               "--weight_decay 0.01 --seed 1 --save_strategy no --report_to none --output_dir w "
               "--heldout_fraction 0.1 --heldout_seed 1")  # fmt: skip
    record.write_text(json.dumps({"command": command, "x": 2}))  # a record from before settings were recorded
    assert finished_run(record, settings)["x"] == 2
    with pytest.raises(CheckpointError, match=r"data\.heldout_fraction: recorded 0\.1, asked None"):
        finished_run(record, protocol.run_settings(Path("glue"), Path("m"), "sst2", 1e-3, 1, tmp_path / "w",
                                                   random_init=False, heldout=False))  # fmt: skip
    record.write_text(json.dumps({"command": "run_glue.py --task_name sst2 --learning_rate fast"}))
    with pytest.raises(CheckpointError, match=r"sweep\.json: run_glue cannot read its command"):
        finished_run(record, settings)
    record.write_text(json.dumps({"eval": {}}))
    with pytest.raises(CheckpointError, match=r"sweep\.json records neither the run's arguments nor its command"):
        finished_run(record, settings)


def test_held_out_runs_and_random_init_are_in_the_settings() -> None:
    protocol = FineTuning()
    model, data, training, _ = protocol.run_settings(Path("glue"), Path("m"), "cola", 1e-3, 0, Path("w"),
                                                     random_init=True, heldout=True)  # fmt: skip
    assert data.heldout_fraction == 0.1 and model.random_init and training.seed == 0
    model, data, training, _ = protocol.run_settings(Path("glue"), Path("m"), "cola", 1e-3, 2, Path("w"),
                                                     random_init=False, heldout=False)  # fmt: skip
    assert data.heldout_fraction is None and not model.random_init and training.seed == 2


def choose_learning_rate(sweep: dict[float, dict], task: str) -> float:
    """The protocol's choice among held-out results as the GLUE study reads them."""
    return protocol.choose({rate: glue_study.held_out(task, results) for rate, results in sweep.items()})[0]


def test_the_rate_is_chosen_among_runs_that_learned() -> None:
    sweep = {1e-4: result("sst2", 0.70), 3e-4: result("sst2", 0.80), 1e-3: result("sst2", 0.80)}
    assert choose_learning_rate(sweep, "sst2") == 3e-4  # ties go to the smaller rate
    sweep[1e-3] = result("sst2", 0.90, share=0.995)  # a higher score from one class: not chosen
    assert choose_learning_rate(sweep, "sst2") == 3e-4
    regression = {1e-4: result("stsb", math.nan, std=0.0), 3e-4: result("stsb", 0.2)}
    assert choose_learning_rate(regression, "stsb") == 3e-4


def test_runs_that_did_not_learn_are_named_not_averaged() -> None:
    runs = {1: result("sst2", 0.8), 2: result("sst2", 0.509, share=1.0), 3: result("sst2", 0.7)}
    cell = cell_from_runs("sst2", dict.fromkeys(runs, 1e-3), runs)
    assert cell.not_learned == [2] and cell.scores == pytest.approx({1: 80.0, 3: 70.0})
    assert cell.interval.mean == pytest.approx(75.0)
    text = budget_table({(500, "sst2"): cell}, {500: {"tokens": 10, "perplexity": 99.4}}, {"sst2": 50.9})
    assert "did not learn (seed 2; chance 50.9)" in text and "| 500 | 10 | 99 |" in text


def cells_from(scores: dict[tuple[int, str], list[float]]) -> dict[tuple[int, str], Cell]:
    return {key: Cell(key[1], dict.fromkeys(range(1, len(values) + 1), 1e-3), dict(enumerate(values, 1)), [])
            for key, values in scores.items()}  # fmt: skip


def test_the_smallest_budget_that_beats_random_init_on_sst2_and_another_task() -> None:
    cells = cells_from({
        (0, "sst2"): [70, 71, 72], (0, "cola"): [5, 6, 7], (0, "stsb"): [10, 12, 14],
        (500, "sst2"): [75, 76, 77], (500, "cola"): [4, 8, 6], (500, "stsb"): [9, 14, 13],  # sst2 only
        (1500, "sst2"): [74, 76, 75], (1500, "cola"): [8, 10, 9], (1500, "stsb"): [10, 12, 14],
        (3000, "sst2"): [80, 81, 82], (3000, "cola"): [15, 16, 17], (3000, "stsb"): [20, 22, 24],
    })  # fmt: skip
    assert smallest_helpful_budget(cells) == 1500
    del cells[1500, "cola"]
    assert smallest_helpful_budget(cells) == 3000
    for task in ("cola", "stsb"):
        del cells[3000, task]
    assert smallest_helpful_budget(cells) is None  # SST-2 alone is not enough
    table = budget_table(cells_from({(0, "sst2"): [70, 71, 72], (3000, "sst2"): [80, 81, 82]}), {}, {"sst2": 50.9})
    assert "| +10.0 in every seed |" in table  # no spread: no interval to bold


def test_a_one_seed_difference_is_not_a_verdict() -> None:
    cells = cells_from({(0, "sst2"): [70], (500, "sst2"): [90], (0, "cola"): [1], (500, "cola"): [30]})
    assert smallest_helpful_budget(cells) is None
    assert "90.0 (n = 1)" in budget_table(cells, {}, {"sst2": 50.9, "cola": 0.0})


def test_fine_tuning_chooses_each_seeds_rate_on_its_held_out_runs_and_resumes(
    checkpoints: dict[str, Path], glue_dir: Path, tmp_path: Path  # noqa: F811
) -> None:
    """The GLUE study runs the lab's protocol: per seed, held-out runs on a slice drawn with that seed, then the
    seed's final run at the rate those runs chose (the rule recomputed here from the records); a second call
    trains nothing."""
    fine_tuning = FineTuning(tasks=("sst2",), seeds=(1, 2), learning_rates=(1e-4, 3e-3), max_train_samples=256,
                             num_train_epochs=2, max_seq_length=32, batch_size=16)  # fmt: skip
    folder = checkpoints["macaron_bert"]
    models = {"pretrained": ModelToTune(folder), "random": ModelToTune(folder, random_init=True)}
    recorded: list[Path] = []
    cells = fine_tune(fine_tuning, models, glue_dir, tmp_path / "work", tmp_path / "records",
                      on_record=recorded.append)  # fmt: skip
    assert len(recorded) == 12  # 2 models x 2 seeds x (2 held-out runs + 1 final run)
    for name, model in models.items():
        runs = tmp_path / "records" / name / "sst2"
        finals = {seed: json.loads((runs / f"seed{seed}.json").read_text()) for seed in fine_tuning.seeds}
        for seed in fine_tuning.seeds:
            sweep = {rate: json.loads((runs / f"sweep-lr{rate:g}-seed{seed}.json").read_text())
                     for rate in fine_tuning.learning_rates}  # fmt: skip
            assert {r["evaluated_on"] for r in sweep.values()} == {f"held-out 0.1 of the training split (seed {seed})"}
            assert {r["random_init"] for r in sweep.values()} == {model.random_init}
            scores = {rate: r["eval"]["validation"]["accuracy"] for rate, r in sweep.items()}
            shares = {rate: r["eval"]["validation"]["largest_class_share"] for rate, r in sweep.items()}
            learned = {rate: value for rate, value in scores.items() if shares[rate] < 0.99} or scores
            best = min(rate for rate, accuracy in learned.items() if accuracy == max(learned.values()))
            assert cells[name, "sst2"].learning_rates[seed] == best
            assert finals[seed]["arguments"]["training"]["learning_rate"] == best
        assert {r["evaluated_on"] for r in finals.values()} == {"dev set"}
        assert {r["command"] for r in finals.values()} == {None}  # the engine was called as a function
        expected = {seed: 100 * r["eval"]["validation"]["accuracy"] for seed, r in finals.items()
                    if r["eval"]["validation"]["largest_class_share"] < 0.99}  # fmt: skip
        assert cells[name, "sst2"].scores == pytest.approx(expected)
        assert not (tmp_path / "work" / name / "sst2" / "seed1" / "model.safetensors").exists()
    recorded.clear()
    again = fine_tune(fine_tuning, models, glue_dir, tmp_path / "work", tmp_path / "records",
                      on_record=recorded.append)  # fmt: skip
    assert recorded == [] and again == cells  # every run was found, none repeated
    assert recorded_cells(tmp_path / "records") == cells  # the README's tables read the same cells back


def test_the_study_scripts_commit_nothing_and_read_only_the_data_folder_they_are_given(tmp_path: Path) -> None:
    """A study writes records and a person commits them: no script or package module runs git; and a study script
    without ``--data_dir`` and without ``$HF_VARIANTS_DATA`` is a one-line error, never a folder of its own
    choosing."""
    import ast
    import subprocess
    import sys

    def words(call: ast.Call) -> set[str]:
        """The string constants among a call's arguments and in the lists it is given."""
        nodes = [*call.args, *(item for arg in call.args if isinstance(arg, ast.List | ast.Tuple) for item in arg.elts)]
        return {node.value for node in nodes if isinstance(node, ast.Constant) and isinstance(node.value, str)}

    writes_to_git = []
    folders = ("scripts", "benchmarks", "tools", "experiments", "examples", "hf_variants")
    for path in [path for folder in folders for path in (ROOT / folder).rglob("*.py")]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [words(node) for node in ast.walk(tree) if isinstance(node, ast.Call)]
        if any("git" in called for called in calls) and any(called & {"commit", "add", "push"} for called in calls):
            writes_to_git.append(path.relative_to(ROOT).as_posix())
    assert writes_to_git == []  # reading the commit a record was made at (experiments/node_nfe/node_nfe.py) is allowed
    env = {key: value for key, value in os.environ.items() if key != "HF_VARIANTS_DATA"}
    for script in ("pretraining_budget.py", "glue_after_pretraining.py"):
        path = ROOT / "experiments" / "glue_after_pretraining" / script
        completed = subprocess.run([sys.executable, str(path), "--output_dir", str(tmp_path)],
                                   capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)  # fmt: skip
        assert completed.returncode == 2, (script, completed.stderr[-2000:])
        assert "the following arguments are required: --data_dir" in completed.stderr.strip().splitlines()[-1]
    study = [sys.executable, "-m", "hf_variants.cli", "study", "classification_from_scratch", "--output_dir", "out"]
    completed = subprocess.run(study, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert completed.returncode == 2 and not (tmp_path / "out").exists()
    assert "argument --data_dir: required when $HF_VARIANTS_DATA is not set" in completed.stderr


@pytest.mark.parametrize("spec", PAIRS)
def test_each_pair_pretrains_the_variant_and_exactly_its_matched_control(spec: str) -> None:
    """The command line's config (``--config_overrides`` text, read back) builds the same model as the
    spec's config (the from-scratch grid's; a control's by ``matched_control`` of the built variant):
    same parameters, same initial values, same outputs (fields of unselected ideas may differ: inert)."""
    sizes = "hidden_size=32,num_hidden_layers=2,num_attention_heads=2,head_dim=16,intermediate_size=64,vocab_size=50"
    input_ids = torch.randint(1, 50, (2, 7), generator=torch.Generator().manual_seed(0))
    for control in (False, True):
        model_type, overrides = pair_overrides(spec, sizes, control=control)
        models = []
        for config in (AutoConfig.for_model(model_type, **parse_overrides(overrides)),
                       (ModelSpec.from_text(spec).control() if control else ModelSpec.from_text(spec)).config(
                           parse_overrides(sizes))):  # fmt: skip
            torch.manual_seed(0)
            models.append(AutoModelForMaskedLM.from_config(config).eval())
        first, second = (model.state_dict() for model in models)
        assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
        with torch.no_grad():
            torch.testing.assert_close(models[0](input_ids).logits, models[1](input_ids).logits, rtol=0, atol=0)
    assert pair_overrides(spec, sizes, control=True) != pair_overrides(spec, sizes, control=False)


def test_the_pair_table_pairs_variant_and_control_by_seed() -> None:
    cells = {
        ("mgk_bert/variant", "sst2"): Cell("sst2", dict.fromkeys((1, 2, 3), 1e-3), {1: 80.0, 2: 82.0, 3: 81.0}, []),
        ("mgk_bert/control", "sst2"): Cell("sst2", {1: 3e-4, 2: 1e-3, 3: 3e-4}, {1: 70.0, 2: 71.0, 3: 72.0}, []),
        ("transject/variant", "sst2"): Cell("sst2", dict.fromkeys((1, 2, 3), 1e-3), {1: 60.0}, [2, 3]),
        ("transject/control", "sst2"): Cell("sst2", dict.fromkeys((1, 2, 3), 1e-3), {1: 70.0, 2: 71.0, 3: 72.0}, []),
    }
    text = pair_table(cells, ["mgk_bert", "transject", "node_transformer"], ["sst2"],
                      {"mgk_bert/variant": 120.4, "mgk_bert/control": 130.0}, {"sst2": 50.9})  # fmt: skip
    mgk, transject, node = text.splitlines()[2:]
    assert "81.0 ± 2.5 (lr 0.001)" in mgk and "71.0 ± 2.5 (lr 0.0003, 0.001)" in mgk  # each seed's rate
    assert "**+10.0 [+7.5, +12.5]**" in mgk and "| 120 / 130 |" in mgk
    assert "did not learn (seed 2, 3; chance 50.9)" in transject and "| — |" in transject  # one paired seed
    assert node.count("not run yet") == 2


def test_the_budget_table_is_rendered_from_the_committed_files_alone(tmp_path: Path) -> None:
    assert budget_study_table(tmp_path) == "No pretraining result committed yet.\n"
    budgets = {"500": {"tokens": 2048000, "perplexity": 300.2, "train_seconds": 1.0}}
    (tmp_path / "pretraining.json").write_text(json.dumps({"budgets": budgets}))
    (tmp_path / "chance.json").write_text(json.dumps({"sst2": 50.9, "cola": 0.0}))
    scores = {("step0", "sst2"): [70, 71, 72], ("step500", "sst2"): [75, 76, 78],
              ("step0", "cola"): [1, 2, 3], ("step500", "cola"): [10, 12, 11]}  # fmt: skip
    for (model, task), values in scores.items():
        folder = tmp_path / "runs" / model / task
        folder.mkdir(parents=True)
        for seed, value in enumerate(values, 1):
            run = result(task, value / 100, share=1.0 if (model, seed) == ("step0", 3) else 0.6)
            record = {"arguments": {"training": {"learning_rate": 3e-4}}, **run}
            (folder / f"seed{seed}.json").write_text(json.dumps(record))
    text = budget_study_table(tmp_path)
    assert "Smallest budget that beats random initialisation on SST-2 and another task" in text
    assert "**500 steps**" in text and "| 500 | 2,048,000 | 300 |" in text
    assert "did not learn (seed 3; chance 50.9) (lr 0.0003)" in text  # random init, seed 3: one class
