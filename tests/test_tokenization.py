"""The locally trained WordPiece tokenizer: deterministic training, BERT's special tokens, round trips."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from hf_variants.tokenization import SPECIAL_TOKENS, train_wordpiece_tokenizer


def tie_heavy_corpus() -> list[str]:
    """Random words over ten letters: many pairs with equal counts, where the trainer breaks ties by id."""
    rng = random.Random(0)
    words = lambda: " ".join("".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 7))) for _ in range(12))  # noqa: E731
    return [words() for _ in range(300)] + ["a # sign, a comma."]


def test_training_is_deterministic() -> None:
    # tokenizers' own trainer returns another vocabulary on almost every run for this corpus
    # (huggingface/tokenizers#1794); ours must give the same tokenizer every time
    corpus = tie_heavy_corpus()
    states = {train_wordpiece_tokenizer(corpus, vocab_size=300).backend_tokenizer.to_str() for _ in range(4)}
    assert len(states) == 1


def test_special_tokens_and_round_trip() -> None:
    tokenizer = train_wordpiece_tokenizer(tie_heavy_corpus(), vocab_size=300)
    assert [tokenizer.convert_ids_to_tokens(i) for i in range(len(SPECIAL_TOKENS))] == list(SPECIAL_TOKENS)
    assert set(tokenizer.get_added_vocab()) == set(SPECIAL_TOKENS)  # the "##c" seeds are vocabulary, not added
    assert "##c" in tokenizer.get_vocab()
    # a literal "##c" in text is pre-tokenized like any punctuation, not matched as one token
    assert tokenizer.tokenize("##c") == ["#", "#", "c"]
    encoded = tokenizer("abc defg", "hij")
    assert encoded["input_ids"][0] == tokenizer.cls_token_id and encoded["token_type_ids"][-1] == 1
    assert tokenizer.decode(encoded["input_ids"], skip_special_tokens=True) == "abc defg hij"


def test_empty_corpus_is_refused() -> None:
    with pytest.raises(ValueError, match="no non-empty line"):
        train_wordpiece_tokenizer(["", "  \n"])


def test_the_tokenizer_engine_takes_the_command_lines_flags_as_typed_settings(tmp_path) -> None:
    """``TokenizerArguments`` has one field per flag of ``hf-variants train-tokenizer`` with the flags'
    defaults; the engine called with them saves the tokenizer the command line saves; a bad value set in
    Python is an error naming the field."""
    import dataclasses

    from hf_variants.settings.tokenizer import TokenizerArguments, build_parser
    from hf_variants.training import train_tokenizer

    flags = vars(build_parser().parse_args(["--output_dir", "o"]))
    fields = {field.name: field.default for field in dataclasses.fields(TokenizerArguments)}
    assert flags == {**fields, "output_dir": Path("o")}  # output_dir: required, no default
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(tie_heavy_corpus()) + "\n")
    train_tokenizer.main(["--train_file", str(corpus), "--vocab_size", "300", "--output_dir", str(tmp_path / "cli")])
    typed = TokenizerArguments(train_file=str(corpus), vocab_size=300, output_dir=tmp_path / "typed")
    assert train_tokenizer.train_tokenizer(typed) == tmp_path / "typed"
    assert (tmp_path / "cli" / "tokenizer.json").read_text() == (tmp_path / "typed" / "tokenizer.json").read_text()
    with pytest.raises(ValueError, match=r"argument --vocab_size: 'many' is not an integer"):
        TokenizerArguments(train_file=str(corpus), vocab_size="many", output_dir=tmp_path)
    with pytest.raises(ValueError, match="give --train_file or --dataset_name"):
        TokenizerArguments(output_dir=tmp_path)
