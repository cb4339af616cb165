"""The studies in scripts/ that train (TransJect's bounds, PARITY) do so on the fine-tuning engine: their runs
match an independent loop, stop on a non-finite gradient naming the parameter, and report a stopped run
as such instead of averaging it in."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from .helpers import load_script, middle_parameter, poison_gradient


@pytest.fixture(scope="module")
def parity():
    return load_script("experiments/parity/parity")


@pytest.fixture(scope="module")
def bounds():
    return load_script("experiments/transject_bounds/transject_bounds")


def reference_parity_run(parity, dim: int, blocks: int, learning_rate: float, seed: int, epochs: int) -> dict:
    """PARITY's optimisation written out by hand: full-batch Adam at a constant rate, no clipping,
    the accuracy of each step's own forward (the paper's rule), stopping at 100%."""
    input_ids, attention_mask, labels = parity.parity_dataset(3)
    torch.manual_seed(seed)
    model = parity.ParityClassifier(parity.model_config(dim, blocks, "vanilla", input_ids.shape[1] - 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    model.train()
    best, best_epoch = -1.0, 0
    for epoch in range(1, epochs + 1):
        loss = model(input_ids, attention_mask, labels)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        accuracy, _ = model.last_training_forward
        if accuracy > best:
            best, best_epoch = accuracy, epoch
        if best == 1.0:
            break
    return {"best_accuracy": best, "epoch_of_best": best_epoch, "epochs_run": epoch}


def test_a_parity_run_on_the_engine_is_the_papers_full_batch_adam(parity) -> None:
    """The Trainer's run (AdamW without decay, constant rate, no clipping, the strings in order in one batch)
    gives the hand-written full-batch Adam loop's best accuracy, the step it was first reached and the
    step it stopped at."""
    data = parity.parity_dataset(3)
    for learning_rate, epochs in ((1e-2, 25), (5e-2, 60)):
        record = parity.train_run(4, 1, "vanilla", learning_rate, 0, epochs, data)
        assert record["status"] == "finished"
        expected = reference_parity_run(parity, 4, 1, learning_rate, 0, epochs)
        assert {key: record[key] for key in expected} == expected
    assert record["mean_nfe_per_forward"] == 0.0  # vanilla blocks solve nothing


def test_a_parity_run_stops_on_an_infinite_gradient_and_is_not_averaged_in(parity, monkeypatch) -> None:
    """A gradient made infinite on the third step stops the run there, naming the parameter; the cell's
    summary counts it as diverged and averages only the finished runs."""
    original = parity.ParityClassifier.__init__
    poisoned = []

    def poisoned_init(self, config):
        original(self, config)
        name, parameter = middle_parameter(self)
        poisoned.append(name)
        poison_gradient(parameter, on_call=3)

    data = parity.parity_dataset(3)
    finished = parity.train_run(4, 1, "ode", 1e-2, 0, 4, data)
    monkeypatch.setattr(parity.ParityClassifier, "__init__", poisoned_init)
    stopped = parity.train_run(4, 1, "ode", 1e-2, 0, 4, data)
    (name,) = poisoned
    assert stopped["status"] == "diverged" and stopped["nonfinite_gradients"] == [name]
    assert stopped["cause"] == f"Step 3: non-finite gradient in {name}" and "best_accuracy" not in stopped
    summary = parity.summarise([finished, stopped], drop_fraction=1 / 6)
    assert (summary["runs"], summary["kept"], summary["diverged"], summary["solver_failed"]) == (2, 1, 1, 0)
    assert summary["mean_best_accuracy"] == finished["best_accuracy"]
    assert parity.summarise([stopped], drop_fraction=1 / 6) == {"runs": 1, "kept": 0, "diverged": 1,
                                                                 "solver_failed": 0}  # fmt: skip


def tiny_transject(tokenizer, residual_weight: str):
    from hf_variants.transject import TransJectConfig

    return TransJectConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2, num_experts=2,
                           num_labels=2, max_position_embeddings=32, pad_token_id=tokenizer.pad_token_id,
                           residual_weight=residual_weight)  # fmt: skip


def test_the_bounds_study_traces_alpha_and_measures_the_model_the_engine_trained(bounds) -> None:
    """α_l is read every ``interval`` steps from the model the Trainer trains (sigmoid: 0.5 at step 0), the
    last entry is the trained model's, and the measurement sees that same trained model."""
    from hf_variants.core.schemes.injective.modeling_injective import residual_weights
    from hf_variants.lab.grid_training import EncodedSplit, RunSettings, train_and_evaluate
    from hf_variants.synthetic import synthetic_sentences
    from hf_variants.tokenization import train_wordpiece_tokenizer

    sentences = synthetic_sentences(48, seed=1)
    tokenizer = train_wordpiece_tokenizer(sentences, vocab_size=80, min_frequency=1)
    split = EncodedSplit.encode(tokenizer, sentences, [int(s.split()[2].endswith("s")) for s in sentences], 16)
    settings = RunSettings(learning_rate=3e-2, warmup_ratio=0.25, steps=8, batch_size=8, seed=4)
    trace, measured = bounds.ResidualWeightTrace(interval=3), []

    def measure(model):
        measured.append(model)
        return {"trained_alphas": residual_weights(model)}

    record = train_and_evaluate(tiny_transject(tokenizer, "sigmoid"), tokenizer, split, split, settings,
                                callbacks=[trace], measure=measure)  # fmt: skip
    assert sorted(trace.by_step) == [0, 3, 6, 8]
    assert trace.by_step[0] == pytest.approx([0.5, 0.5], abs=1e-6)
    assert trace.by_step[8] == record["trained_alphas"] == residual_weights(measured[0])
    assert record["residual_weights"] == pytest.approx(trace.by_step[8], abs=1e-6)  # the grid's record rounds
    assert all(abs(alpha - 0.5) > 1e-4 for alpha in trace.by_step[8])


def test_a_bounds_row_that_stopped_is_reported_by_status(bounds, tmp_path: Path) -> None:
    """A model whose run stopped keeps its status and cause in the bounds file and in the rendered table,
    with no numbers; finished rows render as before."""
    import json

    transject_bounds_table = load_script("tools/study_tables").transject_bounds_table

    stopped = {"status": "diverged", "diverged_at_step": 4, "cause": "Step 5: non-finite gradient in encoder.x"}
    assert bounds.bounds_record(stopped, bounds.ResidualWeightTrace(10)) == stopped
    ratio = {"min": 0.9, "p1": 0.95, "median": 1.0, "p99": 1.05, "max": 1.1, "count": 3}
    finished = {"status": "finished", "dev_accuracy": 0.75, "distance_ratio": [ratio, ratio]}
    path = tmp_path / "transject_bounds.json"
    path.write_text(json.dumps({"models": {"A": finished, "B": stopped}}))
    table = transject_bounds_table(path).splitlines()
    assert table[2] == "| A | 75.0% | — | 1.100 / 1.000 | 1.100 / 1.000 | — (no injective layers) |"
    assert table[3] == "| B | diverged: Step 5: non-finite gradient in encoder.x | — | — | — | — |"


def test_the_parity_table_reports_stopped_runs_by_status(parity, tmp_path: Path) -> None:
    """The rendered PARITY table: the kept runs' means beside the paper's Table 1, how many runs of a cell
    stopped, and no numbers for a cell where none finished."""
    import json

    parity_table = load_script("tools/study_tables").parity_table

    finished = {"learning_rate": 1e-2, "seed": 0, "parameters": 10, "status": "finished", "best_accuracy": 0.75,
                "time_to_best_s": 2.0, "epoch_of_best": 5, "epochs_run": 9, "mean_nfe_per_forward": 20.0}  # fmt: skip
    diverged = {"learning_rate": 1e-2, "seed": 1, "parameters": 10, "status": "diverged", "cause": "Step 3: …"}
    cells = [
        {"dim": 4, "blocks": 1, "block_type": "vanilla", "paper_accuracy_percent": 77.9,
         **parity.summarise([finished, finished], 1 / 6)},
        {"dim": 4, "blocks": 1, "block_type": "ode", "paper_accuracy_percent": 76.4,
         **parity.summarise([finished, diverged], 1 / 6)},
        {"dim": 5, "blocks": 1, "block_type": "ode", "paper_accuracy_percent": None,
         **parity.summarise([diverged], 1 / 6)},
    ]  # fmt: skip
    path = tmp_path / "parity.json"
    path.write_text(json.dumps({"cells": cells}))
    rows = parity_table(path).splitlines()[2:]
    assert rows == [
        "| 4 | 1 | 75.0% | 77.9% | 75.0% (1/2 diverged) | 76.4% | 2.0 s | 2.0 s | 20 |",
        "| 5 | 1 | — | — | no run finished (1/1 diverged) | — | — | — | — |",
    ]
