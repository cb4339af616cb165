"""TransJect's orthogonal weights computed together and held: the same matrices as torch's own
parametrisation, the same outputs and gradients, one batched map per block, and the block's gradient
accumulation equal to per-micro-batch backward passes."""

from __future__ import annotations

import pytest
import torch
from torch.nn.utils import parametrize
from transformers import AutoConfig, AutoModelForMaskedLM

import hf_variants  # noqa: F401  (registers the model types)
from hf_variants.core import modeling_encoder, modeling_orthogonal_weights
from hf_variants.core.configuration_orthogonal_weights import ORTHOGONAL_MAPS
from hf_variants.core.modeling_orthogonal_weights import CayleyMap, OrthogonalWeight, compute_together
from hf_variants.training.run_mlm import send_waiting_gradients


def transject(orthogonal_map: str = "cayley") -> torch.nn.Module:
    """A small TransJect masked LM whose orthogonal offsets are away from zero (a trained model's), with the
    eigenvector estimate (``approx``), so that every kind of orthogonal linear is there."""
    config = AutoConfig.for_model(
        "transject", hidden_size=32, num_hidden_layers=2, vocab_size=60, max_position_embeddings=16,
        orthogonal_map=orthogonal_map, eigenvalue_mode="approx", hidden_dropout_prob=0.0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = AutoModelForMaskedLM.from_config(config)
    with torch.no_grad():
        for module in model.modules():
            if parametrize.is_parametrized(module, "weight"):
                offset = module.parametrizations.weight.original
                offset.copy_(torch.randn_like(offset) * 0.1)
                if orthogonal_map == "householder":  # its diagonal holds the signs ±1
                    offset.diagonal().copy_(torch.sign(torch.randn(offset.shape[0])))
    return model


def inputs(seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 60, (3, 12), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, 8:] = 0
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.where(mask.bool(), ids, -100)}


def orthogonal_linears(model: torch.nn.Module) -> list[OrthogonalWeight]:
    return [m for m in model.modules() if isinstance(m, OrthogonalWeight)]


def torch_parametrisation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference: every orthogonal weight computed by torch's own parametrisation, once per forward."""
    monkeypatch.setattr(modeling_encoder, "held_orthogonal_weights", lambda model: parametrize.cached())


@pytest.fixture
def map_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The batch size of every batched map computed."""
    calls: list[int] = []
    original = modeling_orthogonal_weights.orthogonal_matrices

    def counted(originals: torch.Tensor, bases: torch.Tensor, orthogonal_map: str) -> torch.Tensor:
        calls.append(originals.shape[0])
        return original(originals, bases, orthogonal_map)

    monkeypatch.setattr(modeling_orthogonal_weights, "orthogonal_matrices", counted)
    return calls


@pytest.mark.parametrize("orthogonal_map", ORTHOGONAL_MAPS)
def test_matrices_computed_together_are_torchs_parametrised_weights(orthogonal_map: str) -> None:
    model = transject(orthogonal_map)
    linears = orthogonal_linears(model)
    assert len(linears) == 1 + 2 * (2 + 2 * model.config.num_experts)  # Ũ, then U, V and each expert's two maps
    for together, linear in zip(compute_together(linears), linears, strict=True):
        assert torch.equal(together, linear.weight)


@pytest.mark.parametrize("orthogonal_map", ORTHOGONAL_MAPS)
def test_outputs_and_gradients_equal_torchs_parametrisation(
    orthogonal_map: str, monkeypatch: pytest.MonkeyPatch, map_calls: list[int]
) -> None:
    model, batch = transject(orthogonal_map), inputs(0)
    outputs = model(**batch)
    outputs.loss.backward()
    gradients = {name: p.grad.clone() for name, p in model.named_parameters()}
    assert map_calls == [len(orthogonal_linears(model))]  # one batched map for the whole forward pass
    model.zero_grad()
    torch_parametrisation(monkeypatch)
    reference = model(**batch)
    reference.loss.backward()
    assert torch.equal(outputs.logits, reference.logits)
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(gradients[name], parameter.grad, rtol=1e-5, atol=1e-6, msg=name)


def test_the_cayley_backward_matches_finite_differences() -> None:
    lower = torch.randn(3, 6, 6, dtype=torch.float64).tril()
    skew = (lower - lower.mT).requires_grad_()
    assert torch.autograd.gradcheck(CayleyMap.apply, (skew,))


def test_held_for_an_optimizer_step_gives_the_gradients_of_separate_backward_passes(map_calls: list[int]) -> None:
    """The micro-batches' backward passes stop at the held copies; the pretraining engine's
    ``send_waiting_gradients`` takes their sum through the maps once."""
    model = transject()
    micro_batches = [inputs(seed) for seed in range(3)]
    for batch in micro_batches:
        model(**batch).loss.backward()
    separate = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    map_calls.clear()
    with model.hold_parametrized_weights(accumulate_gradients=True) as held:
        for batch in micro_batches:
            model(**batch).loss.backward()
    originals = [m.parametrizations.weight.original for m in orthogonal_linears(model)]
    assert all(original.grad is None for original in originals)  # waiting for the engine to send them on
    send_waiting_gradients(held)
    assert len(map_calls) == 1
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(separate[name], parameter.grad, rtol=1e-5, atol=1e-6, msg=name)
    assert all(linear.held is None for linear in orthogonal_linears(model))


def test_held_for_evaluation_computes_the_matrices_once(map_calls: list[int]) -> None:
    model = transject().eval()
    batches = [inputs(seed) for seed in range(3)]
    with torch.no_grad():
        one_by_one = [model(**batch).logits for batch in batches]
        map_calls.clear()
        with model.hold_parametrized_weights():
            held = [model(**batch).logits for batch in batches]
    assert len(map_calls) == 1
    assert all(torch.equal(a, b) for a, b in zip(one_by_one, held, strict=True))


def test_a_failure_inside_the_block_releases_the_matrices_and_sends_no_gradient() -> None:
    model = transject()
    with pytest.raises(RuntimeError, match="stopped"), model.hold_parametrized_weights(accumulate_gradients=True):
        model(**inputs(0)).loss.backward()
        raise RuntimeError("stopped")
    assert all(linear.held is None for linear in orthogonal_linears(model))
    assert all(linear.parametrizations.weight.original.grad is None for linear in orthogonal_linears(model))
    model(**inputs(0)).loss.backward()  # the model still trains, outside any block
    assert all(linear.parametrizations.weight.original.grad is not None for linear in orthogonal_linears(model))


def test_a_compiled_model_holds_the_same_matrices_and_gradients() -> None:
    """``nn.Module.compile`` (the eager backend: graph capture without code generation) around a model that
    holds its matrices for a step of two micro-batches: the gradients of the uncompiled model, step after step."""
    compiled, eager = transject(), transject()
    compiled.compile(backend="eager")
    for step in range(2):
        for model in (compiled, eager):
            with model.hold_parametrized_weights(accumulate_gradients=True) as held:
                for seed in (2 * step, 2 * step + 1):
                    model(**inputs(seed)).loss.backward()
            send_waiting_gradients(held)
        for (name, a), b in zip(compiled.named_parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6, msg=name)
        with torch.no_grad():
            for model in (compiled, eager):
                for parameter in model.parameters():
                    parameter -= 0.01 * parameter.grad
                model.zero_grad()


def test_fine_tuning_evaluation_computes_the_matrices_once(map_calls: list[int], tmp_path) -> None:
    """The fine-tuning engine's Trainer holds them for its whole evaluation loop (three batches here)."""
    from transformers import AutoModelForSequenceClassification, TrainingArguments

    from hf_variants.training.run_glue import GlueTrainer

    model = AutoModelForSequenceClassification.from_config(transject().config)
    examples = [{"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.tensor(i % 2)}
                for i, ids in enumerate(torch.randint(5, 60, (6, 12)))]  # fmt: skip
    arguments = TrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=2, report_to=[],
                                  use_cpu=True)  # fmt: skip
    trainer = GlueTrainer(model=model, args=arguments, eval_dataset=examples)
    map_calls.clear()
    metrics = trainer.evaluate()
    assert map_calls == [len(orthogonal_linears(model))] and metrics["eval_loss"] > 0
