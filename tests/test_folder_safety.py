"""Nothing outside the folder, nothing lost, nothing silently different — each guarantee tested by injecting
the fault: crafted manifests (``..``, absolute, symlinked entries), hostile repository ids, an output folder
that is a symlink to a user's files, a kill while the manifest is renamed into place, a kill between a new
checkpoint and the old one's removal under ``--save_total_limit 1``, a finished run re-run, two kills in one
fine-tuning run, SIGTERM, and bad inputs (each refused in one line naming the flag)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hf_variants.storage import run_folder
from hf_variants.storage.files import FAILPOINT_ENV, CheckpointError, inside, is_temporary, write_text_atomic
from hf_variants.storage.run_folder import MANIFEST_FILE
from hf_variants.training import checkpoints, run_glue, run_mlm

from .mlm_helpers import history, mlm_args
from .test_faults import GLUE_STEPS, glue_run_args, launch, make_glue_setup

CLI = Path(sys.executable).with_name("hf-variants")


def cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([str(CLI), *argv], capture_output=True, text=True, timeout=600, env=environment)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` with its bytes, but the lock file (which holds the PID of the last run)."""
    files = (path for path in sorted(folder.rglob("*")) if path.is_file() and path.name != run_folder.LOCK_FILE)
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in files}


def same_weights(expected: Path, got: Path) -> None:
    reference, resumed = load_file(expected / "model.safetensors"), load_file(got / "model.safetensors")
    assert reference.keys() == resumed.keys()
    for name in reference:
        torch.testing.assert_close(resumed[name], reference[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.fixture(scope="module")
def glue(tmp_path_factory, corpus: Path, tokenizer_dir: Path) -> tuple[Path, Path]:
    return make_glue_setup(tmp_path_factory.mktemp("glue"), corpus, tokenizer_dir)


# ------------------------------------------------------------------------------------------------ containment
def test_inside_refuses_every_way_out(tmp_path: Path) -> None:
    folder = tmp_path / "owned"
    folder.mkdir()
    (folder / "sub").mkdir()
    (folder / "link").symlink_to(tmp_path)
    assert inside(folder, "sub/file.txt", "entry") == (folder / "sub" / "file.txt").resolve()
    for escaping in ("../victim.txt", str(tmp_path / "victim.txt"), "link/victim.txt", "sub/../../victim.txt", "."):
        with pytest.raises(CheckpointError, match=rf"entry '{escaping}' lies outside {folder.resolve()}"):
            inside(folder, escaping, "entry")


@pytest.mark.parametrize("entry", ["../victim_outside.txt", "ABSOLUTE", "link_to_victim.txt"])
def test_a_crafted_manifest_deletes_nothing_outside_the_folder(
    entry: str, pretrained_run: Path, tmp_path: Path
) -> None:
    """A manifest travels with a Hub repository: its entries are checked before anything is removed, by
    `hf-variants export` into the folder and by `--overwrite_output_dir` alike."""
    import shutil

    victim = tmp_path / "victim_outside.txt"
    victim.write_text("the user's file")
    crafted = tmp_path / "crafted"
    shutil.copytree(pretrained_run, crafted)
    (crafted / "link_to_victim.txt").symlink_to(victim)
    manifest = json.loads((crafted / MANIFEST_FILE).read_text())
    name = str(victim) if entry == "ABSOLUTE" else entry
    manifest["files"][name] = {"size": len("the user's file"), "sha256": "0" * 64}
    (crafted / MANIFEST_FILE).write_text(json.dumps(manifest))

    with pytest.raises(CheckpointError, match=r"hf_variants_manifest\.json entry .* lies outside"):
        run_folder.remove_previous_run(crafted)
    result = cli("export", str(pretrained_run), "--output_dir", str(crafted), "--overwrite_output_dir")
    assert result.returncode == 1 and "holds a training run" in result.stderr and "Traceback" not in result.stderr
    (crafted / "run_fingerprint.json").unlink()  # now it looks like a previous export: its entries are checked
    result = cli("export", str(pretrained_run), "--output_dir", str(crafted), "--overwrite_output_dir")
    assert result.returncode == 1 and "lies outside" in result.stderr and "Traceback" not in result.stderr
    with pytest.raises(CheckpointError, match=r"lies outside"):
        run_folder.verify_manifest(crafted)  # not even read (hashed) outside the folder
    assert victim.read_text() == "the user's file"
    assert (crafted / "model.safetensors").is_file()  # nothing removed at all: every entry is checked first


def test_push_refuses_a_repo_id_that_leaves_the_local_hub(pretrained_run: Path, tmp_path: Path) -> None:
    from hf_variants.hub import export_for_hub

    model_folder = tmp_path / "export"
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    export_for_hub(AutoModelForMaskedLM.from_pretrained(pretrained_run), model_folder,
                   AutoTokenizer.from_pretrained(pretrained_run))  # fmt: skip
    hub = tmp_path / "deep" / "hub"
    hub.mkdir(parents=True)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for repo_id in ("../../escape", str(tmp_path / "absolute"), "a/b/c"):
        result = cli("push", str(model_folder), "--repo_id", repo_id, "--local_hub", str(hub))
        assert result.returncode == 1, result.stderr
        assert "Repo id must be in the form" in result.stderr and "Traceback" not in result.stderr
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing created anywhere
    (hub / "me").symlink_to(tmp_path)  # a valid id whose folder leads out through a symlink
    result = cli("push", str(model_folder), "--repo_id", "me/model", "--local_hub", str(hub))
    assert result.returncode == 1 and "lies outside" in result.stderr
    assert not (tmp_path / "model").exists()


# ------------------------------------------------------------------------------------------------ ownership
def test_an_output_folder_behind_a_symlink_to_a_users_files_is_never_written(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    users = tmp_path / "users_folder"
    (users / "checkpoint-7").mkdir(parents=True)
    (users / "checkpoint-7" / "model.safetensors").write_bytes(b"another tool's weights")
    (users / "config.json").write_text('{"mine": true}')
    link = tmp_path / "run"
    link.symlink_to(users)
    before = snapshot(users)
    args = mlm_args(corpus, tokenizer_dir, link, "macaron_bert", "--max_train_steps", "2", "--overwrite_output_dir")
    with pytest.raises(CheckpointError, match=r"no hf-variants run wrote it .* checkpoint-7, config\.json"):
        run_mlm.main(args)
    assert snapshot(users) == before


def test_overwrite_keeps_a_checkpoint_the_package_did_not_mark(corpus: Path, tokenizer_dir: Path, tmp_path: Path):
    output = tmp_path / "run"
    first = mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "2",
                     "--checkpointing_steps", "1")  # fmt: skip
    run_mlm.main(first)
    (output / "checkpoint-7").mkdir()  # another tool's checkpoint, copied in by the user
    (output / "checkpoint-7" / "weights.bin").write_bytes(b"theirs")
    run_mlm.main([*first, "--seed", "7", "--overwrite_output_dir"])
    assert (output / "checkpoint-7" / "weights.bin").read_bytes() == b"theirs"
    assert sorted(p.name for p in output.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2", "checkpoint-7"]
    assert json.loads((output / "run_fingerprint.json").read_text())["seed"] == 7


def test_continuing_in_place_is_refused_and_the_input_kept(pretrained_run: Path, corpus: Path, tmp_path: Path):
    import shutil

    folder = tmp_path / "R"
    shutil.copytree(pretrained_run, folder)
    before = snapshot(folder)
    args = ["--model_name_or_path", str(folder), "--train_file", str(corpus), "--max_seq_length", "24",
            "--max_train_steps", "1", "--output_dir", str(folder), "--overwrite_output_dir"]  # fmt: skip
    with pytest.raises(CheckpointError, match=r"--model_name_or_path .* lies in --output_dir .* delete its own input"):
        run_mlm.main(args)
    assert snapshot(folder) == before


# ------------------------------------------------------------------------------------------------ atomic bookkeeping
def test_a_kill_while_the_manifest_is_renamed_into_place_loses_nothing(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    args = mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "2")
    killed = launch(args, f"atomic_write@{MANIFEST_FILE}")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert not (output / MANIFEST_FILE).exists()  # the old state (none), not an empty file
    assert list(output.glob(f".{MANIFEST_FILE}.*.tmp"))  # what the kill left
    result = cli("verify", str(output))  # the unfinished run is named, not trusted
    assert result.returncode == 1 and "did not finish" in result.stderr
    resumed = launch(args)  # the same command finishes the run
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert cli("verify", str(output)).returncode == 0
    assert not list(output.glob("*.tmp")) and not list(output.glob(".*.tmp"))

    # a manifest damaged from outside: reported with the fix, and --overwrite_output_dir recovers the folder
    (output / MANIFEST_FILE).write_text("")
    result = cli("verify", str(output))
    assert result.returncode == 1 and "is not valid JSON" in result.stderr and "--overwrite_output_dir" in result.stderr
    assert launch([*args, "--overwrite_output_dir"]).returncode == 0
    assert cli("verify", str(output)).returncode == 0


def test_write_text_atomic_leaves_the_old_content_when_killed_before_the_rename(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    target.write_text("old")
    code = f"from pathlib import Path; from hf_variants.storage.files import write_text_atomic; " \
           f"write_text_atomic(Path({str(target)!r}), 'new', within=Path({str(tmp_path)!r}))"  # fmt: skip
    env = {**os.environ, FAILPOINT_ENV: "atomic_write@record.json"}
    assert subprocess.run([sys.executable, "-c", code], env=env, timeout=120).returncode == -signal.SIGKILL
    assert target.read_text() == "old"
    leftovers = [path.name for path in tmp_path.iterdir() if path != target]
    assert len(leftovers) == 1 and is_temporary(leftovers[0])  # ignored by manifests
    write_text_atomic(target, "new", within=tmp_path)
    assert target.read_text() == "new" and [path.name for path in tmp_path.iterdir()] == ["record.json"]


# ------------------------------------------------------------------------------------------------ checkpoint rotation
def test_save_total_limit_never_leaves_zero_complete_checkpoints(glue, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    limited = ["--save_total_limit", "1"]
    assert launch([*glue_run_args(glue, reference), *limited], script="run_glue").returncode == 0
    output = tmp_path / "run"
    # killed after checkpoint-6's files are written, before it is marked: the Trainer alone would already
    # have removed checkpoint-3
    killed = launch([*glue_run_args(glue, output), *limited], "checkpoint_files_written@6", "run_glue")
    assert killed.returncode == -signal.SIGKILL
    assert (output / "checkpoint-3" / run_folder.COMPLETE_MARKER).is_file()
    result = launch([*glue_run_args(glue, output), *limited], script="run_glue")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "run stopped while it was being written" in result.stderr and "checkpoint-3" in result.stderr
    same_weights(reference, output)
    assert sorted(p.name for p in output.glob("checkpoint-*")) == [f"checkpoint-{GLUE_STEPS}"]


# ------------------------------------------------------------------------------------------------ finished runs
def test_a_finished_run_run_again_changes_nothing(glue, pretrained_run: Path, tmp_path: Path) -> None:
    output = tmp_path / "finetune"
    assert launch(glue_run_args(glue, output), script="run_glue").returncode == 0
    before = {name: (output / name).stat().st_mtime_ns for name in snapshot(output)}
    contents = snapshot(output)
    again = launch(glue_run_args(glue, output), script="run_glue")
    assert again.returncode == 0 and "holds this run, finished: nothing was trained" in again.stderr
    assert snapshot(output) == contents
    assert {name: (output / name).stat().st_mtime_ns for name in snapshot(output)} == before
    assert not (output / "training_args.bin").exists()  # no pickle in a final folder

    pretrained = snapshot(pretrained_run)
    stamp = (pretrained_run / "results.json").stat().st_mtime_ns
    assert run_mlm.main(json.loads((pretrained_run / "results.json").read_text())["command"].split()[1:])
    assert snapshot(pretrained_run) == pretrained
    assert (pretrained_run / "results.json").stat().st_mtime_ns == stamp


def test_two_interruptions_report_the_uninterrupted_train_loss(glue, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    assert launch(glue_run_args(glue, reference), script="run_glue").returncode == 0
    output = tmp_path / "run"
    for failpoint in ("train_step@5", "train_step@8"):  # the second resume starts from checkpoint-6, written
        killed = launch(glue_run_args(glue, output), failpoint, "run_glue")  # after the first resume
        assert killed.returncode == -signal.SIGKILL
    assert launch(glue_run_args(glue, output), script="run_glue").returncode == 0
    full, resumed = (json.loads((folder / "results.json").read_text())["train"] for folder in (reference, output))
    assert resumed["train_loss"] == pytest.approx(full["train_loss"], rel=1e-5)
    same_weights(reference, output)


def test_sigterm_saves_a_checkpoint_of_the_step_and_the_run_resumes_exactly(
    glue, corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    # pretraining: no checkpointing at all, yet the steps before the signal are kept
    args = mlm_args(corpus, tokenizer_dir, tmp_path / "mlm", "macaron_bert", "--max_train_steps", "8")
    reference = mlm_args(corpus, tokenizer_dir, tmp_path / "mlm-reference", "macaron_bert", "--max_train_steps", "8")
    assert launch(reference).returncode == 0
    stopped = launch(args, "train_step@5:SIGTERM")
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr[-2000:]
    assert "Stopped by SIGTERM after step 5" in stopped.stdout + stopped.stderr
    assert checkpoints.verify_checkpoint(tmp_path / "mlm" / "checkpoint-5")
    assert launch(args).returncode == 0
    same_weights(tmp_path / "mlm-reference", tmp_path / "mlm")
    losses = [[row["loss"] for row in history(tmp_path / name)] for name in ("mlm", "mlm-reference")]
    assert losses[0] == losses[1]

    # fine-tuning: the Trainer saves at the end of the step and stops
    output = tmp_path / "finetune"
    stopped = launch(glue_run_args(glue, output), "train_step@4:SIGTERM", "run_glue")  # sent after step 4
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr[-2000:]
    assert "Stopped by SIGTERM after step 5" in stopped.stderr and not (output / "results.json").exists()
    assert checkpoints.verify_checkpoint(output / "checkpoint-5")  # not a checkpoint step (every 3)
    assert launch(glue_run_args(glue, output), script="run_glue").returncode == 0
    reference = tmp_path / "finetune-reference"
    assert launch(glue_run_args(glue, reference), script="run_glue").returncode == 0
    same_weights(reference, output)


# ------------------------------------------------------------------------------------------------ inputs at the edge
def test_config_overrides_name_fields_of_the_config_in_both_engines(
    pretrained_run: Path, corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=r"--config_overrides: MacaronBertConfig has no field 'hidden_sise'; did you "
                       r"mean 'hidden_size'\?"):  # fmt: skip
        run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / "a", "macaron_bert", "--max_train_steps", "1",
                              "--config_overrides", "hidden_sise=32"))  # fmt: skip
    assert not (tmp_path / "a" / "run_fingerprint.json").exists()
    continued = ["--model_name_or_path", str(pretrained_run), "--train_file", str(corpus), "--max_seq_length",
                 "24", "--max_train_steps", "1", "--output_dir", str(tmp_path / "b"), "--disable_tqdm"]  # fmt: skip
    with pytest.raises(ValueError, match=r"has no field 'num_hiden_layers'"):
        run_mlm.main([*continued, "--config_overrides", "num_hiden_layers=1"])
    # a field of an idea the same overrides switch to is a field
    from transformers import AutoConfig

    from hf_variants.core.overrides import check_override_fields

    check_override_fields({"attention_type": "mgk", "num_key_components": 2},
                          lambda **switches: AutoConfig.for_model("macaron_bert", **switches))  # fmt: skip
    with pytest.raises(ValueError, match=r"--max_seq_length 1000 exceeds the model's position table"):
        run_mlm.main([*continued[:5], "1000", *continued[6:], "--line_by_line"])


def test_a_corpus_without_a_maskable_token_is_refused(tokenizer_dir: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "invisible.txt"
    corpus.write_text("\n".join(["\u200b\u200c\u200d\u2060\u0007" * 40] * 200) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"The training corpus has no token to mask"):
        run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / "run", "macaron_bert", "--max_train_steps", "2",
                              "--validation_file", str(corpus)))  # fmt: skip
    assert not (tmp_path / "run" / "run_fingerprint.json").exists()


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--learning_rate", "nan", "--learning_rate: 'nan' is not a finite number"),
     ("--learning_rate", "inf", "--learning_rate: 'inf' is not a finite number"),
     ("--learning_rate", "0", "--learning_rate: 0.0 must be greater than 0"),
     ("--weight_decay", "nan", "--weight_decay: 'nan' is not a finite number"),
     ("--seed", "-1", "--seed: -1 is not a seed"),
     ("--num_train_epochs", "-1", "--num_train_epochs: -1.0 trains no step"),
     ("--num_train_epochs", "0", "--num_train_epochs: 0.0 trains no step"),
     ("--adam_beta2", "1.5", "--adam_beta2: 1.5 must lie in [0, 1)")],
)  # fmt: skip
def test_fine_tuning_settings_out_of_range_are_usage_errors(flag, value, message, glue, tmp_path, capsys):
    args = [*glue_run_args(glue, tmp_path / "run"), flag, value]
    args.remove("--max_steps")
    args.remove(str(GLUE_STEPS))
    with pytest.raises(SystemExit) as stopped:
        run_glue.parse_args(args)
    assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_user_mistakes_end_in_one_line_naming_the_flag(glue, corpus: Path, tokenizer_dir: Path, tmp_path):
    pretrain_seed = cli("pretrain", *mlm_args(corpus, tokenizer_dir, tmp_path / "p", "macaron_bert", "--seed", "-1"))
    assert pretrain_seed.returncode == 2 and "argument --seed: -1 is not a seed" in pretrain_seed.stderr
    too_long = cli("finetune", *glue_run_args(glue, tmp_path / "f"), "--max_seq_length", "100000")
    assert too_long.returncode == 1 and "Traceback" not in too_long.stderr
    assert "--max_seq_length 100000 exceeds the model's position table" in too_long.stderr
    assert len(too_long.stderr.strip().splitlines()[-1]) > 0 and "error:" in too_long.stderr.strip().splitlines()[-1]
    # the refused run left no fingerprint: the corrected command is not "another run"
    assert not (tmp_path / "f" / "run_fingerprint.json").exists()
    assert launch(glue_run_args(glue, tmp_path / "f"), script="run_glue").returncode == 0
    both = cli("finetune", *glue_run_args(glue, tmp_path / "g"), "--glue_dir", str(tmp_path))
    assert both.returncode == 2 and "--glue_dir and --train_file are two sources of data" in both.stderr
    missing = cli("pretrain", *mlm_args(tmp_path / "nope.txt", tokenizer_dir, tmp_path / "h", "macaron_bert"))
    assert missing.returncode == 1 and "nope.txt" in missing.stderr and "Traceback" not in missing.stderr
    debug = cli("pretrain", *mlm_args(tmp_path / "nope.txt", tokenizer_dir, tmp_path / "h", "macaron_bert"),
                env={"HF_VARIANTS_DEBUG": "1"})  # fmt: skip
    assert "Traceback" in debug.stderr


def test_a_run_folder_without_its_manifest_is_not_trusted(pretrained_run: Path, tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / "copy"
    shutil.copytree(pretrained_run, folder)
    (folder / MANIFEST_FILE).unlink()
    with pytest.raises(CheckpointError, match=r"holds an hf-variants run .* but no hf_variants_manifest\.json"):
        run_folder.verify_manifest(folder)
