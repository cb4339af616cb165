"""Final folders carry a manifest of what the package wrote (sizes and SHA-256): an altered weight file is
refused before it is loaded and named by ``hf-variants verify``; an overwrite or a re-export removes the
package's own files and keeps the user's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import hf_variants
from hf_variants.hub import export_for_hub
from hf_variants.storage.files import CheckpointError
from hf_variants.storage.run_folder import MANIFEST_FILE, verify_manifest
from hf_variants.training import run_mlm

from .helpers import files_below
from .mlm_helpers import mlm_args

CLI = Path(sys.executable).with_name("hf-variants")


def flip_one_byte(path: Path) -> None:
    """The same size, other content: only a checksum notices."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_run_records_the_files_it_wrote(pretrained_run: Path) -> None:
    manifest = verify_manifest(pretrained_run)
    assert manifest is not None and manifest["written_by"].startswith("hf-variants ")
    assert {"model.safetensors", "config.json", "tokenizer.json", "results.json"} <= set(manifest["files"])
    result = subprocess.run([str(CLI), "verify", str(pretrained_run)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and f"files match {MANIFEST_FILE}" in result.stdout


def test_an_altered_weight_file_is_named_and_not_loaded(pretrained_run: Path, tmp_path: Path, corpus: Path) -> None:
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(pretrained_run, damaged)
    flip_one_byte(damaged / "model.safetensors")
    result = subprocess.run([str(CLI), "verify", str(damaged)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "model.safetensors does not match the SHA-256" in result.stderr
    for name, damage, message in (
        ("config.json", lambda path: path.write_bytes(path.read_bytes()[:-5]), "was truncated or replaced"),
        ("tokenizer.json", Path.unlink, r"tokenizer\.json is missing"),
    ):
        broken = tmp_path / f"without-{name}"
        shutil.copytree(pretrained_run, broken)
        damage(broken / name)
        with pytest.raises(CheckpointError, match=message):
            verify_manifest(broken)
    continued = ["--model_name_or_path", str(damaged), "--train_file", str(corpus), "--max_seq_length", "24",
                 "--max_train_steps", "1", "--output_dir", str(tmp_path / "continued"), "--disable_tqdm"]  # fmt: skip
    with pytest.raises(CheckpointError, match=r"model\.safetensors does not match the SHA-256"):
        run_mlm.main(continued)


def test_overwrite_removes_the_previous_run_and_keeps_the_users_files(corpus, tokenizer_dir, tmp_path) -> None:
    output = tmp_path / "run"
    first = mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "2",
                     "--checkpointing_steps", "1")  # fmt: skip
    run_mlm.main(first)
    (output / "notes.txt").write_text("my notes")
    (output / "data").mkdir()
    (output / "data" / "train.txt").write_text("my data")
    run_mlm.main([*first, "--seed", "7", "--overwrite_output_dir", "--max_train_steps", "1", "--checkpointing_steps",
                  "5"])  # fmt: skip
    assert (output / "notes.txt").read_text() == "my notes" and (output / "data" / "train.txt").read_text() == "my data"
    assert sorted(p.name for p in output.glob("checkpoint-*")) == ["checkpoint-1"]  # the new run's only
    assert json.loads((output / "run_fingerprint.json").read_text())["seed"] == 7
    assert "notes.txt" not in verify_manifest(output)["files"]


def test_a_re_export_leaves_no_file_of_the_previous_export(tmp_path: Path) -> None:
    sizes = {"vocab_size": 40, "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
             "intermediate_size": 16}  # fmt: skip
    folder = tmp_path / "export"
    export_for_hub(hf_variants.NodeTransformerForMaskedLM(hf_variants.NodeTransformerConfig(**sizes)), folder)
    assert (folder / "modeling_ode.py").is_file()
    (folder / "notes.txt").write_text("mine")
    before = {name: (folder / name).read_bytes() for name in files_below(folder)}
    control = hf_variants.BertControlForMaskedLM(hf_variants.BertControlConfig(**sizes))
    with pytest.raises(CheckpointError, match=r"holds a previous export: pass --overwrite_output_dir"):
        export_for_hub(control, folder)  # replacing an export is asked for, never assumed
    assert {name: (folder / name).read_bytes() for name in files_below(folder)} == before
    export_for_hub(control, folder, overwrite=True)
    assert not (folder / "modeling_ode.py").exists() and not (folder / "modeling_node_transformer.py").exists()
    assert (folder / "notes.txt").read_text() == "mine"
    assert set(verify_manifest(folder)["files"]) == set(files_below(folder)) - {MANIFEST_FILE, "notes.txt"}
