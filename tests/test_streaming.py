"""``hf-variants pretrain --streaming``: the stream's blocks are the corpus cut as in memory, shuffled within
windows; any position, written to JSON and read back, continues the stream exactly; a run killed with SIGKILL
resumes to the uninterrupted run's weights (one process, and two under the launcher); the held-out validation
lines are not trained on; what a stream cannot do is refused in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from datasets import DatasetDict
from safetensors.torch import load_file
from transformers import AutoTokenizer

from hf_variants.storage.files import FAILPOINT_ENV, CheckpointError
from hf_variants.training import run_mlm
from hf_variants.training.data import load_text_corpus, tokenize_corpus
from hf_variants.training.streaming import BlockStream, StreamPosition, open_source

from .helpers import REPO_ROOT, run_launcher, two_process_launch
from .mlm_helpers import TINY, assert_same_model_as_one_process, history, mlm_args

LENGTH = 24


def stream(corpus: Path, tokenizer_dir: Path, window: int, packing: str = "blocks", skip: int = 0) -> BlockStream:
    def rows():
        source = open_source(corpus, None, None)
        return source.skip(skip) if skip else source

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    return BlockStream(rows, ["text"], tokenizer, LENGTH, packing, window, seed=7, where="the test corpus")


def take(blocks, count: int) -> list[tuple[dict, StreamPosition]]:
    return [next(blocks) for _ in range(count)]


def in_memory_blocks(corpus: Path, tokenizer_dir: Path, packing: str) -> list[dict]:
    """The blocks the in-memory path cuts (one map batch: the corpus has fewer than 1000 lines)."""
    texts = load_text_corpus(corpus, corpus)["train"]
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenized = tokenize_corpus(DatasetDict({"train": texts}), tokenizer, LENGTH, packing=packing)
    return [dict(row) for row in tokenized["train"]]


@pytest.mark.parametrize("packing", ["blocks", "documents"])
def test_an_unshuffled_epoch_is_the_corpus_cut_as_in_memory(corpus: Path, tokenizer_dir: Path, packing: str) -> None:
    expected = in_memory_blocks(corpus, tokenizer_dir, packing)
    assert len(corpus.read_text().splitlines()) < 1000 and len(expected) > 100
    epoch = [block for block, _ in take(stream(corpus, tokenizer_dir, 1, packing).blocks(StreamPosition()),
                                        len(expected) + 1)]  # fmt: skip
    assert epoch[: len(expected)] == expected
    assert epoch[len(expected)] == expected[0]  # the second epoch starts over


def test_windows_are_shuffled_and_an_epoch_uses_every_block_once(corpus: Path, tokenizer_dir: Path) -> None:
    ordered = [block for block, _ in take(stream(corpus, tokenizer_dir, 1).blocks(StreamPosition()), 40)]
    shuffled_stream = stream(corpus, tokenizer_dir, 16)
    total = len(in_memory_blocks(corpus, tokenizer_dir, "blocks"))
    two_epochs = [block for block, _ in take(shuffled_stream.blocks(StreamPosition()), 2 * total)]
    first, second = two_epochs[:total], two_epochs[total:]
    key = lambda block: tuple(block["input_ids"])  # noqa: E731
    assert sorted(map(key, first[:16])) == sorted(map(key, ordered[:16]))  # a window is a permutation of itself
    assert [key(b) for b in first[:16]] != [key(b) for b in ordered[:16]]
    assert sorted(map(key, first)) == sorted(map(key, second))  # each epoch uses every block once
    assert [key(b) for b in first] != [key(b) for b in second]  # in another order


def test_any_position_read_back_from_json_continues_the_stream_exactly(corpus: Path, tokenizer_dir: Path) -> None:
    """Positions inside a window, at a window's end, across a read of lines and across an epoch's end."""
    shuffled = stream(corpus, tokenizer_dir, 16, "documents")
    total = len(in_memory_blocks(corpus, tokenizer_dir, "blocks"))
    uninterrupted = take(shuffled.blocks(StreamPosition()), total + 40)
    for k in (0, 5, 15, 16, 17, 100, total - 1, total, total + 3):
        saved = json.loads(json.dumps(uninterrupted[k][1].to_json()))
        position = StreamPosition.from_json(saved, Path("training_state.json"))
        resumed = [block for block, _ in take(stream(corpus, tokenizer_dir, 16, "documents").blocks(position), 20)]
        assert resumed == [block for block, _ in uninterrupted[k + 1 : k + 21]], k


def test_held_out_validation_lines_are_not_trained_on(corpus: Path, tokenizer_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    lines = corpus.read_text().splitlines()
    first_trained = tokenizer(lines[50])["input_ids"]
    block, _ = next(stream(corpus, tokenizer_dir, 1, skip=50).blocks(StreamPosition()))
    assert block["input_ids"][: len(first_trained)] == first_trained[:LENGTH]


def test_a_damaged_stream_position_is_refused_naming_the_field() -> None:
    good = StreamPosition(epoch=1, window=2, used=3).to_json()
    with pytest.raises(CheckpointError, match="field 'used'"):
        StreamPosition.from_json({**good, "used": -1}, Path("state.json"))
    with pytest.raises(CheckpointError, match="field 'carry'"):
        StreamPosition.from_json({**good, "carry": {"input_ids": ["x"]}}, Path("state.json"))
    with pytest.raises(CheckpointError, match=r"state\.json must hold a JSON object"):
        StreamPosition.from_json(None, Path("state.json"))


def streaming_args(corpus: Path, tokenizer_dir: Path, output: Path, steps: int = 12, *extra: str) -> list[str]:
    return mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--streaming", "--shuffle_window_blocks", "16",
                    "--streaming_validation_lines", "50", "--max_train_steps", str(steps),
                    "--checkpointing_steps", "4", *extra)  # fmt: skip


def launch(args: list[str], failpoint: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != FAILPOINT_ENV}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
    if failpoint:
        env[FAILPOINT_ENV] = failpoint
    command = [sys.executable, str(REPO_ROOT / "scripts" / "run_mlm.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)


def same_weights(a: Path, b: Path) -> bool:
    first, second = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_a_streamed_run_killed_and_resumed_ends_with_the_uninterrupted_weights(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    """Killed after step 30 of 40, resumed from checkpoint-28 (the stream's own epoch ends are covered by the
    position test above)."""
    full, killed = tmp_path / "full", tmp_path / "killed"
    run_mlm.main(streaming_args(corpus, tokenizer_dir, full, 40))
    result = launch(streaming_args(corpus, tokenizer_dir, killed, 40), "train_step@30")
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    result = launch(streaming_args(corpus, tokenizer_dir, killed, 40))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Resumed from" in result.stdout + result.stderr and "checkpoint-28" in result.stderr
    assert same_weights(full, killed)
    assert [e["loss"] for e in history(killed)] == [e["loss"] for e in history(full)]
    # a stream is another run than the same corpus in memory
    in_memory = tmp_path / "in-memory"
    run_mlm.main(mlm_args(corpus, tokenizer_dir, in_memory, "macaron_bert", "--max_train_steps", "40"))
    assert not same_weights(full, in_memory)


@pytest.mark.skipif(not Path(sys.executable).with_name("accelerate").exists(), reason="no accelerate launcher")
def test_two_processes_killed_and_resumed_train_the_one_process_model(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    """Under `accelerate launch --multi_gpu --num_processes 2` (gloo on the CPU, per-device batch 4), a streamed
    run killed after step 6 and resumed from checkpoint-4 ends with the weights of one process at batch 8
    (dropout off: each process draws its own dropout masks)."""
    overrides = TINY["macaron_bert"] + ",hidden_dropout_prob=0.0,attention_probs_dropout_prob=0.0"

    def args(output: Path, batch: int) -> list[str]:
        values = streaming_args(corpus, tokenizer_dir, output, 10)
        values[values.index("--config_overrides") + 1] = overrides
        values[values.index("--per_device_train_batch_size") + 1] = str(batch)
        return values

    def launched(output: Path, failpoint: str | None = None) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != FAILPOINT_ENV}
        env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", **({FAILPOINT_ENV: failpoint} if failpoint else {}))
        return run_launcher(two_process_launch("pretrain", *args(output, 4)), cwd=tmp_path, env=env)

    one, two = tmp_path / "one", tmp_path / "two"
    run_mlm.main(args(one, 8))
    assert launched(two, "train_step@6").returncode != 0
    assert (two / "checkpoint-4").is_dir() and not (two / "results.json").exists()
    resumed = launched(two)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "Resumed from" in resumed.stdout + resumed.stderr
    assert_same_model_as_one_process(one, two)


@pytest.mark.parametrize("extra, named", [
    ((), "--streaming needs --max_train_steps"),
    (("--max_train_steps", "3", "--line_by_line"), "--line_by_line is not streamed"),
    (("--max_train_steps", "3", "--train_tokenizer_vocab_size", "100"), "hf-variants train-tokenizer"),
])  # fmt: skip
def test_what_a_stream_cannot_do_is_a_usage_error(extra: tuple[str, ...], named: str, tmp_path: Path, capsys) -> None:
    argv = ["--model_type", "macaron_bert", "--train_file", "train.txt", "--tokenizer_name", "tok", "--streaming",
            "--output_dir", str(tmp_path / "out"), *extra]  # fmt: skip
    if "--train_tokenizer_vocab_size" in extra:
        argv.remove("--tokenizer_name"), argv.remove("tok")
    with pytest.raises(SystemExit):
        run_mlm.parse_args(argv)
    assert named in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_run_made_before_the_streaming_settings_keeps_its_fingerprint(corpus: Path, tokenizer_dir: Path,
                                                                         tmp_path: Path) -> None:  # fmt: skip
    """Settings added later are left out of the fingerprint at the value older runs had, so a folder started
    before them still resumes; any other value makes another run."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    default = run_mlm.run_fingerprint(run_mlm.parse_args(mlm_args(corpus, tokenizer_dir, tmp_path, "macaron_bert")),
                                      tokenizer)  # fmt: skip
    assert not set(run_mlm.LATER_SETTINGS) & set(default)
    streamed = run_mlm.run_fingerprint(run_mlm.parse_args(streaming_args(corpus, tokenizer_dir, tmp_path)), tokenizer)
    assert streamed["streaming"] is True and streamed["shuffle_window_blocks"] == 16


def test_a_dataset_name_streams_through_load_dataset_with_its_validation_split(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    """``--dataset_name`` goes through ``load_dataset(name, streaming=True)`` as a Hub dataset does (here a local
    folder of split files, offline): its validation split is the validation set, and training skips no row."""
    from hf_variants.training import streaming

    lines = corpus.read_text().splitlines()
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "train.txt").write_text("\n".join(lines[:600]) + "\n")
    (dataset / "validation.txt").write_text("\n".join(lines[600:]) + "\n")
    rows = open_source(None, str(dataset), None)
    texts, held_out = streaming.validation_texts(None, str(dataset), None, rows.take(5), ["text"], "held out")
    assert texts == lines[600:] and held_out is False
    args = mlm_args(corpus, tokenizer_dir, tmp_path / "run", "macaron_bert", "--streaming", "--max_train_steps", "3")
    args[args.index("--train_file") : args.index("--train_file") + 2] = ["--dataset_name", str(dataset)]
    results = run_mlm.main(args)  # training skipping 1000 held-out rows of its 600 would have no block to train on
    assert results["steps"] == 3 and results["eval_tokens"] > 0


def test_a_stream_that_is_not_utf8_is_named_in_one_line(tmp_path: Path, tokenizer_dir: Path) -> None:
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes(b"the cat sat on the mat\n" * 40 + "caf\xe9 au lait\n".encode("latin-1"))
    for validation_lines in ("1000", "5"):  # the file's error while reading the validation rows, then training
        argv = mlm_args(corpus, tokenizer_dir, tmp_path / f"run-{validation_lines}", "macaron_bert", "--streaming",
                        "--max_train_steps", "50", "--streaming_validation_lines", validation_lines)  # fmt: skip
        with pytest.raises(ValueError, match=r"latin1\.txt\)? is not UTF-8 text .*; convert it to UTF-8\.$") as refused:
            run_mlm.main(argv)
        assert "\n" not in str(refused.value)
