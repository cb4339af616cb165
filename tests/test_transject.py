"""TransJect: the common suite, orthogonality, Theorem 2's bounds, Σ modes, the entropic variant,
the reconstruction loss and per-forward caching of the orthogonal weights."""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
import pytest
import torch
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import _Orthogonal
from transformers import AutoModelForMaskedLM

from hf_variants import transject
from hf_variants.core import modeling_orthogonal_weights
from hf_variants.transject import (
    TransJectConfig,
    TransJectForMaskedLM,
    TransJectForSequenceClassification,
    TransJectModel,
)
from hf_variants.transject.modeling_transject import sinusoidal_positions

from .common import CommonEncoderTests, make_inputs

SMALL = {"num_experts": 2, "intermediate_size": 32, "num_attention_heads": 1}


class TestTransJectCommon(CommonEncoderTests):
    variant = transject.VARIANT
    config_kwargs: ClassVar[dict] = SMALL
    softmax_attention = False
    trainer_learning_rate = 3e-2


class TestExactRandomTransJectCommon(CommonEncoderTests):
    variant = transject.VARIANT
    config_kwargs: ClassVar[dict] = {**SMALL, "eigenvalue_mode": "exact", "residual_weight": "tanh"}
    softmax_attention = False
    trainer_learning_rate = 3e-2


class TestEntropicTransJectCommon(CommonEncoderTests):
    """Entropic with code-style input-dependent expert weights and random Σ (deterministic in eval)."""

    variant = transject.VARIANT
    config_kwargs: ClassVar[dict] = {
        **SMALL,
        "entropic": True,
        "eigenvalue_mode": "random",
        "expert_weights": "input_dependent",
        "use_token_type_embeddings": True,
    }
    softmax_attention = False
    trainer_learning_rate = 3e-2


def small_config(**overrides) -> TransJectConfig:
    kwargs = dict(vocab_size=60, hidden_size=16, num_hidden_layers=3, num_experts=2, max_position_embeddings=64)
    return TransJectConfig(**{**kwargs, **overrides})


def orthogonal_matrices(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {
        name: module.weight.detach()
        for name, module in model.named_modules()
        if parametrize.is_parametrized(module, "weight")
    }


def assert_orthogonal(model: torch.nn.Module, tolerance: float = 1e-5) -> None:
    matrices = orthogonal_matrices(model)
    assert matrices, "no orthogonal matrices found"
    for name, weight in matrices.items():
        identity = torch.eye(weight.shape[0])
        assert (weight.T @ weight - identity).abs().max() < tolerance, name


def test_embeddings_concatenate_tokens_and_sinusoidal_positions() -> None:
    model = TransJectModel(small_config()).eval()
    ids = torch.tensor([[5, 6, 5, 7]])
    embeddings = model.embeddings(input_ids=ids)
    assert embeddings.shape == (1, 4, 16)
    torch.testing.assert_close(embeddings[..., :8], model.embeddings.word_embeddings(ids))
    positions = torch.arange(4, dtype=torch.float64)[:, None]
    frequencies = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    expected = torch.stack([torch.sin(positions * frequencies), torch.cos(positions * frequencies)], -1).flatten(1)
    torch.testing.assert_close(embeddings[0, :, 8:].double(), expected, atol=1e-6, rtol=0)
    # Injective: the same token at two positions gets two different embeddings.
    assert not torch.allclose(embeddings[0, 0], embeddings[0, 2])


def test_position_code_is_recomputed_after_loading(tmp_path) -> None:
    model = TransJectModel(small_config())
    model.save_pretrained(tmp_path)
    assert not any("position" in key for key in model.state_dict())  # nothing stored, nothing stale
    loaded = TransJectModel.from_pretrained(tmp_path)
    ids = torch.tensor([[3, 4, 5]])
    code = sinusoidal_positions(torch.arange(3)[None], 8, torch.float32)
    torch.testing.assert_close(loaded.embeddings(input_ids=ids)[..., 8:], code)


@pytest.mark.parametrize("orthogonal_map", ["cayley", "matrix_exp"])
def test_orthogonal_after_training_and_after_save_load(tmp_path, orthogonal_map: str) -> None:
    torch.manual_seed(0)
    config = small_config(num_labels=2, orthogonal_map=orthogonal_map)
    model = TransJectForSequenceClassification(config).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-2)
    inputs = make_inputs(config, batch=4)
    labels = torch.tensor([0, 1, 1, 0])
    before = {k: v.clone() for k, v in orthogonal_matrices(model).items()}
    for _ in range(10):
        model(**inputs, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    after = orthogonal_matrices(model)
    assert any(not torch.allclose(before[k], after[k]) for k in before), "training did not move the matrices"
    assert model.transject.encoder.layer[0].alpha.item() != 0.0
    assert_orthogonal(model)
    model.save_pretrained(tmp_path)
    loaded = TransJectForSequenceClassification.from_pretrained(tmp_path)
    assert_orthogonal(loaded)
    for name, weight in orthogonal_matrices(loaded).items():
        assert torch.equal(weight, after[name]), name


def test_switching_the_orthogonal_map_keeps_the_trained_function(tmp_path) -> None:
    torch.manual_seed(0)
    config = small_config(orthogonal_map="matrix_exp")
    model = TransJectForMaskedLM(config).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-2)
    inputs = make_inputs(config, batch=4)
    for _ in range(5):
        model(**inputs, labels=inputs["input_ids"]).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    with torch.no_grad():
        before = model(**inputs).logits
    matrices = orthogonal_matrices(model)
    model.reparametrize(orthogonal_map="cayley")
    assert model.config.orthogonal_map == "cayley"
    maps = {str(m.parametrizations.weight[0].orthogonal_map) for m in model.modules() if hasattr(m, "parametrizations")}
    assert maps == {"_OrthMaps.cayley"}
    for name, weight in orthogonal_matrices(model).items():
        torch.testing.assert_close(weight, matrices[name], atol=1e-6, rtol=0)
    with torch.no_grad():
        torch.testing.assert_close(model(**inputs).logits, before, atol=1e-5, rtol=1e-5)
    model.save_pretrained(tmp_path)
    loaded = TransJectForMaskedLM.from_pretrained(tmp_path).eval()
    assert loaded.config.orthogonal_map == "cayley"
    with torch.no_grad():
        torch.testing.assert_close(loaded(**inputs).logits, before, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="orthogonal_map must be one of"):
        model.reparametrize(orthogonal_map="svd")
    with pytest.raises(ValueError, match=r"eigenvalue_mode is not a parametrization field .* orthogonal_map"):
        model.reparametrize(eigenvalue_mode="exact")
    # hf-variants 0.2's name still works, with a FutureWarning naming the new one.
    with pytest.warns(FutureWarning, match=r"reparametrize\(orthogonal_map='matrix_exp'\)"):
        model.set_orthogonal_map("matrix_exp")
    assert model.config.orthogonal_map == "matrix_exp"
    with torch.no_grad():
        torch.testing.assert_close(model(**inputs).logits, before, atol=1e-5, rtol=1e-5)
    # Loading with another map than the checkpoint's (kwarg or config override) switches exactly.
    for loaded in (
        TransJectForMaskedLM.from_pretrained(tmp_path, orthogonal_map="matrix_exp"),
        AutoModelForMaskedLM.from_pretrained(tmp_path, config=small_config(orthogonal_map="matrix_exp")),
    ):
        assert loaded.config.orthogonal_map == "matrix_exp"
        with torch.no_grad():
            torch.testing.assert_close(loaded.eval()(**inputs).logits, before, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("alpha", [0.95, -0.95])
@pytest.mark.parametrize("layers", [1, 3, 6])
def test_distance_ratio_within_theorem_2_bounds(alpha: float, layers: int) -> None:
    """With Σ fixed and |α/L| < 1/L, ``(1 − 1/L)^{2L} ≤ ‖f(x) − f(y)‖ / ‖x − y‖ ≤ e²`` for the
    non-entropic encoder f (constant expert weights, ELU, orthogonal maps)."""
    torch.manual_seed(layers)
    config = small_config(num_hidden_layers=layers, num_experts=3, eigenvalue_mode="exact")
    model = TransJectModel(config).eval()
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.alpha.fill_(alpha)
            layer.expert_logits.normal_()
        for name, parameter in model.named_parameters():
            if name.endswith("original"):
                parameter.normal_(0.0, 0.5)  # move the orthogonal matrices away from their base
    eigenvalues = torch.rand(1, 16) * 2 - 1
    eigenvalues = eigenvalues / eigenvalues.abs().max()
    lower, upper = (1 - 1 / layers) ** (2 * layers), math.e**2
    ratios = []
    with torch.no_grad():
        for trial in range(50):
            scale = 10.0 ** (trial % 5 - 2)  # distances from 0.01 to 100
            x = torch.randn(1, 7, 16) * 3
            y = x + scale * torch.randn(1, 7, 16)
            fx = model.encoder(x, None, (eigenvalues,))[0]
            fy = model.encoder(y, None, (eigenvalues,))[0]
            ratios.append(((fx - fy).norm() / (x - y).norm()).item())
    assert lower <= min(ratios) and max(ratios) <= upper, (min(ratios), max(ratios))
    assert max(ratios) > 1.0 or min(ratios) < 1.0  # the layers do act


def test_exact_eigenvalues_exclude_padding() -> None:
    model = TransJectModel(small_config(eigenvalue_mode="exact")).eval()
    inputs = make_inputs(model.config, batch=2, seq_len=9)
    inputs["attention_mask"][1, 5:] = 0
    with torch.no_grad():
        output = model(**inputs, output_diagnostics=True)
        embeddings = model.embeddings(input_ids=inputs["input_ids"]).double().numpy()
    for row in range(2):
        real = embeddings[row, inputs["attention_mask"][row].bool().numpy()]
        expected = np.sort(np.linalg.eigvalsh(real.T @ real))[::-1]
        expected = expected / np.abs(expected).max()
        np.testing.assert_allclose(output.diagnostics["eigenvalues"][row].numpy(), expected, atol=1e-5)


def test_exact_eigenvalues_are_computed_in_float64(monkeypatch: pytest.MonkeyPatch) -> None:
    """float32 eigvalsh once failed to converge on an ill-conditioned Gram matrix; the solver gets float64."""
    dtypes = []
    eigvalsh = torch.linalg.eigvalsh

    def recording(matrix: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        dtypes.append(matrix.dtype)
        return eigvalsh(matrix, *args, **kwargs)

    monkeypatch.setattr(torch.linalg, "eigvalsh", recording)
    model = TransJectModel(small_config(eigenvalue_mode="exact")).eval()
    with torch.no_grad():
        output = model(**make_inputs(model.config), output_diagnostics=True)
    assert dtypes == [torch.float64]
    assert output.diagnostics["eigenvalues"].dtype == torch.float32


def test_approx_eigenvalues_are_the_diagonal_in_the_learned_basis() -> None:
    model = TransJectModel(small_config()).eval()
    inputs = make_inputs(model.config, batch=2)
    with torch.no_grad():
        output = model(**inputs, output_diagnostics=True)
        embeddings = model.embeddings(input_ids=inputs["input_ids"]) * inputs["attention_mask"][..., None]
        basis = model.eigenvalues.eigenvectors.weight
        gram = embeddings.transpose(1, 2) @ embeddings
        diagonal = torch.diagonal(basis.T @ gram @ basis, dim1=-2, dim2=-1)
        expected = diagonal / diagonal.abs().amax(-1, keepdim=True)
        reconstruction = basis @ torch.diag_embed(diagonal) @ basis.T
        error = (torch.linalg.matrix_norm(gram - reconstruction) / torch.linalg.matrix_norm(gram)).mean()
    torch.testing.assert_close(output.diagnostics["eigenvalues"], expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(output.diagnostics["reconstruction_loss"], error, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(output.auxiliary_loss, 1e-3 * error, atol=1e-8, rtol=1e-5)


def test_random_eigenvalues_are_fixed_per_model_and_standardised() -> None:
    model = TransJectModel(small_config(eigenvalue_mode="random")).eval()
    with torch.no_grad():
        first = model(**make_inputs(model.config, seed=0), output_diagnostics=True).diagnostics["eigenvalues"]
        second = model(**make_inputs(model.config, seed=1), output_diagnostics=True).diagnostics["eigenvalues"]
    assert torch.equal(first[0], second[0]) and torch.equal(first[0], first[1])
    assert first.abs().max().item() == pytest.approx(1.0)
    assert model(**make_inputs(model.config), output_diagnostics=True).auxiliary_loss is None


def test_mlm_loss_adds_the_weighted_reconstruction_loss() -> None:
    model = TransJectForMaskedLM(small_config(reconstruction_loss_weight=0.5)).eval()
    inputs = make_inputs(model.config)
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    with torch.no_grad():
        out = model(**inputs, labels=labels, output_diagnostics=True)
    task = torch.nn.functional.cross_entropy(out.logits.view(-1, model.config.vocab_size), labels.view(-1))
    torch.testing.assert_close(out.loss, task + out.auxiliary_loss)
    torch.testing.assert_close(out.auxiliary_loss, 0.5 * out.diagnostics["reconstruction_loss"])
    assert model.lm_head.decoder.weight.shape == (model.config.vocab_size, 8)  # tied to the d/2 embeddings


def test_reconstruction_loss_decreases_when_trained_alone() -> None:
    torch.manual_seed(0)
    model = TransJectModel(small_config(hidden_size=32))
    inputs = make_inputs(model.config, batch=8, seq_len=20)
    with torch.no_grad():
        embeddings = model.embeddings(input_ids=inputs["input_ids"])
    mask = inputs["attention_mask"].bool()
    optimizer = torch.optim.Adam(model.eigenvalues.parameters(), lr=0.05)
    losses = []
    for _ in range(60):
        _, loss = model.eigenvalues(embeddings, mask)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses[::10]


def test_entropic_variant_samples_in_training_and_is_deterministic_in_eval() -> None:
    torch.manual_seed(0)
    entropic = TransJectModel(small_config(entropic=True)).eval()
    with torch.no_grad():
        for layer in entropic.encoder.layer:
            layer.alpha.fill_(0.8)
    plain = TransJectModel(small_config())
    plain.load_state_dict(entropic.state_dict())
    plain.eval()
    inputs = make_inputs(entropic.config)
    with torch.no_grad():
        first, second = entropic(**inputs).last_hidden_state, entropic(**inputs).last_hidden_state
        torch.testing.assert_close(first, second, rtol=0, atol=0)
        # Evaluation uses the expectation of eq. (4), x + r: the non-entropic layer.
        torch.testing.assert_close(first, plain(**inputs).last_hidden_state)
        entropic.train()
        sampled = [entropic(**inputs).last_hidden_state for _ in range(2)]
    assert not torch.allclose(sampled[0], sampled[1])
    entropic.config.entropic_eval = "sample"
    entropic.eval()
    with torch.no_grad():
        assert not torch.allclose(entropic(**inputs).last_hidden_state, entropic(**inputs).last_hidden_state)


def test_entropic_update_has_the_expectation_x_plus_r() -> None:
    layer = TransJectModel(small_config(entropic=True)).encoder.layer[0].train()
    x, update = torch.randn(4000, 1, 16), torch.randn(4000, 1, 16)
    torch.manual_seed(0)
    sampled = layer.residual(x, update)
    # Each unit takes one of the four branches of eq. (4).
    branches = torch.stack([1.5 * x + update, 1.5 * x - update, 4 * update, x])
    assert bool(((sampled[None] - branches).abs() < 1e-6).any(0).all())
    torch.testing.assert_close(sampled.mean(0), (x + update).mean(0), atol=0.15, rtol=0)


def test_orthogonal_weights_are_computed_once_per_forward(monkeypatch) -> None:
    """All of them in one batched map, and never one by one through torch's parametrisation."""
    model = TransJectForMaskedLM(small_config()).eval()
    batched, one_by_one = [], []
    original_map, original_forward = modeling_orthogonal_weights.orthogonal_matrices, _Orthogonal.forward
    monkeypatch.setattr(modeling_orthogonal_weights, "orthogonal_matrices",
                        lambda stack, *rest: batched.append(len(stack)) or original_map(stack, *rest))  # fmt: skip
    monkeypatch.setattr(_Orthogonal, "forward", lambda self, X: one_by_one.append(1) or original_forward(self, X))
    with torch.no_grad():
        model(**make_inputs(model.config))
    # per layer: 2 per expert + 2 FFN; plus the eigenvector basis of the approx mode
    expected = model.config.num_hidden_layers * (2 * model.config.num_experts + 2) + 1
    assert batched == [expected] and one_by_one == []
    assert expected == len(orthogonal_matrices(model))


class TestSigmoidStandardNormalTransJectCommon(CommonEncoderTests):
    """eq. 3's α_l ∈ (0, 1) read as stated, and the authors' N(0, 1) token embeddings."""

    variant = transject.VARIANT
    config_kwargs: ClassVar[dict] = {**SMALL, "residual_weight": "sigmoid", "embedding_init": "standard_normal"}
    softmax_attention = False
    trainer_learning_rate = 3e-2


def test_layers_learn_from_the_first_step_only_when_alpha_starts_inside_0_1() -> None:
    """At ReZero's α_l = tanh(0) = 0 the layers are the identity and the gradients of their attention
    and FFN weights are exactly 0 (∝ α_l); ``"sigmoid"`` starts at α_l = 0.5 and they learn at once."""
    gradients = {}
    for residual_weight in ("tanh", "sigmoid"):
        torch.manual_seed(0)
        model = TransJectForMaskedLM(small_config(residual_weight=residual_weight, num_hidden_layers=2))
        assert [layer.residual_weight().item() for layer in model.transject.encoder.layer] == (
            [0.0, 0.0] if residual_weight == "tanh" else [0.5, 0.5]
        )
        inputs = make_inputs(model.config)
        model(**inputs, labels=inputs["input_ids"]).loss.backward()
        encoder = model.transject.encoder.named_parameters()
        layer_weights = [p.grad for name, p in encoder if "alpha" not in name and p.grad is not None]
        gradients[residual_weight] = max(float(grad.abs().max()) for grad in layer_weights)
    assert gradients["tanh"] == 0.0 and gradients["sigmoid"] > 1e-4
    layer = TransJectModel(small_config(residual_weight="sigmoid")).encoder.layer[0]
    with torch.no_grad():
        for a in (-50.0, 50.0):
            layer.alpha.fill_(a)
            assert 0.0 <= layer.residual_weight().item() <= 1.0  # eq. 3's range, so Theorem 2 holds


def test_standard_normal_embedding_init_is_the_authors_and_training_only(tmp_path) -> None:
    torch.manual_seed(0)
    default = TransJectModel(small_config(vocab_size=4000)).embeddings.word_embeddings.weight
    model = TransJectForMaskedLM(small_config(vocab_size=4000, embedding_init="standard_normal"))
    weight = model.transject.embeddings.word_embeddings.weight
    pad = model.config.pad_token_id
    assert abs(float(weight[1:].std()) - 1.0) < 0.05 and abs(float(default[1:].std()) - 0.02) < 0.002
    assert not weight[pad].any()
    model.save_pretrained(tmp_path)
    loaded = TransJectForMaskedLM.from_pretrained(tmp_path, embedding_init="initializer_range")
    assert torch.equal(loaded.transject.embeddings.word_embeddings.weight, weight)  # loaded weights stay
    assert "embedding_init" in model.config.training_only_fields()
    with pytest.raises(ValueError, match="embedding_init must be one of"):
        small_config(embedding_init="xavier")


def test_transject_config_errors() -> None:
    with pytest.raises(ValueError, match="must be even"):
        small_config(hidden_size=15)
    with pytest.raises(ValueError, match="eigenvalue_mode must be one of"):
        small_config(eigenvalue_mode="svd")
    with pytest.raises(ValueError, match="num_experts must be a positive integer"):
        small_config(num_experts=0)
    with pytest.raises(ValueError, match="reconstruction_loss_weight"):
        small_config(reconstruction_loss_weight=-1.0)


def test_alpha_zero_makes_every_layer_the_identity_and_restores_it() -> None:
    """The bounds script and the grid report accuracy "with α_l = 0": inside ``layers_as_identity`` the
    encoder returns its input embeddings unchanged (every residual step is 0), and α_l comes back after."""
    from hf_variants.core.schemes.injective.modeling_injective import layers_as_identity, residual_weights

    torch.manual_seed(0)
    model = TransJectModel(small_config(residual_weight="sigmoid")).eval()
    inputs = make_inputs(model.config)
    with torch.no_grad():
        before = model(**inputs).last_hidden_state
        embeddings = model.embeddings(input_ids=inputs["input_ids"])
        with layers_as_identity(model):
            assert residual_weights(model) == [0.0, 0.0, 0.0]
            torch.testing.assert_close(model(**inputs).last_hidden_state, embeddings, rtol=0, atol=0)
        assert residual_weights(model) == [0.5, 0.5, 0.5]
        torch.testing.assert_close(model(**inputs).last_hidden_state, before, rtol=0, atol=0)
    assert not torch.allclose(before, embeddings)  # the layers act when α_l = 0.5


def test_an_idea_reports_itself_to_a_study_that_does_not_name_it() -> None:
    """The generic diagnostics (:mod:`hf_variants.core.diagnostics`) a study reads: TransJect's layers report α_l
    and offer the identity ablation; the same model without the injective scheme reports and offers nothing, and
    asking it for the ablation names what it offers."""
    from hf_variants.core.diagnostics import ablated, ablations, diagnostics

    model = TransJectModel(small_config(residual_weight="sigmoid"))
    assert diagnostics(model) == {"residual_weights": [0.5, 0.5, 0.5]} and ablations(model) == ["identity_layers"]
    with ablated(model, "identity_layers"):
        assert diagnostics(model) == {"residual_weights": [0.0, 0.0, 0.0]}
    assert diagnostics(model)["residual_weights"] == [0.5, 0.5, 0.5]
    with pytest.raises(RuntimeError, match="inside"), ablated(model, "identity_layers"):
        raise RuntimeError("inside")
    assert diagnostics(model)["residual_weights"] == [0.5, 0.5, 0.5]  # restored after an error too
    plain = TransJectModel(small_config(layer_scheme="vanilla"))
    assert diagnostics(plain) == {} and ablations(plain) == []
    with pytest.raises(ValueError, match="offers no ablation 'identity_layers'; it offers none"):
        ablated(plain, "identity_layers").__enter__()
