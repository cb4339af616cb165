"""MLM pretraining: end-to-end per model type, exact resume, two-process equivalence, tokenizer
training, and clear errors."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM, AutoTokenizer, pipeline

from hf_variants.storage.run_folder import MANIFEST_FILE
from hf_variants.tokenization import train_wordpiece_tokenizer
from hf_variants.training import run_mlm
from hf_variants.training.data import SeededMaskingCollator

from .helpers import run_launcher, two_process_launch
from .mlm_helpers import TINY, assert_same_model_as_one_process, deterministic_metrics, history, mlm_args


def test_masks_depend_only_on_seed_and_key(tokenizer_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    examples = [{"input_ids": tokenizer("the cat sat on the mat " * 8)["input_ids"]} for _ in range(4)]
    fresh = SeededMaskingCollator(tokenizer, seed=3)(examples, key=5)
    used = SeededMaskingCollator(tokenizer, seed=3)
    used(examples, key=1)  # a process that resumes calls key 5 first; one that did not, after others
    torch.manual_seed(123)
    caller_state = torch.get_rng_state()
    again = used(examples, key=5)
    assert torch.equal(torch.get_rng_state(), caller_state)  # dropout's stream is not consumed
    assert torch.equal(fresh["labels"], again["labels"]) and torch.equal(fresh["input_ids"], again["input_ids"])
    assert (fresh["labels"] != -100).any()
    other = SeededMaskingCollator(tokenizer, seed=4)(examples, key=5)
    assert not torch.equal(fresh["labels"], other["labels"])


@pytest.mark.parametrize("model_type", sorted(TINY))
def test_pretraining_reduces_the_loss(model_type: str, corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    # TransJect starts as the identity (ReZero) and needs a larger step to move within 40 steps.
    rate = "2e-2" if model_type == "transject" else "3e-3"
    extra = ["--max_train_steps", "40", "--learning_rate", rate]
    results = run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path, model_type, *extra))
    losses = [entry["loss"] for entry in history(tmp_path)]
    assert len(losses) == 40 and results["steps"] == 40
    assert sum(losses[-5:]) / 5 < 0.85 * sum(losses[:5]) / 5, losses
    assert results["perplexity"] == pytest.approx(torch.tensor(results["eval_loss"]).exp().item(), rel=1e-6)
    model = AutoModelForMaskedLM.from_pretrained(tmp_path)
    assert model.config.model_type == model_type
    rows = (tmp_path / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("step,") and len(rows) > 40


def test_saved_model_serves_fill_mask_and_exports(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    export = tmp_path / "hub"
    run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path, "macaron_bert", "--max_train_steps", "5",
                          "--export_dir", str(export)))  # fmt: skip
    assert "auto_map" in json.loads((export / "config.json").read_text())
    assert (export / "tokenizer.json").is_file() and "perplexity" in (export / "README.md").read_text()
    fill = pipeline(
        "fill-mask",
        model=AutoModelForMaskedLM.from_pretrained(tmp_path),
        tokenizer=AutoTokenizer.from_pretrained(tmp_path),
    )
    predictions = fill("the small dog [MASK] the ball .")
    assert len(predictions) == 5 and all(0 <= p["score"] <= 1 for p in predictions)


def test_resume_continues_exactly(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    """Stopping at a checkpoint and resuming gives the same data, masks, losses and weights (with
    dropout on: the checkpoint restores the RNG states), and the whole run's history."""
    full, resumed = tmp_path / "full", tmp_path / "resumed"
    common = ["--max_train_steps", "8", "--checkpointing_steps", "4", "--gradient_accumulation_steps", "2"]
    run_mlm.main(mlm_args(corpus, tokenizer_dir, full, "macaron_bert", *common))
    run_mlm.main(mlm_args(corpus, tokenizer_dir, resumed, "macaron_bert", *common,
                          "--resume_from_checkpoint", str(full / "checkpoint-4")))  # fmt: skip
    uninterrupted = {entry["step"]: entry["loss"] for entry in history(full)}
    continued = {entry["step"]: entry["loss"] for entry in history(resumed)}
    assert sorted(continued) == list(range(1, 9))  # steps 1-4 come from the checkpoint's history
    for step, loss in continued.items():
        assert loss == uninterrupted[step], (step, loss, uninterrupted[step])
    assert deterministic_metrics(resumed) == deterministic_metrics(full)
    a, b = load_file(full / "model.safetensors"), load_file(resumed / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    other = tmp_path / "other-tokenizer"  # same size, another corpus: other ids for the same rows
    train_wordpiece_tokenizer(
        [line[::-1] for line in corpus.read_text().splitlines()], 120, min_frequency=1
    ).save_pretrained(other)
    with pytest.raises(ValueError, match="checkpoint-4 was trained with another vocabulary"):
        run_mlm.main(mlm_args(corpus, other, tmp_path / "wrong", "macaron_bert", *common,
                              "--resume_from_checkpoint", str(full / "checkpoint-4")))  # fmt: skip


def test_data_seed_fixes_the_batches_and_masks_while_the_seed_draws_the_initialisation(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs at other ``--seed`` values and one ``--data_seed`` see the same batches with the same masks and
    start from other weights (a comparison's negative control); without ``--data_seed`` the batches follow
    ``--seed``."""
    seen: dict[str, list[tuple]] = {}
    collate = SeededMaskingCollator.__call__

    def recorded(self, examples, key):
        batch = collate(self, examples, key)
        seen.setdefault(self.run, []).append((key, batch["input_ids"].tolist(), batch["labels"].tolist()))
        return batch

    monkeypatch.setattr(SeededMaskingCollator, "__call__", recorded)
    weights, set_seed, initialised = {}, run_mlm.set_seed, []
    monkeypatch.setattr(run_mlm, "set_seed", lambda seed: (initialised.append(seed), set_seed(seed)))
    for name, seeds in {"a": ["--seed", "1", "--data_seed", "5"], "b": ["--seed", "2", "--data_seed", "5"],
                        "c": ["--seed", "2"]}.items():  # fmt: skip
        monkeypatch.setattr(SeededMaskingCollator, "run", name, raising=False)
        run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / name, "macaron_bert", "--max_train_steps", "3",
                              *seeds))  # fmt: skip
        assert initialised[-1] == int(seeds[1])  # the initialisation's seed is --seed
        weights[name] = load_file(tmp_path / name / "model.safetensors")
    assert seen["a"] == seen["b"] and len(seen["a"]) >= 3
    assert seen["c"] != seen["b"]
    embeddings = next(key for key in weights["a"] if "word_embeddings" in key)
    assert not torch.equal(weights["a"][embeddings], weights["b"][embeddings])
    assert json.loads((tmp_path / "b" / "results.json").read_text())["arguments"]["data_seed"] == 5


def test_sparse_prediction_trains_like_dense(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    dense, sparse = tmp_path / "dense", tmp_path / "sparse"
    run_mlm.main(mlm_args(corpus, tokenizer_dir, dense, "mgk_bert", "--max_train_steps", "4"))
    args = mlm_args(corpus, tokenizer_dir, sparse, "mgk_bert", "--max_train_steps", "4")
    args[args.index("--config_overrides") + 1] += ",sparse_prediction=True"
    run_mlm.main(args)
    for d, s in zip(history(dense), history(sparse), strict=True):
        assert s["loss"] == pytest.approx(d["loss"], rel=1e-5, abs=1e-6)


@pytest.mark.skipif(shutil.which("accelerate") is None and not Path(sys.executable).with_name("accelerate").exists(),
                    reason="the accelerate launcher is not installed")  # fmt: skip
def test_two_processes_train_the_same_model_as_one(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    """`accelerate launch --multi_gpu --num_processes 2` on this GPU-less machine (torchrun + gloo,
    per-device batch 4) equals one process with batch 8, to float tolerance (dropout off: each
    process draws its own dropout masks)."""
    overrides = TINY["macaron_bert"] + ",hidden_dropout_prob=0.0,attention_probs_dropout_prob=0.0"
    one, two = tmp_path / "one", tmp_path / "two"

    def args(output: Path, batch: int) -> list[str]:
        values = mlm_args(corpus, tokenizer_dir, output, "macaron_bert", "--max_train_steps", "6")
        values[values.index("--config_overrides") + 1] = overrides
        values[values.index("--per_device_train_batch_size") + 1] = str(batch)
        return values

    run_mlm.main(args(one, 8))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    result = run_launcher(two_process_launch("pretrain", *args(two, 4)), cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    assert_same_model_as_one_process(one, two)


def test_tokenizer_training_round_trip(tokenizer_dir: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    assert len(tokenizer) <= 120
    assert tokenizer.pad_token_id == 0 and tokenizer.mask_token == "[MASK]"
    text = "the hungry fox chases the rabbit near the river ."
    encoded = tokenizer(text, "the cat runs .")
    assert encoded["input_ids"][0] == tokenizer.cls_token_id and tokenizer.unk_token_id not in encoded["input_ids"]
    assert set(encoded["token_type_ids"]) == {0, 1}
    ids = tokenizer(text)["input_ids"]
    decoded = tokenizer.decode(ids, skip_special_tokens=True)
    assert decoded.replace(" .", ".") == text.replace(" .", ".")  # BERT's decoder joins "river ." to "river."
    assert tokenizer(decoded)["input_ids"] == ids


def test_empty_or_missing_corpus_raises(tokenizer_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n   \n\n")
    with pytest.raises(ValueError, match="contains no text"):
        run_mlm.main(mlm_args(empty, tokenizer_dir, tmp_path / "out", "macaron_bert", "--max_train_steps", "1"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run_mlm.main(mlm_args(tmp_path / "missing.txt", tokenizer_dir, tmp_path / "out", "macaron_bert"))


def test_bad_corpus_files_name_the_file_and_line(tokenizer_dir: Path, tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"the dog runs .\nthe cat sleeps .\ncaf\xe9 au lait .\n")
    with pytest.raises(ValueError, match=r"latin1\.txt:3: byte 0xe9 is not UTF-8"):
        run_mlm.main(mlm_args(latin1, tokenizer_dir, tmp_path / "a", "macaron_bert"))
    binary = tmp_path / "model.txt"
    binary.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ValueError, match=r"model\.txt:1: NUL byte; this is not a text file"):
        run_mlm.main(mlm_args(binary, tokenizer_dir, tmp_path / "b", "macaron_bert"))
    one_line = tmp_path / "one.txt"
    one_line.write_text("the dog runs .\n")
    with pytest.raises(ValueError, match=r"Too little text to hold out 5.0% for validation: .* 1 non-empty line"):
        run_mlm.main(mlm_args(one_line, tokenizer_dir, tmp_path / "c", "macaron_bert"))


def test_continuing_from_a_checkpoint_without_its_backbone_is_refused(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    from safetensors.torch import save_file

    run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / "first", "macaron_bert", "--max_train_steps", "1"))
    weights = load_file(tmp_path / "first" / "model.safetensors")
    name = next(k for k in weights if k.endswith("layer.1.attention.query.weight"))
    weights[name.replace("layer.1", "layer.7")] = weights.pop(name)
    save_file(weights, tmp_path / "first" / "model.safetensors")
    # edited by hand into a folder of another tool: the manifest would name the file first
    (tmp_path / "first" / MANIFEST_FILE).unlink()
    (tmp_path / "first" / "run_fingerprint.json").unlink()
    args = mlm_args(corpus, tokenizer_dir, tmp_path / "second", "macaron_bert", "--max_train_steps", "1")
    at = args.index("--model_type")
    args[at : at + 4] = ["--model_name_or_path", str(tmp_path / "first")]  # no --model_type/--config_overrides
    with pytest.raises(ValueError, match=r"does not hold every weight of this model: 1 missing .*layer\.1\.attention"):
        run_mlm.main(args)


def test_tokenizer_model_vocabulary_mismatch_raises(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    args = mlm_args(corpus, tokenizer_dir, tmp_path, "macaron_bert", "--max_train_steps", "1")
    args[args.index("--config_overrides") + 1] += ",vocab_size=50"
    with pytest.raises(ValueError, match=r"tokenizer has \d+ tokens but the model's vocab_size is 50"):
        run_mlm.main(args)


def test_unknown_model_type_raises(corpus: Path, tokenizer_dir: Path, tmp_path: Path, capsys) -> None:
    args = mlm_args(corpus, tokenizer_dir, tmp_path, "macaron_bert")
    args[args.index("--model_type") + 1] = "gpt9"
    with pytest.raises(SystemExit):
        run_mlm.main(args)
    assert "unknown --model_type 'gpt9'" in capsys.readouterr().err


def test_sharded_optimizer_state_is_refused_and_an_unhonoured_fsdp_launch_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """FSDP/DeepSpeed shard the optimizer state, which run_mlm's main-process checkpoints would lose;
    on a CPU-only machine accelerate runs an FSDP launch config as plain data parallelism (said)."""
    from types import SimpleNamespace

    from accelerate.utils import DistributedType

    from hf_variants.training.run_mlm import check_parallelism

    printed = []
    for sharded in (DistributedType.FSDP, DistributedType.DEEPSPEED):
        with pytest.raises(SystemExit, match=f"does not support {sharded.value}"):
            check_parallelism(SimpleNamespace(distributed_type=sharded, print=printed.append))
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    check_parallelism(SimpleNamespace(distributed_type=DistributedType.MULTI_CPU, print=printed.append))
    assert printed and "asked for FSDP, but this run uses MULTI_CPU" in printed[-1]


def test_continuing_pretraining_never_starts_a_fresh_head_or_another_function(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    """A bare-encoder folder, or ``tie_word_embeddings=False`` on a tied checkpoint, would start a fresh MLM
    head; ``hidden_act=relu`` would run GELU-trained weights under ReLU: each is refused, naming the cause."""
    run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / "first", "macaron_bert", "--max_train_steps", "1"))
    AutoModel.from_pretrained(tmp_path / "first").save_pretrained(tmp_path / "bare")

    def continued(source: Path, output: str, *extra: str) -> list[str]:
        args = mlm_args(corpus, tokenizer_dir, tmp_path / output, "macaron_bert", "--max_train_steps", "1", *extra)
        at = args.index("--model_type")
        args[at : at + 4] = ["--model_name_or_path", str(source)]
        return args

    with pytest.raises(ValueError, match=r"does not hold every weight of this model: \d+ missing from the checkpoint"):
        run_mlm.main(continued(tmp_path / "bare", "from-bare"))
    with pytest.raises(ValueError, match=r"missing from the checkpoint .*decoder"):
        run_mlm.main(continued(tmp_path / "first", "untied", "--config_overrides", "tie_word_embeddings=False",
                               "--allow_function_changes"))  # fmt: skip
    with pytest.raises(ValueError, match=r"hidden_act: 'gelu' → 'relu'.*--allow_function_changes"):
        run_mlm.main(continued(tmp_path / "first", "relu", "--config_overrides", "hidden_act=relu"))
    run_mlm.main(continued(tmp_path / "first", "relu-on-purpose", "--config_overrides", "hidden_act=relu",
                           "--allow_function_changes"))  # fmt: skip
    assert AutoConfig.from_pretrained(tmp_path / "relu-on-purpose").hidden_act == "relu"
    run_mlm.main(continued(tmp_path / "first", "no-dropout", "--config_overrides", "hidden_dropout_prob=0.0"))


def test_typed_settings_are_the_command_lines_flags_with_their_defaults() -> None:
    """The flags are generated from the fields: a minimal command line parses to exactly the fields with
    their defaults, every field is a flag, and a value given in Python meets its flag's own check: a bad one
    is an error naming the field."""
    import dataclasses

    from hf_variants.settings.pretraining import PretrainingArguments, build_parser

    minimal = {"model_type": "macaron_bert", "train_file": "t.txt", "output_dir": "o"}
    argv = [f"--{key}={value}" for key, value in minimal.items()]
    parsed = vars(build_parser().parse_args(argv))
    fields = dataclasses.fields(PretrainingArguments)
    assert set(parsed) == {field.name for field in fields}
    defaults = {field.name: field.default_factory() if field.default_factory is not dataclasses.MISSING
                else field.default for field in fields if field.name not in minimal}  # fmt: skip
    assert {key: value for key, value in parsed.items() if key not in minimal} == defaults
    assert run_mlm.parse_args(argv) == PretrainingArguments(**minimal)
    help_text = " ".join(build_parser().format_help().split())
    assert all(f"--{field.name}" in help_text for field in fields)
    built = PretrainingArguments(**minimal, num_warmup_steps=200, max_seq_length="64")  # as the flag would read them
    assert built.num_warmup_steps == 200.0 and isinstance(built.num_warmup_steps, float) and built.max_seq_length == 64
    for bad, message in [({"learning_rate": 0}, "argument --learning_rate: 0 must be greater than 0"),
                         ({"max_seq_length": 2.5}, "argument --max_seq_length: '2.5' is not an integer"),
                         ({"lr_scheduler_type": "cos"}, r"lr_scheduler_type: invalid choice: 'cos' \(choose"),
                         ({"config_name": "c"}, "give exactly one of --model_type, --config_name"),
                         ({"report_to": ["csv", "none"]}, "--report_to none cannot be combined")]:  # fmt: skip
        with pytest.raises(ValueError, match=message):
            PretrainingArguments(**{**minimal, **bad})
    with pytest.raises(ValueError, match=r"--learning_rate: 0 must .*; argument --seed: -1 is not"):  # all at once
        PretrainingArguments(**minimal, learning_rate=0, seed=-1)


def test_the_engine_called_with_typed_settings_is_the_command_line_run(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    """``run_mlm.run`` with typed settings (as the studies call it) trains the same model as the command line
    with the same values, records the same settings, and a record without them is read by its command."""
    from hf_variants.settings.pretraining import PretrainingArguments

    argv = mlm_args(corpus, tokenizer_dir, tmp_path / "command", "macaron_bert", "--max_train_steps", "4")
    command = run_mlm.main(argv)
    typed = run_mlm.run(PretrainingArguments(
        model_type="macaron_bert", config_overrides=TINY["macaron_bert"], train_file=str(corpus),
        tokenizer_name=str(tokenizer_dir), max_seq_length=24, per_device_train_batch_size=8, learning_rate=3e-3,
        num_warmup_steps=0, output_dir=tmp_path / "typed", disable_tqdm=True, logging_steps=1, max_train_steps=4,
    ))  # fmt: skip
    assert typed["command"] is None and command["command"].startswith("run_mlm.py --model_type macaron_bert")
    differing = {k for k in typed["arguments"] if typed["arguments"][k] != command["arguments"][k]}
    assert differing == {"output_dir"}
    assert run_mlm.recorded_arguments({"command": command["command"]}, tmp_path) == command["arguments"]
    assert typed["eval_loss"] == command["eval_loss"]
    weights = [load_file(tmp_path / run / "model.safetensors") for run in ("command", "typed")]
    assert all(torch.equal(weights[0][key], weights[1][key]) for key in weights[0])


def test_lines_longer_than_the_model_are_packed_without_the_tokenizers_warning(tokenizer_dir: Path) -> None:
    """Whole lines are tokenized, then cut into blocks: a 300-token line is expected, so transformers'
    "Token indices sequence length is longer than the specified maximum" warning is not shown; the blocks
    hold every token of the line, in order."""
    from datasets import Dataset, DatasetDict
    from transformers.utils import logging as transformers_logging

    from hf_variants.training.data import tokenize_corpus

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    tokenizer.model_max_length = 64
    line = " ".join(["the cat chases the mouse ."] * 50)
    logger = transformers_logging.get_logger("transformers.tokenization_utils_base")
    records: list[str] = []
    handler = logging_handler(records)
    logger.addHandler(handler)
    try:
        blocks = tokenize_corpus(DatasetDict({"train": Dataset.from_dict({"text": [line]})}), tokenizer, 32)
    finally:
        logger.removeHandler(handler)
    assert not [message for message in records if "longer than the specified maximum" in message]
    ids = tokenizer(line)["input_ids"]
    assert len(ids) > tokenizer.model_max_length  # the case the warning is about
    assert [token for block in blocks["train"]["input_ids"] for token in block] == ids[: len(ids) // 32 * 32]


def logging_handler(records: list[str]):
    import logging

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    return Collect()


def test_a_tasks_own_training_file_is_a_corpus(tmp_path: Path) -> None:
    """Self-pretraining reads a task file as it is: GLUE's TSV (quotes are text) with its text column, or a pair
    task's two columns joined; the label column is never text."""
    from hf_variants.training.data import load_text_corpus

    tsv = tmp_path / "train.tsv"
    tsv.write_text('sentence\tlabel\nit \'s a "gem" .\t1\nflat and dull\t0\n\t1\n')
    corpus = load_text_corpus(tsv, tsv, text_column="sentence")
    assert corpus["validation"]["text"] == ['it \'s a "gem" .', "flat and dull"]  # the empty row dropped
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sentence1,sentence2,label\nA man sleeps.,Nobody sleeps.,2\nA dog runs.,,0\n")
    corpus = load_text_corpus(pairs, pairs, text_column="sentence1, sentence2")
    assert corpus["validation"]["text"] == ["A man sleeps. Nobody sleeps.", "A dog runs."]
    with pytest.raises(ValueError, match=r"has no column 'sentence3'"):
        load_text_corpus(pairs, pairs, text_column="sentence1,sentence3")


def test_pretraining_compiles_resumes_and_records_it(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    """``--torch_compile`` compiles the forward in place (``nn.Module.compile``; the eager backend here, so the
    arithmetic is the uncompiled one): the same weights as an uncompiled run, a compiled run stopped at step 1 and
    continued to step 2 ends where an uninterrupted one does, and the setting is part of the run's identity."""
    from hf_variants.storage.files import CheckpointError

    constant = ["--lr_scheduler_type", "constant"]  # a run extended to more steps continues its schedule exactly
    compiled = ["--torch_compile", "--torch_compile_backend", "eager", *constant]
    plain, whole, resumed = tmp_path / "plain", tmp_path / "whole", tmp_path / "resumed"
    run_mlm.main(mlm_args(corpus, tokenizer_dir, plain, "macaron_bert", "--max_train_steps", "2", *constant))
    run_mlm.main(mlm_args(corpus, tokenizer_dir, whole, "macaron_bert", "--max_train_steps", "2", *compiled))
    run_mlm.main(mlm_args(corpus, tokenizer_dir, resumed, "macaron_bert", "--max_train_steps", "1",
                          "--checkpointing_steps", "1", *compiled))  # fmt: skip
    run_mlm.main(mlm_args(corpus, tokenizer_dir, resumed, "macaron_bert", "--max_train_steps", "2",
                          "--checkpointing_steps", "1", *compiled))  # fmt: skip
    weights = {name: load_file(folder / "model.safetensors") for name, folder in
               (("plain", plain), ("whole", whole), ("resumed", resumed))}  # fmt: skip
    assert not any(key.startswith("_orig_mod") for key in weights["whole"])
    for key, tensor in weights["plain"].items():
        torch.testing.assert_close(weights["whole"][key], tensor, rtol=0, atol=0)
        torch.testing.assert_close(weights["resumed"][key], tensor, rtol=0, atol=0)
    results = json.loads((whole / "results.json").read_text())
    assert json.dumps(results).count('"torch_compile": true') >= 1
    with pytest.raises((CheckpointError, SystemExit, ValueError), match="torch_compile"):
        run_mlm.main(mlm_args(corpus, tokenizer_dir, whole, "macaron_bert", "--max_train_steps", "3", *constant))


def test_held_orthogonal_weights_train_like_one_forward_pass_each(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TransJect with gradient accumulation: the engine holds its orthogonal matrices for the step's micro-batches
    and sends their summed gradients through the maps once; the weights match a run that computes them in every
    forward pass (the same arithmetic up to rounding), and the orthogonal offsets did train."""
    common = ["--max_train_steps", "3", "--gradient_accumulation_steps", "2", "--per_device_train_batch_size", "4",
              "--learning_rate", "2e-2"]  # fmt: skip
    run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / "held", "transject", *common))
    unheld = run_mlm.held_weights
    monkeypatch.setattr(run_mlm, "held_weights", lambda model, accelerator, accumulate_gradients=False: (
        unheld(model, accelerator) if not accumulate_gradients else contextlib.nullcontext()))
    run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / "per_forward", "transject", *common))
    held, per_forward = (load_file(tmp_path / name / "model.safetensors") for name in ("held", "per_forward"))
    offsets = [key for key in held if key.endswith("parametrizations.weight.original")]
    assert offsets and any(bool(held[key].abs().max() > 0) for key in offsets)  # offsets start at zero
    for key, tensor in per_forward.items():
        torch.testing.assert_close(held[key], tensor, rtol=1e-4, atol=1e-5, msg=key)


def test_gradient_checkpointing_recomputes_every_layer_and_trains_the_same_run(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """``--gradient_checkpointing``: each layer's forward runs under torch's checkpoint, and the losses and weights
    are those of the same run without it (dropout included: the recomputation replays the random state)."""
    import torch.utils.checkpoint
    import transformers.modeling_utils

    checkpointed = []
    original = torch.utils.checkpoint.checkpoint

    def counted(function, *args, **kwargs):
        checkpointed.append(function)
        return original(function, *args, **kwargs)

    for module in (torch.utils.checkpoint, transformers.modeling_utils):  # the name transformers' checkpointing calls
        monkeypatch.setattr(module, "checkpoint", counted, raising=False)
    steps = ["--max_train_steps", "4"]
    run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / "plain", "macaron_bert", *steps))
    assert checkpointed == []
    run_mlm.main(mlm_args(corpus, tokenizer_dir, tmp_path / "recomputed", "macaron_bert", *steps,
                          "--gradient_checkpointing"))  # fmt: skip
    assert len(checkpointed) == 4 * 2  # every step, both layers
    losses = {name: [row["loss"] for row in history(tmp_path / name)] for name in ("plain", "recomputed")}
    assert losses["plain"] == losses["recomputed"]
    plain, recomputed = (load_file(tmp_path / name / "model.safetensors") for name in ("plain", "recomputed"))
    assert all(torch.equal(plain[name], recomputed[name]) for name in plain)


def test_gradient_checkpointing_is_refused_with_the_models_reason_before_anything_is_written(
    corpus: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    arguments = mlm_args(corpus, tokenizer_dir, tmp_path / "run", "mgk_bert", "--max_train_steps", "2",
                         "--gradient_checkpointing")  # fmt: skip
    overrides = arguments.index("--config_overrides") + 1
    arguments[overrides] += ",mixture_weights=soft_em"
    with pytest.raises(ValueError, match=r"^--gradient_checkpointing: mixture_weights='soft_em' updates π"):
        run_mlm.main(arguments)
    assert not (tmp_path / "run").exists()
