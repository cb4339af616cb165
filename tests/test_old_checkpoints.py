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
#: torch's CPU capability on the machines where the fixtures' outputs were reproduced bit for bit.
FIXTURE_CPU_CAPABILITY = "AVX512"
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


def assert_same_numbers(got: torch.Tensor, saved: torch.Tensor) -> None:
    """Bit for bit on a CPU with the vector instructions of the machine that wrote the fixtures; another
    instruction set (AVX2 instead of AVX-512) sums in another order, which moves float32 results in the
    last bits (at most 3e-6 seen here, after an adaptive ODE solve), far below any change of the model."""
    if torch.backends.cpu.get_cpu_capability() == FIXTURE_CPU_CAPABILITY:
        assert torch.equal(got, saved)
    else:
        torch.testing.assert_close(got, saved, atol=1e-5, rtol=1e-5)


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
