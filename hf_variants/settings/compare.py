"""Settings of ``hf-variants compare``, the main job (:func:`hf_variants.lab.compare.main`): one
field per flag, declared once, with the budgets of ``--preset`` as data."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .arguments import Settings, argument_parser, parse_into, setting
from .checks import above, at_least, model_seed_count, open_interval, seed_range, task_margin

#: The environment variable naming a local data folder (wikitext-2/ and glue/), read without --data_dir.
DATA_ENV = "HF_VARIANTS_DATA"
#: The BERT control from this package's core first (the baseline), then the four variants. ``bert``
#: (``transformers``' own BertForMaskedLM) can be added as an external reference.
DEFAULT_MODELS = ("bert_control", "macaron_bert", "mgk_bert", "transject", "node_transformer")

DESCRIPTION = """\
The main job: pretrain every chosen model and its matched control (the same model with only its idea
turned off) at one size with MLM, fine-tune each with several seeds at a learning rate chosen on
held-out training data, give each variant-vs-control verdict as a seed-paired interval,
reload everything through the Auto classes, measure, and write a report folder (report.md,
results.json, PNG figures).

Data: the package's embedded synthetic language and its tasks (attractor_number by default;
recall, subject_number, agreement), unless asked for otherwise: --data_dir (wikitext-2/ and glue/ in the GLUE
TSV layout), else the HF_VARIANTS_DATA environment variable (a folder of the same layout), else
--from_hub. The Hub is never tried unless asked for.

Two calibration models are added (--no_calibration_controls leaves them out): the BERT control without
token mixing (the positive control, which must come out below) and initialised from other seeds on the
same data (the negative control, which must hold 0); the report's first line says whether the budget can
be trusted.

--preset picks the budget: 'minutes' (the default: minutes on a 2-core CPU, every variant against its
control at hidden size 64 over 12 seeds (a power computation: docs/main-job.md), the N-ODE Transformer
and its control over 6 (its own budget), at one learning rate common to both sides), 'power'
(the earlier default budget, hidden size 128, over 16 seeds, N-ODE left out and MLK added, final runs at
every swept rate: about an hour on a 2-core CPU), 'full' (the
larger, slower comparison for real data: 2 layers, 200 MLM steps, 600 fine-tuning steps, three learning
rates) or 'recall' (the embedded recall task, which needs two layers and more examples than the default's
budget: see docs/main-job.md). With several learning rates each seed chooses each model's own on held-out
training data. Any flag below overrides its
preset's value.
"""

#: The equivalence margin when none is declared, in points of the task's metric. "Equivalent within ±m" means the
#: two one-sided tests at 5% (the 90% interval of the seed-paired difference inside ±m), Holm-adjusted over the
#: report's pairs.
DEFAULT_EQUIVALENCE_MARGIN = 2.0
#: Why the default margin is what it is: the smallest effect a user would act on.
DEFAULT_MARGIN_REASON = (
    "the smallest difference a user would act on: swapping the BERT control for a research variant costs its extra "
    "code, its slower training and a second set of tuned settings, which a gain under 2 points of accuracy does not "
    "pay for; a loss under 2 points is too small to rule a variant out for its other merits"
)
#: When the default margin and its reason were declared: before every run judged by it (older records say so).
DEFAULT_MARGIN_DECLARED = "2026-12-06"

#: Fine-tuning steps of the recall preset (calibrated: enough for the BERT control to learn the task; docs "The main
#: job").
RECALL_STEPS = 1500

#: The variants of the powered preset: every one but N-ODE (whose solver takes 10–20× a step's time), and MGK's
#: linear form MLK.
POWER_MODELS = ("bert_control", "macaron_bert", "mgk_bert", "mgk_bert:attention_type=mlk", "transject")

#: The seeds of the default budget: with them a comparison at its budget passes its calibration (the negative control
#: equivalent within ±2, the positive control below) with probability ≥ 90%, at the spreads its A/A record measured on
#: the default data and on average over the data draws of the default command's committed runs at other ``--seed``
#: values (docs "The main job": "How often the default calibrates", rendered from those records; a test holds them
#: together).
MINUTES_SEEDS = 12
#: The N-ODE Transformer's own budget in the default: its adaptive solver makes it the long pole, so it and its
#: control run fewer seeds, and the report says so (``--model_seeds``).
MINUTES_NODE_SEEDS = 6
#: Fine-tuning steps of the default budget: at 200 a seed's run that leaves the task's early loss plateau late ends
#: far below the others, and on some data draws (``--seed``) those runs doubled the A/A spread; at 300 they finish
#: learning (docs "The main job").
MINUTES_FINETUNE_STEPS = 300

#: The budgets of ``--preset``: flag name → value. Flags set on the command line override them.
PRESETS: dict[str, dict[str, object]] = {
    "minutes": {
        "hidden_size": 64, "num_layers": 1, "max_seq_length": 32, "pretrain_steps": 100,
        "finetune_steps": MINUTES_FINETUNE_STEPS, "finetune_learning_rates": [1e-3], "num_seeds": MINUTES_SEEDS,
        "model_seeds": [f"node_transformer={MINUTES_NODE_SEEDS}"],
    },
    "power": {
        "models": list(POWER_MODELS), "hidden_size": 128, "num_layers": 1, "max_seq_length": 32,
        "pretrain_steps": 100, "finetune_steps": 200, "finetune_learning_rates": [1e-3, 3e-3], "num_seeds": 16,
        "final_runs_at_every_rate": True,
    },
    "full": {
        "hidden_size": 128, "num_layers": 2, "max_seq_length": 64, "pretrain_steps": 200, "finetune_steps": 600,
        "finetune_learning_rates": [3e-4, 1e-3, 3e-3], "num_seeds": 3,
    },
    "recall": {
        "hidden_size": 128, "num_layers": 2, "max_seq_length": 32, "pretrain_steps": 100,
        "finetune_steps": RECALL_STEPS, "finetune_learning_rates": [1e-3, 3e-3], "num_seeds": 3, "tasks": ["recall"],
    },
}  # fmt: skip
DEFAULT_PRESET = "minutes"
#: The seeds of a default-size comparison, the group size of the A/A check (a report's ``aa_check_lines``).
DEFAULT_SEEDS = PRESETS[DEFAULT_PRESET]["num_seeds"]


#: The fields a preset may set (each left ``None`` by the user takes its preset's value).
PRESET_FIELDS = tuple(dict.fromkeys(name for preset in PRESETS.values() for name in preset))


@dataclass(kw_only=True)
class CompareArguments(Settings):
    """``hf-variants compare``'s settings, typed. A field of :data:`PRESET_FIELDS` left ``None`` takes its
    value from ``preset``; every value meets its flag's check, from a command line or from Python."""

    preset: str = setting(
        DEFAULT_PRESET, choices=sorted(PRESETS),
        help="The budget: "
        + "; ".join(f"'{name}': " + ", ".join(f"{k}={v}" for k, v in kv.items()) for name, kv in PRESETS.items())
        + ".",
    )  # fmt: skip
    models: list[str] | None = setting(
        None,
        help="Model types, each optionally with config fields: e.g. macaron_bert:attention_type=mgk or "
        "node_transformer:attention_type=mlk. Default: the BERT control and the four variants (the 'power' preset: "
        "N-ODE left out, MLK added); add 'bert' for transformers' BertForMaskedLM as an external reference.",
    )
    no_matched_controls: bool = setting(
        False, help="Do not add each variant's matched control (the same model with only its idea turned off, at "
        "the same sizes) after it.",
    )  # fmt: skip
    no_calibration_controls: bool = setting(
        False, help="Do not add the two models that show what the comparison can detect: the BERT control without "
        "token mixing (positive control: it must come out below) and initialised from other seeds on the same data "
        "(negative control: it must hold 0).",
    )  # fmt: skip
    output_dir: Path = setting(Path("outputs/compare"), help="The report folder.")
    overwrite_output_dir: bool = setting(
        False, help="Replace another comparison in --output_dir (its files and every model's runs); without it a "
        "folder holding another comparison is refused, and one holding this comparison continues it.",
    )  # fmt: skip
    data_dir: Path | None = setting(None, help="Folder with wikitext-2/ and glue/ (GLUE TSV layout).")
    tasks: list[str] | None = setting(
        None, help="GLUE tasks (default sst2 with --data_dir, $HF_VARIANTS_DATA or --from_hub) or embedded tasks: "
        "attractor_number (default), recall, subject_number, agreement.",
    )  # fmt: skip
    from_hub: bool = setting(
        False, help="Take WikiText-2 and the GLUE tasks from the Hub (never tried otherwise; an error when it does "
        "not answer).",
    )  # fmt: skip
    attractors: int | None = setting(
        None, parse=at_least(0),
        help="Difficulty of the embedded attractor_number task: the most phrases, each with a noun of either "
        "number, between the subject and its verb (default: the level calibrated in docs/main-job.md).",
    )  # fmt: skip
    recall_pairs: int | None = setting(
        None, parse=at_least(1),
        help="Difficulty of the embedded recall task: key–value pairs before the query (default: the level "
        "calibrated in docs/main-job.md).",
    )  # fmt: skip
    tokenizer: str | None = setting(None, help="Use this tokenizer (path or Hub name) instead of training one.")
    vocab_size: int | None = setting(
        None, parse=at_least(16), help="Of the trained tokenizer (default 8000; 200 synthetic, 360 with recall)."
    )
    hidden_size: int | None = setting(None, parse=at_least(1), help="Hidden size of every model.")
    num_layers: int | None = setting(None, parse=at_least(1), help="Layers (blocks) of every model.")
    head_size: int = setting(32, parse=at_least(1), help="Width of one attention head.")
    node_tolerance: float = setting(1e-3, parse=above(0), help="rtol = atol of the N-ODE solver.")
    max_seq_length: int | None = setting(None, parse=at_least(3), help="Tokens per example.")
    pretrain_on: str = setting(
        "corpus", choices=("corpus", "task"),
        help="What each model's MLM pretraining reads: the data's corpus (WikiText-2, the synthetic language), or "
        "'task': the fine-tuning tasks' own training inputs without the held-out slice (self-pretraining; no dev, "
        "no labels).",
    )  # fmt: skip
    pretrain_steps: int | None = setting(None, parse=at_least(1), help="MLM steps per model.")
    pretrain_seconds: float | None = setting(None, parse=above(0), help="Also stop pretraining after this much time.")
    pretrain_batch_size: int = setting(16, parse=at_least(1), help="MLM examples per step.")
    pretrain_learning_rate: float = setting(1e-3, parse=above(0), help="MLM learning rate.")
    max_pretrain_eval_samples: int = setting(256, parse=at_least(1), help="MLM validation examples.")
    finetune_steps: int | None = setting(None, parse=at_least(1), help="Fine-tuning steps per run.")
    finetune_batch_size: int = setting(32, parse=at_least(1), help="Fine-tuning examples per step.")
    finetune_learning_rates: list[float] | None = setting(
        None, parse=above(0), aliases=("--finetune_learning_rate",),
        help="Fine-tuning learning rates; with more than one, each model's is chosen per task by its score on a "
        "held-out tenth of the training split (the dev set is seen only by the final runs).",
    )  # fmt: skip
    final_runs_at_every_rate: bool | None = setting(
        None, help="Run the final runs at every --finetune_learning_rates value, not only at the chosen one: the "
        "report then gives each pair at every common rate beside its chosen-rate verdict (on in the 'power' "
        "preset).",
    )  # fmt: skip
    num_seeds: int | None = setting(
        None, parse=at_least(1),
        help="Fine-tuning runs per model and task at the chosen learning rate, with seeds --seed, --seed + 1, …; "
        "each variant-vs-control verdict is the paired interval over them.",
    )  # fmt: skip
    model_seeds: list[str] | None = setting(
        None, parse=model_seed_count(),
        help="Fewer seeds for a slow model and its matched control: MODEL=N entries, each running the first N of "
        "the seeds (at most --num_seeds), its own budget, which the report states ('minutes' preset: "
        f"node_transformer={MINUTES_NODE_SEEDS}, its adaptive solver being the long pole).",
    )  # fmt: skip
    equivalence_margin: list[str] = setting(
        default_factory=lambda: [f"{DEFAULT_EQUIVALENCE_MARGIN:g}"], parse=task_margin(),
        help="The margin, in points of a task's metric, within which a variant counts as equivalent to its control "
        "(two one-sided tests at 5%%, Holm-adjusted over the report's pairs); declared before the run, kept in the "
        "report folder's fingerprint (a resume with another margin is refused) and printed in the report. One number "
        f"for every task, or task=number entries (default {DEFAULT_EQUIVALENCE_MARGIN:g}: the smallest difference a "
        "user would act on; docs \"Concepts\").",
    )  # fmt: skip
    heldout_fraction: float = setting(
        0.1, parse=open_interval(0, 1), help="Share of the training split held out for choosing the learning rate."
    )
    analysis_sentences: int = setting(32, parse=at_least(1), help="Dev sentences the analysis reads.")
    seed: int = setting(42, parse=seed_range(), help="Seed of data, initialisation and masks.")
    workers: int = setting(
        2, parse=at_least(1),
        help="Runs trained side by side (each on its share of the CPU threads); 1 runs them one after another in "
        "this process.",
    )  # fmt: skip
    disable_tqdm: bool = setting(False, help="No progress bars.")

    def __post_init__(self) -> None:
        if self.preset in PRESETS:
            for name, value in PRESETS[self.preset].items():
                if getattr(self, name) is None:
                    setattr(self, name, list(value) if isinstance(value, list) else value)
        if self.models is None:
            self.models = list(DEFAULT_MODELS)
        if self.final_runs_at_every_rate is None:
            self.final_runs_at_every_rate = False
        inert = PRESETS.get(self.preset, {}).get("model_seeds", [])  # a preset's entry for a model not asked for
        self.model_seeds = [entry for entry in self.model_seeds or []
                            if entry not in inert or entry.rpartition("=")[0] in self.model_names()] or None
        super().__post_init__()

    def problems(self) -> list[str]:
        rates = self.finetune_learning_rates or []
        if len(set(rates)) != len(rates):
            return [f"argument --finetune_learning_rates: needs distinct rates, got {rates}"]
        named = [entry.rpartition("=")[0] for entry in self.equivalence_margin if "=" in entry]
        if len(set(named)) != len(named) or len(self.equivalence_margin) - len(named) > 1:
            return [f"argument --equivalence_margin: names a task, or gives every task's margin, twice: "
                    f"{self.equivalence_margin}"]  # fmt: skip
        unknown = [entry for entry in self.model_seeds or [] if entry.rpartition("=")[0] not in self.model_names()]
        if unknown:
            return [f"argument --model_seeds: {', '.join(unknown)} names no model of --models "
                    f"({', '.join(self.model_names())})"]  # fmt: skip
        return []

    def model_names(self) -> list[str]:
        """The names of ``models`` (as written, or the specs' names once parsed)."""
        return [model if isinstance(model, str) else model.name for model in self.models or []]

    def seeds_of(self, model: str) -> int:
        """How many seeds ``model`` (a variant's name; its matched control runs the same) runs: its ``--model_seeds``
        entry, at most ``num_seeds``, else ``num_seeds``."""
        return min(int(keyed(self.model_seeds).get(model, self.num_seeds)), self.num_seeds)

    def margin_reason(self) -> str:
        """Why the margins are what they are: the default's reason, or that ``--equivalence_margin`` declared them."""
        if self.equivalence_margin == [f"{DEFAULT_EQUIVALENCE_MARGIN:g}"]:
            return DEFAULT_MARGIN_REASON
        return "declared with --equivalence_margin"

    def margin(self, task: str) -> float:
        """The equivalence margin of ``task`` in points: its ``task=number`` entry, else the entry for every task,
        else :data:`DEFAULT_EQUIVALENCE_MARGIN`."""
        return equivalence_margin(vars(self), task)


def declared_margins(args: CompareArguments, tasks: list[str], declared_on: str) -> dict[str, dict[str, object]]:
    """Task → its margin in points, with its reason and the date it was declared, as a comparison records it before
    its first run: the default's reason and date (:data:`DEFAULT_MARGIN_REASON`), or, for a margin given with
    ``--equivalence_margin``, that flag and ``declared_on`` (the day the comparison started)."""
    default = args.margin_reason() == DEFAULT_MARGIN_REASON
    return {task: {"points": args.margin(task), "reason": args.margin_reason(),
                   "declared": DEFAULT_MARGIN_DECLARED if default else declared_on}
            for task in tasks}  # fmt: skip


def keyed(entries: list[str] | None) -> dict[str, str]:
    """``key=value`` entries of a list setting (``--equivalence_margin``, ``--model_seeds``) by key; an entry without
    a key under ``""``."""
    return dict(entry.rpartition("=")[::2] for entry in entries or [])


def equivalence_margin(settings: dict, task: str) -> float:
    """The margin of ``task`` in points from a comparison's settings (a :class:`CompareArguments`' fields, or
    those a results file records; a record without the setting gets the default)."""
    entries = keyed(settings.get("equivalence_margin"))
    return float(entries.get(task, entries.get("", DEFAULT_EQUIVALENCE_MARGIN)))


def build_parser(prog: str = "hf-variants compare"):
    """The command line, generated from :class:`CompareArguments`."""
    return argument_parser(CompareArguments, prog, DESCRIPTION)


def parse_args(argv: list[str] | None = None, prog: str = "hf-variants compare") -> CompareArguments:
    """The command line as typed settings, every flag it leaves unset taken from ``--preset``."""
    return parse_into(CompareArguments, build_parser(prog), argv)
