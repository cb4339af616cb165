"""GLUE after pretraining: masked-LM pretraining on WikiText-2, then fine-tuning on GLUE tasks with the
learning rate chosen on held-out training data — shared by this folder's two studies, and their tables:

* the **budget study** (``pretraining_budget.py``): one BERT-control MLM run keeps a checkpoint
  every few hundred steps; each chosen checkpoint ("budget", in optimizer steps) and the same
  architecture from random initialisation (budget 0) are fine-tuned, and a budget helps on a task when
  its paired-by-seed difference from random initialisation has a 95% interval above 0 (more than the
  seed spread). It measures the budget the variant comparison needs before that comparison is run.
* the **variant comparison** (``glue_after_pretraining.py``): each variant and its matched
  control pretrained at one budget with the same tokenizer, data, schedule and seed, then fine-tuned the
  same way; differences variant − control paired by seed.

Fine-tuning (``FineTuning``), per model, task and seed, through the lab's protocol
(:mod:`hf_variants.lab.protocol`): the seed's learning rate is chosen on a held-out slice of the *training* split
(``run_glue --heldout_fraction``, drawn with the seed), never on dev; then the seed's run at that rate on the
training split, scored on dev. (The committed studies chose once per model and task, at seed 0: their records are
read as such, :data:`~hf_variants.lab.protocol.RATE_CHOSEN_ONCE`.) Each run is the fine-tuning engine called
as a function with typed settings (``run_glue.run``); its ``results.json`` is recorded next to the study (a few
KB, committed; :mod:`.records`), and a run whose copy holds the same settings is not run again, so a study resumes
across sessions. A run
whose dev predictions are ≥ 99% one class (or one constant score) "did not learn": it is named, and left
out of means and pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hf_variants.lab import records, verdicts
from hf_variants.lab.outcomes import ENGINE_RESULTS, read_outcome
from hf_variants.lab.protocol import Run, run_protocol
from hf_variants.lab.statistics import Interval, mean_interval, paired_difference_if_any
from hf_variants.storage.files import CheckpointError
from hf_variants.storage.record_schema import load_json
from hf_variants.tasks import get_glue_task
from hf_variants.training import checkpoints

if TYPE_CHECKING:
    from transformers import TrainingArguments

    from hf_variants.settings.finetuning import DataTrainingArguments, ModelArguments, RunArguments
    from hf_variants.settings.pretraining import PretrainingArguments

#: One fine-tuning run's typed settings, the arguments of :func:`hf_variants.training.run_glue.run`.
FineTuningRun = tuple["ModelArguments", "DataTrainingArguments", "TrainingArguments", "RunArguments"]
#: The chance score shown next to "did not learn" (dev majority share for SST-2 comes from the data).
NO_SKILL = {"matthews_correlation": 0.0, "pearson": 0.0}
#: Size of every pretrained model here: the BERT control's (the budget study) and, for the variant
#: comparison, each variant's and its control's (MGK and the others keep 2 heads of 64).
PRETRAINING_SIZES = "hidden_size=128,num_hidden_layers=2,num_attention_heads=2,intermediate_size=512"


def mlm_settings(
    model_type: str, overrides: str, data_dir: Path, tokenizer: Path, steps: int, checkpoint_every: int, output: Path
) -> PretrainingArguments:
    """The pretraining engine's settings: WikiText-2, 128-token blocks, 32 per step, lr 1e-3 constant after
    200 warmup steps (so that a checkpoint at step s is the budget-s model), validation perplexity at each
    checkpoint."""
    from hf_variants.settings.pretraining import PretrainingArguments

    corpus = data_dir / "wikitext-2"
    return PretrainingArguments(
        model_type=model_type, config_overrides=overrides, train_file=str(corpus / "train.txt"),
        validation_file=str(corpus / "valid.txt"), tokenizer_name=str(tokenizer), max_seq_length=128,
        per_device_train_batch_size=32, learning_rate=1e-3, lr_scheduler_type="constant_with_warmup",
        num_warmup_steps=200, max_train_steps=steps, checkpointing_steps=checkpoint_every,
        eval_steps=checkpoint_every, max_eval_samples=512, seed=42, logging_steps=50, output_dir=output,
        disable_tqdm=True,
    )  # fmt: skip


def wikitext_tokenizer(data_dir: Path, folder: Path) -> Path:
    """The 8,000-token WordPiece tokenizer of WikiText-2's training file (trained once, then reused)."""
    from hf_variants.settings.tokenizer import TokenizerArguments
    from hf_variants.training import train_tokenizer

    if not (folder / "tokenizer.json").is_file():
        corpus = str(data_dir / "wikitext-2" / "train.txt")
        train_tokenizer.train_tokenizer(TokenizerArguments(train_file=corpus, vocab_size=8000, output_dir=folder))
    return folder


def pretrain(settings: PretrainingArguments) -> dict[str, Any]:
    """Run the pretraining engine (which resumes from the newest checkpoint of the same run) unless a run
    with these settings has finished in ``settings.output_dir``; its results."""
    from hf_variants.training import run_mlm

    done = settings.output_dir / "results.json"
    expected = run_mlm.requested_arguments(settings)
    if not (done.is_file() and run_mlm.recorded_arguments(load_json(done), done) == expected):
        run_mlm.run(settings)
    return load_json(done)


def checkpoint_record(checkpoint: Path, step: int) -> dict[str, Any]:
    """Tokens, seconds and validation perplexity of a ``run_mlm`` checkpoint (evaluated at ``step``)."""
    state = load_json(checkpoint / "training_state.json")
    evaluation = [row for row in state["logged"] if row["step"] == step and "perplexity" in row]
    if not evaluation:
        raise CheckpointError(f"{checkpoint}: no validation perplexity logged at step {step}.")
    return {"tokens": state["train_tokens"], "perplexity": evaluation[-1]["perplexity"],
            "train_seconds": state["train_seconds"]}  # fmt: skip


@dataclass(frozen=True)
class FineTuning:
    """The fine-tuning protocol shared by every budget (and recorded with the results)."""

    tasks: tuple[str, ...] = ("sst2", "cola", "stsb")
    seeds: tuple[int, ...] = (1, 2, 3)
    learning_rates: tuple[float, ...] = (1e-4, 3e-4, 1e-3)
    heldout_fraction: float = 0.1
    max_train_samples: int = 8000
    num_train_epochs: float = 3.0
    max_seq_length: int = 64
    batch_size: int = 32

    def run_settings(
        self, glue_dir: Path, model_dir: Path, task: str, learning_rate: float, seed: int, output_dir: Path, *,
        random_init: bool, heldout: bool,
    ) -> FineTuningRun:  # fmt: skip
        """The typed settings of one fine-tuning run (a held-out run when ``heldout``, its slice drawn with
        ``seed``) for :func:`hf_variants.training.run_glue.run`."""
        from transformers import TrainingArguments

        from hf_variants.settings.finetuning import DataTrainingArguments, ModelArguments, RunArguments

        held_out = {"heldout_fraction": self.heldout_fraction, "heldout_seed": seed} if heldout else {}
        return (
            ModelArguments(model_name_or_path=str(model_dir), random_init=random_init),
            DataTrainingArguments(
                task_name=task, glue_dir=str(glue_dir), max_seq_length=self.max_seq_length, pad_to_max_length=False,
                max_train_samples=self.max_train_samples, **held_out,
            ),
            TrainingArguments(
                output_dir=str(output_dir), do_train=True, do_eval=True, per_device_train_batch_size=self.batch_size,
                per_device_eval_batch_size=128, learning_rate=learning_rate, num_train_epochs=self.num_train_epochs,
                warmup_steps=0.1, weight_decay=0.01, seed=seed, save_strategy="no", report_to="none",
                disable_tqdm=True, log_level="warning", dataloader_pin_memory=False,
            ),
            RunArguments(print_logs=False),
        )  # fmt: skip


def export_checkpoint_model(checkpoint: Path, final_model: Path, destination: Path) -> Path:
    """A loadable model folder for one ``run_mlm`` checkpoint: the final model's config and the
    checkpoint's own weights and tokenizer. Refuses a checkpoint whose weights do not fit the config."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    model = AutoModelForMaskedLM.from_pretrained(final_model)
    weights = checkpoints.load_tensors(checkpoint / "model.safetensors")
    try:
        missing, unexpected = model.load_state_dict(weights, strict=False)
    except RuntimeError as error:  # a tensor of another shape
        message = f"{checkpoint}: its weights do not fit {final_model}'s config: {error}"
        raise CheckpointError(message) from None
    if missing or unexpected:
        raise CheckpointError(
            f"{checkpoint}: its weights do not fit {final_model}'s config (missing {missing[:5]}, "
            f"unexpected {unexpected[:5]})."
        )
    model.save_pretrained(destination)
    AutoTokenizer.from_pretrained(checkpoint / "tokenizer").save_pretrained(destination)
    return destination


def finished_run(record: Path, settings: FineTuningRun) -> dict[str, Any] | None:
    """The recorded results of a run with exactly these settings, or None when it has not run
    (:func:`~.records.record_for`). A record of other settings is an error naming the fields (a study repeated
    with other settings into the same folder), never reused. Fields that one transformers version has and the
    other lacks are not compared."""
    from hf_variants.training import run_glue

    return records.record_for(record, run_glue.requested_arguments(*settings),
                              lambda results: run_glue.recorded_arguments(results, record),
                              compare_missing=False)  # fmt: skip


def run_outcome(results: dict[str, Any], task: str) -> verdicts.RunOutcome:
    """A run's ``results.json`` as the protocol's verdicts read the engine's results
    (:data:`~hf_variants.lab.outcomes.ENGINE_RESULTS`). The studies' runs stop the study when they fail,
    and their records keep no loss curve and no chance level: one class, one constant score or an
    undefined correlation is what leaves a run out."""
    return read_outcome(results, ENGINE_RESULTS, task)


def held_out(task: str, results: dict[str, Any]) -> verdicts.HeldOutRun:
    """A held-out run's ``results.json`` as the protocol's rate choice reads it."""
    return run_outcome(results, task).held_out()


@dataclass
class Cell:
    """One model on one task: the rate each seed was trained at and the dev scores by seed of the runs that
    learned."""

    task: str
    learning_rates: dict[int, float]
    scores: dict[int, float]
    not_learned: list[int]

    @property
    def interval(self) -> Interval | None:
        return mean_interval(list(self.scores.values())) if self.scores else None


def cell_from_runs(task: str, learning_rates: dict[int, float], runs: dict[int, dict[str, Any]]) -> Cell:
    outcomes = {seed: run_outcome(results, task) for seed, results in runs.items()}
    scores = {seed: 100 * value for seed, value in verdicts.learned_values(outcomes).items()}
    return Cell(task, learning_rates, scores, sorted(seed for seed in runs if seed not in scores))


def difference(cell: Cell, reference: Cell) -> Interval | None:
    """Paired-by-seed difference ``cell − reference``, or None with fewer than two shared seeds."""
    return paired_difference_if_any(cell.scores, reference.scores)


@dataclass(frozen=True)
class ModelToTune:
    """A model folder to fine-tune (its weights, or its architecture from random initialisation)."""

    folder: Path
    random_init: bool = False


@dataclass(frozen=True)
class FineTuningJob:
    """Where a study's fine-tuning runs train and record (:func:`fine_tune`): each run in
    ``work_dir/<model>/<task>/<run>/``, its results in ``record_dir/<model>/<task>/<run>.json``."""

    protocol: FineTuning
    models: dict[str, ModelToTune]
    glue_dir: Path
    work_dir: Path
    record_dir: Path

    def settings(self, run: Run) -> FineTuningRun:
        model = self.models[run.model]
        return self.protocol.run_settings(self.glue_dir, model.folder, run.task, run.learning_rate, run.seed,
                                          self.work(run), random_init=model.random_init,
                                          heldout=run.heldout)  # fmt: skip

    def work(self, run: Run) -> Path:
        return self.work_dir / run.model / run.task / run.name

    def record(self, run: Run) -> Path:
        return self.record_dir / run.model / run.task / f"{run.name}.json"

    def train(self, run: Run) -> dict[str, Any]:
        """The run's recorded results, or the run trained now (in a worker of the lab's executor) and its
        ``results.json``."""
        from hf_variants.training import run_glue

        settings = self.settings(run)
        if (recorded := finished_run(self.record(run), settings)) is not None:
            return recorded
        run_glue.run(*settings)
        return load_json(self.work(run) / "results.json")


def fine_tune(
    protocol: FineTuning,
    models: dict[str, ModelToTune],
    glue_dir: Path,
    work_dir: Path,
    record_dir: Path,
    workers: int = 1,
    on_record: Callable[[Path], None] | None = None,
) -> dict[tuple[str, str], Cell]:
    """Fine-tune every model on every task through the lab's protocol (:func:`~hf_variants.lab.protocol.
    run_protocol`): per seed, the held-out runs, their choice, the final run. Each run's results are recorded as it
    ends (``on_record`` is called on each new record; the run's model is deleted, its results kept); recorded runs
    are read back, not run again. Returns ``{(model, task): Cell}``."""
    job = FineTuningJob(protocol, models, glue_dir, work_dir, record_dir)

    def finished(run: Run, results: dict[str, Any]) -> None:
        record = job.record(run)
        if not record.is_file():
            records.write_record(record, results, within=record_dir)
            (job.work(run) / "model.safetensors").unlink(missing_ok=True)  # keep the results, not the model
            if on_record is not None:
                on_record(record)

    outcomes = run_protocol([(name, seed) for seed in protocol.seeds for name in models], protocol.tasks,
                            protocol.learning_rates, job.train, held_out, pretrained=False, workers=workers,
                            finished=finished)  # fmt: skip
    cells = {}
    for name in models:
        for task in protocol.tasks:
            rates = {seed: outcomes.choices[name, task, seed][0] for seed in protocol.seeds}
            cells[name, task] = cell_from_runs(task, rates, outcomes.final_runs(name, task, protocol.seeds))
    return cells


def recorded_cells(record_dir: Path) -> dict[tuple[str, str], Cell]:
    """The cells of a study from its committed result files alone: ``{(model, task): Cell}`` for every
    ``<model>/<task>/`` folder (``<model>`` may be nested, e.g. ``mgk_bert/variant``) that holds seed runs,
    with the rate each seed run was trained at."""
    from hf_variants.training import run_glue

    cells = {}
    for task_folder in sorted({path.parent for path in record_dir.rglob("seed*.json")}):
        files = {int(p.stem.removeprefix("seed")): p for p in task_folder.glob("seed*.json")}
        runs = {seed: load_json(path) for seed, path in files.items()}
        rates = {seed: run_glue.recorded_arguments(runs[seed], path)["training"]["learning_rate"]
                 for seed, path in files.items()}  # fmt: skip
        name, task = task_folder.parent.relative_to(record_dir).as_posix(), task_folder.name
        cells[name, task] = cell_from_runs(task, dict(sorted(rates.items())), runs)
    return cells


def chance_scores(tasks: Sequence[str], glue_dir: Path) -> dict[str, float]:
    """What a model that did not learn scores on dev (×100): the majority share for a classification task
    scored by accuracy, 0 for a correlation."""
    from hf_variants.glue.data import load_glue
    from hf_variants.lab.statistics import majority_share

    return {task: 100 * majority_share(list(load_glue(task, glue_dir)["validation"]["label"]))
            if get_glue_task(task).headline_metric == "accuracy" else NO_SKILL[get_glue_task(task).headline_metric]
            for task in tasks}  # fmt: skip


# --------------------------------------------------------------------------------------------
# The budget study
# --------------------------------------------------------------------------------------------
def smallest_helpful_budget(cells: dict[tuple[int, str], Cell], anchor: str = "sst2") -> int | None:
    """The smallest budget whose paired difference from random initialisation (budget 0) lies above 0 on
    ``anchor`` and on at least one other task (the issue's bar); None if no budget does."""
    budgets = sorted({budget for budget, _ in cells if budget > 0})
    tasks = sorted({task for _, task in cells})
    for budget in budgets:
        above = {
            task for task in tasks
            if (budget, task) in cells and (0, task) in cells
            and (gain := difference(cells[budget, task], cells[0, task])) is not None and gain.low > 0
        }  # fmt: skip
        if anchor in above and len(above) >= 2:
            return budget
    return None


def difference_text(interval: Interval | None) -> str:
    """``+d [low, high]`` (bold: excludes 0); ``—`` without two paired seeds."""
    return "—" if interval is None else interval.difference_text()


def score_text(cell: Cell | None, chance: float | None) -> str:
    """Mean ± 95% interval (with the chosen rate), and the seeds that did not learn (with the chance score)."""
    if cell is None:
        return "not run yet"
    parts = [cell.interval.mean_text()] if cell.interval is not None else []
    if cell.not_learned:
        at_chance = "" if chance is None else f"; chance {chance:.1f}"
        parts.append(f"did not learn (seed {', '.join(map(str, cell.not_learned))}{at_chance})")
    rates = sorted(set(cell.learning_rates.values()))
    return "; ".join(parts) + f" (lr {', '.join(f'{rate:g}' for rate in rates)})"


def budget_table(
    cells: dict[tuple[int, str], Cell], pretraining: dict[int, dict[str, Any]], chance: dict[str, float]
) -> str:
    """One row per budget: steps, tokens seen, validation perplexity, and per task the dev mean ± 95%
    interval, then the paired difference from random initialisation [95% interval] (bold: excludes 0)."""
    tasks = task_order(cells)
    header = "| budget (steps) | tokens | MLM val. perplexity | " + " | ".join(
        f"{t} ({get_glue_task(t).headline_metric}): dev | − random init" for t in tasks
    )
    lines = [header + " |", "|---:|---:|---:|" + "---|---:|" * len(tasks)]
    for budget in sorted({b for b, _ in cells}):
        info = pretraining.get(budget, {})
        tokens = f"{info['tokens']:,}" if "tokens" in info else "0"
        perplexity = f"{info['perplexity']:.0f}" if "perplexity" in info else "—"
        row = [f"{budget:,}" if budget else "0 (random init)", tokens, perplexity]
        for task in tasks:
            cell, random_init = cells.get((budget, task)), cells.get((0, task))
            gain = difference(cell, random_init) if budget and cell and random_init else None
            row += [score_text(cell, chance.get(task)), "" if not budget else difference_text(gain)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# The variant comparison
# --------------------------------------------------------------------------------------------
def pair_overrides(spec: str, sizes: str, control: bool) -> tuple[str, str]:
    """``(model_type, --config_overrides)`` of a pair's variant (``spec`` = ``model_type[:key=value,...]``)
    or of its matched control, at ``sizes``."""
    from hf_variants.core.overrides import format_overrides, parse_overrides
    from hf_variants.lab.spec import ModelSpec

    variant = ModelSpec.from_text(spec)
    model = variant.control() if control else variant
    return variant.model_type, format_overrides(model.fields(parse_overrides(sizes)))


def pair_table(
    cells: dict[tuple[str, str], Cell],
    pairs: Sequence[str],
    tasks: Sequence[str],
    perplexity: dict[str, float],
    chance: dict[str, float],
) -> str:
    """Per task and pair: variant and control dev scores (mean ± 95% interval, chosen rate), the paired
    difference [95% interval] (bold: excludes 0) and both models' MLM validation perplexity.
    ``cells`` and ``perplexity`` are keyed ``<pair folder>/variant`` and ``<pair folder>/control``."""
    from hf_variants.lab.spec import spec_folder
    from hf_variants.lab.tables import PAIR_LABELS

    lines = ["| task (metric) | comparison | variant dev | control dev | variant − control (paired, 95% CI) "
             "| MLM perplexity (variant / control) |", "|---|---|---|---|---:|---|"]  # fmt: skip
    for task in tasks:
        for spec in pairs:
            folder = spec_folder(spec)
            variant, control = cells.get((f"{folder}/variant", task)), cells.get((f"{folder}/control", task))
            gain = difference(variant, control) if variant and control else None
            ppl = " / ".join(f"{perplexity[f'{folder}/{role}']:.0f}" if f"{folder}/{role}" in perplexity else "—"
                             for role in ("variant", "control"))  # fmt: skip
            lines.append(f"| {task} ({get_glue_task(task).headline_metric}) | {PAIR_LABELS.get(spec, spec)} | "
                         f"{score_text(variant, chance.get(task))} | {score_text(control, chance.get(task))} | "
                         f"{difference_text(gain)} | {ppl} |")  # fmt: skip
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Tables from the committed files (the docs renderer)
# --------------------------------------------------------------------------------------------
def task_order(cells: dict[tuple[Any, str], Cell]) -> list[str]:
    """The tasks of ``cells``, SST-2 (the anchor task) first, then alphabetical."""
    return sorted({task for _, task in cells}, key=lambda t: (t != "sst2", t))


def recorded_chance(folder: Path) -> dict[str, float]:
    """The study's ``chance.json`` (empty before the study wrote it)."""
    return load_json(folder / "chance.json") if (folder / "chance.json").is_file() else {}


def budget_study_table(folder: Path) -> str:
    """The budget study's table and verdict, from ``folder``'s committed result files."""
    if not (folder / "pretraining.json").is_file():
        return "No pretraining result committed yet.\n"
    budgets = {int(b): info for b, info in load_json(folder / "pretraining.json")["budgets"].items()}
    recorded = recorded_cells(folder / "runs")
    cells = {(int(name.removeprefix("step")), task): cell for (name, task), cell in recorded.items()}
    if not cells:
        return "Pretrained; no fine-tuning run finished yet.\n"
    chance = recorded_chance(folder)
    helpful = smallest_helpful_budget(cells)
    bar = "beats random initialisation on SST-2 and another task (paired 95% interval above 0)"
    verdict = f"No budget here {bar}." if helpful is None else f"Smallest budget that {bar}: **{helpful:,} steps**."
    return f"{budget_table(cells, budgets, chance)}\n{verdict}\n"


def pair_study_table(folder: Path, pairs: Sequence[str]) -> str:
    """The variant comparison's table, from ``folder``'s committed result files."""
    from hf_variants.lab.spec import spec_folder

    cells = recorded_cells(folder) if folder.is_dir() else {}
    if not cells:
        return "Not run yet.\n"
    perplexity = {}
    for spec in pairs:
        for role in ("variant", "control"):
            record = folder / spec_folder(spec) / role / "pretraining.json"
            if record.is_file():
                perplexity[f"{spec_folder(spec)}/{role}"] = load_json(record)["perplexity"]
    chance = recorded_chance(folder)
    return pair_table(cells, pairs, task_order(cells), perplexity, chance)
