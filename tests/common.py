"""The common test suite every variant plugs into (in the spirit of transformers' ModelTesterMixin).

A variant's test module subclasses :class:`CommonEncoderTests` with::

    class TestMyVariant(CommonEncoderTests):
        variant = my_variant.VARIANT
        config_kwargs = {...}          # a small config
        softmax_attention = True       # eager vs sdpa comparison applies

and pytest runs every ``test_*`` method below for it.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
import transformers
from transformers import AutoConfig, PreTrainedModel, Trainer, TrainingArguments

from hf_variants.core.composition import has_attention_probabilities
from hf_variants.core.registration import Variant
from hf_variants.hub import export_for_hub

from .helpers import run_python

#: Sizes of the small models the tests build (variant-specific fields are added on top).
SMALL_SIZES: dict[str, Any] = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}

HEADS = (
    "AutoModel",
    "AutoModelForMaskedLM",
    "AutoModelForSequenceClassification",
    "AutoModelForTokenClassification",
    "AutoModelForQuestionAnswering",
    "AutoModelForMultipleChoice",
)

#: Preamble of scripts run in a fresh interpreter that must not be able to import hf_variants.
WITHOUT_PACKAGE = textwrap.dedent(
    """
    import importlib.abc, json, sys
    class BlockHfVariants(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "hf_variants":
                raise ModuleNotFoundError("hf_variants is blocked in this test")
    sys.meta_path.insert(0, BlockHfVariants())
    try:
        import hf_variants  # noqa: F401
        raise SystemExit("hf_variants is importable: the test would prove nothing")
    except ModuleNotFoundError:
        pass
    """
)

#: Loads every head from an exported folder with trust_remote_code and compares with the outputs
#: saved by the test.
REMOTE_LOAD_SCRIPT = WITHOUT_PACKAGE + textwrap.dedent(
    """
    import torch, transformers
    folder, reference_file = sys.argv[1], sys.argv[2]
    reference = torch.load(reference_file)
    report = {}
    for head in reference["heads"]:
        inputs = reference["inputs_mc"] if head == "AutoModelForMultipleChoice" else reference["inputs"]
        model = getattr(transformers, head).from_pretrained(folder, trust_remote_code=True).eval()
        if type(model).__module__.startswith("hf_variants"):
            raise SystemExit("loaded the installed package instead of the remote code")
        with torch.no_grad():
            got = model(**inputs, return_dict=False)[0]
        expected = reference["outputs"].get(head)
        difference = float((got - expected).abs().max()) if expected is not None else None
        report[head] = [type(model).__name__, bool(torch.isfinite(got).all()), difference]
    print(json.dumps(report))
    """
)


def make_inputs(config: Any, batch: int = 3, seq_len: int = 9, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random ids (never the pad id) with right padding of different lengths per row."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, config.vocab_size, (batch, seq_len), generator=generator)
    lengths = [seq_len - (i % 3) * 2 for i in range(batch)]
    attention_mask = torch.zeros(batch, seq_len, dtype=torch.long)
    for row, length in enumerate(lengths):
        attention_mask[row, :length] = 1
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, seq_len // 2 :] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def make_multiple_choice_inputs(
    config: Any, batch: int = 3, seq_len: int = 9, num_choices: int = 2, seed: int = 0
) -> dict[str, torch.Tensor]:
    """``(batch, num_choices, seq_len)`` inputs with a different sequence for every choice."""
    flat = make_inputs(config, batch * num_choices, seq_len, seed)
    return {k: v.view(batch, num_choices, seq_len) for k, v in flat.items()}


def enable_checkpointing(model: PreTrainedModel) -> None:
    """Activation checkpointing through the name this transformers version offers (newer versions
    deprecate ``gradient_checkpointing_enable`` for ``activation_checkpointing_enable``)."""
    method = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
    method()


def perturb_parameters(model: torch.nn.Module, seed: int = 1) -> None:
    """Move every parameter away from its initial value, so a re-initialisation after loading shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))


def first_output(model: PreTrainedModel, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    return model(**inputs, return_dict=False)[0]


class CommonEncoderTests:
    variant: ClassVar[Variant]
    config_kwargs: ClassVar[dict[str, Any]]
    softmax_attention: ClassVar[bool] = True
    #: False where the variant refuses gradient checkpointing with a clear error (tested instead).
    gradient_checkpointing: ClassVar[bool] = True
    #: Tolerance for comparisons that differ only by float re-association (batching, checkpointing).
    atol: ClassVar[float] = 1e-5
    #: Learning rate of the short Trainer runs (ReZero-initialised variants start as the identity
    #: and need a larger one to move within 15 steps).
    trainer_learning_rate: ClassVar[float] = 5e-3

    # ------------------------------------------------------------------ helpers
    def config(self, **overrides: Any) -> Any:
        return self.variant.config_class(**{**SMALL_SIZES, **self.config_kwargs, **overrides})

    def model(self, head: str = "AutoModel", seed: int = 0, **overrides: Any) -> PreTrainedModel:
        torch.manual_seed(seed)
        return self.variant.models[head](self.config(**overrides)).eval()

    def head_inputs(self, head: str, config: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
        if head == "AutoModelForMultipleChoice":
            return make_multiple_choice_inputs(config, **kwargs)
        return make_inputs(config, **kwargs)

    # ------------------------------------------------------------------ registration and shapes
    def test_auto_classes_build_the_variant(self) -> None:
        fields = {**SMALL_SIZES, **self.config_kwargs, "vocab_size": 50}  # (a grid class's kwargs hold no sizes)
        config = AutoConfig.for_model(self.variant.model_type, **fields)
        assert isinstance(config, self.variant.config_class)
        for head in HEADS:
            model = getattr(transformers, head).from_config(config)
            assert type(model) is self.variant.models[head]

    def test_output_shapes_of_every_head(self) -> None:
        config = self.config(num_labels=3)
        batch, seq_len, hidden = 3, 9, config.hidden_size
        inputs = make_inputs(config, batch, seq_len)
        with torch.no_grad():
            base = self.variant.models["AutoModel"](config).eval()(**inputs)
            assert base.last_hidden_state.shape == (batch, seq_len, hidden)
            assert base.pooler_output.shape == (batch, hidden)
            mlm = self.variant.models["AutoModelForMaskedLM"](config).eval()(**inputs)
            assert mlm.logits.shape == (batch, seq_len, config.vocab_size)
            seq = self.variant.models["AutoModelForSequenceClassification"](config).eval()(**inputs)
            assert seq.logits.shape == (batch, 3)
            tok = self.variant.models["AutoModelForTokenClassification"](config).eval()(**inputs)
            assert tok.logits.shape == (batch, seq_len, 3)
            qa = self.variant.models["AutoModelForQuestionAnswering"](config).eval()(**inputs)
            assert qa.start_logits.shape == qa.end_logits.shape == (batch, seq_len)
            mc_inputs = make_multiple_choice_inputs(config, batch, seq_len, num_choices=4)
            mc = self.variant.models["AutoModelForMultipleChoice"](config).eval()(**mc_inputs)
            assert mc.logits.shape == (batch, 4)
        for output in (base.last_hidden_state, mlm.logits, seq.logits, tok.logits, qa.start_logits, mc.logits):
            assert torch.isfinite(output).all()

    def test_hidden_states_and_attentions_are_returned(self) -> None:
        config = self.config()
        model = self.variant.models["AutoModel"](config).eval()
        inputs = make_inputs(config)
        with torch.no_grad():
            out = model(**inputs, output_hidden_states=True, output_attentions=True)
        assert len(out.hidden_states) == config.num_hidden_layers + 1
        assert torch.equal(out.hidden_states[-1], out.last_hidden_state)
        if not has_attention_probabilities(config):  # attention-free: declared, not a tuple of Nones
            assert out.attentions is None
            return
        assert len(out.attentions) == config.num_hidden_layers
        assert all(isinstance(weights, torch.Tensor) for weights in out.attentions)
        if self.softmax_attention:
            padded_keys = inputs["attention_mask"] == 0
            for weights in out.attentions:
                assert weights.shape == (3, config.num_attention_heads, 9, 9)
                torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))
                assert (weights.masked_select(padded_keys[:, None, None, :]) == 0).all()

    # ------------------------------------------------------------------ save / load
    @pytest.mark.parametrize("head", HEADS)
    def test_save_load_round_trip_is_bit_identical(self, head: str, tmp_path: Path) -> None:
        model = self.model(head, num_labels=3)
        perturb_parameters(model)
        inputs = self.head_inputs(head, model.config)
        model.save_pretrained(tmp_path)
        loaded = getattr(transformers, head).from_pretrained(tmp_path).eval()
        assert type(loaded) is type(model)
        saved, restored = model.state_dict(), loaded.state_dict()
        assert saved.keys() == restored.keys() and all(torch.equal(saved[k], restored[k]) for k in saved)
        # Weights read from a safetensors file can sit at addresses of another alignment than freshly
        # allocated ones, which on some CPUs selects another SIMD kernel (last-bit differences, 7e-9 seen):
        # the function is compared with the loaded weights in fresh memory, bit for bit.
        with torch.no_grad():
            for parameter in loaded.parameters():
                parameter.data = parameter.data.clone()
            assert torch.equal(first_output(model, inputs), first_output(loaded, inputs))

    @pytest.mark.parametrize("head", HEADS)
    def test_from_pretrained_reinitialises_no_loaded_weight(self, head: str, tmp_path: Path) -> None:
        model = self.model(head, num_labels=3)
        perturb_parameters(model)
        model.save_pretrained(tmp_path)
        loaded = getattr(transformers, head).from_pretrained(tmp_path)
        expected, got = model.state_dict(), loaded.state_dict()
        assert expected.keys() == got.keys()
        changed = [name for name in expected if not torch.equal(expected[name], got[name])]
        assert changed == []

    @pytest.mark.parametrize("head", HEADS[2:])
    def test_fine_tuning_head_loads_the_pretrained_backbone(self, head: str, tmp_path: Path) -> None:
        """A task head loaded from an MLM checkpoint keeps every backbone weight; only its own
        new layers (and the pooler, which MLM does not train) are initialised."""
        pretrained = self.model("AutoModelForMaskedLM")
        perturb_parameters(pretrained)
        pretrained.save_pretrained(tmp_path)
        fine_tuned = getattr(transformers, head).from_pretrained(tmp_path, num_labels=3)
        expected, got = pretrained.base_model.state_dict(), fine_tuned.base_model.state_dict()
        shared = [name for name in got if name in expected]
        assert len(shared) == len(expected) > 0
        assert [name for name in shared if not torch.equal(expected[name], got[name])] == []

    def test_mlm_decoder_tied_after_load_and_resize(self, tmp_path: Path) -> None:
        model = self.model("AutoModelForMaskedLM")
        embeddings = model.get_input_embeddings()
        assert model.get_output_embeddings().weight is embeddings.weight
        model.save_pretrained(tmp_path)
        loaded = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path)
        assert loaded.get_output_embeddings().weight is loaded.get_input_embeddings().weight

        new_size = model.config.vocab_size + 7
        loaded.resize_token_embeddings(new_size)
        decoder = loaded.get_output_embeddings()
        assert decoder.weight is loaded.get_input_embeddings().weight
        assert decoder.weight.shape[0] == decoder.bias.shape[0] == loaded.config.vocab_size == new_size
        inputs = make_inputs(loaded.config)
        inputs["input_ids"][0, 0] = new_size - 1  # a new token id is now valid
        with torch.no_grad():
            assert loaded.eval()(**inputs).logits.shape[-1] == new_size

    def test_untied_decoder_when_configured(self) -> None:
        model = self.model("AutoModelForMaskedLM", tie_word_embeddings=False)
        assert model.get_output_embeddings().weight is not model.get_input_embeddings().weight

    # ------------------------------------------------------------------ training-time behaviour
    def test_gradient_checkpointing_gives_the_same_gradients(self) -> None:
        config = self.config()
        if not self.gradient_checkpointing:
            with pytest.raises(ValueError, match="gradient checkpointing"):
                enable_checkpointing(self.variant.models["AutoModelForMaskedLM"](config))
            return
        inputs = make_inputs(config)
        labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)

        def gradients(checkpointing: bool) -> dict[str, torch.Tensor]:
            torch.manual_seed(0)
            model = self.variant.models["AutoModelForMaskedLM"](config).train()
            if checkpointing:
                enable_checkpointing(model)
                assert all(layer.gradient_checkpointing for layer in model.base_model.encoder.layer)
            model(**inputs, labels=labels).loss.backward()
            return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

        plain, checkpointed = gradients(False), gradients(True)
        assert plain.keys() == checkpointed.keys() and len(plain) > 0
        for name in plain:
            torch.testing.assert_close(checkpointed[name], plain[name], atol=self.atol, rtol=1e-4, msg=name)

    def test_eager_and_sdpa_agree(self) -> None:
        if not self.softmax_attention:
            pytest.skip("this variant has no softmax attention implementations to compare")
        inputs = make_inputs(self.config())
        outputs = {}
        for implementation in ("eager", "sdpa"):
            model = self.model("AutoModelForMaskedLM", attn_implementation=implementation)
            assert model.config._attn_implementation == implementation
            with torch.no_grad():
                outputs[implementation] = model(**inputs).logits
        real = inputs["attention_mask"].bool()
        torch.testing.assert_close(outputs["sdpa"][real], outputs["eager"][real], atol=self.atol, rtol=1e-4)

    def test_padding_invariance(self) -> None:
        """Outputs at real tokens do not change when padding (with arbitrary ids) is appended."""
        model = self.model()
        ids = torch.randint(1, model.config.vocab_size, (1, 7), generator=torch.Generator().manual_seed(3))
        padded_ids = torch.cat([ids, torch.randint(1, model.config.vocab_size, (1, 5))], dim=1)
        mask = torch.cat([torch.ones(1, 7), torch.zeros(1, 5)], dim=1).long()
        with torch.no_grad():
            alone = model(input_ids=ids)
            padded = model(input_ids=padded_ids, attention_mask=mask)
        torch.testing.assert_close(padded.last_hidden_state[:, :7], alone.last_hidden_state, atol=self.atol, rtol=1e-4)
        torch.testing.assert_close(padded.pooler_output, alone.pooler_output, atol=self.atol, rtol=1e-4)

    def test_batch_invariance(self) -> None:
        """A sequence gives the same output alone and inside a padded batch."""
        model = self.model()
        inputs = make_inputs(model.config, batch=3)
        with torch.no_grad():
            batched = model(**inputs).last_hidden_state
            for row in range(3):
                length = int(inputs["attention_mask"][row].sum())
                single = {k: v[row : row + 1, :length] for k, v in inputs.items()}
                alone = model(**single).last_hidden_state
                torch.testing.assert_close(batched[row : row + 1, :length], alone, atol=self.atol, rtol=1e-4)

    @pytest.mark.parametrize(("dtype", "tolerance"), [(torch.bfloat16, 0.08), (torch.float16, 0.015)])
    def test_half_precision_runs_close_to_float32_and_trains(self, dtype: torch.dtype, tolerance: float) -> None:
        """``model.to(dtype)`` and autocast give finite logits within ``tolerance × std(logits)`` of
        float32, and one training step updates every parameter finitely (TransJect's orthogonal maps
        and the ODE solver keep float32 inside)."""
        reference = self.model("AutoModelForMaskedLM")
        perturb_parameters(reference)
        inputs = make_inputs(reference.config)
        real = inputs["attention_mask"].bool()
        half = copy.deepcopy(reference).to(dtype)
        with torch.no_grad():
            expected = reference(**inputs).logits[real]
            got = half(**inputs).logits[real]
            with torch.autocast("cpu", dtype=dtype):
                autocast = reference(**inputs).logits[real]
        bound = tolerance * float(expected.std())
        for name, logits in (("model.to", got), ("autocast", autocast)):
            assert torch.isfinite(logits).all(), name
            assert float((logits.float() - expected).abs().max()) <= bound, (name, bound)

        half.train()
        labels = inputs["input_ids"].masked_fill(~real, -100)
        loss = half(**inputs, labels=labels).loss
        loss.backward()
        assert torch.isfinite(loss)
        before = {n: p.detach().clone() for n, p in half.named_parameters()}
        with torch.no_grad():
            for parameter in half.parameters():
                if parameter.grad is not None:
                    assert torch.isfinite(parameter.grad).all()
                    parameter.sub_(0.1 * parameter.grad)
        moved = [n for n, p in half.named_parameters() if not torch.equal(p, before[n])]
        assert moved and all(torch.isfinite(p).all() for p in half.parameters())

    # ------------------------------------------------------------------ losses
    def test_sequence_regression_with_one_label(self) -> None:
        model = self.model("AutoModelForSequenceClassification", num_labels=1)
        inputs = make_inputs(model.config)
        labels = torch.tensor([0.5, 2.0, -1.0])
        out = model(**inputs, labels=labels, output_diagnostics=True)
        assert model.config.problem_type == "regression"
        assert out.logits.shape == (3, 1)
        expected = ((out.logits.squeeze(-1) - labels) ** 2).mean()
        torch.testing.assert_close(out.loss, _plus_auxiliary(expected, out))
        out.loss.backward()
        assert model.classifier.weight.grad.abs().sum() > 0

    def test_sequence_classification_losses(self) -> None:
        model = self.model("AutoModelForSequenceClassification", num_labels=3)
        inputs = make_inputs(model.config)
        labels = torch.tensor([0, 2, 1])
        out = model(**inputs, labels=labels, output_diagnostics=True)
        expected = torch.nn.functional.cross_entropy(out.logits, labels)
        torch.testing.assert_close(out.loss, _plus_auxiliary(expected, out))
        multi = self.model("AutoModelForSequenceClassification", num_labels=3)
        multi_hot = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        out = multi(**inputs, labels=multi_hot, output_diagnostics=True)
        assert multi.config.problem_type == "multi_label_classification"
        expected = torch.nn.functional.binary_cross_entropy_with_logits(out.logits, multi_hot)
        torch.testing.assert_close(out.loss, _plus_auxiliary(expected, out))

    def test_labels_outside_label_set_raise(self) -> None:
        model = self.model("AutoModelForSequenceClassification", num_labels=2)
        with pytest.raises(ValueError, match="outside \\[0, 2\\)"):
            model(**make_inputs(model.config), labels=torch.tensor([0, 1, 2]))

    @pytest.mark.parametrize("head", HEADS[1:])
    def test_trainer_steps_reduce_the_loss(self, head: str, tmp_path: Path) -> None:
        """A few Trainer steps on one fixed batch give finite, decreasing loss for every head."""
        torch.manual_seed(0)
        config = self.config(num_labels=3)
        model = self.variant.models[head](config)
        inputs = self.head_inputs(head, config, batch=8, seq_len=10)
        generator = torch.Generator().manual_seed(0)
        if head == "AutoModelForMaskedLM":
            inputs["labels"] = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
        elif head == "AutoModelForSequenceClassification":
            inputs["labels"] = torch.randint(0, 3, (8,), generator=generator)
        elif head == "AutoModelForTokenClassification":
            labels = torch.randint(0, 3, (8, 10), generator=generator)
            inputs["labels"] = labels.masked_fill(inputs["attention_mask"] == 0, -100)
        elif head == "AutoModelForQuestionAnswering":
            inputs["start_positions"] = torch.randint(0, 5, (8,), generator=generator)
            inputs["end_positions"] = inputs["start_positions"] + 1
        else:
            inputs["labels"] = torch.randint(0, 2, (8,), generator=generator)
        rows = [{k: v[i] for k, v in inputs.items()} for i in range(8)]
        args = TrainingArguments(
            output_dir=str(tmp_path),
            max_steps=15,
            per_device_train_batch_size=8,
            learning_rate=self.trainer_learning_rate,
            lr_scheduler_type="constant",
            warmup_steps=0,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            disable_tqdm=True,
            seed=0,
        )
        trainer = Trainer(model=model, args=args, train_dataset=rows)
        trainer.train()
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        assert len(losses) == 15 and bool(torch.isfinite(torch.tensor(losses)).all())
        assert sum(losses[-3:]) / 3 < 0.9 * sum(losses[:3]) / 3, losses

    # ------------------------------------------------------------------ clear errors
    def test_bad_configs_raise_clear_errors(self) -> None:
        with pytest.raises(ValueError, match="not divisible by num_attention_heads"):
            self.config(hidden_size=30, num_attention_heads=4, head_dim=None)
        with pytest.raises(ValueError, match="num_hidden_layers must be a positive integer"):
            self.config(num_hidden_layers=0)
        with pytest.raises(ValueError, match="hidden_dropout_prob must be a probability"):
            self.config(hidden_dropout_prob=1.5)
        with pytest.raises(ValueError, match="hidden_act must be one of"):
            self.config(hidden_act="not-an-activation")
        with pytest.raises(ValueError, match="pad_token_id"):
            self.config(pad_token_id=1000)
        with pytest.raises(ValueError, match="chunk_size_feed_forward must be a non-negative integer"):
            self.config(chunk_size_feed_forward=-1)

    def test_bad_inputs_raise_clear_errors(self) -> None:
        model = self.model()
        config = model.config
        with pytest.raises(ValueError, match="outside the vocabulary"):
            model(input_ids=torch.tensor([[1, 2, config.vocab_size]]))
        with pytest.raises(ValueError, match="outside the vocabulary"):
            model(input_ids=torch.tensor([[1, -1, 2]]))
        with pytest.raises(ValueError, match="exceeds max_position_embeddings"):
            model(input_ids=torch.ones(1, config.max_position_embeddings + 1, dtype=torch.long))
        with pytest.raises(ValueError, match="input_ids must have shape"):
            model(input_ids=torch.ones(4, dtype=torch.long))
        with pytest.raises(ValueError, match="attention_mask must have shape"):
            model(input_ids=torch.ones(2, 5, dtype=torch.long), attention_mask=torch.ones(2, 4))
        with pytest.raises(ValueError, match="no real token"):
            model(input_ids=torch.ones(2, 5, dtype=torch.long), attention_mask=torch.tensor([[1] * 5, [0] * 5]))
        with pytest.raises(ValueError, match="token_type_ids contain value"):
            model(input_ids=torch.ones(1, 5, dtype=torch.long), token_type_ids=torch.full((1, 5), 7))
        for empty in (torch.ones(0, 5, dtype=torch.long), torch.ones(2, 0, dtype=torch.long)):
            with pytest.raises(ValueError, match="an empty batch or a sequence of length 0"):
                model(input_ids=empty)
        embeds = torch.randn(1, 4, config.word_embedding_size)
        embeds[0, 1, 0] = float("nan")
        with pytest.raises(ValueError, match="inputs_embeds contain NaN or infinity"):
            model(inputs_embeds=embeds)
        width = config.word_embedding_size
        wider = f"inputs_embeds have width {width + 1}, the model's word embeddings {width}"
        with pytest.raises(ValueError, match=wider):
            model(inputs_embeds=torch.randn(1, 4, width + 1))

    def test_inputs_too_large_for_float32_raise_or_answer_as_float64_does(self) -> None:
        """Finite inputs of 1e30 overflow inside most models; at inference such a model raises rather than
        answer NaN. A model whose arithmetic stays finite (norm-preserving orthogonal mixing with Σ that does
        not depend on the input) must then answer what the same model computes in float64."""
        model = self.model().eval()
        inputs = torch.full((2, 4, model.config.word_embedding_size), 1e30)
        try:
            with torch.no_grad():
                answer = model(inputs_embeds=inputs).last_hidden_state
        except FloatingPointError as error:
            assert "NaN or infinity" in str(error)
            return
        with torch.no_grad():
            reference = copy.deepcopy(model).double()(inputs_embeds=inputs.double()).last_hidden_state
        torch.testing.assert_close(answer.double(), reference, rtol=1e-4, atol=0.0)

    def test_a_non_finite_weight_is_named_not_blamed_on_the_inputs(self) -> None:
        """A checkpoint with a NaN weight (damaged after its manifest was written, or repaired by hand) answers
        nothing at inference, and the error names the weight, not "inputs too large"."""
        model = self.model().eval()
        name, weight = next((name, weight) for name, weight in model.named_parameters() if ".layer.0." in name)
        with torch.no_grad():
            weight.view(-1).fill_(float("nan"))
        within_the_layer = re.escape(name.split(".layer.0.")[-1])
        with pytest.raises(FloatingPointError, match=rf"The weight \S*{within_the_layer} holds NaN"), torch.no_grad():
            model(input_ids=torch.tensor([[1, 2, 3, 4]]))
        with torch.no_grad():  # repaired in place: the model answers again
            weight.view(-1).fill_(0.5)
        assert torch.isfinite(model(input_ids=torch.tensor([[1, 2, 3, 4]])).last_hidden_state).all()

    # ------------------------------------------------------------------ transformers conventions
    def test_a_users_subclass_does_not_rewire_the_heads(self) -> None:
        """Defining ``class Mine(<Variant>Model)`` must not make it the backbone of the package's heads."""
        base = self.variant.models["AutoModel"]
        type("UserSubclass", (base,), {})
        head = self.variant.models["AutoModelForSequenceClassification"](self.config())
        assert type(head.base_model) is base

    def test_init_weights_after_building_on_the_meta_device(self) -> None:
        """``to_empty()`` + ``init_weights()`` (how transformers materialises a model built on the meta
        device) initialises every weight: finite outputs, orthogonal weights orthogonal, LayerNorms at 1."""
        with torch.device("meta"):
            model = self.variant.models["AutoModelForMaskedLM"](self.config())
        model.to_empty(device="cpu")
        model.init_weights()
        model.eval()
        for module in model.modules():
            if torch.nn.utils.parametrize.is_parametrized(module, "weight"):
                weight = module.weight
                torch.testing.assert_close(weight.T @ weight, torch.eye(weight.shape[1]), atol=1e-5, rtol=0)
            if isinstance(module, torch.nn.LayerNorm):
                assert torch.equal(module.weight, torch.ones_like(module.weight))
        with torch.no_grad():
            assert torch.isfinite(model(**make_inputs(model.config)).logits).all()

    def test_from_pretrained_without_a_path_takes_the_state_dict(self) -> None:
        model = self.model("AutoModelForMaskedLM")
        perturb_parameters(model)
        loaded = type(model).from_pretrained(None, config=model.config, state_dict=model.state_dict()).eval()
        inputs = make_inputs(model.config)
        with torch.no_grad():
            assert torch.equal(first_output(loaded, inputs), first_output(model, inputs))

    def test_every_head_refuses_a_misspelt_keyword_and_gives_tuples_on_request(self) -> None:
        """transformers 5's forward convention (``**kwargs: Unpack[TransformersKwargs]``, ``can_return_tuple``)
        without its hole: a keyword the model does not know is an error naming it, not silently ignored."""
        config = self.config(num_labels=3)
        for head in HEADS:
            model = self.variant.models[head](config).eval()
            inputs = make_multiple_choice_inputs(config) if head.endswith("MultipleChoice") else make_inputs(config)
            with pytest.raises(TypeError, match="'output_attention'"):
                model(**inputs, output_attention=True)
            with torch.no_grad():
                as_output, as_tuple = model(**inputs, output_hidden_states=True), model(
                    **inputs, output_hidden_states=True, return_dict=False
                )
            assert isinstance(as_tuple, tuple) and len(as_tuple) == len(as_output.to_tuple())
            for got, expected in zip(as_tuple, as_output.to_tuple(), strict=True):
                same = torch.equal if isinstance(got, torch.Tensor) else lambda a, b: all(map(torch.equal, a, b))
                assert same(got, expected)
            assert len(as_output.hidden_states) == config.num_hidden_layers + 1  # the keyword reached the backbone

    def test_forward_signature_names_the_inputs(self) -> None:
        """The Trainer keeps dataset columns that ``forward`` names (``remove_unused_columns``)."""
        parameters = inspect.signature(self.variant.models["AutoModel"].forward).parameters
        assert {"input_ids", "attention_mask", "token_type_ids", "inputs_embeds"} <= set(parameters)

    # ------------------------------------------------------------------ remote code
    def test_remote_code_loads_every_head_without_the_package(self, tmp_path: Path) -> None:
        model = self.model("AutoModelForMaskedLM")
        perturb_parameters(model)
        folder = export_for_hub(model, tmp_path / "export")
        config_json = json.loads((folder / "config.json").read_text())
        assert set(config_json["auto_map"]) == {"AutoConfig", *HEADS}

        inputs = make_inputs(model.config)
        outputs = {}
        with torch.no_grad():
            # Heads the checkpoint lacks get fresh weights, so outputs are compared for what it holds:
            # the backbone (AutoModel) and the saved MLM head; the other heads must load and run.
            for head in ("AutoModel", "AutoModelForMaskedLM"):
                loaded = getattr(transformers, head).from_pretrained(folder).eval()
                outputs[head] = first_output(loaded, inputs)
        reference = tmp_path / "reference.pt"
        torch.save(
            {
                "heads": HEADS,
                "inputs": inputs,
                "inputs_mc": make_multiple_choice_inputs(model.config),
                "outputs": outputs,
            },
            reference,
        )
        result = run_python(REMOTE_LOAD_SCRIPT, str(folder), str(reference), cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert set(report) == set(HEADS)
        for head, (class_name, finite, max_difference) in report.items():
            assert class_name == self.variant.models[head].__name__
            assert finite, head
            if head in outputs:
                assert max_difference == 0.0, (head, max_difference)


def _plus_auxiliary(task_loss: torch.Tensor, output: Any) -> torch.Tensor:
    """The loss a head reports: the task loss plus the backbone's (weighted) auxiliary loss."""
    return task_loss if output.auxiliary_loss is None else task_loss + output.auxiliary_loss
