"""The libraries users combine our models with: transformers pipelines (batched), PEFT adapters and
sentence-transformers — on every variant and the BERT control."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.nn.utils import parametrize
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

from hf_variants.core.composition import lora_target_modules
from hf_variants.core.registration import VARIANTS
from hf_variants.hub import export_for_hub

from .common import SMALL_SIZES, WITHOUT_PACKAGE, perturb_parameters
from .helpers import run_python

#: A small config per model type (the N-ODE solver tight enough that batching changes nothing visible).
SMALL: dict[str, dict[str, Any]] = {
    "bert_control": {},
    "macaron_bert": {},
    "mgk_bert": {"num_attention_heads": 2, "head_dim": 16},
    "transject": {"num_experts": 2, "num_attention_heads": 1},
    "node_transformer": {"rtol": 1e-8, "atol": 1e-8},
}
MODEL_TYPES = sorted(SMALL)
TEXTS = ["the cat sat", "a dog ran over the hill and far away", "birds sing"]


def small_model(model_type: str, head: str, vocab_size: int, seed: int = 0, **overrides: Any):
    sizes = {**SMALL_SIZES, "vocab_size": vocab_size, **SMALL[model_type], **overrides}
    config = VARIANTS[model_type].config_class(**sizes)
    torch.manual_seed(seed)
    return VARIANTS[model_type].models[head](config).eval()


def assert_same_results(batched: Any, single: Any, atol: float = 1e-5) -> None:
    """Pipeline results (nested lists/dicts of numbers and strings) agree element by element."""
    if isinstance(batched, dict):
        assert batched.keys() == single.keys()
        for key in batched:
            assert_same_results(batched[key], single[key], atol)
    elif isinstance(batched, (list, tuple)):
        assert len(batched) == len(single)
        for a, b in zip(batched, single, strict=True):
            assert_same_results(a, b, atol)
    elif isinstance(batched, (float, np.floating)):
        assert batched == pytest.approx(single, abs=atol)
    else:
        assert batched == single


# ---------------------------------------------------------------------------------------------- pipelines
PIPELINES = {
    "feature-extraction": "AutoModel",
    "fill-mask": "AutoModelForMaskedLM",
    "text-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
}


@pytest.mark.parametrize("model_type", MODEL_TYPES)
@pytest.mark.parametrize("task", sorted(PIPELINES))
def test_batched_pipelines_give_the_unbatched_results(
    task: str, model_type: str, tokenizer_dir: Path, tmp_path: Path
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    model = small_model(model_type, PIPELINES[task], len(tokenizer), num_labels=3)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    texts = [f"{text} {tokenizer.mask_token}" for text in TEXTS] if task == "fill-mask" else TEXTS
    runner = pipeline(task, model=str(tmp_path), device="cpu")
    batched = runner(texts, batch_size=2)
    single = runner(texts, batch_size=1)
    assert len(batched) == len(texts)
    if task == "feature-extraction":
        # (1, tokens, hidden) per text; batched rows keep the batch's padding (as for every model),
        # so the real tokens are compared
        for text, features in zip(texts, single, strict=True):
            assert len(features[0]) == len(tokenizer(text)["input_ids"])
        batched = [[features[0][: len(reference[0])]] for features, reference in zip(batched, single, strict=True)]
    assert_same_results(batched, single)


# ---------------------------------------------------------------------------------------------- PEFT
@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_lora_on_every_linear_layer_trains_merges_and_reloads(model_type: str, tmp_path: Path) -> None:
    """``LoraConfig(target_modules="all-linear")``, PEFT's default for a model it has no table for, works on every
    variant: each linear layer is adapted (TransJect's orthogonal U, V and FFN included; its eigenvector estimate Ũ,
    a matrix no input passes through as a layer, is not one), training moves the adapters, the merged model gives the
    adapted model's outputs, and it saves and reloads as a plain model of its type."""
    peft = pytest.importorskip("peft", reason="the 'peft' extra is not installed")
    model = small_model(model_type, "AutoModelForSequenceClassification", 99, num_labels=2, rtol=1e-5, atol=1e-5)
    perturb_parameters(model)
    linears = {name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    adapted = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules="all-linear", task_type="SEQ_CLS"))
    wrapped = {name.removeprefix("base_model.model.") for name, module in adapted.named_modules()
               if hasattr(module, "lora_A")}  # fmt: skip
    assert wrapped and wrapped <= linears and not any("eigenvectors" in name for name in wrapped)
    assert {name for name in linears if "encoder.layer" in name} <= wrapped  # every linear of every layer
    torch.manual_seed(1)
    inputs = {"input_ids": torch.randint(1, 99, (8, 7)), "labels": torch.tensor([0, 1] * 4)}
    optimizer = torch.optim.AdamW([p for p in adapted.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(4):
        adapted(**inputs).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert any(p.abs().sum() > 0 for name, p in adapted.named_parameters() if "lora_B" in name)
    adapted.eval()
    with torch.no_grad():
        expected = adapted(input_ids=inputs["input_ids"]).logits
        merged = adapted.merge_and_unload()
        torch.testing.assert_close(merged(input_ids=inputs["input_ids"]).logits, expected, atol=1e-5, rtol=1e-5)
    if model_type == "transject":  # W + ΔW is not orthogonal: the merged model is refused, its adapter saved
        with pytest.raises(ValueError, match=r"orthogonal weight was replaced by a plain one .* Save the adapter"):
            merged.save_pretrained(tmp_path)
        assert not (tmp_path / "config.json").exists()
        return
    merged.save_pretrained(tmp_path)
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(input_ids=inputs["input_ids"]).logits, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_lora_adapter_trains_saves_and_loads(model_type: str, tmp_path: Path) -> None:
    peft = pytest.importorskip("peft", reason="the 'peft' extra is not installed")
    model = small_model(model_type, "AutoModelForSequenceClassification", 99, num_labels=2, rtol=1e-5, atol=1e-5)
    perturb_parameters(model)  # as if pretrained (TransJect's residual weights α start at 0: identity layers)
    targets = lora_target_modules(model.config)
    adapted = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=targets, modules_to_save=["classifier"]))
    wrapped = {name.split(".")[-1] for name, module in adapted.named_modules() if hasattr(module, "lora_A")}
    assert set(targets) <= wrapped  # every documented name matched a layer
    trainable = {name for name, p in adapted.named_parameters() if p.requires_grad}
    assert all("lora_" in name or "classifier" in name for name in trainable)

    torch.manual_seed(1)
    inputs = {"input_ids": torch.randint(1, 99, (8, 7)), "labels": torch.tensor([0, 1] * 4)}
    optimizer = torch.optim.AdamW([p for p in adapted.parameters() if p.requires_grad], lr=1e-2)
    adapted.train()
    losses = []
    for _ in range(15):
        loss = adapted(**inputs).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert any(p.abs().sum() > 0 for name, p in adapted.named_parameters() if "lora_B" in name)

    adapted.eval()
    with torch.no_grad():
        expected = adapted(input_ids=inputs["input_ids"]).logits
    adapted.save_pretrained(tmp_path)
    assert (tmp_path / "adapter_model.safetensors").is_file()
    base = small_model(model_type, "AutoModelForSequenceClassification", 99, num_labels=2, rtol=1e-5, atol=1e-5)
    perturb_parameters(base)
    reloaded = peft.PeftModel.from_pretrained(base, tmp_path).eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(input_ids=inputs["input_ids"]).logits, expected, atol=1e-6, rtol=0)
        # PEFT merges by writing into `weight.data`: an orthogonally parametrised weight that an adapter
        # wraps is a plain parameter by then (HoldsOrthogonalLinears), so the merge keeps every delta
        wrapped_bases = [m.get_base_layer() for m in reloaded.modules() if hasattr(m, "lora_A")]
        assert not any(parametrize.is_parametrized(base, "weight") for base in wrapped_bases)
        merged = reloaded.merge_and_unload()
        assert not any(hasattr(m, "lora_A") for m in merged.modules())
        torch.testing.assert_close(merged(input_ids=inputs["input_ids"]).logits, expected, atol=1e-5, rtol=1e-5)
    original = small_model(model_type, "AutoModelForSequenceClassification", 99, num_labels=2, rtol=1e-5, atol=1e-5)
    perturb_parameters(original)  # the same weights as `base` before the adapter was merged into it
    before, after = dict(original.named_modules()), dict(merged.named_modules())
    adapted_layers = [name for name in after if name.rsplit(".", 1)[-1] in targets]
    assert adapted_layers and all(not torch.equal(after[n].weight, before[n].weight) for n in adapted_layers)


# ---------------------------------------------------------------------------------------------- sentence-transformers
SENTENCE_SCRIPT = WITHOUT_PACKAGE + textwrap.dedent(
    """
    import logging
    import warnings

    logging.basicConfig(level=logging.WARNING)  # every library's warning reaches stderr
    warnings.simplefilter("always")
    from sentence_transformers import SentenceTransformer
    folder, texts = sys.argv[1], json.loads(sys.argv[2])
    encoder = SentenceTransformer(folder, trust_remote_code=True, device="cpu")  # the export as it is
    print(json.dumps({"max_seq_length": encoder.max_seq_length, "embeddings": encoder.encode(texts).tolist()}))
    """
)


def mean_pooled(model, tokenizer, texts: list[str]) -> torch.Tensor:
    """The reference: mean of the last hidden states over real tokens, one text at a time."""
    rows = []
    with torch.no_grad():
        for text in texts:
            rows.append(model(**tokenizer(text, return_tensors="pt")).last_hidden_state[0].mean(0))
    return torch.stack(rows)


@pytest.mark.parametrize("model_type", [model_type if model_type == "bert_control" else
                                        pytest.param(model_type, marks=pytest.mark.full)  # each export: common suite
                                        for model_type in MODEL_TYPES])  # fmt: skip
def test_sentence_transformers_encodes_a_saved_model_and_a_hub_export(
    model_type: str, tokenizer_dir: Path, tmp_path: Path
) -> None:
    sentence_transformers = pytest.importorskip(
        "sentence_transformers", reason="the 'sentence-transformers' extra is not installed"
    )
    from sentence_transformers import models

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    model = small_model(model_type, "AutoModel", len(tokenizer))
    expected = mean_pooled(model, tokenizer, TEXTS)

    saved = tmp_path / "saved"
    model.save_pretrained(saved)
    tokenizer.save_pretrained(saved)
    module = models.Transformer(str(saved))
    pooling = models.Pooling(module.get_embedding_dimension(), pooling_mode="mean")
    encoder = sentence_transformers.SentenceTransformer(modules=[module, pooling], device="cpu")
    embeddings = torch.as_tensor(encoder.encode(TEXTS, batch_size=2))
    torch.testing.assert_close(embeddings, expected, atol=1e-5, rtol=1e-4)

    # the export is a sentence-transformers model as it is (modules.json, mean pooling, its length): no fallback
    exported = export_for_hub(model, tmp_path / "export", tokenizer, max_seq_length=24)
    result = run_python(SENTENCE_SCRIPT, str(exported), json.dumps(TEXTS), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "WARNING" not in result.stderr and "Warning" not in result.stderr, result.stderr[-3000:]
    remote = json.loads(result.stdout.strip().splitlines()[-1])
    assert remote["max_seq_length"] == 24  # read from sentence_bert_config.json (the position table holds more)
    torch.testing.assert_close(torch.tensor(remote["embeddings"]), expected, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------------------------------------- torch.compile
COMPILE_CASES = {  # model type → config overrides; every token mixer and layer scheme appears
    "bert_control": {},
    "macaron_bert": {},
    "mgk_bert": {},
    "mgk_bert:mlk": {"attention_type": "mlk"},
    "transject": {},
    "node_transformer": {"rtol": 1e-5, "atol": 1e-5},
}


@pytest.mark.parametrize("case", [case if case == "bert_control" else pytest.param(case, marks=pytest.mark.full)
                                  for case in sorted(COMPILE_CASES)])  # the others in the full suite  # fmt: skip
def test_torch_compile_forward_and_backward_match_eager(case: str) -> None:
    """fullgraph=True wherever the math allows; the N-ODE Transformer breaks the graph once per block,
    around the adaptive solve (README "torch.compile"), and nowhere else."""
    model_type = case.split(":")[0]
    model = small_model(model_type, "AutoModelForSequenceClassification", 99, num_labels=2, **COMPILE_CASES[case])
    model.train()  # dropout is 0: training mode without randomness
    torch.manual_seed(2)
    inputs = {"input_ids": torch.randint(1, 99, (4, 9)), "attention_mask": torch.ones(4, 9, dtype=torch.long)}
    inputs["attention_mask"][1, 6:] = 0
    labels = torch.tensor([0, 1, 0, 1])

    def loss_and_gradients(module) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        output = module(**inputs, labels=labels)
        output.loss.backward()
        return output.loss.detach(), output.logits.detach(), [p.grad.clone() for p in model.parameters()]

    eager = loss_and_gradients(model)
    torch._dynamo.reset()
    ode = model.config.layer_scheme == "ode"
    if ode:
        explanation = torch._dynamo.explain(model)(**inputs)
        assert explanation.graph_break_count == model.config.num_hidden_layers
        assert all("integrate" in reason.reason for reason in explanation.break_reasons)
    compiled = loss_and_gradients(torch.compile(model, fullgraph=not ode))
    torch.testing.assert_close(compiled[0], eager[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(compiled[1], eager[1], atol=1e-5, rtol=1e-5)
    for got, expected in zip(compiled[2], eager[2], strict=True):
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------------------------------------- flex attention
FLEX_CASES = {  # softmax attention under each scheme that runs it, and MGK's augmented-key form
    "bert_control": {},
    "macaron_bert": {},
    "mgk_bert": {},
    "mgk_bert:soft_em": {"mixture_weights": "soft_em"},
    "node_transformer": {"rtol": 1e-7, "atol": 1e-7},
}


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize("case", sorted(FLEX_CASES))
def test_flex_attention_matches_eager_on_padded_batches(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``attn_implementation="flex_attention"`` runs through flex attention (counted) with the padding
    as a BlockMask, and agrees with eager attention at the real tokens. (torch has no CPU backward
    for flex attention: on this machine it is an inference path.)"""
    from transformers.integrations import flex_attention as flex_module
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS


    calls, original = [], flex_module.flex_attention_forward

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS._global_mapping, "flex_attention", counted)
    monkeypatch.setattr(flex_module, "flex_attention_forward", counted)  # the MGK kernel's call
    model = small_model(case.split(":")[0], "AutoModel", 99, **FLEX_CASES[case])
    inputs = {"input_ids": torch.randint(1, 99, (3, 9)), "attention_mask": torch.ones(3, 9, dtype=torch.long)}
    inputs["attention_mask"][1, 5:] = 0
    real = inputs["attention_mask"].bool()
    with torch.no_grad():
        model.set_attn_implementation("eager")
        expected = model(**inputs).last_hidden_state
        model.set_attn_implementation("flex_attention")
        got = model(**inputs).last_hidden_state
    assert calls, "flex attention was never called"
    torch.testing.assert_close(got[real], expected[real], atol=2e-6, rtol=1e-5)
