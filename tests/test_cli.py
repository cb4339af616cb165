"""The ``hf-variants`` command line: subcommands, fast help, accelerate conventions, run extension,
trackers, and the export → push → remote load path through the commands a user types."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

import hf_variants
import hf_variants.cli.commands
from hf_variants.settings import finetuning as finetune_arguments
from hf_variants.settings import pretraining as pretrain_arguments

from .common import WITHOUT_PACKAGE
from .helpers import files_below, run_launcher, run_python
from .mlm_helpers import mlm_args

CLI = Path(sys.executable).with_name("hf-variants")


def run_cli(*argv: str, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {})}
    return subprocess.run([str(CLI), *argv], capture_output=True, text=True, timeout=timeout, env=environment)


def test_version_comes_from_the_package_metadata() -> None:
    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"hf-variants {metadata.version('hf-variants')}"
    assert hf_variants.__version__ == metadata.version("hf-variants")


def test_help_lists_every_subcommand_and_an_unknown_one_is_named() -> None:
    listed = run_cli("--help").stdout
    for name in ("pretrain", "finetune", "train-tokenizer", "export", "push", "compare", "info"):
        assert name in listed and name in hf_variants.cli.commands.COMMANDS
    wrong = run_cli("pretrian")
    assert wrong.returncode == 2 and "invalid choice: 'pretrian'; did you mean 'pretrain'?" in wrong.stderr


@pytest.mark.parametrize(("command", "usage", "error"), [
    ("pretrain", "usage: hf-variants pretrain [options]", "the following arguments are required: --output_dir; "
     "give exactly one of --model_type, --config_name, --model_name_or_path; give --train_file or --dataset_name"),
    ("finetune --do_train", "usage: hf-variants finetune [options]", "the following arguments are required: "
     "--model_name_or_path; give --task_name (GLUE), --train_file or --dataset_name"),
    ("train-tokenizer --vocab_size 100", "usage: hf-variants train-tokenizer [options]",
     "required: --output_dir; give --train_file or --dataset_name"),
    ("export", "usage: hf-variants export CHECKPOINT [options]", "required: checkpoint, --output_dir"),
    ("compare --num_seeds 0", "usage: hf-variants compare [options]", "argument --num_seeds: 0 is below 1"),
])  # fmt: skip
def test_a_usage_error_is_two_lines_not_the_whole_usage(command: str, usage: str, error: str) -> None:
    """A command with forty flags answers a mistake with a short usage and the error (``--help`` lists all);
    every missing required setting is named at once, with the combinations already wrong without them."""
    refused = run_cli(*command.split())
    lines = refused.stderr.splitlines()
    assert refused.returncode == 2 and len(lines) == 2, refused.stderr
    assert lines[0] == f"{usage}  (--help lists them)" and error in lines[1]


def test_flags_may_be_written_with_dashes_as_in_transformers() -> None:
    from hf_variants.settings import compare, tokenizer
    from hf_variants.settings import pretraining as pretrain

    dashed = pretrain.parse_args(["--model-type", "macaron_bert", "--train-file", "t.txt", "--output-dir", "out",
                                  "--max-train-steps=5"])  # fmt: skip
    assert (dashed.model_type, dashed.train_file, dashed.max_train_steps) == ("macaron_bert", "t.txt", 5)
    assert tokenizer.parse_args(["--train-file", "t.txt", "--vocab-size", "100", "--output-dir", "o"]).vocab_size == 100
    assert compare.parse_args(["--output-dir", "o", "--num-seeds", "4"]).num_seeds == 4
    assert pretrain.parse_args(["--model_type", "bert", "--train_file", "a-b.txt", "--output_dir", "o"]).train_file == (
        "a-b.txt"
    )  # values keep their dashes


HELP_COMMANDS = ["--help", "--version", "info --help", "pretrain --help", "finetune --help", "compare --help",
                 "train-tokenizer --help", "export --help", "push --help"]  # fmt: skip


HEAVY_MODULES = ("torch", "transformers.modeling_utils", "transformers.trainer", "accelerate", "hf_variants.core",
                 "hf_variants.training")


@pytest.mark.parametrize("command", HELP_COMMANDS)
def test_help_imports_neither_torch_nor_the_training_stack(command: str, tmp_path: Path) -> None:
    """``--help`` prints without torch, transformers' modeling code, accelerate or the library's models and
    engines (``import hf_variants`` is lazy; the settings it declares load without them). Only
    ``finetune --help`` may import transformers at all: its help is rendered by ``HfArgumentParser`` from
    run_glue's own dataclasses (the parser the engine uses, so the help cannot drift from what is parsed)."""
    forbidden = HEAVY_MODULES if command.startswith("finetune") else (*HEAVY_MODULES, "transformers")
    script = textwrap.dedent(
        f"""
        import json, sys
        from hf_variants.cli.commands import main
        try:
            main({command.split()!r})
        except SystemExit:
            pass
        print(json.dumps(sorted(m for m in {forbidden!r} if m in sys.modules)))
        """
    )
    result = run_python(script, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_help_shows_defaults_without_markup() -> None:
    text = run_cli("pretrain", "--help").stdout
    assert "(default: 0.15)" in text and "(default: 128)" in text  # --mlm_probability, --max_seq_length
    assert ":mod:" not in text and "``" not in text


def test_the_command_line_knows_every_registered_model_type_task_and_dtype() -> None:
    from hf_variants.tasks import GLUE_TASKS as TASKS
    from hf_variants.training.run_glue import DTYPES

    assert set(pretrain_arguments.MODEL_TYPES) == {*hf_variants.VARIANTS, "bert"}
    assert tuple(TASKS) == finetune_arguments.TASK_NAMES and tuple(DTYPES) == finetune_arguments.DTYPE_NAMES


def test_finetune_help_names_its_own_arguments_and_the_trainers() -> None:
    text = run_cli("finetune", "--help").stdout
    assert "--task_name" in text and "--heldout_fraction" in text and "--help_all" in text
    every = run_cli("finetune", "--help_all").stdout
    assert "--learning_rate" in every and "--task_name" in every


def test_report_to_is_checked_at_the_edge(tmp_path: Path) -> None:
    base = ["--model_type", "bert_control", "--train_file", "x.txt", "--output_dir", str(tmp_path)]
    with pytest.raises(SystemExit):
        pretrain_arguments.parse_args([*base, "--report_to", "csv", "weights_and_biases"])
    assert pretrain_arguments.parse_args([*base, "--with_tracking"]).report_to == ["csv", "all"]


def pretrain(corpus: Path, tokenizer_dir: Path, output: Path, *extra: str, env: dict[str, str] | None = None):
    result = run_cli("pretrain", *mlm_args(corpus, tokenizer_dir, output, "macaron_bert", *extra), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((output / "results.json").read_text())


@pytest.mark.full  # two launched runs; the launcher path itself runs in test_run_mlm
def test_mixed_precision_comes_from_the_launcher_unless_a_flag_is_given(corpus, tokenizer_dir, tmp_path) -> None:
    launcher = Path(sys.executable).with_name("accelerate")

    def launch(output: Path, *extra: str) -> dict:
        settings = ["--num_processes", "1", "--num_machines", "1", "--mixed_precision", "bf16"]
        settings += ["--dynamo_backend", "no"]
        arguments = mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "2", *extra)
        command = [str(launcher), "launch", *settings, "-m", "hf_variants.cli", "pretrain", *arguments]
        environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        result = run_launcher(command, cwd=tmp_path, env=environment)
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads((output / "results.json").read_text())

    from_launcher = launch(tmp_path / "bf16")
    assert from_launcher["mixed_precision"] == "bf16"
    flag = launch(tmp_path / "no", "--mixed_precision", "no")
    assert flag["mixed_precision"] == "no"
    assert from_launcher["final_train_loss"] != flag["final_train_loss"]  # bf16 autocast really ran


def test_a_finished_constant_schedule_run_extends_exactly(corpus, tokenizer_dir, tmp_path) -> None:
    constant = ["--lr_scheduler_type", "constant", "--checkpointing_steps", "3"]
    extended = tmp_path / "extended"
    pretrain(corpus, tokenizer_dir, extended, *constant, "--max_train_steps", "4")
    results = pretrain(corpus, tokenizer_dir, extended, *constant, "--max_train_steps", "7")
    direct = pretrain(corpus, tokenizer_dir, tmp_path / "direct", *constant, "--max_train_steps", "7")
    assert results["steps"] == direct["steps"] == 7
    a, b = load_file(extended / "model.safetensors"), load_file(tmp_path / "direct" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    metrics = (extended / "metrics.csv").read_text().splitlines()
    assert [row.split(",")[0] for row in metrics[1:8]] == [str(step) for step in range(1, 8)]  # one history


def test_a_decaying_schedule_of_another_length_is_another_run(corpus, tokenizer_dir, tmp_path) -> None:
    output = tmp_path / "linear"
    pretrain(corpus, tokenizer_dir, output, "--max_train_steps", "3")
    result = run_cli("pretrain", *mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "5"))
    assert result.returncode != 0
    assert "holds another run" in result.stderr and "schedule_steps: 3 → 5" in result.stderr


def test_a_tracker_that_is_not_installed_is_named(corpus, tokenizer_dir, tmp_path) -> None:
    from accelerate.tracking import get_available_trackers

    missing = next(name for name in ("wandb", "aim", "clearml", "dvclive", "swanlab")
                   if name not in {str(t.value) for t in get_available_trackers()})  # fmt: skip
    result = run_cli("pretrain", *mlm_args(corpus, tokenizer_dir, tmp_path / "run", "macaron_bert",
                                           "--max_train_steps", "1", "--report_to", missing))  # fmt: skip
    assert result.returncode != 0 and f"--report_to {missing}" in result.stderr and "pip install" in result.stderr


PUSHED_LOAD = WITHOUT_PACKAGE + textwrap.dedent(
    """
    import transformers
    folder = sys.argv[1]
    model = transformers.AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True)
    fill = transformers.pipeline("fill-mask", model=folder, trust_remote_code=True)
    print(json.dumps([type(model).__module__.split(".")[0], len(fill("the [MASK] sat ."))]))
    """
)


def test_export_push_to_a_local_hub_and_load_without_the_package(corpus, tokenizer_dir, tmp_path) -> None:
    run = tmp_path / "run"
    pretrain(corpus, tokenizer_dir, run, "--max_train_steps", "2")
    exported, hub = tmp_path / "export", tmp_path / "hub"
    result = run_cli("export", str(run), "--output_dir", str(exported), "--repo_id", "me/tiny", "--push",
                     "--local_hub", str(hub))  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    pushed = hub / "me" / "tiny"
    assert files_below(pushed) == files_below(exported)  # all but the folder's lock, which is bookkeeping
    card = (pushed / "README.md").read_text()
    metadata_block = yaml.safe_load(card.split("---\n")[1])
    assert metadata_block["language"] == "en" and "base_model" not in metadata_block  # trained from scratch
    assert "### Training hyperparameters" in card
    assert "| `learning_rate` | `0.003` |" in card
    assert f"- transformers {metadata.version('transformers')}" in card
    assert "../" not in card and "the repository README" not in card
    loaded = run_python(PUSHED_LOAD, str(pushed), cwd=tmp_path)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert json.loads(loaded.stdout.strip().splitlines()[-1]) == ["transformers_modules", 5]
    assert "You are using a model of type" not in loaded.stderr  # the remote config class is the saved one


def test_a_run_refused_before_it_wrote_anything_leaves_no_folder(tmp_path: Path) -> None:
    """A missing input ends pretraining and fine-tuning with one line, and the new --output_dir the lock
    had created (holding only the lock file) is gone; a folder that existed before stays."""
    for command in (["pretrain", "--model_type", "bert_control", "--train_file", str(tmp_path / "nope.txt")],
                    ["finetune", "--model_name_or_path", "x", "--train_file", str(tmp_path / "nope.csv"),
                     "--do_train"]):  # fmt: skip
        refused = run_cli(*command, "--output_dir", str(tmp_path / "new"))
        assert refused.returncode == 1 and "does not exist" in refused.stderr, refused.stderr
        assert not (tmp_path / "new").exists()
    (tmp_path / "mine").mkdir()
    run_cli("pretrain", "--model_type", "bert_control", "--train_file", str(tmp_path / "nope.txt"),
            "--output_dir", str(tmp_path / "mine"))  # fmt: skip
    assert (tmp_path / "mine").is_dir()
