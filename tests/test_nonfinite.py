"""The one non-finite gradient check (hf_variants.training.nonfinite), against a per-parameter
reference, and why it must run before clipping."""

from __future__ import annotations

import math

import pytest
import torch

from hf_variants.training.nonfinite import NonFiniteStepError, describe_parameters, drop_gradients, nonfinite_gradients


def model_with_gradients(poisoned: dict[str, float]) -> torch.nn.Module:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3), torch.nn.Linear(3, 2))
    model(torch.randn(5, 4)).square().sum().backward()
    model[3].bias.grad = None  # a parameter without a gradient is not a non-finite one
    for name, parameter in model.named_parameters():
        if name in poisoned:
            parameter.grad.view(-1)[1] = poisoned[name]
    return model


@pytest.mark.parametrize(
    "poisoned",
    [{}, {"2.weight": math.inf}, {"0.bias": math.nan, "3.weight": -math.inf}, {"0.weight": math.nan}],
)
def test_names_exactly_the_parameters_with_a_non_finite_gradient(poisoned: dict[str, float]) -> None:
    model = model_with_gradients(poisoned)
    reference = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
    assert reference == [n for n in dict(model.named_parameters()) if n in poisoned]
    assert nonfinite_gradients(model.named_parameters()) == reference


def test_clipping_would_hide_which_parameter_it_was() -> None:
    """After clip_grad_norm_ an infinite gradient in one parameter is NaN there and 0 elsewhere, a NaN
    one is NaN everywhere: only a check before clipping names the culprit."""
    model = model_with_gradients({"0.bias": math.nan})
    assert nonfinite_gradients(model.named_parameters()) == ["0.bias"]
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    assert len(nonfinite_gradients(model.named_parameters())) == 5  # every parameter with a gradient


def test_dropped_gradients_leave_adamw_weights_and_state_untouched() -> None:
    model = model_with_gradients({"2.weight": math.inf})
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.5)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    drop_gradients(model.parameters())
    optimizer.step()
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters()) and not optimizer.state


def test_the_message_names_the_step_the_parameters_and_the_way_out() -> None:
    names = [f"layer.{i}.weight" for i in range(10)]
    error = NonFiniteStepError(7, names, loss="nan", hint="lower --learning_rate.")
    assert str(error) == (f"Step 7: non-finite training loss nan; gradient in {describe_parameters(names)}. "
                          "Nothing was updated; lower --learning_rate.")  # fmt: skip
    assert describe_parameters(names).endswith("layer.7.weight and 2 more")
    assert str(NonFiniteStepError(3, [], loss="inf")) == "Step 3: non-finite training loss inf. Nothing was updated."


def test_a_norm_that_overflows_over_finite_gradients_is_named_as_such() -> None:
    # each gradient finite in float32, their norm not (√2 · 3e38 lies beyond float32's 3.4e38, however the norm is
    # summed): the pretraining loop's check sees no parameter to name and the norm stops the step; the message says
    # so, not "another process"
    model = model_with_gradients({"0.weight": 3e38, "2.weight": 3e38})
    named = nonfinite_gradients(model.named_parameters())  # before clipping, as the loop asks
    norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
    assert named == [] and not math.isfinite(norm)
    error = NonFiniteStepError(885, named, detail=f" (gradient norm {norm})")
    assert error.summary == "Step 885: non-finite gradient norm (every gradient this process holds is finite)" \
        " (gradient norm inf)"
