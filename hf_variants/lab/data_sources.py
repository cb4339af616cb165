"""Where the main job's data comes from (:func:`resolve_data`): a local folder, ``$HF_VARIANTS_DATA``, the Hub
when asked for (``--from_hub``), or the embedded default — the package's synthetic language for MLM and its
attractor-number task (or its other tasks: recall, subject number, agreement), generated from a seed — as the
engines' settings (:class:`DataSource`)."""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..settings import compare as compare_settings
from ..storage.files import make_folder, write_text_atomic
from ..synthetic import RECALL_KEYS, RECALL_VALUES
from ..tasks import EMBEDDED_TASKS, EmbeddedLevels, get_glue_task
from ..tasks.embedded import DEFAULT_LEVELS

DATA_ENV = compare_settings.DATA_ENV


#: The embedded default's fine-tuning task when no data is given (one of :data:`~hf_variants.tasks.EMBEDDED_TASKS`).
SYNTHETIC_TASK = "attractor_number"
#: The embedded default's tokenizer size (its language's words and pieces), and what recall adds: room for each
#: key and value word and the WordPiece pieces it is merged from, so that every one is a single token (tested).
SYNTHETIC_VOCAB_SIZE, RECALL_VOCAB = 200, 2 * (RECALL_KEYS + RECALL_VALUES)


@dataclass
class DataSource:
    """Where the corpus and the tasks come from, as the engines' settings: ``corpus`` holds fields of
    ``PretrainingArguments`` (``train_file`` and ``validation_file``, or ``dataset_name`` and
    ``dataset_config_name``), ``tasks`` per task fields of run_glue's ``DataTrainingArguments``."""

    kind: str  # "data_dir", "env", "hub" or "synthetic"
    description: str
    corpus: dict[str, str]
    tasks: dict[str, dict[str, str]] = field(default_factory=dict)
    glue_dir: Path | None = None  # local GLUE folder (data_dir / env)
    synthetic_dir: Path | None = None  # folder of the embedded default
    vocab_size: int | None = None  # the size of the tokenizer trained on it, unless asked for another

    def input_files(self, task: str | None = None) -> list[Path]:
        """The local files the corpus (``task=None``) or a task is read from (none for Hub data)."""
        settings = self.corpus if task is None else self.tasks[task]
        files = [Path(value) for name, value in settings.items() if name.endswith("_file")]
        if task is not None and self.glue_dir is not None:
            files += sorted((self.glue_dir / get_glue_task(task).folder).glob("*.tsv"))
        return files

    def task_inputs_corpus(self, tasks: Sequence[str], heldout_fraction: float, folder: Path, *,
                           within: Path) -> dict[str, str]:  # fmt: skip
        """The pretraining corpus of self-pretraining (``--pretrain_on task``): the training inputs of ``tasks``
        as the fine-tuning engine reads them, without the slice it holds out for choosing the learning rate
        (:func:`hf_variants.training.run_glue.hold_out`, same fraction and seed), one example per line (a
        pair's two texts joined by a space); labels, dev and test never. Written to ``folder/task-inputs.txt``;
        the pretraining engine holds out its own validation lines from it. ``corpus``-style settings."""
        from ..settings.finetuning import DataTrainingArguments
        from ..training import run_glue

        lines = []
        for task in tasks:
            raw = run_glue.load_raw_datasets(DataTrainingArguments(**self.tasks[task]))
            glue_task = run_glue.get_glue_task(task) if "task_name" in self.tasks[task] else None
            raw = run_glue.hold_out(run_glue.encode_labels(raw, run_glue.label_space(raw, glue_task)),
                                    heldout_fraction, 0)  # fmt: skip
            keys = [key for key in run_glue.text_keys(raw, glue_task) if key is not None]
            lines += [" ".join(" ".join(str(row[key]).split()) for key in keys) for row in raw["train"]]
        path = folder / "task-inputs.txt"
        make_folder(path.parent, within=within)
        write_text_atomic(path, "".join(line + "\n" for line in lines if line.strip()), within=within)
        return {"train_file": str(path)}

    def dev_split(self, task: str) -> tuple[list[str], list[str] | None, np.ndarray]:
        """The dev set of ``task``: first texts, second texts (pairs) or None, labels."""
        from datasets import load_dataset

        from ..glue import load_glue

        if self.kind == "synthetic":
            files = {"validation": str(self.synthetic_dir / f"{task}_dev.csv")}
            dev = load_dataset("csv", data_files=files)["validation"]
            return list(dev["sentence"]), None, np.asarray(dev["label"])
        dev = load_glue(task, self.glue_dir)["validation"]
        keys = get_glue_task(task).keys
        second = list(dev[keys[1]]) if len(keys) > 1 else None
        return list(dev[keys[0]]), second, np.asarray(dev["label"])


# --------------------------------------------------------------------------------------------
# Data resolution
# --------------------------------------------------------------------------------------------
def local_source(kind: str, folder: Path, tasks: Sequence[str]) -> DataSource:
    """A data folder; raises naming what is missing (corpus file or task folder)."""
    corpus = folder / "wikitext-2"
    for name in ("train.txt", "valid.txt"):
        if not (corpus / name).is_file():
            raise FileNotFoundError(f"{folder} has no corpus file wikitext-2/{name} (expected {corpus / name}).")
    task_data = {}
    for task_name in tasks:
        task = get_glue_task(task_name)
        task_folder = folder / "glue" / task.folder
        if not (task_folder / "train.tsv").is_file() or not (task_folder / "dev.tsv").is_file():
            raise FileNotFoundError(
                f"{folder} has no GLUE task {task.name}: expected {task_folder}/train.tsv and dev.tsv."
            )
        task_data[task.name] = {"task_name": task.name, "glue_dir": str(folder / "glue")}
    origin = "--data_dir" if kind == "data_dir" else f"${DATA_ENV}"
    return DataSource(
        kind,
        f"{origin} {folder}: WikiText-2 for MLM, GLUE {', '.join(task_data)} for fine-tuning",
        {"train_file": str(corpus / "train.txt"), "validation_file": str(corpus / "valid.txt")},
        task_data,
        glue_dir=folder / "glue",
    )


def hub_reachable(timeout: float = 10.0) -> bool:
    """False when offline (``HF_HUB_OFFLINE``) or when the Hub does not answer."""
    import huggingface_hub

    if huggingface_hub.constants.HF_HUB_OFFLINE:
        return False
    try:
        huggingface_hub.HfApi().dataset_info("nyu-mll/glue", timeout=timeout)
    except Exception:  # any failure (network, HTTP, timeout) means: not usable now
        return False
    return True


def synthetic_corpus(count: int, seed: int, levels: EmbeddedLevels, recall: bool = False) -> list[str]:
    """The MLM corpus of the embedded default: the synthetic language's simple sentences alternating with
    sentences with attractor phrases (:func:`~hf_variants.synthetic.attractor_sentence`); with ``recall``,
    every third line is instead a recall sequence with its answer (:func:`~hf_variants.synthetic.recall_lines`),
    so that the tokenizer and the MLM see the recall task's words."""
    import random

    from ..synthetic import attractor_sentence, recall_lines, synthetic_sentence

    rng = random.Random(seed)
    lines = [attractor_sentence(rng, levels.attractors)[0] if index % 2 else synthetic_sentence(rng)
             for index in range(count)]  # fmt: skip
    if recall:
        lines[2::3] = recall_lines(len(lines[2::3]), seed + 7919, levels.recall_pairs)
    return lines


#: Dev rows of each embedded task. The dev set's own sampling noise is a large share of a run's spread over seeds at
#: 400 rows: re-scored on 8,000 rows, the same BERT-control runs (default budget, 12 seeds) spread 0.73 points
#: instead of 1.20, their A/A differences 1.24 instead of 1.84. The spread falls as ``a + b/rows`` (variances), so
#: 2,000 rows keep most of the gain (about 0.82) at a quarter of the scoring time of 8,000.
DEV_EXAMPLES = 2000


def synthetic_source(
    folder: Path, seed: int, tasks: Sequence[str] = (SYNTHETIC_TASK,), levels: EmbeddedLevels = DEFAULT_LEVELS, *,
    within: Path,
) -> DataSource:
    """Write the embedded default data into ``folder``: the synthetic corpus (:func:`synthetic_corpus`,
    MLM) and each of ``tasks`` (CSV with ``sentence``/``label``: 2,000 training rows and :data:`DEV_EXAMPLES` dev
    rows, from disjoint seeds; a dev sentence that also occurs in training is replaced, so that no dev example was
    trained on)."""
    recall = "recall" in tasks
    make_folder(folder, within=within)
    write_text_atomic(folder / "train.txt", "\n".join(synthetic_corpus(6000, seed, levels, recall)) + "\n",
                      within=within)
    write_text_atomic(folder / "valid.txt", "\n".join(synthetic_corpus(600, seed + 1, levels, recall)) + "\n",
                      within=within)
    task_data = {}
    for task in tasks:
        train = EMBEDDED_TASKS[task].generate(2000, seed + 2, levels)
        seen = {sentence for sentence, _ in train}
        candidates = EMBEDDED_TASKS[task].generate(4 * DEV_EXAMPLES, seed + 3, levels)
        dev = [row for row in candidates if row[0] not in seen][:DEV_EXAMPLES]
        for split, rows in (("train", train), ("dev", dev)):
            table = io.StringIO(newline="")
            csv.writer(table, lineterminator="\n").writerows([("sentence", "label"), *rows])
            write_text_atomic(folder / f"{task}_{split}.csv", table.getvalue(), within=within)
        task_data[task] = {"train_file": str(folder / f"{task}_train.csv"),
                           "validation_file": str(folder / f"{task}_dev.csv")}  # fmt: skip
    return DataSource(
        "synthetic",
        f"embedded default in {folder}: the package's synthetic language for MLM and its "
        f"{' and '.join(EMBEDDED_TASKS[task].describe(levels) for task in tasks)} "
        f"task{'s' if len(tasks) > 1 else ''} for fine-tuning",
        {"train_file": str(folder / "train.txt"), "validation_file": str(folder / "valid.txt")},
        task_data,
        synthetic_dir=folder,
        vocab_size=SYNTHETIC_VOCAB_SIZE + (RECALL_VOCAB if recall else 0),
    )


def resolve_data(
    data_dir: Path | None, tasks: Sequence[str] | None, output_dir: Path, seed: int, from_hub: bool = False,
    levels: EmbeddedLevels = DEFAULT_LEVELS,
) -> DataSource:
    """The data a user asked for — ``data_dir``, else ``$HF_VARIANTS_DATA``, else the Hub with
    ``from_hub`` — or the embedded default; tasks of the embedded default
    (:data:`~hf_variants.tasks.EMBEDDED_TASKS`) are always taken from it. Whether the Hub answers never
    changes the choice: asked for and unreachable is an error, not asked for is never tried, so one command
    line is one experiment on every machine."""
    if tasks and set(tasks) <= EMBEDDED_TASKS.keys():
        return synthetic_source(output_dir / "data", seed, list(dict.fromkeys(tasks)), levels, within=output_dir)
    glue_tasks = list(tasks) if tasks else ["sst2"]
    if data_dir is not None:
        return local_source("data_dir", Path(data_dir), glue_tasks)
    if os.environ.get(DATA_ENV):
        return local_source("env", Path(os.environ[DATA_ENV]), glue_tasks)
    if from_hub:
        if not hub_reachable():
            raise ConnectionError(
                "--from_hub: the Hub is not reachable (or HF_HUB_OFFLINE is set); give a local copy with "
                f"--data_dir or ${DATA_ENV}, or leave both out for the embedded tasks."
            )
        return DataSource(
            "hub",
            f"the Hub: wikitext/wikitext-2-raw-v1 for MLM, nyu-mll/glue {', '.join(glue_tasks)} for fine-tuning",
            {"dataset_name": "wikitext", "dataset_config_name": "wikitext-2-raw-v1"},
            {task: {"task_name": task} for task in glue_tasks},
        )
    if tasks:
        raise FileNotFoundError(
            f"--tasks {' '.join(tasks)}: GLUE tasks need data: --data_dir, ${DATA_ENV} or --from_hub. "
            f"The embedded tasks are {', '.join(sorted(EMBEDDED_TASKS))}."
        )
    return synthetic_source(output_dir / "data", seed, levels=levels, within=output_dir)
