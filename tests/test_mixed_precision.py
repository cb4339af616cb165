"""bf16 mixed precision (``accelerate launch --mixed_precision bf16`` = ``torch.autocast``), on the CPU so that
CI covers the code path GPUs take: every variant and pair trains a step with finite loss and gradients close to
float32's, and the float32 islands (``hf_variants.core.inputs.full_precision``) stay float32 inside autocast —
orthogonal weights stay orthogonal, TransJect's spectrum, MGK's soft E-step and the ODE solver's state are
computed as in float32."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForMaskedLM

import hf_variants  # noqa: F401  (registers the variants)
from hf_variants.core.inputs import TokenLayout
from hf_variants.core.mixers.orthogonal.modeling_orthogonal import EigenvalueEstimator
from hf_variants.core.modeling_orthogonal_weights import orthogonal_linear

SMALL = {"vocab_size": 60, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 64, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}  # fmt: skip
MODELS = {
    "bert_control": ("bert_control", {}),
    "macaron_bert": ("macaron_bert", {}),
    "mgk_bert": ("mgk_bert", {"num_attention_heads": 2, "head_dim": 16}),
    "mgk_bert soft E-step": ("mgk_bert", {"num_attention_heads": 2, "head_dim": 16, "mixture_weights": "soft_em"}),
    "mlk": ("mgk_bert", {"attention_type": "mlk", "num_attention_heads": 2, "head_dim": 16}),
    "transject": ("transject", {"num_experts": 2}),
    "node_transformer": ("node_transformer", {"num_hidden_layers": 1, "rtol": 1e-3, "atol": 1e-3}),
}


def autocast() -> torch.autocast:
    return torch.autocast("cpu", dtype=torch.bfloat16)


def loss_and_gradients(model: torch.nn.Module, inputs: dict, mixed: bool) -> tuple[float, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    if mixed:
        with autocast():
            loss = model(**inputs).loss
    else:
        loss = model(**inputs).loss
    loss.backward()
    gradients = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return float(loss), gradients


@pytest.mark.parametrize("name", list(MODELS))
def test_every_variant_trains_a_step_in_bf16_autocast(name: str) -> None:
    model_type, fields = MODELS[name]
    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **{**SMALL, **fields})
    model = AutoModelForMaskedLM.from_config(config).train()
    ids = torch.randint(5, 60, (4, 12), generator=torch.Generator().manual_seed(1))
    inputs = {"input_ids": ids, "labels": ids}
    full, full_gradients = loss_and_gradients(model, inputs, mixed=False)
    mixed, mixed_gradients = loss_and_gradients(model, inputs, mixed=True)
    assert all(p.dtype == torch.float32 for p in model.parameters())  # autocast keeps float32 master weights
    assert torch.isfinite(mixed_gradients).all()
    assert mixed == pytest.approx(full, rel=2e-2)  # bf16 has 8 bits of mantissa: ~0.4% per rounding
    cosine = torch.nn.functional.cosine_similarity(mixed_gradients, full_gradients, dim=0)
    assert cosine > 0.98, float(cosine)


@pytest.mark.parametrize("orthogonal_map", ["cayley", "matrix_exp", "householder"])
def test_orthogonal_weights_are_computed_in_float32_inside_autocast(
    orthogonal_map: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.manual_seed(0)
    linear = orthogonal_linear(32, False, orthogonal_map)
    used = []
    original = torch.nn.functional.linear
    monkeypatch.setattr(torch.nn.functional, "linear", lambda x, w, b=None: used.append(w) or original(x, w, b))
    with autocast():
        linear(torch.randn(3, 32))
    weight = used[-1]  # base @ map(offset): a random orthogonal base, which a bf16 product would round (~4e-3)
    assert weight.dtype == torch.float32
    torch.testing.assert_close(weight.T @ weight, torch.eye(32), atol=1e-5, rtol=0)


def test_transject_spectrum_and_mgk_e_step_match_float32_inside_autocast() -> None:
    torch.manual_seed(0)
    config = AutoConfig.for_model("transject", **SMALL, eigenvalue_mode="exact")
    estimator = EigenvalueEstimator(config)
    embeddings = torch.randn(2, 7, 32)
    reference, _ = estimator(embeddings, None)
    with autocast():
        mixed, _ = estimator(embeddings, None)
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, reference, atol=1e-6, rtol=1e-6)

    config = AutoConfig.for_model("mgk_bert", **{**SMALL, **MODELS["mgk_bert soft E-step"][1]})
    model = AutoModelForMaskedLM.from_config(config)
    attention = next(m for m in model.modules() if hasattr(m, "update_priors"))
    query, keys = torch.randn(2, 2, 7, 16), torch.randn(2, 2, 2, 7, 16)
    before = attention.mixture_prior.clone()
    attention.update_priors(query, keys, TokenLayout(None))
    reference = attention.mixture_prior.clone()
    attention.mixture_prior.copy_(before)
    with autocast():
        attention.update_priors(query, keys, TokenLayout(None))
    torch.testing.assert_close(attention.mixture_prior, reference, atol=1e-6, rtol=1e-6)


def test_the_ode_solver_integrates_a_float32_state_inside_autocast(monkeypatch: pytest.MonkeyPatch) -> None:
    import torchdiffeq

    states = []
    original = torchdiffeq.odeint
    monkeypatch.setattr(torchdiffeq, "odeint", lambda f, y0, t, **kw: states.append(y0) or original(f, y0, t, **kw))
    config = AutoConfig.for_model("node_transformer", **{**SMALL, **MODELS["node_transformer"][1]})
    model = AutoModelForMaskedLM.from_config(config).eval()
    with autocast(), torch.no_grad():
        model(input_ids=torch.tensor([[5, 6, 7, 8]]))
    assert states and all(state.dtype == torch.float32 for state in states)


def test_fine_tuning_in_bf16_trains_and_is_another_run_than_fp32(tmp_path, corpus, tokenizer_dir) -> None:
    """`--bf16` (or the launcher's `--mixed_precision bf16`, which reaches the Trainer through the environment)
    trains in bf16 autocast, and the run's identity records it: an fp32 run in the same folder is another run."""
    import json

    from hf_variants.storage.files import CheckpointError
    from hf_variants.training import run_glue

    from .test_faults import glue_run_args, make_glue_setup

    setup = make_glue_setup(tmp_path / "setup", corpus, tokenizer_dir)
    output = tmp_path / "bf16"
    args = [*glue_run_args(setup, output), "--use_cpu", "true"]
    run_glue.main([*args, "--bf16", "true"])
    assert json.loads((output / "run_fingerprint.json").read_text())["mixed_precision"] == "bf16"
    with pytest.raises(CheckpointError, match=r"holds another run .*mixed_precision: 'bf16' → 'no'"):
        run_glue.main(args)
