"""Checkpoints written by v0.1.0 (before attention types and layer schemes were separated) load
with every weight and give the same outputs, and a model built with today's code from the same
config and seed is the same model (same state-dict keys, same outputs).

The fixtures were written by v0.1.0's code itself: ``tests/fixtures/make_v010_checkpoints.py`` says how.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file
from torch.nn.utils import parametrize

import hf_variants  # noqa: F401  (registers the variants)
from hf_variants.core.registration import VARIANTS

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "v0.1.0"
CHECKPOINTS = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
#: The pair each v0.1.0 configuration meant.
EXPECTED_PAIR = {
    "macaron_bert": ("softmax", "strang"),
    "mgk_bert": ("mgk", "lie_trotter"),
    "transject": ("orthogonal", "injective"),
    "node_transformer": ("softmax", "ode"),
}


def test_every_fixture_is_present() -> None:
    assert len(CHECKPOINTS) == 12
    assert {name.split("_", 2)[0] for name in CHECKPOINTS} >= {"macaron", "mgk", "transject", "node"}


#: How far float32 outputs may move between machines that run the same model: another CPU (another
#: vector width or BLAS kernel) sums in another order, which moves each float32 result in its last bits
#: — up to 1.2e-7 on logits of order 1, and 2.5e-6 after an adaptive ODE solve (the solver's step choices
#: amplify the rounding; its tolerance in these fixtures is 1e-3) — seen between two AVX-512 CPUs. A change
#: of the model moves outputs by orders of magnitude more (one weight of 1e-3 moves logits by ~1e-3).
FLOAT32_ACROSS_MACHINES = {"atol": 1e-5, "rtol": 1e-5}


def assert_same_numbers(got: torch.Tensor, saved: torch.Tensor) -> None:
    """The outputs of the same model on another machine: equal within float32 rounding, whatever the CPU
    (no comparison is keyed to the machine that wrote the fixture)."""
    torch.testing.assert_close(got, saved, **FLOAT32_ACROSS_MACHINES)


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_v010_checkpoint_loads_every_weight_and_gives_the_same_logits(name: str) -> None:
    folder = FIXTURES / name
    expected = load_file(folder / "expected.safetensors")
    inputs = {key: expected[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
    model, info = transformers.AutoModelForMaskedLM.from_pretrained(folder, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    config = model.config
    pair = EXPECTED_PAIR[config.model_type]
    if name == "mgk_bert_linear":  # saved with v0.1.0's attention_kind="linear"
        pair = ("mlk", "lie_trotter")
    if name == "node_transformer_vanilla":  # saved with v0.1.0's block_type="vanilla" inside the ode scheme
        pair = ("softmax", "vanilla")
        assert not hasattr(config, "block_type")
    assert (config.attention_type, config.layer_scheme) == pair
    saved = load_file(folder / "model.safetensors")  # loading is bit-exact by nature: compared exactly
    loaded = model.state_dict()
    for key, weight in saved.items():
        assert torch.equal(loaded[key], weight), key
    with torch.no_grad():
        logits = model.eval()(**inputs).logits
    assert_same_numbers(logits, expected["saved_logits"])


#: Fresh initialisation changed on purpose after v0.1.0: there, ``_init_weights`` never reached the
#: bias-free orthogonal Linears (transformers skips custom-code modules without parameters of their
#: own), so building on the meta device left them uninitialised; now every orthogonal weight is
#: initialised at its parametrisation, which draws random numbers in another order.
REINITIALISED = {"transject"}


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_fresh_model_from_the_same_config_and_seed_is_unchanged(name: str) -> None:
    """Same construction and initialisation order as v0.1.0: same weights, so the same outputs
    (except where the initialisation was deliberately fixed: same keys, orthogonal weights)."""
    folder = FIXTURES / name
    expected = load_file(folder / "expected.safetensors")
    inputs = {key: expected[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
    config = transformers.AutoConfig.from_pretrained(folder)
    variant = VARIANTS[config.model_type]
    torch.manual_seed(0)
    base = variant.models["AutoModel"](config).eval()
    torch.manual_seed(0)
    mlm = variant.models["AutoModelForMaskedLM"](config).eval()
    saved_keys = set(load_file(folder / "model.safetensors"))
    assert set(mlm.state_dict()) - {"lm_head.decoder.weight"} == saved_keys - {"lm_head.decoder.weight"}
    if config.model_type in REINITIALISED:
        orthogonal = [m.weight for m in mlm.modules() if parametrize.is_parametrized(m, "weight")]
        assert orthogonal
        for weight in orthogonal:
            torch.testing.assert_close(weight.T @ weight, torch.eye(weight.shape[1]), atol=1e-5, rtol=0)
        with torch.no_grad():
            assert torch.isfinite(base(**inputs).last_hidden_state).all()
        return
    with torch.no_grad():
        assert_same_numbers(base(**inputs).last_hidden_state, expected["fresh_hidden"])
        assert_same_numbers(mlm(**inputs).logits, expected["fresh_logits"])
