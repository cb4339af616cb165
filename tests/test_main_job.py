"""The main job's embedded task, calibration controls and the naming of every run left out
(``hf_variants.synthetic.synthetic_attractor_number``, ``hf_variants.lab.compare``)."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats as scipy_stats

from hf_variants.lab import compare, data_sources, evidence, report
from hf_variants.synthetic import _PREPOSITIONS, attractor_sentence, synthetic_attractor_number

from .helpers import REPO_ROOT, load_script

NOUNS = {"cat", "dog", "bird", "horse", "goat", "teacher", "doctor", "farmer", "writer"}


def is_noun(word: str) -> bool:
    return word.removesuffix("s") in NOUNS


def is_plural(noun: str) -> bool:
    return noun.endswith("s")


def subject_by_parsing(sentence: str) -> str:
    """The subject noun, found independently of the generator: skip the fronted prepositional phrases
    (``preposition the [adjective] noun``); the subject is then the first noun."""
    words, position = sentence.split(), 0
    while words[position] in _PREPOSITIONS:
        position += 1
        while not is_noun(words[position]):
            position += 1
        position += 1
    return next(word for word in words[position:] if is_noun(word))


def test_attractor_labels_are_the_subject_s_number_on_hand_checked_sentences() -> None:
    rng = random.Random(0)
    sentences = [attractor_sentence(rng, 3) for _ in range(400)]
    for sentence, plural in sentences:
        assert is_plural(subject_by_parsing(sentence)) == plural, sentence
    # by hand: fronted phrases before the subject, attractors after it, a numberless past-tense verb
    for sentence, plural in [
        ("near the dogs the cat that the birds watched chased the ball .", False),
        ("behind the doctor with the writers the busy teachers read the book .", True),
        ("the goats that followed the horse with the cats watched the shadows .", True),
    ]:
        assert is_plural(subject_by_parsing(sentence)) == plural


def test_attractor_task_is_deterministic_balanced_and_harder_with_the_knob() -> None:
    assert synthetic_attractor_number(50, seed=3) == synthetic_attractor_number(50, seed=3)
    assert synthetic_attractor_number(50, seed=3) != synthetic_attractor_number(50, seed=4)
    rows = synthetic_attractor_number(2000, seed=1, attractors=3)
    assert 0.45 < sum(label for _, label in rows) / len(rows) < 0.55
    easy = synthetic_attractor_number(500, seed=1, attractors=0)
    assert max(len(s.split()) for s, _ in easy) < max(len(s.split()) for s, _ in rows)


def heuristic_accuracy(rows: list[tuple[str, int]], guess) -> float:
    return sum(guess(sentence) == label for sentence, label in rows) / len(rows)


def test_neither_a_bag_of_words_nor_the_nearest_noun_decides_it() -> None:
    """Every other noun's number is independent of the subject's: counting plural nouns, taking the
    noun nearest the verb, or the first noun of the sentence all stay far from what parsing gets (100%)."""
    rows = synthetic_attractor_number(2000, seed=2, attractors=3)

    def noun_numbers(sentence: str) -> list[bool]:
        return [is_plural(word) for word in sentence.split() if is_noun(word)]

    def majority(sentence: str) -> int:
        numbers = noun_numbers(sentence)
        return int(sum(numbers) * 2 > len(numbers))

    def nearest_to_verb(sentence: str) -> int:
        words = sentence.split()
        verb = max(i for i, w in enumerate(words) if w in ("chased", "watched", "followed", "read", "wrote", "bought"))
        return int(is_plural(next(word for word in reversed(words[:verb]) if is_noun(word))))

    def first_noun(sentence: str) -> int:
        return int(noun_numbers(sentence)[0])

    for guess in (majority, nearest_to_verb, first_noun):
        assert heuristic_accuracy(rows, guess) < 0.8, guess.__name__
    assert heuristic_accuracy(rows, lambda s: int(is_plural(subject_by_parsing(s)))) == 1.0


def test_embedded_data_has_no_dev_sentence_in_training(tmp_path: Path) -> None:
    source = data_sources.synthetic_source(tmp_path, seed=5, tasks=["attractor_number", "subject_number"],
                                          within=tmp_path)
    for task in source.tasks:
        with open(source.tasks[task]["train_file"], newline="") as handle:
            train = {row["sentence"] for row in csv.DictReader(handle)}
        with open(source.tasks[task]["validation_file"], newline="") as handle:
            dev = [row["sentence"] for row in csv.DictReader(handle)]
        assert len(dev) == data_sources.DEV_EXAMPLES and len(train) > 1500 and not train & set(dev), task
    corpus = (tmp_path / "train.txt").read_text().splitlines()
    assert len(corpus) == 6000 and sum(" that " in line or line.split()[0] in _PREPOSITIONS for line in corpus) > 1000


def runs(values: list[float]) -> dict:
    """Final runs as compare records them (400 dev examples, a falling loss curve)."""
    curve = [{"step": 5 * (i + 1), "loss": loss} for i, loss in enumerate([0.69, 0.5, 0.3, 0.2, 0.1, 0.05])]
    return {str(42 + i): {"metric": "accuracy", "value": v, "status": "learned" if v > 0.6 else "at chance",
                          "curve": curve, "did_not_learn": False, "chance": 0.5, "dev_examples": 400}
            for i, v in enumerate(values)}  # fmt: skip


def calibrated_results(positive: list[float], replica: list[float]) -> dict:
    task = "attractor_number"
    model = lambda values: {"control_of": None, "fine_tuning": {task: {"metric": "accuracy", "runs": runs(values)}}}  # noqa: E731
    return {
        "tasks": [task], "data": {"kind": "synthetic"}, "settings": {},
        "calibration": {"baseline": "bert_control", "negative": "bert_control (other seeds)",
                        "positive": "bert_control:attention_type=mean", "positive_tasks": [task]},
        "models": {"bert_control": model([0.85, 0.88, 0.86]), "bert_control:attention_type=mean": model(positive),
                   "bert_control (other seeds)": model(replica)},
    }  # fmt: skip


def test_the_first_line_says_whether_the_calibration_controls_passed() -> None:
    """Calibrated: the positive control below the baseline and the negative control equivalent to it within the
    default ±2-point margin (differences +0.5, −0.5, +0.5 points: 90% interval [−0.8, +1.1])."""
    good = report.trust_lines(calibrated_results([0.55, 0.58, 0.52], [0.855, 0.875, 0.865]))
    assert good[0].startswith("**Calibrated:**")
    # the positive control's runs at chance count (that is what it shows): -31 points, below
    assert "below its control: **-31.3" in "\n".join(good) and "Below, as it must be." in "\n".join(good)
    assert "equivalent within ±2.0 points" in "\n".join(good)
    assert "Equivalent within the margin, as it must be." in "\n".join(good)
    undetected = report.trust_lines(calibrated_results([0.80, 0.90, 0.85], [0.855, 0.875, 0.865]))
    assert undetected[0].startswith("**This budget cannot be trusted:** the positive control on attractor_number "
                                    "was not detected")  # fmt: skip
    # differences +1, −1, +2 points hold 0 but their 90% interval [−1.9, +3.2] is not inside ±2: not calibrated
    noisy = report.trust_lines(calibrated_results([0.55, 0.58, 0.52], [0.86, 0.87, 0.88]))
    assert noisy[0].startswith("**This budget cannot be trusted:** the negative control on attractor_number "
                               "was not equivalent (not resolved: +0.7 [-3.1, +4.5]")  # fmt: skip
    drifting = report.trust_lines(calibrated_results([0.55, 0.58, 0.52], [0.95, 0.97, 0.96]))
    assert "the negative control on attractor_number was not equivalent (above its control" in drifting[0]
    assert report.trust_lines({"tasks": ["x"], "models": {}, "calibration": {}})[0].startswith("No calibration")


def test_the_calibration_outlook_is_the_chance_of_passing_at_the_measured_spreads() -> None:
    """From the record's own spreads: with the A/A differences +1, −1, +2 points (s = 1.53) and the positive control
    far below, three seeds pass with the probability that two one-sided tests call such a null pair equivalent within
    ±2 (checked against simulated seed sets), and the seeds named are the first at which that probability, times the
    positive control's power, reaches 90%."""
    from hf_variants.lab import statistics

    results = calibrated_results([0.55, 0.58, 0.52], [0.86, 0.87, 0.88])
    text = report.calibration_outlook(results, "attractor_number")
    aa_sd = float(np.std([1.0, -1.0, 2.0], ddof=1)) / 100
    values = np.random.default_rng(1).normal(0.0, aa_sd, (200_000, 3))
    half = scipy_stats.t.ppf(0.95, 2) * values.std(axis=1, ddof=1) / np.sqrt(3)
    simulated = np.mean(np.abs(values.mean(axis=1)) + half < 0.02)
    probability = evidence.calibration_probability(aa_sd, -0.31, 0.03, 3, 0.02)
    assert probability == pytest.approx(simulated, abs=0.01)  # the positive control is found almost surely
    assert f"a comparison with 3 seeds passes its calibration with probability {probability:.0%}" in text
    needed = next(n for n in range(2, 50) if statistics.equivalence_probability(aa_sd, n, 0.02) >= 0.9)
    assert f"and {needed} seeds would pass it with 90%" in text
    assert report.calibration_outlook({**results, "calibration": {}}, "attractor_number") == ""
    at_six = evidence.calibration_probability(aa_sd, -0.31, 0.03, 6, 0.02)  # another seed count than the record's
    assert (f"a comparison with 6 seeds passes its calibration with probability {at_six:.0%}"
            in report.calibration_outlook(results, "attractor_number", seeds=6))  # fmt: skip


def test_the_default_seeds_calibrate_nine_times_in_ten_on_the_committed_records() -> None:
    """The default's seed count is the power computation it claims, from records made at the default budget: at the
    spreads of the A/A record (≥ 48 seeds, judged in groups of the default's size) and on average over the data
    draws of the committed default runs (each at the spreads its own run measured), a default comparison passes its
    calibration with probability ≥ 90%."""
    import json

    from hf_variants.settings.compare import DEFAULT_SEEDS, PRESETS

    def record(name: str) -> dict:
        return json.loads((REPO_ROOT / "experiments" / "compare" / name / "results.json").read_text(encoding="utf-8"))

    aa, runs = record("aa"), [record(name) for name in load_script("tools/findings").DEFAULT_RUNS]
    budget = {name: value for name, value in PRESETS["minutes"].items() if name not in ("num_seeds", "model_seeds")}
    for results in (aa, *runs):
        assert {name: results["settings"][name] for name in budget} == budget
        assert evidence.default_seeds(results) == DEFAULT_SEEDS
    assert all(results["settings"]["num_seeds"] == DEFAULT_SEEDS for results in runs)
    assert len({results["settings"]["seed"] for results in runs}) == len(runs)  # four data draws
    assert len(aa["models"]["bert_control"]["pretraining_runs"]) >= 48
    for task in aa["tasks"]:
        assert evidence.calibration_outlook_of(aa, task, seeds=DEFAULT_SEEDS).probability >= evidence.CALIBRATION_TARGET
        chances = evidence.calibration_across_draws(runs, task, DEFAULT_SEEDS)
        assert sum(chances) / len(chances) >= evidence.CALIBRATION_TARGET


def test_the_report_says_what_its_negative_control_shared_with_the_baseline() -> None:
    """A record made under the shared-data rule says it from the record itself; an older record, without it, says
    that its negative control drew its data from its own seeds too."""
    from hf_variants.lab.spec import SHARED_DATA_RULE, with_calibration_controls

    results = calibrated_results([0.55, 0.58, 0.52], [0.855, 0.875, 0.865])
    older = "\n".join(report.trust_lines(results))
    assert "The negative control is the BERT control under other seeds for everything" in older
    _, calibration = with_calibration_controls([], ["attractor_number"])
    assert calibration["negative_shares"] == SHARED_DATA_RULE
    current = "\n".join(report.trust_lines({**results, "calibration": {**results["calibration"], **calibration}}))
    assert f"The negative control is {SHARED_DATA_RULE}." in current and "older rule" not in current


def test_a_held_out_run_stopped_by_a_non_finite_gradient_is_named_in_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NaN injected into the loss of the held-out run at one rate: the engine stops it (a real
    NonFiniteStepError), the other rate is chosen, and the report names the run, its cause and step."""
    from transformers import Trainer

    original = Trainer.compute_loss  # beneath the engine's check, where the model's loss is computed

    def nan_in_one_held_out_run(self, model, inputs, *args, **kwargs):
        loss = original(self, model, inputs, *args, **kwargs)
        loss_value = loss[0] if isinstance(loss, tuple) else loss
        if "sweep-lr0.001" in self.args.output_dir and self.state.global_step == 2:
            loss_value = loss_value * float("nan")
        return (loss_value, *loss[1:]) if isinstance(loss, tuple) else loss_value

    monkeypatch.setattr(Trainer, "compute_loss", nan_in_one_held_out_run)
    monkeypatch.delenv(compare.DATA_ENV, raising=False)
    results = compare.main([
        "--output_dir", str(tmp_path), "--models", "bert_control", "--hidden_size", "32", "--head_size", "16",
        "--pretrain_steps", "4", "--finetune_steps", "6", "--finetune_learning_rates", "3e-4", "1e-3",
        "--pretrain_batch_size", "8", "--finetune_batch_size", "8", "--analysis_sentences", "2", "--num_seeds", "2",
        "--workers", "1", "--disable_tqdm", "--no_calibration_controls",
    ])  # fmt: skip
    tuned = results["models"]["bert_control"]["fine_tuning"][data_sources.SYNTHETIC_TASK]
    assert tuned["learning_rates"] == {"42": 3e-4, "43": 3e-4}  # each seed's choice
    assert all(scores["0.001"] is None for scores in tuned["heldout_scores"].values())
    report = (tmp_path / "report.md").read_text()
    left_out = report.split("## Runs left out")[1].split("##")[0]
    for seed in (42, 43):
        assert (f"- bert_control, attractor_number, held-out run at learning rate 0.001, seed {seed}: failed "
                "(NonFiniteStepError: Step 3: non-finite training loss nan" in left_out), left_out  # fmt: skip
    assert torch.isfinite(torch.tensor(tuned["runs"]["42"]["value"]))


def test_a_solver_failure_in_fine_tuning_names_its_step(corpus: Path, tokenizer_dir: Path, tmp_path: Path) -> None:
    """The N-ODE solver knows its block, not the training step: the fine-tuning engine adds the step, so that
    a report (and a user) can say when a run stopped. One solver step per block cannot reach rtol 1e-9."""
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

    from hf_variants.core.schemes.ode.modeling_ode import ODESolverError
    from hf_variants.training import run_glue

    from .test_faults import glue_run_args, make_glue_setup

    model_dir, train = make_glue_setup(tmp_path, corpus, tokenizer_dir)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = AutoConfig.for_model("node_transformer", vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                  num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                                  max_num_steps=1, rtol=1e-9, atol=1e-9)  # fmt: skip
    torch.manual_seed(0)
    AutoModelForMaskedLM.from_config(config).save_pretrained(model_dir)
    with pytest.raises(ODESolverError, match=r"^Step 1: (N-ODE block 0|the solve exceeded)"):
        run_glue.main(glue_run_args((model_dir, train), tmp_path / "run"))
