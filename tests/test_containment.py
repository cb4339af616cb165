"""Every write and every upload stays inside what the package owns — each case tried as an adversary would: a
planted link where the package writes (the lock, an export's card, a local hub's README), a user's folder given as
an export's output, a secret linked into an export before a push, malformed and emptied manifests, method and
dunder names as config overrides, a failed run followed by its correction, a run stopped at its last step, another
run's checkpoint copied in, a corpus whose batches mask nothing, a full disk and inputs that are not files."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from hf_variants.cli.commands import disk_full
from hf_variants.cli.commands import main as cli_main
from hf_variants.hub import REPO_PLACEHOLDER, LocalHub, export_checkpoint, push_folder_to_hub
from hf_variants.storage.files import CheckpointError, target_inside, write_text_atomic
from hf_variants.storage.run_folder import LOCK_FILE, MANIFEST_FILE, verify_manifest
from hf_variants.training import checkpoints, run_mlm

from .helpers import files_below
from .mlm_helpers import history, mlm_args
from .test_faults import GLUE_STEPS, glue_run_args, launch, make_glue_setup
from .test_folder_safety import cli, same_weights, snapshot

SECRET = "the user's secret"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "elsewhere" / "victim.txt"
    path.parent.mkdir()
    path.write_text(SECRET)
    return path


@pytest.fixture(scope="module")
def glue(tmp_path_factory, corpus: Path, tokenizer_dir: Path) -> tuple[Path, Path]:
    return make_glue_setup(tmp_path_factory.mktemp("glue"), corpus, tokenizer_dir)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, pretrained_run: Path) -> Path:
    """A finished export of the tiny pretrained run (copied by each test that alters it)."""
    return export_checkpoint(pretrained_run, tmp_path_factory.mktemp("export") / "hub")


def copy_of(folder: Path, tmp_path: Path, name: str = "copy") -> Path:
    shutil.copytree(folder, tmp_path / name, symlinks=True)
    return tmp_path / name


def one_line_error(result) -> str:
    """The command's one-line error (exit status 1, no traceback)."""
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result.stderr.strip().splitlines()[-1]


# ------------------------------------------------------------------------------------------------ the one writer
def test_a_write_replaces_a_link_and_never_leaves_the_folder(tmp_path: Path, victim: Path) -> None:
    folder = tmp_path / "owned"
    folder.mkdir()
    (folder / "record.json").symlink_to(victim)
    write_text_atomic(folder / "record.json", "new", within=folder)
    assert victim.read_text() == SECRET and not (folder / "record.json").is_symlink()
    assert (folder / "record.json").read_text() == "new"
    (folder / "out").symlink_to(victim.parent)  # a folder link that leads out
    with pytest.raises(CheckpointError, match="lies outside"):
        write_text_atomic(folder / "out" / "victim.txt", "new", within=folder)
    with pytest.raises(CheckpointError, match="names no file"):
        target_inside(folder, "..", "entry")
    assert victim.read_text() == SECRET


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(
    corpus: Path, tokenizer_dir: Path, glue, tmp_path: Path, victim: Path
) -> None:
    for command, args in (("pretrain", mlm_args(corpus, tokenizer_dir, tmp_path / "mlm", "macaron_bert",
                                                "--max_train_steps", "1")),
                          ("finetune", glue_run_args(glue, tmp_path / "glue"))):  # fmt: skip
        output = Path(args[args.index("--output_dir") + 1])
        output.mkdir()
        (output / LOCK_FILE).symlink_to(victim)
        line = one_line_error(cli(command, *args))
        assert "is a symbolic link" in line and LOCK_FILE in line
        assert victim.read_text() == SECRET and sorted(p.name for p in output.iterdir()) == [LOCK_FILE]


# ------------------------------------------------------------------------------------------------ export
def test_export_refuses_a_users_folder_a_linked_folder_and_its_own_input(
    pretrained_run: Path, tmp_path: Path
) -> None:
    users = tmp_path / "users"
    users.mkdir()
    (users / "README.md").write_text("my readme")
    (users / "config.json").write_text('{"mine": true}')
    before = snapshot(users)
    assert "no hf-variants run wrote it" in one_line_error(cli("export", str(pretrained_run), "--output_dir",
                                                               str(users), "--overwrite_output_dir"))  # fmt: skip
    (tmp_path / "link").symlink_to(users)  # the output folder is a link to the user's folder
    assert "no hf-variants run wrote it" in one_line_error(cli("export", str(pretrained_run), "--output_dir",
                                                               str(tmp_path / "link")))  # fmt: skip
    assert snapshot(users) == before and not (users / LOCK_FILE).exists()
    run_before = snapshot(pretrained_run)
    for output in (pretrained_run, pretrained_run / "hub"):
        assert "never writes into its own input" in one_line_error(cli("export", str(pretrained_run), "--output_dir",
                                                                       str(output)))  # fmt: skip
    assert snapshot(pretrained_run) == run_before


def test_a_re_export_never_writes_through_a_linked_card(
    exported: Path, pretrained_run: Path, tmp_path: Path, victim: Path
) -> None:
    folder = copy_of(exported, tmp_path)
    (folder / "README.md").unlink()
    (folder / "README.md").symlink_to(victim)  # the listed card replaced by a link to a file elsewhere
    assert "holds a previous export" in one_line_error(cli("export", str(pretrained_run), "--output_dir", str(folder)))
    line = one_line_error(cli("export", str(pretrained_run), "--output_dir", str(folder), "--overwrite_output_dir"))
    assert "entry 'README.md' lies outside" in line and victim.read_text() == SECRET
    (folder / "README.md").unlink()
    (folder / "README.md").symlink_to(folder / "config.json")  # a link that stays inside: replaced itself
    config = (folder / "config.json").read_bytes()
    result = cli("export", str(pretrained_run), "--output_dir", str(folder), "--overwrite_output_dir")
    assert result.returncode == 0, result.stderr[-2000:]
    assert not (folder / "README.md").is_symlink() and "hf-variants" in (folder / "README.md").read_text()
    assert (folder / "config.json").read_bytes() == config  # rewritten by the export, not through the link
    assert cli("verify", str(folder)).returncode == 0

    # an unlisted file of the user's where the export would write is named, not replaced
    (folder / "tokenizer.json").rename(tmp_path / "tokenizer.json")
    write_text_atomic(folder / MANIFEST_FILE, json.dumps({**json.loads((folder / MANIFEST_FILE).read_text()),
                      "files": {n: e for n, e in json.loads((folder / MANIFEST_FILE).read_text())["files"].items()
                                if n != "tokenizer.json"}}), within=folder)  # fmt: skip
    (folder / "tokenizer.json").write_text("the user's own")
    line = one_line_error(cli("export", str(pretrained_run), "--output_dir", str(folder), "--overwrite_output_dir"))
    assert "tokenizer.json was not written by a previous export" in line
    assert (folder / "tokenizer.json").read_text() == "the user's own"


@pytest.mark.parametrize("point", [f"export_moved@{MANIFEST_FILE}", "export_moved@README.md"])
def test_an_export_killed_while_moving_into_place_is_redone_by_the_same_command(
    point: str, pretrained_run: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "hub"
    command = ["export", str(pretrained_run), "--output_dir", str(folder)]
    environment = {"HF_VARIANTS_FAILPOINT": point}
    assert cli(*command, env=environment).returncode == -signal.SIGKILL
    assert cli("verify", str(folder)).returncode == 1  # half moved: not trusted
    assert cli(*command).returncode == 0  # the same command redoes it: no previous export stands in its way
    assert cli("verify", str(folder)).returncode == 0
    assert files_below(folder) == sorted([*verify_manifest(folder)["files"], MANIFEST_FILE])


# ------------------------------------------------------------------------------------------------ push
def test_push_uploads_only_what_the_manifest_lists(exported: Path, tmp_path: Path, victim: Path) -> None:
    folder = copy_of(exported, tmp_path)
    (folder / "notes.txt").symlink_to(victim)  # a secret linked in: verify and push agree that this is no export
    verified = cli("verify", str(folder))
    assert verified.returncode == 1 and "notes.txt" in verified.stderr and "does not list" in verified.stderr
    hub = tmp_path / "hub"
    line = one_line_error(cli("push", str(folder), "--repo_id", "me/model", "--local_hub", str(hub)))
    assert "notes.txt" in line and "does not list" in line
    assert not (hub / "me").exists()  # nothing created, nothing uploaded
    (folder / "notes.txt").unlink()
    (folder / "sub").mkdir()
    (folder / "sub" / "extra.bin").write_bytes(b"unlisted")
    assert "sub/extra.bin" in one_line_error(cli("push", str(folder), "--repo_id", "me/model", "--local_hub", str(hub)))
    shutil.rmtree(folder / "sub")

    # the local hub's README is a link to a file elsewhere: the push replaces the link, never writes through it
    (hub / "me" / "model").mkdir(parents=True)
    (hub / "me" / "model" / "README.md").symlink_to(victim)
    assert push_folder_to_hub(folder, "me/model", api=LocalHub(hub)) == "me/model"
    pushed = hub / "me" / "model"
    assert victim.read_text() == SECRET and not (pushed / "README.md").is_symlink()
    card = (folder / "README.md").read_text()  # uploaded naming its repository (the export's names a placeholder)
    assert (pushed / "README.md").read_text() == REPO_PLACEHOLDER.sub("me/model", card) != card
    assert files_below(pushed) == sorted([*verify_manifest(folder)["files"], MANIFEST_FILE])
    assert verify_manifest(pushed) is not None  # its manifest re-computed for the card it holds


def test_a_folder_without_an_exports_manifest_is_pushed_only_when_asked(
    exported: Path, pretrained_run: Path, tmp_path: Path, victim: Path
) -> None:
    hub = LocalHub(tmp_path / "hub")
    with pytest.raises(CheckpointError, match=r"was written by `hf-variants .* pretrain`, not by `hf-variants export`"):
        push_folder_to_hub(pretrained_run, "me/run", api=hub)
    plain = copy_of(exported, tmp_path, "plain")
    (plain / MANIFEST_FILE).unlink()
    (plain / "link.txt").symlink_to(victim)
    (plain / ".hidden").write_text("never")
    with pytest.raises(CheckpointError, match=r"has no hf_variants_manifest\.json.*--unverified_folder"):
        push_folder_to_hub(plain, "me/plain", api=hub)
    push_folder_to_hub(plain, "me/plain", api=hub, unverified=True)
    uploaded = files_below(tmp_path / "hub" / "me" / "plain")
    assert uploaded == [name for name in files_below(plain) if not (plain / name).is_symlink()]
    assert "link.txt" not in uploaded


# ------------------------------------------------------------------------------------------------ records
MALFORMED = {
    "files null": {"written_by": "x export", "files": None},
    "files a list": {"written_by": "x export", "files": ["config.json"]},
    "entry not an object": {"written_by": "x export", "files": {"config.json": 3}},
    "entry without sha256": {"written_by": "x export", "files": {"config.json": {"size": 1}}},
    "files empty": {"written_by": "x export", "files": {}},
    "no files key": {"written_by": "x export"},
    "NUL in an entry": {"written_by": "x export", "files": {"a\u0000b": {"size": 1, "sha256": "0" * 64}}},
    "a list": [1, 2],
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_manifest_is_one_line_naming_the_file_and_the_field(case: str, exported: Path, tmp_path) -> None:
    folder = copy_of(exported, tmp_path)
    (folder / MANIFEST_FILE).write_text(json.dumps(MALFORMED[case]))
    line = one_line_error(cli("verify", str(folder)))
    assert MANIFEST_FILE in line and ("field" in line or "JSON object" in line), line
    assert "push" not in line and MANIFEST_FILE in one_line_error(
        cli("push", str(folder), "--repo_id", "me/model", "--local_hub", str(tmp_path / "hub")))
    assert not (tmp_path / "hub" / "me").exists()


def test_overwrite_on_a_malformed_manifest_removes_nothing_it_cannot_attribute(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    args = mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "1")
    run_mlm.main(args)
    (output / MANIFEST_FILE).write_text(json.dumps({"written_by": "hf-variants pretrain", "files": None}))
    line = one_line_error(cli("pretrain", *args))
    assert MANIFEST_FILE in line and "'files'" in line and "--overwrite_output_dir" in line
    assert run_mlm.main([*args, "--overwrite_output_dir"])["steps"] == 1
    assert verify_manifest(output)["files"]  # the new run's manifest, well-formed


# ------------------------------------------------------------------------------------------------ overrides
@pytest.mark.parametrize("override", ["to_dict=1", "__class__=x", "__dict__=1", "model_type=bert"])
def test_an_override_that_is_no_field_is_refused_before_anything_is_written(
    override: str, corpus: Path, tokenizer_dir: Path, glue, tmp_path: Path
) -> None:
    args = mlm_args(corpus, tokenizer_dir, tmp_path / "mlm", "macaron_bert", "--max_train_steps", "1")
    args[args.index("--config_overrides") + 1] += f",{override}"
    with pytest.raises(ValueError, match=override.split("=")[0]):
        run_mlm.main(args)
    assert not (tmp_path / "mlm").exists()
    from hf_variants.lab.spec import ModelSpec

    with pytest.raises(ValueError, match=override.split("=")[0]):
        ModelSpec.parse(f"macaron_bert:{override}")
    if override == "to_dict=1":  # the fine-tuning engine goes through the same check
        line = one_line_error(cli("finetune", *glue_run_args(glue, tmp_path / "glue"), "--config_overrides", override))
        assert "has no field 'to_dict'" in line and not (tmp_path / "glue").exists()


# ------------------------------------------------------------------------------------------------ runs
def test_a_run_that_failed_before_its_first_checkpoint_never_blocks_its_correction(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    args = mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "3")
    with pytest.raises(FloatingPointError):
        run_mlm.main([*args, "--learning_rate", "1e9"])  # the later flag wins: a rate that diverges
    assert (output / "run_fingerprint.json").is_file() and not list(output.glob("checkpoint-*"))
    assert run_mlm.main(args)["steps"] == 3  # the corrected command is not "another run"
    assert json.loads((output / "run_fingerprint.json").read_text())["learning_rate"] == 3e-3
    # a run that had checkpointed is still protected: another command is refused
    with pytest.raises(CheckpointError, match="holds another run"):
        run_mlm.main([*args, "--seed", "9"])


def test_a_fine_tuning_run_stopped_at_its_last_step_finishes_without_training(glue, tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    assert launch(glue_run_args(glue, reference), script="run_glue").returncode == 0
    output = tmp_path / "run"
    killed = launch(glue_run_args(glue, output), f"checkpoint_marked@{GLUE_STEPS}", "run_glue")
    assert killed.returncode == -signal.SIGKILL and not (output / "results.json").exists()
    finished = launch(glue_run_args(glue, output), script="run_glue")
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "finishes without training" in finished.stderr
    state = json.loads((output / "trainer_state.json").read_text())
    assert state["global_step"] == GLUE_STEPS
    same_weights(reference, output)
    ours, theirs = (json.loads((folder / "results.json").read_text())["train"] for folder in (output, reference))
    assert ours["train_loss"] == pytest.approx(theirs["train_loss"], rel=1e-6)
    assert cli("verify", str(output)).returncode == 0


def test_a_checkpoint_is_resumed_only_by_its_own_run(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    run_mlm.main(mlm_args(corpus, tokenizer_dir, other, "macaron_bert", "--max_train_steps", "4",
                          "--checkpointing_steps", "1", "--seed", "5"))  # fmt: skip
    output = tmp_path / "run"
    args = mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "4", "--checkpointing_steps",
                    "1")  # fmt: skip
    killed = launch(args, "train_step@3")  # checkpoints 1 and 2 written
    assert killed.returncode == -signal.SIGKILL
    shutil.copytree(other / "checkpoint-4", output / "checkpoint-4")  # another run's complete checkpoint
    with pytest.raises(CheckpointError, match=r"checkpoint-4 belongs to another run \(seed"):
        run_mlm.main(args)
    shutil.rmtree(output / "checkpoint-4")
    (output / "checkpoint-99").symlink_to(other / "checkpoint-4", target_is_directory=True)
    reference = tmp_path / "reference"
    run_mlm.main(mlm_args(corpus, tokenizer_dir, reference, "macaron_bert", "--max_train_steps", "4",
                          "--checkpointing_steps", "1"))  # fmt: skip
    assert run_mlm.main(args)["steps"] == 4  # resumed from its own checkpoint-2, the link left alone
    same_weights(reference, output)
    assert (output / "checkpoint-99").is_symlink()


def test_a_batch_that_masks_nothing_is_skipped_and_counted_not_logged_as_loss_zero(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    mostly_invisible = tmp_path / "mostly_invisible.txt"
    lines = ["\u200b\u200c\u200d" * 30] * 199 + ["the cat sat on the mat"]
    mostly_invisible.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = mlm_args(mostly_invisible, tokenizer_dir, tmp_path / "run", "macaron_bert", "--max_train_steps", "6",
                    "--line_by_line", "--validation_file", str(mostly_invisible))  # fmt: skip
    results = run_mlm.main(args)
    assert results["steps"] == 6 and results["steps_without_masked_tokens"] >= 1
    logged = history(tmp_path / "run")
    assert len(logged) == 6 - results["steps_without_masked_tokens"]
    assert all(row["loss"] > 0 for row in logged)

    invisible = tmp_path / "invisible.txt"
    invisible.write_text("\u200b\u200c\n" * 50, encoding="utf-8")
    with pytest.raises(ValueError, match="The validation corpus has no token to mask"):
        run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / "refused", "macaron_bert", "--max_train_steps", "2",
                              "--validation_file", str(invisible)))  # fmt: skip
    assert not (tmp_path / "refused" / "run_fingerprint.json").exists()  # refused before training


# ------------------------------------------------------------------------------------------------ one-line errors
def test_a_full_disk_is_one_line_whatever_raised_it(monkeypatch, capsys) -> None:
    from safetensors import SafetensorError

    full = SafetensorError('Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: '
                           '"No space left on device" })')  # fmt: skip
    assert disk_full(full) and disk_full(OSError(28, os.strerror(28)))
    wrapped = RuntimeError("saving failed")
    wrapped.__cause__ = OSError(28, os.strerror(28))
    assert disk_full(wrapped) and not disk_full(RuntimeError("saving failed"))

    def fail(_argv):
        raise full

    monkeypatch.setattr("hf_variants.cli.commands.run", fail)
    monkeypatch.delenv("HF_VARIANTS_DEBUG", raising=False)
    with pytest.raises(SystemExit) as stopped:
        cli_main(["pretrain"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert stopped.value.code == 1 and len(lines) == 1 and "the disk is full" in lines[0]
    monkeypatch.setenv("HF_VARIANTS_DEBUG", "1")
    with pytest.raises(SafetensorError):
        cli_main(["pretrain"])


def test_a_directory_a_fifo_or_a_device_as_a_file_is_named_as_such(
    tokenizer_dir: Path, glue, tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    cases = {tmp_path: "is a directory", fifo: "is not a regular file", Path("/dev/zero"): "is not a regular file"}
    for path, message in cases.items():
        with pytest.raises((OSError, ValueError), match=message):
            run_mlm.main(mlm_args(path, tokenizer_dir, tmp_path / "run", "macaron_bert", "--max_train_steps", "1"))
    model, _ = glue
    table_fifo = tmp_path / "fifo.csv"
    os.mkfifo(table_fifo)
    line = one_line_error(cli("finetune", *glue_run_args((model, table_fifo), tmp_path / "glue")))
    assert f"The train file {table_fifo} is not a regular file" in line


def test_a_runs_default_export_folder_that_links_out_is_refused(tmp_path: Path, victim: Path) -> None:
    from types import SimpleNamespace

    run = tmp_path / "run"
    run.mkdir()
    (run / "hub_export").symlink_to(victim.parent, target_is_directory=True)
    args = SimpleNamespace(export_dir=None, push_to_hub=True, output_dir=run, hub_model_id="me/model")
    model = SimpleNamespace(config=SimpleNamespace(model_type="macaron_bert"))
    with pytest.raises(CheckpointError, match="the run's export folder 'hub_export' lies outside"):
        run_mlm.export_if_asked(args, model, None, {})
    assert sorted(p.name for p in victim.parent.iterdir()) == ["victim.txt"]


def test_a_checkpoint_record_altered_with_its_marker_is_one_line(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    output = tmp_path / "run"
    args = mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "2", "--checkpointing_steps",
                    "1")  # fmt: skip
    run_mlm.main(args)
    (output / MANIFEST_FILE).unlink()  # not finished: the same command resumes from checkpoint-2
    (output / "checkpoint-2" / "optimizer.json").write_text(json.dumps({"param_groups": []}))
    checkpoints.mark_complete(output / "checkpoint-2")  # the marker rewritten to match, as an adversary would
    line = one_line_error(cli("pretrain", *args))
    assert "checkpoint-2 holds a malformed record (KeyError" in line
