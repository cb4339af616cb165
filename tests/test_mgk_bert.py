"""MGK-BERT: the common suite for each attention form, plus fused vs reference, E-steps, MLK,
numerics and the parameter counts of the paper's appendix B."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import ClassVar

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoConfig, BertConfig
from transformers.models.bert.modeling_bert import BertAttention

from hf_variants import mgk_bert
from hf_variants.core.composition import ATTENTION_TYPES
from hf_variants.core.inputs import TokenLayout
from hf_variants.core.mixers.mgk.modeling_mgk import mixture_log_scores
from hf_variants.mgk_bert import MgkBertConfig, MgkBertForMaskedLM, MixtureOfKeysAttention

from .common import CommonEncoderTests, make_inputs

MGK_SMALL = {"num_attention_heads": 2, "head_dim": 16}  # H/2 heads of the baseline's width D = 32/4


class TestMgkBertCommon(CommonEncoderTests):
    variant = mgk_bert.VARIANT
    config_kwargs: ClassVar[dict] = MGK_SMALL


class TestShiftedMgkBertCommon(CommonEncoderTests):
    variant = mgk_bert.VARIANT
    config_kwargs: ClassVar[dict] = {**MGK_SMALL, "key_mode": "shifted"}


class TestSoftEmMgkBertCommon(CommonEncoderTests):
    variant = mgk_bert.VARIANT
    config_kwargs: ClassVar[dict] = {**MGK_SMALL, "mixture_weights": "soft_em"}
    gradient_checkpointing = False


class TestHardMgkBertCommon(CommonEncoderTests):
    variant = mgk_bert.VARIANT
    config_kwargs: ClassVar[dict] = {**MGK_SMALL, "mixture_weights": "hard", "key_mode": "shifted"}


class TestMlkBertCommon(CommonEncoderTests):
    variant = mgk_bert.VARIANT
    config_kwargs: ClassVar[dict] = {**MGK_SMALL, "attention_type": "mlk"}
    softmax_attention = False


# ------------------------------------------------------------------------------------------------
def attention_pair(dtype: torch.dtype = torch.float32, **overrides) -> tuple[MixtureOfKeysAttention, ...]:
    """The same weights under the reference (eager) and fused (sdpa) implementations."""
    kwargs = dict(hidden_size=32, num_attention_heads=2, head_dim=16, attention_probs_dropout_prob=0.0, **overrides)
    torch.manual_seed(0)
    module_class = ATTENTION_TYPES.implementation(MgkBertConfig(**kwargs).attention_type)  # MGK's or MLK's
    reference = module_class(MgkBertConfig(attn_implementation="eager", **kwargs))
    fused = module_class(MgkBertConfig(attn_implementation="sdpa", **kwargs))
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.normal_(0.0, 0.3)
        if reference.mixture_prior is not None:
            reference.mixture_prior.copy_(torch.tensor([[0.3, 0.7], [0.6, 0.4]]))
    fused.load_state_dict(reference.state_dict())
    return reference.to(dtype), fused.to(dtype)


def padded_hidden(batch: int = 3, seq_len: int = 11, dtype: torch.dtype = torch.float32, pad: bool = True):
    hidden = torch.randn(batch, seq_len, 32, generator=torch.Generator().manual_seed(1)).to(dtype)
    mask = torch.ones(batch, seq_len, dtype=torch.bool)
    if pad:
        mask[1, 7:] = False
        mask[2, 3:] = False
    return hidden, (mask if pad else None)


MODES = list(itertools.product(["separate", "shifted"], ["learned", "soft_em", "hard"]))
#: The paper's equal variances (default; ‖q‖² cancels) and the §3 ablation's unequal ones (it does not).
VARIANCES = pytest.mark.parametrize("variance_factors", [[1.0, 1.0], [1.0, 3.0]], ids=["equal", "ablation"])


@pytest.mark.parametrize(("key_mode", "mixture_weights"), MODES)
@pytest.mark.parametrize("pad", [False, True], ids=["no-padding", "padding"])
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
@VARIANCES
def test_fused_matches_reference_forward_and_backward(
    key_mode, mixture_weights, pad, training, variance_factors
) -> None:
    """In float64 the two exact forms agree to round-off (variants.md: 1e-15), outputs and gradients."""
    reference, fused = attention_pair(
        torch.float64, key_mode=key_mode, mixture_weights=mixture_weights, variance_factors=variance_factors
    )
    reference.train(training)
    fused.train(training)
    hidden, mask = padded_hidden(pad=pad, dtype=torch.float64)
    outputs, gradients = [], []
    for module in (reference, fused):
        x = hidden.clone().requires_grad_(True)
        out, _ = module(x, TokenLayout(mask))
        real = mask if mask is not None else torch.ones(out.shape[:2], dtype=torch.bool)
        (out[real] * torch.linspace(-1, 1, out.shape[-1], dtype=out.dtype)).sum().backward()
        outputs.append(out[real])
        gradients.append([x.grad] + [p.grad for p in module.parameters()])
    torch.testing.assert_close(outputs[1], outputs[0], atol=1e-12, rtol=1e-10)
    for got, expected in zip(gradients[1], gradients[0], strict=True):
        torch.testing.assert_close(got, expected, atol=1e-12, rtol=1e-10)
    if mixture_weights == "soft_em":  # both updated π identically in training, left it alone in eval
        torch.testing.assert_close(fused.mixture_prior, reference.mixture_prior)


def naive_mgk(module: MixtureOfKeysAttention, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Eq. (7) written out in float64 with explicit differences q_i − k_jr (no expansion tricks)."""
    query, keys, value = (t.double() for t in module.project(hidden))
    sigma2 = torch.tensor(module.config.variance_factors, dtype=torch.float64) * math.sqrt(module.head_dim)
    diff = query[:, :, None, :, None, :] - keys[:, :, :, None, :, :]  # (B, H, M, Nq, Nk, D)
    kernel = torch.exp(-(diff**2).sum(-1) / (2 * sigma2[None, None, :, None, None]))
    if module.config.mixture_weights == "hard":
        weights = kernel.amax(dim=2)
    else:
        priors = module.log_priors().double().exp()
        weights = (priors[None, :, :, None, None] * kernel).sum(dim=2)
    if mask is not None:
        weights = weights * mask[:, None, None, :]
    attention = weights / weights.sum(-1, keepdim=True)
    context = (attention @ value).transpose(1, 2).reshape(hidden.shape[0], hidden.shape[1], -1)
    return F.linear(context, module.output.weight.double(), module.output.bias.double())


def test_fused_matches_reference_in_float32() -> None:
    reference, fused = attention_pair()
    hidden, mask = padded_hidden()
    padding = TokenLayout(mask)
    torch.testing.assert_close(fused.eval()(hidden, padding)[0][mask], reference.eval()(hidden, padding)[0][mask])


@pytest.mark.parametrize(("key_mode", "mixture_weights"), MODES)
@VARIANCES
def test_reference_matches_equation_7_written_out(key_mode, mixture_weights, variance_factors) -> None:
    reference, fused = attention_pair(
        key_mode=key_mode, mixture_weights=mixture_weights, variance_factors=variance_factors
    )
    hidden, mask = padded_hidden()
    expected = naive_mgk(reference.eval(), hidden, mask)
    real = mask
    for module in (reference, fused):
        got, _ = module.eval()(hidden, TokenLayout(mask))
        torch.testing.assert_close(got[real].double(), expected[real], atol=1e-5, rtol=1e-5)


def test_hard_e_step_is_the_small_variance_limit() -> None:
    """``t · log Σ_r π_r exp(−d/(2tσ²))`` → ``max_r −d/(2σ²)`` as t → 0 (paper §2.3: hard E-step =
    MGK as σ → 0); so attention with the hard E-step is the limit of the soft scores."""
    torch.manual_seed(0)
    query, keys = torch.randn(2, 2, 6, 8, dtype=torch.float64), torch.randn(2, 2, 2, 6, 8, dtype=torch.float64)
    variances = torch.tensor([1.0, 3.0], dtype=torch.float64) * math.sqrt(8)
    log_priors = torch.log(torch.tensor([[0.3, 0.7], [0.5, 0.5]], dtype=torch.float64))
    hard = mixture_log_scores(query, keys, variances, log_priors, hard=True)
    previous_gap = math.inf
    for t in (1e-1, 1e-2, 1e-4):
        soft = t * mixture_log_scores(query, keys, variances * t, log_priors)
        gap = (soft - hard).abs().max().item()
        assert gap < previous_gap
        previous_gap = gap
    assert previous_gap < 1e-3
    torch.testing.assert_close(torch.softmax(soft, -1), torch.softmax(hard, -1), atol=1e-3, rtol=0)


@VARIANCES
def test_soft_e_step_updates_priors_only_in_training(variance_factors) -> None:
    reference, _ = attention_pair(mixture_weights="soft_em", variance_factors=variance_factors)
    hidden, mask = padded_hidden()
    initial = reference.mixture_prior.clone()
    reference.eval()(hidden, TokenLayout(mask))
    assert torch.equal(reference.mixture_prior, initial)

    # Expected M-step from eq. (8), computed independently in float64 with explicit differences.
    query, keys, _ = (t.double() for t in reference.project(hidden))
    sigma2 = torch.tensor(variance_factors, dtype=torch.float64) * math.sqrt(16)
    distance = ((query[:, :, None, :, None, :] - keys[:, :, :, None, :, :]) ** 2).sum(-1)
    weighted = initial.double()[None, :, :, None, None] * torch.exp(-distance / (2 * sigma2[None, None, :, None, None]))
    responsibilities = weighted / weighted.sum(dim=2, keepdim=True)
    pairs = (mask[:, :, None] & mask[:, None, :]).double()[:, None, None]
    expected = (responsibilities * pairs).sum(dim=(0, 3, 4)) / pairs.sum(dim=(0, 3, 4))

    reference.train()(hidden, TokenLayout(mask))
    torch.testing.assert_close(reference.mixture_prior.double(), expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(reference.mixture_prior.sum(-1), torch.ones(2))
    assert not reference.mixture_prior.requires_grad


def test_soft_e_step_priors_survive_save_and_load(tmp_path) -> None:
    config = MgkBertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=1, mixture_weights="soft_em", **MGK_SMALL, intermediate_size=64
    )
    model = MgkBertForMaskedLM(config).train()
    model(**make_inputs(config))
    prior = model.mgk_bert.encoder.layer[0].attention.mixture_prior.clone()
    assert not torch.allclose(prior, torch.full_like(prior, 0.5))
    model.save_pretrained(tmp_path)
    loaded = MgkBertForMaskedLM.from_pretrained(tmp_path)
    assert torch.equal(loaded.mgk_bert.encoder.layer[0].attention.mixture_prior, prior)


# ------------------------------------------------------------------------------------------------
def naive_mlk(module: MixtureOfKeysAttention, hidden: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """MLK (§2.4) as the quadratic sum ``Σ_j Σ_r π_r φ(q_i)ᵀφ(k_jr) v_j / Σ_j Σ_r π_r φ(q_i)ᵀφ(k_jr)``."""
    query, keys, value = (t.double() for t in module.project(hidden))
    phi = lambda t: F.elu(t) + 1  # noqa: E731
    priors = torch.softmax(module.mixture_logits.double(), -1)
    similarity = torch.einsum("bhid,bhrjd->bhrij", phi(query), phi(keys))
    weights = (priors[None, :, :, None, None] * similarity).sum(dim=2)
    if mask is not None:
        weights = weights * mask[:, None, None, :]
    context = (weights @ value) / weights.sum(-1, keepdim=True)
    context = context.transpose(1, 2).reshape(hidden.shape[0], hidden.shape[1], -1)
    return F.linear(context, module.output.weight.double(), module.output.bias.double())


@pytest.mark.parametrize("key_mode", ["separate", "shifted"])
def test_mlk_equals_the_quadratic_formula(key_mode: str) -> None:
    module, _ = attention_pair(attention_type="mlk", key_mode=key_mode)
    hidden, mask = padded_hidden()
    got, weights = module.eval()(hidden, TokenLayout(mask), output_attentions=True)
    expected = naive_mlk(module, hidden, mask)
    torch.testing.assert_close(got[mask].double(), expected[mask], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)), atol=1e-5, rtol=0)
    assert (weights.masked_select(~mask[:, None, None, :]) == 0).all()


class ShapeRecorder(TorchDispatchMode):
    """Records the shape of every tensor produced by an aten op."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[str, tuple[int, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for tensor in result if isinstance(result, (tuple, list)) else [result]:
            if isinstance(tensor, torch.Tensor):
                self.shapes.append((str(func), tuple(tensor.shape)))
        return result


def test_mlk_never_forms_an_n_by_n_tensor() -> None:
    module, _ = attention_pair(attention_type="mlk")
    seq_len = 97  # distinct from every other dimension
    hidden = torch.randn(2, seq_len, 32, requires_grad=True)
    mask = torch.ones(2, seq_len, dtype=torch.bool)
    mask[1, 50:] = False
    with ShapeRecorder() as recorder:
        out, _ = module.train()(hidden, TokenLayout(mask))
        out.sum().backward()
    assert recorder.shapes, "nothing was recorded"
    quadratic = [(op, shape) for op, shape in recorder.shapes if list(shape).count(seq_len) >= 2]
    assert quadratic == []


# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_low_precision_matches_float32(dtype: torch.dtype, implementation: str) -> None:
    reference, fused = attention_pair()
    module = reference if implementation == "eager" else fused
    hidden, mask = padded_hidden()
    with torch.no_grad():
        expected, _ = module.eval()(hidden, TokenLayout(mask))
        got, _ = module.to(dtype)(hidden.to(dtype), TokenLayout(mask))
    assert got.dtype == dtype
    scale = expected[mask].abs().max()
    tolerance = 1e-2 if dtype == torch.float16 else 4e-2
    assert ((got[mask].float() - expected[mask]).abs().max() / scale) < tolerance


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_no_nan_when_every_key_is_far_from_a_query(implementation: str) -> None:
    """Distances of ~1e6 make every exp underflow; log-sum-exp + softmax keep a valid distribution."""
    reference, fused = attention_pair(key_bias=True)
    module = (reference if implementation == "eager" else fused).eval()
    with torch.no_grad():
        module.key.bias.fill_(3e3)  # pushes every key far from every query
    hidden, mask = padded_hidden()
    with torch.no_grad():
        out, _ = module(hidden, TokenLayout(mask))
        eager = implementation == "eager"
        _, weights = reference.eval()(hidden, TokenLayout(mask), output_attentions=True) if eager else (0, None)
    assert torch.isfinite(out).all()
    if weights is not None:
        assert torch.isfinite(weights).all()
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))


# ------------------------------------------------------------------------------------------------
def count(module: torch.nn.Module, kind: str) -> int:
    """Entries of the projection (``nn.Linear``) weights or biases, or of a named parameter."""
    if kind in ("weight", "bias"):
        linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
        return sum(getattr(m, kind).numel() for m in linears if getattr(m, kind) is not None)
    return sum(p.numel() for name, p in module.named_parameters() if name.split(".")[-1] == kind)


@pytest.mark.parametrize(("heads", "head_dim"), [(8, 64), (4, 32), (12, 64)])
def test_parameter_counts_match_appendix_b(heads: int, head_dim: int) -> None:
    """Appendix B.2 with D_x = H·D: softmax H heads has 3HDD_x + (HD)² weights; MGK (option A, M = 2)
    with H/2 heads has 2HDD_x + 0.5(HD)² + H. Counted: the projection weight matrices, plus π as
    H/2 heads × M = H learned logits (shared over positions, as the paper counts). Biases are
    not in the paper's formulas and are counted separately: the paper's keys have none (the default),
    ``key_bias=True`` (the authors' code, hf-variants ≤ 0.2) adds one per key."""
    H, D = heads, head_dim
    hidden = H * D
    bert = BertAttention(BertConfig(hidden_size=hidden, num_attention_heads=H))
    assert count(bert, "weight") == 3 * H * D * hidden + (H * D) ** 2
    config = MgkBertConfig(hidden_size=hidden, num_attention_heads=H // 2, head_dim=D)
    mgk = MixtureOfKeysAttention(config)
    assert count(mgk, "weight") + count(mgk, "mixture_logits") == 2 * H * D * hidden + (H * D) ** 2 // 2 + H
    assert count(mgk, "bias") == (H // 2) * D * 2 + hidden  # query, value; output
    biased = MixtureOfKeysAttention(MgkBertConfig(hidden_size=hidden, num_attention_heads=H // 2, head_dim=D,
                                                  key_bias=True))  # fmt: skip
    assert count(biased, "weight") == count(mgk, "weight")
    assert count(biased, "bias") == count(mgk, "bias") + H * D  # two keys of H/2 heads
    assert mgk.output.in_features == (H // 2) * D and mgk.output.out_features == hidden

    shifted = MixtureOfKeysAttention(
        MgkBertConfig(hidden_size=hidden, num_attention_heads=H // 2, head_dim=D, key_mode="shifted")
    )
    # Option B: one key projection plus M shifts of width D per head.
    assert count(shifted, "weight") == 1.5 * H * D * hidden + (H * D) ** 2 // 2
    assert count(shifted, "key_shift") == 2 * (H // 2) * D
    assert shifted.key.bias is None  # the shifts b_r are the keys' only offsets


def test_configs_saved_before_key_bias_keep_their_key_biases(tmp_path: Path) -> None:
    """A config saved by hf-variants ≤ 0.2 has no ``key_bias`` field and biased keys: it loads with
    ``key_bias=True``, a keyword still wins, and a config saved today keeps the paper's ``False``."""
    current = MgkBertConfig(hidden_size=16, num_attention_heads=2, num_hidden_layers=1, intermediate_size=32)
    assert current.key_bias is False
    current.save_pretrained(tmp_path)
    assert MgkBertConfig.from_pretrained(tmp_path).key_bias is False
    saved = current.to_dict()
    del saved["key_bias"]
    assert MgkBertConfig.from_dict(saved).key_bias is True
    assert MgkBertConfig.from_dict(saved, key_bias=False).key_bias is False
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text(json.dumps(saved))
    loaded = AutoConfig.from_pretrained(old)  # the path of every from_pretrained (weights: test_old_checkpoints)
    assert loaded.key_bias is True and MixtureOfKeysAttention(loaded).key.bias is not None
    softmax = {key: value for key, value in saved.items() if key not in ("attention_type", "attention_kind")}
    softmax["model_type"] = "bert_control"
    switched = AutoConfig.for_model("bert_control").from_dict(softmax, attention_type="mgk")
    switched.validate()  # what building a model does: fills the fields of the pair switched to
    assert switched.attention_type == "mgk" and switched.key_bias is False  # never saved with MGK: today's


def test_mgk_config_errors() -> None:
    with pytest.raises(ValueError, match="variance_factors has 2 entries but num_key_components is 3"):
        MgkBertConfig(num_key_components=3)
    with pytest.raises(ValueError, match="key_mode must be one of"):
        MgkBertConfig(key_mode="tied")
    with pytest.raises(ValueError, match="supports only mixture_weights='learned'"):
        MgkBertConfig(attention_type="mlk", mixture_weights="hard")
    with pytest.raises(ValueError, match="variance_factors must be positive"):
        MgkBertConfig(variance_factors=[1.0, -3.0])
    with pytest.raises(ValueError, match="head_dim must be a positive integer"):
        MgkBertConfig(head_dim=0)
    assert MgkBertConfig(num_key_components=3, variance_factors=[1, 2, 3]).num_key_components == 3
