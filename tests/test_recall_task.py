"""The embedded recall task (``hf_variants.synthetic.synthetic_recall``): labels against an independent reading of
each sequence, determinism, what shortcuts score, no dev sequence in training, one token per key and value, and the
``--preset recall`` budget."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from hf_variants.lab import data_sources
from hf_variants.settings.compare import PRESETS, parse_args
from hf_variants.synthetic import (
    RECALL_KEYS,
    RECALL_VALUES,
    recall_lines,
    recall_words,
    synthetic_recall,
)
from hf_variants.tasks import TASKS, EmbeddedLevels

from .helpers import committed_records


def answer_by_reading(sequence: str) -> int:
    """The value that followed the queried key, read off the words (independently of the generator)."""
    words = sequence.split()
    assert words[-2] == "?"
    pairs = dict(zip(words[:-2:2], words[1:-2:2], strict=True))
    return int(pairs[words[-1]].removeprefix("v"))


def test_labels_are_the_queried_key_s_value_on_hand_checked_sequences() -> None:
    assert synthetic_recall(3, seed=0) == [("k49 v1 k53 v8 ? k53", 8), ("k51 v15 k38 v11 ? k51", 15),
                                           ("k17 v4 k36 v3 ? k36", 3)]  # fmt: skip
    assert synthetic_recall(1, seed=1, pairs=4) == [("k17 v15 k8 v14 k32 v15 k15 v12 ? k8", 14)]
    for pairs in (1, 2, 5):
        for sequence, label in synthetic_recall(300, seed=pairs, pairs=pairs):
            words = sequence.split()
            keys = words[:-2:2]
            assert len(keys) == pairs == len(set(keys)) and words[-1] in keys  # distinct keys, one of them asked
            assert answer_by_reading(sequence) == label


def test_recall_is_deterministic_and_covers_every_value() -> None:
    assert synthetic_recall(40, seed=3) == synthetic_recall(40, seed=3) != synthetic_recall(40, seed=4)
    labels = Counter(label for _, label in synthetic_recall(3200, seed=2))
    assert set(labels) == set(range(RECALL_VALUES)) and max(labels.values()) < 2 * 3200 / RECALL_VALUES
    with pytest.raises(ValueError, match="pairs: needs 1 to 64"):
        synthetic_recall(1, pairs=RECALL_KEYS + 1)


def test_only_binding_key_to_value_solves_it() -> None:
    """Shortcuts stay near their chance: a bag of words (the most frequent value present, ties to the first) and
    "the value of the first pair" score about 1/pairs; the position of the asked key in the sequence is uniform."""
    pairs, rows = 3, synthetic_recall(3000, seed=5, pairs=3)

    def values(sequence: str) -> list[int]:
        return [int(word[1:]) for word in sequence.split()[1:-2:2]]

    first_pair = sum(values(s)[0] == label for s, label in rows) / len(rows)
    bag = sum(Counter(values(s)).most_common(1)[0][0] == label for s, label in rows) / len(rows)
    assert abs(first_pair - 1 / pairs) < 0.05 and bag < 1 / pairs + 0.1
    asked = Counter(s.split()[:-2:2].index(s.split()[-1]) for s, _ in rows)
    assert all(abs(count / len(rows) - 1 / pairs) < 0.05 for count in asked.values())


def test_the_corpus_lines_carry_right_answers() -> None:
    for line in recall_lines(200, seed=1, pairs=3):
        words = line.split()
        assert answer_by_reading(" ".join(words[:-1])) == int(words[-1][1:])


def test_embedded_recall_data_is_disjoint_and_each_key_and_value_is_one_token(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from hf_variants.settings.tokenizer import TokenizerArguments
    from hf_variants.training.train_tokenizer import train_tokenizer

    source = data_sources.synthetic_source(tmp_path / "data", seed=5, tasks=["recall"], within=tmp_path)
    with open(source.tasks["recall"]["train_file"], newline="") as handle:
        train = {row["sentence"] for row in csv.DictReader(handle)}
    with open(source.tasks["recall"]["validation_file"], newline="") as handle:
        dev = [row["sentence"] for row in csv.DictReader(handle)]
    assert len(dev) == data_sources.DEV_EXAMPLES and len(train) > 1900 and not train & set(dev)
    corpus = (tmp_path / "data" / "train.txt").read_text().splitlines()
    assert sum(line.split()[0].startswith("k") for line in corpus) == 2000  # every third of 6,000 lines
    # without recall the corpus is the language alone, line for line what it is with recall elsewhere
    plain = data_sources.synthetic_corpus(6000, 5, EmbeddedLevels())
    assert [line for i, line in enumerate(plain) if i % 3 != 2] == [line for i, line in enumerate(corpus) if i % 3 != 2]
    assert not set(recall_words()) & {word for line in plain for word in line.split()}
    folder = train_tokenizer(TokenizerArguments(train_file=source.corpus["train_file"], vocab_size=source.vocab_size,
                                                output_dir=tmp_path / "tokenizer"))  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert [word for word in recall_words() if tokenizer.tokenize(word) != [word]] == []


def test_the_recall_preset_runs_the_recall_task_at_two_layers() -> None:
    args = parse_args(["--preset", "recall"])
    assert args.tasks == ["recall"] and args.num_layers == 2
    assert args.finetune_steps == PRESETS["recall"]["finetune_steps"]
    assert parse_args(["--preset", "recall", "--tasks", "attractor_number"]).tasks == ["attractor_number"]
    assert parse_args([]).tasks is None  # the default's task is chosen by the data, not the preset


@pytest.mark.parametrize("pairs", ["0", str(RECALL_KEYS + 1)])
def test_a_recall_level_the_keys_cannot_fill_is_a_one_line_error(pairs: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    command = [sys.executable, "-m", "hf_variants.cli", "compare", "--preset", "recall", "--recall_pairs", pairs,
               "--output_dir", str(tmp_path / "out")]  # fmt: skip
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert finished.returncode != 0 and finished.stderr.strip().count("\n") <= 1, finished.stderr
    assert "argument --recall_pairs: " in finished.stderr and not (tmp_path / "out" / "models").exists()


CALIBRATED = [("attractors-{}", "DEFAULT_ATTRACTORS", 0.55, 0.95),
              ("recall-{}pairs-{}steps", "DEFAULT_RECALL_PAIRS", 0.1, 0.95)]


@pytest.mark.parametrize(("name", "level", "low", "high"), CALIBRATED)
def test_the_default_levels_are_the_calibrated_ones(name: str, level: str, low: float, high: float) -> None:
    """Each embedded task's default difficulty (and the recall preset's budget) has a committed calibration record in
    which the BERT control scored above chance and below 95% on every seed's mean."""
    import json

    from hf_variants import synthetic
    from hf_variants.settings.compare import RECALL_STEPS

    folder = committed_records("calibration")
    record = json.loads((folder / (name.format(getattr(synthetic, level), RECALL_STEPS) + ".json")).read_text())
    assert low < record["dev_accuracy_mean"] < high
    assert record["statuses"] == dict.fromkeys(record["statuses"], "learned")


@pytest.mark.parametrize("pairs", [1, 2, 3, 5])
def test_the_guessing_level_is_guessing_among_the_values_shown(pairs: int) -> None:
    """The declared guessing level, E[1/distinct values shown], against the task's own generator: a model that
    picks uniformly among the sequence's distinct values scores it (within 3 binomial standard errors)."""
    from hf_variants.synthetic import recall_guessing_level

    rows = synthetic_recall(20_000, seed=3, pairs=pairs)
    expected = sum(1 / len({word for word in sentence.split() if word.startswith("v")}) for sentence, _ in rows)
    level = recall_guessing_level(pairs)
    assert abs(expected / len(rows) - level) < 3 * (level * (1 - level) / len(rows)) ** 0.5 + 1e-9
    assert TASKS["recall"].guessing_level(EmbeddedLevels(recall_pairs=pairs)) == level
    assert TASKS["attractor_number"].guessing_level() is None  # its majority share applies
