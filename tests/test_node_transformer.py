"""N-ODE Transformer: the common suite, eq. (9) vs eq. (1), adaptivity (NFE), solver agreement,
the kinetic regulariser, adjoint gradients and clear solver errors."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest
import torch
import torch.nn.functional as F
from torchdiffeq import odeint

from hf_variants import node_transformer
from hf_variants.core.composition import build_layer
from hf_variants.core.inputs import TokenLayout
from hf_variants.node_transformer import (
    NodeTransformerBlock,
    NodeTransformerConfig,
    NodeTransformerForSequenceClassification,
    NodeTransformerModel,
    ODESolverError,
    VanillaTransformerBlock,
)

from .common import CommonEncoderTests, make_inputs
from .helpers import run_python

# Tight tolerances: the adaptive solver shares its steps across a batch, so padding and batch
# invariance hold to the solver's accuracy; at 1e-7 that is well inside the suite's 1e-5.
TIGHT = {"rtol": 1e-7, "atol": 1e-7, "num_hidden_layers": 2, "intermediate_size": 32}


class TestNodeTransformerCommon(CommonEncoderTests):
    variant = node_transformer.VARIANT
    config_kwargs: ClassVar[dict] = TIGHT


class TestNodeTransformerEq9TimeAttentionCommon(CommonEncoderTests):
    variant = node_transformer.VARIANT
    config_kwargs: ClassVar[dict] = {
        **TIGHT,
        # A smooth F: with the default ReLU, this F's kinks made dopri5's error estimate loose enough that
        # padding moved one output by 1.7e-5 at rtol = atol = 1e-7 (and 1e-9 exhausts the step cap in bf16).
        "hidden_act": "gelu",
        "ode_function": "eq9",
        "time_dependent_attention": True,
        "use_layer_norm": True,
        "kinetic_regularization": 0.1,
    }


class TestNodeTransformerFixedStepCommon(CommonEncoderTests):
    variant = node_transformer.VARIANT
    config_kwargs: ClassVar[dict] = {**TIGHT, "ode_function": "eq3", "ode_method": "rk4", "step_size": 0.25}


class TestVanillaBlocksCommon(CommonEncoderTests):
    variant = node_transformer.VARIANT
    config_kwargs: ClassVar[dict] = {**TIGHT, "layer_scheme": "vanilla"}


def small(**overrides) -> NodeTransformerConfig:
    kwargs = dict(vocab_size=50, hidden_size=16, num_attention_heads=8, num_hidden_layers=1, max_position_embeddings=32)
    return NodeTransformerConfig(**{**kwargs, **overrides})


def randomise(module: torch.nn.Module, std: float = 0.3, seed: int = 0) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)


def test_eq9_with_one_euler_step_is_a_vanilla_block() -> None:
    """One Euler step of size T_F = 1 of eq. (9) is eq. (1) with the same weights (time terms vanish
    at t = 0), checked against VanillaTransformerBlock and a hand-written eq. (1)."""
    config = small(ode_function="eq9", ode_method="euler", time_dependent_attention=True)
    block = build_layer(config, 0).eval()
    assert isinstance(block, NodeTransformerBlock)
    randomise(block)
    vanilla = build_layer(small(layer_scheme="vanilla"), 0).eval()
    assert isinstance(vanilla, VanillaTransformerBlock)
    state = {k.removeprefix("dynamics."): v for k, v in block.state_dict().items() if "time_coefficient" not in k}
    vanilla.load_state_dict(state)
    x = torch.randn(2, 5, 16, dtype=torch.float32)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    with torch.no_grad():
        ode = block(x, TokenLayout(mask))
        nfe = block.solver_statistics[0]
        reference = vanilla(x, TokenLayout(mask))

        def mhsa(h):
            return vanilla.attention(h, TokenLayout(mask))[0]

        y = x + mhsa(x)
        by_hand = y + F.linear(
            F.relu(F.linear(y, vanilla.feed_forward.fc_in.weight, vanilla.feed_forward.fc_in.bias)),  # the paper's ReLU
            vanilla.feed_forward.fc_out.weight,
            vanilla.feed_forward.fc_out.bias,
        )
    assert nfe.item() == 1
    torch.testing.assert_close(ode[mask], reference[mask])
    torch.testing.assert_close(reference, by_hand)


def test_nfe_adapts_to_tolerance_and_to_the_input() -> None:
    torch.manual_seed(0)
    model = NodeTransformerModel(small(num_hidden_layers=2)).double().eval()
    randomise(model, std=0.5)
    inputs = make_inputs(model.config, batch=2, seq_len=8)

    def nfe(rtol: float, scale: float = 1.0) -> list[float]:
        model.config.rtol = model.config.atol = rtol
        embeddings = model.embeddings(input_ids=inputs["input_ids"]) * scale
        with torch.no_grad():
            out = model(inputs_embeds=embeddings, attention_mask=inputs["attention_mask"], output_diagnostics=True)
        per_block = out.diagnostics["nfe_per_block"].tolist()
        assert out.diagnostics["nfe_total"].item() == sum(per_block)
        return per_block

    loose, tight = nfe(1e-3), nfe(1e-7)
    assert sum(tight) > sum(loose)
    assert nfe(1e-5, scale=4.0) != nfe(1e-5, scale=1.0)


def test_rk4_matches_dopri5_at_tight_tolerance() -> None:
    torch.manual_seed(0)
    # A smooth F (GELU): across the default ReLU's kinks RK4 drops below fourth order.
    adaptive = NodeTransformerModel(small(rtol=1e-9, atol=1e-9, hidden_act="gelu")).double().eval()
    randomise(adaptive, std=0.4)
    fixed = NodeTransformerModel(small(ode_method="rk4", step_size=0.01, hidden_act="gelu")).double().eval()
    fixed.load_state_dict(adaptive.state_dict())
    inputs = make_inputs(adaptive.config)
    with torch.no_grad():
        a, b = adaptive(**inputs).last_hidden_state, fixed(**inputs).last_hidden_state
    real = inputs["attention_mask"].bool()
    torch.testing.assert_close(b[real], a[real], atol=1e-7, rtol=1e-7)
    assert fixed(**inputs, output_diagnostics=True).diagnostics["nfe_total"].item() == 4 * 100  # 4 stages × 100 steps


def test_kinetic_regulariser_equals_a_riemann_sum() -> None:
    """λ/(2L) ∫‖X'‖² from the augmented state equals a fine trapezoid sum of ‖F(X(t), t)‖² along
    the trajectory (computed separately on a 2001-point grid)."""
    torch.manual_seed(0)
    config = small(kinetic_regularization=0.3, rtol=1e-9, atol=1e-9, time_dependent_attention=True)
    model = NodeTransformerModel(config).double().eval()
    randomise(model, std=0.4)
    inputs = make_inputs(config, batch=2, seq_len=6)
    with torch.no_grad():
        out = model(**inputs, output_diagnostics=True)
        dynamics = model.encoder.layer[0].dynamics
        mask = inputs["attention_mask"].bool()
        dynamics.layout = TokenLayout(mask)
        x0 = model.embeddings(input_ids=inputs["input_ids"], token_type_ids=inputs["token_type_ids"])
        grid = torch.linspace(0, 1, 2001, dtype=torch.float64)
        trajectory = odeint(dynamics.velocity, x0, grid, rtol=1e-10, atol=1e-10)
        speed = torch.stack(
            [dynamics.velocity(t, x).pow(2).sum(dim=(1, 2)) for t, x in zip(grid, trajectory, strict=True)]
        )
        integral = torch.trapezoid(speed, grid, dim=0) / mask.sum(-1)
    torch.testing.assert_close(out.diagnostics["kinetic_energy"], integral, rtol=1e-5, atol=1e-9)
    torch.testing.assert_close(out.auxiliary_loss, 0.5 * 0.3 * integral.mean(), rtol=1e-5, atol=1e-9)


def test_kinetic_regulariser_is_added_to_the_loss() -> None:
    model = NodeTransformerForSequenceClassification(small(kinetic_regularization=2.0)).eval()
    inputs = make_inputs(model.config)
    labels = torch.tensor([0, 1, 1])
    out = model(**inputs, labels=labels, output_diagnostics=True)
    task = F.cross_entropy(out.logits, labels)
    torch.testing.assert_close(out.loss, task + out.auxiliary_loss)
    assert out.auxiliary_loss > 0


def test_adjoint_and_autograd_gradients_agree() -> None:
    grads = []
    for adjoint in (False, True):
        torch.manual_seed(0)
        # A smooth F (GELU): with ReLU's kinks the adjoint solve at 1e-8 needs more than the 1000-step cap.
        config = small(
            adjoint=adjoint, rtol=1e-8, atol=1e-8, time_dependent_attention=True, num_labels=2, hidden_act="gelu"
        )
        model = NodeTransformerForSequenceClassification(config).double()
        randomise(model, std=0.3)
        inputs = make_inputs(config)
        model(**inputs, labels=torch.tensor([0, 1, 1])).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=1e-4, atol=1e-7, msg=name)


def test_step_cap_raises_a_clear_error() -> None:
    model = NodeTransformerModel(small(max_num_steps=2, rtol=1e-10, atol=1e-10)).eval()
    randomise(model, std=1.0)
    with pytest.raises(ODESolverError, match="max_num_steps"):
        model(**make_inputs(model.config))


def test_parameter_counts_of_vanilla_and_ode_blocks_are_close() -> None:
    ode = NodeTransformerModel(small(hidden_size=8, num_attention_heads=4, num_hidden_layers=2))
    vanilla = NodeTransformerModel(
        small(hidden_size=8, num_attention_heads=4, num_hidden_layers=2, layer_scheme="vanilla")
    )
    count = lambda m: sum(p.numel() for p in m.encoder.parameters())  # noqa: E731
    # The only difference: one time coefficient c per output of each time-dependent affine map (eq. 5).
    assert count(ode) - count(vanilla) == 2 * (8 + 8)


def test_node_config_errors() -> None:
    with pytest.raises(ValueError, match="ode_function must be one of"):
        small(ode_function="eq4")
    with pytest.raises(ValueError, match="ode_method must be one of"):
        small(ode_method="rk45")
    with pytest.raises(ValueError, match="step_size is for fixed-step methods"):
        small(step_size=0.1)
    with pytest.raises(ValueError, match="exceeds max_num_steps"):
        small(ode_method="euler", step_size=1e-4, max_num_steps=100)
    with pytest.raises(ValueError, match="kinetic_regularization"):
        small(kinetic_regularization=-1)
    with pytest.raises(ValueError, match="max_num_steps must be at most 100000"):
        small(max_num_steps=10**9)


def test_a_solve_over_its_evaluation_budget_stops_with_a_clear_error() -> None:
    """The step cap bounds steps; the evaluation budget bounds the work of one solve, whatever the method."""
    model = NodeTransformerModel(small(max_num_steps=3)).eval()
    model.encoder.layer[0].dynamics.max_evaluations = 5  # fewer than one dopri5 step needs (6)
    with pytest.raises(ODESolverError, match="exceeded its budget of 5 function evaluations"):
        model(**make_inputs(model.config))


def test_configs_are_built_validated_and_saved_without_importing_torchdiffeq(tmp_path) -> None:
    """Every pair's config, its matched control and a save/load round trip import no solver; the first
    solve does (the import stays visible to transformers' remote-code requirement check)."""
    script = """
import json, sys
import hf_variants
from hf_variants.core.composition import ATTENTION_TYPES, LAYER_SCHEMES, matched_control
from transformers import AutoConfig
seen = {"import": "torchdiffeq" in sys.modules}
for mixer in ATTENTION_TYPES:
    for scheme in LAYER_SCHEMES:
        try:
            config = AutoConfig.for_model("node_transformer", attention_type=mixer, layer_scheme=scheme)
        except ValueError:
            continue  # a pairing its validators refuse
        matched_control(config).save_pretrained(sys.argv[1])
        AutoConfig.from_pretrained(sys.argv[1])
seen["configs"] = "torchdiffeq" in sys.modules
import torch
from transformers import AutoModel
model = AutoModel.from_config(AutoConfig.for_model("node_transformer", hidden_size=8, num_attention_heads=2,
                              intermediate_size=8, num_hidden_layers=1, vocab_size=11))
seen["model"] = "torchdiffeq" in sys.modules
model(torch.ones(1, 3, dtype=torch.long))
seen["solve"] = "torchdiffeq" in sys.modules
print(json.dumps(seen))
"""
    result = run_python(script, str(tmp_path / "config"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {"import": False, "configs": False, "model": False,
                                                           "solve": True}  # fmt: skip


def test_the_solver_import_is_found_by_transformers_remote_code_check() -> None:
    from transformers.dynamic_module_utils import get_imports

    from hf_variants.core.schemes.ode import configuration_ode, modeling_ode

    assert "torchdiffeq" in get_imports(modeling_ode.__file__)
    assert "torchdiffeq" not in get_imports(configuration_ode.__file__)  # a config never needs the solver


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_the_padding_mask_is_built_once_per_forward(monkeypatch: pytest.MonkeyPatch, implementation: str) -> None:
    """An N-ODE model calls its token mixer at every function evaluation of every block; the padding's
    attention-backend form is still built once per forward pass (transformers builds its mask once per
    forward too), and the output is the one built per call would give."""
    from hf_variants.core import inputs

    built: list[str] = []
    original = inputs.visible_keys
    monkeypatch.setattr(inputs, "visible_keys", lambda *args: built.append("visible_keys") or original(*args))
    torch.manual_seed(0)
    model = NodeTransformerModel(small(num_hidden_layers=2, rtol=1e-4, atol=1e-4, attn_implementation=implementation))
    randomise(model)
    input_ids = torch.randint(5, 50, (3, 9))
    attention_mask = torch.ones(3, 9, dtype=torch.long)
    attention_mask[1, 6:] = 0
    with torch.no_grad():
        output = model.eval()(input_ids, attention_mask=attention_mask, output_diagnostics=True)
    assert output.diagnostics["nfe_total"] >= 2 * 6  # at least one dopri5 step (6 evaluations) in each block
    assert built == ["visible_keys"]
    # each mixer call sees the same mask as a freshly built one: padded keys get no weight
    padded = input_ids.clone()
    padded[1, 6:] = 7  # other tokens behind the padding change nothing
    with torch.no_grad():
        again = model(padded, attention_mask=attention_mask).last_hidden_state
    torch.testing.assert_close(again[1, :6], output.last_hidden_state[1, :6], atol=1e-5, rtol=1e-5)
