"""Fault injection for MLM pretraining: runs killed with SIGKILL (also while a checkpoint is being
written) resume to exactly the uninterrupted run; damaged, foreign and pickled checkpoints are refused
with errors that name the file; one run per output folder; non-finite losses stop the run."""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hf_variants.storage import run_folder, run_identity
from hf_variants.storage.files import FAILPOINT_ENV, CheckpointError
from hf_variants.storage.record_schema import load_json
from hf_variants.training import checkpoints, run_mlm
from hf_variants.training.nonfinite import NonFiniteStepError

from .helpers import REPO_ROOT, middle_parameter, poison_gradient, run_launcher, two_process_launch
from .mlm_helpers import deterministic_metrics, history, mlm_args

STEPS, EVERY = 14, 3  # checkpoints at 3, 6, 9, 12


def run_args(corpus: Path, tokenizer_dir: Path, output: Path, *extra: str) -> list[str]:
    # dropout stays on: the resumed run must also restore the random states exactly
    return mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", str(STEPS),
                    "--checkpointing_steps", str(EVERY), "--eval_steps", "5", *extra)  # fmt: skip


def launch(args: list[str], failpoint: str | None = None, script: str = "run_mlm") -> subprocess.CompletedProcess:
    """``scripts/<script>.py args`` in a fresh process, killed by itself at ``failpoint`` if given."""
    env = {k: v for k, v in os.environ.items() if k != FAILPOINT_ENV}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    if failpoint:
        env[FAILPOINT_ENV] = failpoint
    command = [sys.executable, str(REPO_ROOT / "scripts" / f"{script}.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, corpus: Path, tokenizer_dir: Path) -> Path:
    output = tmp_path_factory.mktemp("uninterrupted")
    result = launch(run_args(corpus, tokenizer_dir, output))
    assert result.returncode == 0, result.stderr[-3000:]
    return output


def test_sigkill_at_several_points_then_latest_resumes_to_the_uninterrupted_run(
    uninterrupted: Path,
    corpus: Path,
    tokenizer_dir: Path,
    tmp_path: Path,
) -> None:
    output = tmp_path / "run"
    resume = ["--resume_from_checkpoint", "latest"]
    for failpoint in ("train_step@5", "checkpoint_files_written@9", "train_step@11"):
        result = launch(run_args(corpus, tokenizer_dir, output, *resume), failpoint)
        assert result.returncode == -signal.SIGKILL, (failpoint, result.returncode, result.stderr[-2000:])
        if failpoint.startswith("checkpoint"):  # killed while writing checkpoint-9: only its partial folder
            assert (output / ".checkpoint-9.partial" / "model.safetensors").is_file()
            assert not (output / "checkpoint-9").exists()
    # the third run resumed from checkpoint-6 (checkpoint-9 was half-written) and wrote 9 itself
    assert "Resuming this run from" in result.stderr and "checkpoint-6" in result.stderr
    assert (output / "checkpoint-9" / run_folder.COMPLETE_MARKER).is_file()
    result = launch(run_args(corpus, tokenizer_dir, output, *resume))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Resuming this run from" in result.stderr and "checkpoint-9" in result.stderr

    expected, got = load_file(uninterrupted / "model.safetensors"), load_file(output / "model.safetensors")
    assert expected.keys() == got.keys() and all(torch.equal(expected[k], got[k]) for k in expected)
    assert [e["loss"] for e in history(output)] == [e["loss"] for e in history(uninterrupted)]
    assert [e["step"] for e in history(output)] == list(range(1, STEPS + 1))
    assert deterministic_metrics(output) == deterministic_metrics(uninterrupted)


def test_a_damaged_newest_checkpoint_is_skipped_and_named(uninterrupted: Path, tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(uninterrupted, folder, ignore=shutil.ignore_patterns(run_folder.LOCK_FILE))
    # checkpoints every 3 steps and at the last one (14), so that a longer run of the same schedule continues
    weights = folder / "checkpoint-14" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # truncated
    latest, skipped = checkpoints.latest_checkpoint(folder)
    assert latest == folder / "checkpoint-12" and skipped == [folder / "checkpoint-14"]
    with pytest.raises(CheckpointError, match=r"checkpoint-14/model.safetensors has 100 bytes"):
        checkpoints.verify_checkpoint(folder / "checkpoint-14")
    (folder / "checkpoint-12" / "random_states.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"checkpoint-12/random_states.safetensors is missing"):
        checkpoints.verify_checkpoint(folder / "checkpoint-12")


class _Payload:
    """Unpickling this creates the file named by ``path``: the proof that code ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.mark.parametrize(
    "name",
    ["model.safetensors", "optimizer.safetensors", "optimizer.json", "scheduler.json", "random_states.safetensors",
     "random_states.json", "training_state.json", "run_fingerprint.json", "random_states_0.pkl",
     "custom_checkpoint_0.pkl", "optimizer.bin", "pytorch_model.bin", "scheduler.bin"],
)  # fmt: skip
def test_a_malicious_pickle_under_any_checkpoint_name_is_refused_without_running(
    name: str,
    uninterrupted: Path,
    corpus: Path,
    tokenizer_dir: Path,
    tmp_path: Path,
) -> None:
    import shutil

    checkpoint = tmp_path / "checkpoint-12"
    shutil.copytree(uninterrupted / "checkpoint-12", checkpoint)
    evidence = tmp_path / "code-ran"
    (checkpoint / name).write_bytes(pickle.dumps(_Payload(str(evidence))))
    with pytest.raises(CheckpointError, match=rf"checkpoint-12/{name}"):
        run_mlm.main(run_args(corpus, tokenizer_dir, tmp_path / "a", "--resume_from_checkpoint", str(checkpoint)))
    # an attacker who also rewrites the completeness marker still gets no unpickling: the loaders read
    # safetensors and JSON only, and never open a file of another name
    marker = load_json(checkpoint / run_folder.COMPLETE_MARKER)
    ours = name in marker["files"]
    marker["files"][name] = {"size": (checkpoint / name).stat().st_size,
                             "sha256": run_identity.file_sha256(checkpoint / name)}  # fmt: skip
    checkpoints.write_json(checkpoint / run_folder.COMPLETE_MARKER, marker, within=checkpoint)
    rerun = run_args(corpus, tokenizer_dir, tmp_path / "b", "--resume_from_checkpoint", str(checkpoint))
    if ours:
        with pytest.raises(CheckpointError, match=rf"{name}"):
            run_mlm.main(rerun)
    else:
        assert run_mlm.main(rerun)["steps"] == STEPS
    assert not evidence.exists()


def test_old_accelerate_checkpoints_are_refused(tmp_path: Path) -> None:
    old = tmp_path / "checkpoint-4"
    old.mkdir()
    for name in ("model.safetensors", "optimizer.bin", "random_states_0.pkl", "custom_checkpoint_0.pkl"):
        (old / name).write_bytes(b"x")
    with pytest.raises(CheckpointError, match=r"holds pickled state .* not loaded \(unpickling can run code\)"):
        checkpoints.verify_checkpoint(old)


def test_one_run_per_output_folder(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    output = tmp_path / "run"
    lock = run_folder.OutputDirLock(output)  # another run holds the folder
    with pytest.raises(CheckpointError, match=rf"in use by another run \(PID {os.getpid()}\)"):
        run_mlm.main(run_args(corpus, tokenizer_dir, output))
    lock.release()

    short = mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "6",
                     "--checkpointing_steps", "3")  # fmt: skip
    run_mlm.main(short)
    other_seed = [*short, "--seed", "7"]
    with pytest.raises(CheckpointError, match=r"holds another run \(1 difference\(s\): seed: 42 → 7\)"):
        run_mlm.main(other_seed)
    import shutil

    shutil.copytree(output / "checkpoint-6", output / "checkpoint-99")  # an old checkpoint of the package's
    (output / "checkpoint-98").mkdir()  # not the package's (no completeness marker): kept
    run_mlm.main([*other_seed, "--overwrite_output_dir", "--max_train_steps", "3"])
    assert sorted(p.name for p in output.glob("checkpoint-*")) == ["checkpoint-3", "checkpoint-98"]

    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    for overwrite in ([], ["--overwrite_output_dir"]):
        with pytest.raises(CheckpointError, match=r"not empty and no hf-variants run wrote it .* it holds notes\.txt"):
            run_mlm.main(mlm_args(corpus, tokenizer_dir, stranger, "macaron_bert", "--max_train_steps", "2",
                                  *overwrite))  # fmt: skip
    assert sorted(p.name for p in stranger.iterdir()) == ["notes.txt"]  # not even a lock file


def test_resuming_a_checkpoint_of_another_run_is_refused(
    uninterrupted: Path,
    corpus: Path,
    tokenizer_dir: Path,
    tmp_path: Path,
) -> None:
    checkpoint = uninterrupted / "checkpoint-6"
    args = run_args(corpus, tokenizer_dir, tmp_path / "x", "--resume_from_checkpoint", str(checkpoint))
    args[args.index("--learning_rate") + 1] = "1e-3"
    with pytest.raises(CheckpointError, match=r"belongs to another run \(learning_rate: 0.003 → 0.001\)"):
        run_mlm.main(args)


def test_a_non_finite_loss_stops_the_run_or_is_skipped_and_counted(
    corpus: Path,
    tokenizer_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = run_mlm.masked_lm_loss_sum
    calls = {"n": 0}

    def nan_on_third_step(model, batch, sparse):
        calls["n"] += 1
        loss, auxiliary = original(model, batch, sparse)
        return (loss * float("nan") if calls["n"] == 3 else loss), auxiliary

    monkeypatch.setattr(run_mlm, "masked_lm_loss_sum", nan_on_third_step)
    args = mlm_args(corpus, tokenizer_dir, tmp_path / "stop", "macaron_bert", "--max_train_steps", "5")
    stopped = r"Step 3: non-finite training loss nan; gradient in .* training examples \["
    with pytest.raises(FloatingPointError, match=stopped):
        run_mlm.main(args)
    calls["n"] = 0
    skip = mlm_args(corpus, tokenizer_dir, tmp_path / "skip", "macaron_bert", "--max_train_steps", "5")
    results = run_mlm.main([*skip, "--skip_nonfinite_steps"])
    assert results["skipped_nonfinite_steps"] == 1 and results["steps"] == 5
    weights = load_file(tmp_path / "skip" / "model.safetensors")
    assert all(torch.isfinite(tensor).all() for tensor in weights.values())


def test_an_infinite_gradient_stops_pretraining_naming_the_step_and_the_parameter(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One parameter's gradient infinite on the third step with a finite loss: the loop checks before
    clipping and names that step and exactly that parameter."""
    original, poisoned = run_mlm.masked_lm_loss_sum, {}

    def poison_once(model, batch, sparse):
        if not poisoned:
            name, parameter = middle_parameter(model)
            poisoned[name] = poison_gradient(parameter, on_call=3)
        return original(model, batch, sparse)

    monkeypatch.setattr(run_mlm, "masked_lm_loss_sum", poison_once)
    args = mlm_args(corpus, tokenizer_dir, tmp_path / "stop", "macaron_bert", "--max_train_steps", "5")
    with pytest.raises(NonFiniteStepError) as stopped:
        run_mlm.main(args)
    (name,) = poisoned
    assert stopped.value.step == 3 and stopped.value.parameters == [name]
    assert re.match(rf"Step 3: non-finite gradient in {re.escape(name)} \(gradient norm inf\) on the batch of "
                    r"training examples \[", str(stopped.value))  # fmt: skip


# ------------------------------------------------------------------------------------------------ run_glue
GLUE_STEPS = 9  # Trainer checkpoints at 3, 6, 9


@pytest.fixture(scope="module")
def glue_setup(tmp_path_factory, corpus: Path, tokenizer_dir: Path) -> tuple[Path, Path]:
    return make_glue_setup(tmp_path_factory.mktemp("glue-faults"), corpus, tokenizer_dir)


def make_glue_setup(root: Path, corpus: Path, tokenizer_dir: Path) -> tuple[Path, Path]:
    """A tiny MLM checkpoint and a CSV sentence task (the label: does the sentence mention a person?)."""
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = AutoConfig.for_model("bert_control", vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)  # fmt: skip
    torch.manual_seed(0)
    AutoModelForMaskedLM.from_config(config).save_pretrained(root / "model")
    tokenizer.save_pretrained(root / "model")
    lines = corpus.read_text().splitlines()[:200]
    person = ("teacher", "child", "doctor")
    rows = ["sentence,label", *(f"{line},{int(any(word in line for word in person))}" for line in lines)]
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    return root / "model", root / "train.csv"


def glue_run_args(setup: tuple[Path, Path], output: Path) -> list[str]:
    model, train = setup
    return ["--model_name_or_path", str(model), "--train_file", str(train), "--output_dir", str(output),
            "--do_train", "--max_steps", str(GLUE_STEPS), "--save_strategy", "steps", "--save_steps", "3",
            "--per_device_train_batch_size", "8", "--learning_rate", "3e-3", "--logging_steps", "1",
            "--max_seq_length", "24", "--report_to", "none", "--disable_tqdm", "true", "--seed", "3",
            "--dataloader_pin_memory", "false"]  # fmt: skip


def test_run_glue_killed_at_several_points_resumes_to_the_uninterrupted_run(
    glue_setup: tuple[Path, Path], tmp_path: Path
) -> None:
    import json

    reference = tmp_path / "reference"
    result = launch(glue_run_args(glue_setup, reference), script="run_glue")
    assert result.returncode == 0, result.stderr[-3000:]
    output = tmp_path / "run"
    for failpoint in ("train_step@4", "checkpoint_files_written@6"):  # the second: checkpoint-6 left unmarked
        result = launch(glue_run_args(glue_setup, output), failpoint, "run_glue")
        assert result.returncode == -signal.SIGKILL, (failpoint, result.returncode, result.stderr[-2000:])
    assert (output / "checkpoint-6").is_dir() and not (output / "checkpoint-6" / run_folder.COMPLETE_MARKER).exists()
    # the same command again: it resumes, skipping the unmarked checkpoint-6
    result = launch(glue_run_args(glue_setup, output), script="run_glue")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "checkpoint-6: it is incomplete or damaged" in result.stderr and "Resuming this run from" in result.stderr

    expected, got = load_file(reference / "model.safetensors"), load_file(output / "model.safetensors")
    assert expected.keys() == got.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-5, atol=1e-6, msg=name)
    full, resumed = (json.loads((folder / "results.json").read_text())["train"] for folder in (reference, output))
    assert resumed["train_loss"] == pytest.approx(full["train_loss"], rel=1e-5)


@pytest.mark.skipif(not Path(sys.executable).with_name("accelerate").exists(), reason="no accelerate launcher")
@pytest.mark.full  # a minute of two launched processes; the launcher's pretraining path runs in test_run_mlm
def test_fine_tuning_under_the_launcher_trains_one_process_model_and_resumes_exactly(
    glue_setup: tuple[Path, Path], tmp_path: Path
) -> None:
    """`accelerate launch --multi_gpu --num_processes 2 … finetune` on this GPU-less machine (gloo, per-device
    batch 4) trains the model one process trains with batch 8 (dropout off: each process draws its own masks),
    also when it is killed after step 5 and resumed from checkpoint-3 under two processes."""
    import json

    import transformers
    from packaging import version

    def args(output: Path, batch: int) -> list[str]:
        values = glue_run_args(glue_setup, output)
        values[values.index("--per_device_train_batch_size") + 1] = str(batch)
        return [*values, "--config_overrides", "hidden_dropout_prob=0.0,attention_probs_dropout_prob=0.0"]

    def launched(output: Path, failpoint: str | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != FAILPOINT_ENV}
        env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", **({FAILPOINT_ENV: failpoint} if failpoint else {}))
        return run_launcher(two_process_launch("finetune", *args(output, 4)), cwd=tmp_path, env=env)

    one, two, killed = tmp_path / "one", tmp_path / "two", tmp_path / "killed"
    assert launch(args(one, 8), script="run_glue").returncode == 0
    alone = json.loads((one / "results.json").read_text())["train"]
    expected = load_file(one / "model.safetensors")

    def same_as_one_process(folder: Path) -> None:
        got = load_file(folder / "model.safetensors")
        for name in expected:
            torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-5, msg=name)
        parallel = json.loads((folder / "results.json").read_text())["train"]
        assert parallel["train_loss"] == pytest.approx(alone["train_loss"], rel=1e-5)

    done = launched(two)
    assert done.returncode == 0, done.stderr[-4000:]
    same_as_one_process(two)
    assert launched(killed, "train_step@5").returncode != 0  # both processes killed after step 5
    assert (killed / "checkpoint-3" / run_folder.COMPLETE_MARKER).is_file() and not (killed / "results.json").exists()
    resumed = launched(killed)
    if version.parse(transformers.__version__) < version.parse("5.18.0"):  # the lowest supported end: refused
        assert resumed.returncode != 0 and "needs transformers >= 5.18" in resumed.stderr, resumed.stderr[-3000:]
        return
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "Resuming this run from" in resumed.stderr
    same_as_one_process(killed)


@pytest.mark.parametrize("engine", ["pretrain", "finetune"])
def test_a_failed_run_ends_its_process_group(
    engine: str, corpus: Path, tokenizer_dir: Path, glue_setup: tuple[Path, Path], tmp_path: Path
) -> None:
    """A launched process whose run fails still destroys its process group on the way out (left to interpreter
    shutdown, gloo's threads can hang or abort the process): both engines' ``main`` end it in a ``finally``."""
    import torch.distributed as dist

    from hf_variants.training import run_glue

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    try:
        if engine == "pretrain":
            with pytest.raises(FileNotFoundError, match="does not exist"):
                run_mlm.main(run_args(tmp_path / "missing.txt", tokenizer_dir, tmp_path / "out"))
        else:
            args = glue_run_args(glue_setup, tmp_path / "out")
            args[args.index("--train_file") + 1] = str(tmp_path / "missing.csv")
            with pytest.raises((FileNotFoundError, ValueError), match=r"missing\.csv"):
                run_glue.main(args)
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_fine_tuning_refuses_sharded_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import TrainingArguments

    from hf_variants.training import run_glue

    plain = TrainingArguments("unused", report_to="none")
    run_glue.refuse_sharded_state(plain)  # data parallelism: fine
    with pytest.raises(ValueError, match=r"does not support FSDP: its checkpoints are written in shards"):
        run_glue.refuse_sharded_state(TrainingArguments("unused", report_to="none", fsdp="full_shard"))
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")  # what `accelerate launch` sets from a config file
    with pytest.raises(ValueError, match=r"does not support DEEPSPEED"):
        run_glue.refuse_sharded_state(plain)


def test_a_malicious_pickle_in_a_trainer_checkpoint_never_runs(glue_setup: tuple[Path, Path], tmp_path: Path) -> None:
    """Trainer checkpoints hold torch pickles (optimizer.pt, scheduler.pt, rng_state.pth): a replaced
    file fails the completeness marker; with a forged marker the Trainer's weights_only=True loading
    refuses it — in both cases without running the payload."""
    import shutil

    from hf_variants.training import run_glue

    def args(output: Path) -> list[str]:
        values = glue_run_args(glue_setup, output)
        values[values.index("--max_steps") + 1] = "6"
        return values

    source = tmp_path / "source"
    run_glue.main(args(source))
    for name in ("optimizer.pt", "rng_state.pth", "scheduler.pt"):
        checkpoint = tmp_path / name / "checkpoint-3"
        shutil.copytree(source / "checkpoint-3", checkpoint)
        evidence = tmp_path / name / "code-ran"
        (checkpoint / name).write_bytes(pickle.dumps(_Payload(str(evidence))))

        def resume(output: str, checkpoint: Path = checkpoint) -> list[str]:
            return [*args(checkpoint.parent / output), "--resume_from_checkpoint", str(checkpoint)]

        with pytest.raises(CheckpointError, match=rf"checkpoint-3/{name} (has|does not match)"):
            run_glue.main(resume("out"))
        marker = load_json(checkpoint / run_folder.COMPLETE_MARKER)
        marker["files"][name] = {"size": (checkpoint / name).stat().st_size,
                                 "sha256": run_identity.file_sha256(checkpoint / name)}  # fmt: skip
        checkpoints.write_json(checkpoint / run_folder.COMPLETE_MARKER, marker, within=checkpoint)
        with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
            run_glue.main(resume("out2"))
        assert not evidence.exists(), name


def test_damaged_pretrained_weights_are_named(tmp_path: Path) -> None:
    from transformers import AutoModelForSequenceClassification

    from hf_variants.bert_control import BertControlConfig, BertControlForMaskedLM

    model = BertControlForMaskedLM(BertControlConfig(vocab_size=30, hidden_size=8, num_attention_heads=2,
                                                     intermediate_size=16, num_hidden_layers=1))  # fmt: skip
    model.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])
    with pytest.raises(CheckpointError, match=r"model\.safetensors is not a readable safetensors file"):
        checkpoints.load_pretrained(AutoModelForSequenceClassification.from_pretrained, str(tmp_path))
