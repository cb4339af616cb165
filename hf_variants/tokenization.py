"""Train a BERT-style WordPiece tokenizer locally (no Hub access needed)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def continuation_characters(texts: Iterable[str], tokenizer: Tokenizer) -> set[str]:
    """Characters that occur after the first one of a pre-tokenized word (the trainer's "##c" tokens)."""
    characters: set[str] = set()
    for text in texts:
        for word, _ in tokenizer.pre_tokenizer.pre_tokenize_str(tokenizer.normalizer.normalize_str(text)):
            characters.update(word[1:])
    return characters


def without_added_tokens(tokenizer: Tokenizer, keep: Iterable[str]) -> Tokenizer:
    """``tokenizer`` with its added tokens other than ``keep`` removed from the list of tokens matched in
    raw text; their vocabulary entries stay."""
    state = json.loads(tokenizer.to_str())
    state["added_tokens"] = [token for token in state["added_tokens"] if token["content"] in set(keep)]
    return Tokenizer.from_str(json.dumps(state))


def train_wordpiece_tokenizer(
    texts: Iterable[str],
    vocab_size: int = 8000,
    min_frequency: int = 2,
    lowercase: bool = True,
    model_max_length: int = 512,
) -> PreTrainedTokenizerFast:
    """Train an uncased (by default) BERT WordPiece tokenizer on ``texts``.

    The result behaves like ``BertTokenizerFast``: ``[CLS] a [SEP] b [SEP]`` templates with token
    type ids, ``[PAD]`` = 0 and ``[MASK]`` for fill-mask. Deterministic: the same corpus and settings
    give the same tokenizer, id for id (the corpus is read into memory for that, see below). Raises
    ``ValueError`` when the corpus has no text to learn from.
    """
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lowercase, clean_text=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(prefix="##")
    texts = [text for text in texts if text.strip()]
    if not texts:
        raise ValueError("Cannot train a tokenizer: the corpus contains no non-empty line.")
    # tokenizers' trainer numbers the "##c" tokens in hash-map order, and merge ties are broken by
    # id, so the same corpus gives another vocabulary on each run (huggingface/tokenizers#1794). Giving
    # it every "##c" up front, sorted, fixes their ids and so the whole training.
    continuations = sorted(continuation_characters(texts, tokenizer))
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *(f"##{character}" for character in continuations)],
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer = without_added_tokens(tokenizer, keep=SPECIAL_TOKENS)
    cls_id, sep_id = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=model_max_length,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )
