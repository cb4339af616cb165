"""Run identity (``run_identity``): tokenizers by their whole definition, arguments by exclusion."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoTokenizer, TrainingArguments

from hf_variants.settings.finetuning import RunArguments
from hf_variants.storage import run_identity
from hf_variants.synthetic import synthetic_sentences
from hf_variants.tokenization import train_wordpiece_tokenizer
from hf_variants.training import run_glue


def test_a_tokenizer_is_identified_by_its_definition_not_its_vocabulary(tmp_path: Path) -> None:
    tokenizer = train_wordpiece_tokenizer(synthetic_sentences(200, seed=1), vocab_size=80, min_frequency=1)
    tokenizer.save_pretrained(tmp_path / "lower")
    reloaded = AutoTokenizer.from_pretrained(tmp_path / "lower")
    assert run_identity.tokenizer_sha256(reloaded) == run_identity.tokenizer_sha256(tokenizer)  # a round trip keeps it
    reloaded.enable_truncation = None  # a caller's truncation state is not the tokenizer
    reloaded.backend_tokenizer.enable_truncation(7)
    assert run_identity.tokenizer_sha256(reloaded) == run_identity.tokenizer_sha256(tokenizer)

    definition = json.loads((tmp_path / "lower" / "tokenizer.json").read_text())
    definition["normalizer"]["lowercase"] = not definition["normalizer"]["lowercase"]
    (tmp_path / "lower" / "tokenizer.json").write_text(json.dumps(definition))
    cased = AutoTokenizer.from_pretrained(tmp_path / "lower")
    assert run_identity.vocabulary_sha256(cased) == run_identity.vocabulary_sha256(tokenizer)  # the same vocabulary
    assert run_identity.tokenizer_sha256(cased) != run_identity.tokenizer_sha256(tokenizer)  # another tokenizer


def test_every_training_argument_is_identity_unless_excluded() -> None:
    """A field transformers adds later is covered without a change: only the named exclusions are left out,
    and each exclusion names a real field of TrainingArguments or run_glue's RunArguments (a misspelt one
    would leave out nothing)."""
    fields = {**TrainingArguments(output_dir="unused").to_dict(), **vars(RunArguments())}
    kept = run_identity.arguments_with_effect(fields, run_glue.TRAINING_ARGUMENTS_WITHOUT_EFFECT)
    left_out = set(fields) - set(kept)
    for name in run_glue.TRAINING_ARGUMENTS_WITHOUT_EFFECT:
        matches = [field for field in fields if field == name or (name.endswith("*") and field.startswith(name[:-1]))]
        assert matches, f"{name} is not a TrainingArguments field"
        assert set(matches) <= left_out
    assert {"learning_rate", "neftune_noise_alpha", "lr_scheduler_kwargs", "optim_args", "dataloader_drop_last",
            "load_best_model_at_end", "metric_for_best_model", "label_names", "auto_find_batch_size",
            "ignore_data_skip", "average_tokens_across_devices"} <= set(kept)  # fmt: skip
    assert len(kept) + len(left_out) == len(fields)


def test_files_are_identified_by_content_wherever_they_lie(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "train.txt", tmp_path / "b" / "other-name.txt"
    for path in (first, second):
        path.parent.mkdir()
        path.write_text("the same words\n")
    identity_a, where_a = run_identity.describe_files([first])
    identity_b, where_b = run_identity.describe_files([second])
    assert identity_a == identity_b and where_a != where_b
    current = {"data": identity_b, "locations": where_b, "versions": {"torch": "2"}}
    assert run_identity.fingerprint_differences({"data": identity_a, "locations": where_a, "versions": {"torch": "1"}},
                                                current) == []  # fmt: skip
    assert run_identity.version_changes({"versions": {"torch": "1"}}, current) == ["torch 1 → 2"]
    second.write_text("other words\n")
    changed, _ = run_identity.describe_files([second])
    assert run_identity.fingerprint_differences({"data": identity_a}, {"data": changed})
