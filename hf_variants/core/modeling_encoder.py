"""The encoder skeleton and task heads shared by every variant.

A variant provides a config (subclass of :class:`EncoderConfig`, whose ``attention_type`` and
``layer_scheme`` pick the layer from ``hf_variants.core.composition``) and declares its models as
one-line subclasses::

    class MyPreTrainedModel(EncoderPreTrainedModel):
        config_class = MyConfig
        base_model_prefix = "my_variant"

    class MyModel(MyPreTrainedModel, EncoderModel): ...

    class MyForMaskedLM(MyPreTrainedModel, EncoderForMaskedLM):
        base_model_class = MyModel

    class MyForSequenceClassification(MyPreTrainedModel, EncoderForSequenceClassification):
        base_model_class = MyModel
    ...

Each head names its backbone (``base_model_class = MyModel``) and builds it under the attribute
``base_model_prefix``, so checkpoints load across heads the way BERT's do (``self.bert = BertModel(config)``).

The layer protocol (:class:`~hf_variants.core.encoder_layers.LayerScheme`): ``layer(hidden_states,
layout, *context, output_attentions=...)`` returns the new hidden states, as transformers 5's layers
do; every layer's hidden states and the token mixers' attention probabilities are recorded by
transformers' output hooks. ``layout`` is the :class:`~hf_variants.core.inputs.TokenLayout` built once
per forward (padding, packed documents, rotary positions and their masks); ``context`` comes from the token
mixer's context module (e.g. TransJect's eigenvalues Σ), plain tensors passed positionally so gradient
checkpointing keeps their gradients; what a layer keeps of the forward pass (the N-ODE blocks' function
evaluations and kinetic energy) the scheme's ``summarize_layers`` turns into diagnostics and an auxiliary loss.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn
from torch.nn.utils import parametrize
from transformers import PretrainedConfig, PreTrainedModel
from transformers.loss.loss_utils import (
    ForMaskedLMLoss,
    ForQuestionAnsweringLoss,
    ForSequenceClassificationLoss,
    ForTokenClassification,
)
from transformers.processing_utils import Unpack
from transformers.utils import TransformersKwargs, can_return_tuple, logging
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .composition import (
    LAYER_SCHEMES,
    build_layer,
    context_modules,
    document_packing_error,
    gradient_checkpointing_error,
    has_attention_probabilities,
    parametrization_owners,
    static_graph_error,
    weight_initializers,
)
from .configuration_encoder import EncoderConfig
from .encoder_layers import EncoderEmbeddings, LayerInputs, LayerScheme, MaskedLMHead, Pooler, TokenMixer
from .inputs import (
    TokenLayout,
    check_finite_output,
    check_finite_weights,
    key_padding_mask,
    packed_documents,
    value_checks_enabled,
)
from .modeling_orthogonal_weights import check_orthogonal_weights_kept, held_orthogonal_weights, weights_held
from .outputs import (
    EncoderMaskedLMOutput,
    EncoderMultipleChoiceOutput,
    EncoderOutput,
    EncoderQuestionAnsweringOutput,
    EncoderSequenceClassifierOutput,
    EncoderTokenClassifierOutput,
)
from .positions import rotary_code

if TYPE_CHECKING:
    from .registered_implementations import *  # noqa: F403 - the layers and mixers a model may build, by name

logger = logging.get_logger(__name__)

#: Keyword arguments of ``from_pretrained`` that say where a checkpoint is (to read its saved config).
HUB_KWARGS = ("cache_dir", "force_download", "proxies", "token", "local_files_only", "revision", "subfolder")


#: What ``output_hidden_states`` / ``output_attentions`` record (transformers' ``_can_record_outputs``): every
#: layer's input and output hidden states, and the attention probabilities a token mixer returns second when
#: asked (an ODE block, which calls its mixer many times per layer, asks once, at the end state).
RECORDED_OUTPUTS = {"hidden_states": LayerScheme, "attentions": OutputRecorder(TokenMixer, index=1)}


def record_outputs(forward: Callable[..., EncoderOutput]) -> Callable[..., EncoderOutput | tuple]:
    """transformers 5's ``capture_outputs`` for the backbone: every layer's hidden states and attention
    probabilities are recorded by hooks on the layers (``_can_record_outputs``: :data:`RECORDED_OUTPUTS`),
    the last hidden state being the final LayerNorm's output in a pre-LN stack, and ``return_dict=False``
    gives a tuple. A pair without attention probabilities (TransJect's orthogonal attention, the injective
    scheme's mixture of experts) is attention-free in transformers' sense: ``output_attentions=True`` gives
    ``attentions=None`` with a warning, as transformers' attention-free models do (the recorder, declared
    per class, would give an empty tuple)."""
    captured = capture_outputs(forward)

    @functools.wraps(forward)
    def wrapper(self: EncoderModel, *args: Any, **kwargs: Any) -> EncoderOutput | tuple:
        asked = kwargs.get("output_attentions")
        if not self.has_attentions and (self.config.output_attentions if asked is None else asked):
            logger.warning_once(
                "output_attentions=True: this model's token mixing has no attention probabilities "
                "(attention-free in transformers' sense); `attentions` is None."
            )
            kwargs["output_attentions"] = False
        return captured(self, *args, **kwargs)

    return wrapper


class EncoderStack(nn.Module):
    """``num_hidden_layers`` layers of the config's (scheme, token mixer), then a final LayerNorm for
    pre-LN stacks.

    Every layer's hidden states and attention probabilities are recorded by transformers' output hooks
    on the layers (:data:`RECORDED_OUTPUTS`), not collected here.
    """

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(build_layer(config, i) for i in range(config.num_hidden_layers))
        self.final_layer_norm = (
            nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.uses_final_layer_norm else None
        )

    def forward(
        self,
        hidden_states: torch.Tensor,
        layout: TokenLayout,
        extra_inputs: tuple[torch.Tensor, ...] = (),
        output_attentions: bool = False,
    ) -> torch.Tensor:
        """The stack's last hidden state."""
        for layer in self.layer:
            hidden_states = layer(hidden_states, layout, *extra_inputs, output_attentions=output_attentions)
        if self.final_layer_norm is not None:
            hidden_states = self.final_layer_norm(hidden_states)
        return hidden_states


class EncoderPreTrainedModel(PreTrainedModel):
    """Base of every hf-variants model: init, embeddings access and the class-level wiring.

    Class attributes a variant sets: ``config_class``, ``base_model_prefix`` and, when it replaces
    BERT's, ``embeddings_class``.
    """

    config_class = EncoderConfig
    base_model_prefix = "encoder_model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    # Softmax attention (under any scheme) dispatches through ALL_ATTENTION_FUNCTIONS with the padding in
    # each backend's form (eager: additive bias, sdpa: boolean mask, flex: BlockMask); the other token
    # mixers ignore the choice. Flash attention would need unpadded inputs and hub attention kernels are
    # untested, so neither is declared.
    _supports_sdpa = True
    _supports_flex_attn = True
    # Losses are means over the batch; the Trainer must scale them for gradient accumulation.
    accepts_loss_kwargs = False
    _can_record_outputs = RECORDED_OUTPUTS
    embeddings_class: ClassVar[type[nn.Module]] = EncoderEmbeddings
    #: The backbone a head builds under ``base_model_prefix`` (each head of a variant names its ``…Model``).
    base_model_class: ClassVar[type[PreTrainedModel] | None] = None

    def __init__(self, config: EncoderConfig, *args: Any, **kwargs: Any) -> None:
        config.validate()  # also fills the fields of a pair changed after the config was built
        super().__init__(config, *args, **kwargs)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """``PreTrainedModel._init_weights`` (normal(0, initializer_range) for Linear/Embedding weights,
        zeros for biases and the padding row, ones/zeros for LayerNorm), then what the pair's ideas add
        (:meth:`~hf_variants.core.ideas.ConfigurableIdea.init_weights`, e.g. the orthogonal
        weights' parametrisations), then the module's own parameters (``init_extra_parameters``) — all
        through ``transformers.initialization``, which only touches tensors that were not loaded."""
        super()._init_weights(module)
        for initialize in weight_initializers(self.config):
            initialize(module, self.config)
        if hasattr(module, "init_extra_parameters"):
            module.init_extra_parameters(self.config)

    def post_init(self) -> None:
        """transformers' ``post_init``, with ``_no_split_modules`` (the blocks ``device_map`` must keep on one
        device) read off the built model: its embeddings and the classes of the layers it holds, whatever a
        scheme builds (e.g. the ode scheme's vanilla eq. (1) blocks), with no list of idea names here."""
        layers = {type(module).__name__ for module in self.modules() if isinstance(module, LayerScheme)}
        self._no_split_modules = [self.embeddings_class.__name__, *sorted(layers)]
        super().post_init()

    def _set_gradient_checkpointing(self, enable: bool = True, *args: Any, **kwargs: Any) -> None:
        """Where every transformers entry point (``gradient_checkpointing_enable``, and its newer name
        ``activation_checkpointing_enable``) turns checkpointing on, before anything changes: a pair whose
        recomputation would not be exact (:func:`~hf_variants.core.composition.gradient_checkpointing_error`)
        refuses it with the reason."""
        reason = gradient_checkpointing_error(self.config) if enable else None
        if reason is not None:
            raise ValueError(reason)
        super()._set_gradient_checkpointing(enable, *args, **kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """transformers' ``from_pretrained``, honouring exactly a requested value of a parametrisation
        field of the pair (:attr:`~hf_variants.core.ideas.ConfigurableIdea.parametrization_fields`,
        e.g. ``orthogonal_map``): the checkpoint's tensors are parameters of its own parametrisation (under
        another they would be another function), so the model loads with the saved values and is then
        re-parametrised (:meth:`reparametrize`)."""
        if pretrained_model_name_or_path is None:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        given = kwargs.get("config")
        given = given if isinstance(given, PretrainedConfig) else None  # (remote code has its own classes)
        hub = {key: kwargs[key] for key in HUB_KWARGS if key in kwargs}
        saved = None if given is not None else cls.config_class.get_config_dict(pretrained_model_name_or_path, **hub)[0]
        pair = vars(given) if given is not None else {**saved, **kwargs}
        owners = {}
        if isinstance(pair.get("attention_type"), str) and isinstance(pair.get("layer_scheme"), str):
            owners = parametrization_owners(pair["attention_type"], pair["layer_scheme"])
        requested = {name: kwargs.pop(name, None) or getattr(given, name, None) for name in owners}
        requested = {name: value for name, value in requested.items() if value is not None}
        if not requested:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        if saved is None:
            saved = cls.config_class.get_config_dict(pretrained_model_name_or_path, **hub)[0]
        stored = {name: saved.get(name, value) for name, value in requested.items()}
        if given is not None:
            kwargs["config"] = copy.deepcopy(given)
            for name, value in stored.items():
                setattr(kwargs["config"], name, value)
        else:
            kwargs.update(stored)
        model = super().from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        switched = {name: value for name, value in requested.items() if value != stored[name]}
        if switched:
            model.reparametrize(**switched)
        return model

    def save_pretrained(self, save_directory: Any, *args: Any, **kwargs: Any) -> Any:
        """transformers' ``save_pretrained``, refused for a model whose orthogonal weights an adapter merge replaced
        (:func:`~.modeling_orthogonal_weights.check_orthogonal_weights_kept`): it would not load back as it is."""
        check_orthogonal_weights_kept(self)
        return super().save_pretrained(save_directory, *args, **kwargs)

    def reparametrize(self, **fields: Any) -> None:
        """Store the weights under other values of the pair's parametrisation fields without changing the
        function, and record them in the config: ``model.reparametrize(orthogonal_map="matrix_exp")``
        continues a model trained with the Cayley map from the same orthogonal matrices."""
        owners = parametrization_owners(self.config.attention_type, self.config.layer_scheme)
        for name, value in fields.items():
            if name not in owners:
                raise ValueError(
                    f"{name} is not a parametrization field of attention_type={self.config.attention_type!r}, "
                    f"layer_scheme={self.config.layer_scheme!r} (its fields: {', '.join(sorted(owners)) or 'none'})."
                )
            owners[name].reparametrize(self, name, value)
            setattr(self.config, name, value)

    def hold_parametrized_weights(self, accumulate_gradients: bool = False) -> contextlib.AbstractContextManager:
        """A block in which the model's parametrised weights (TransJect's orthogonal matrices) are computed
        once, together, and reused by every forward pass: evaluation over many batches, or, with
        ``accumulate_gradients=True``, the micro-batches of one optimizer step, whose summed gradients the caller
        then sends on to the parameters (:func:`~.modeling_orthogonal_weights.held_orthogonal_weights`).
        Every forward pass outside such a block computes them once for itself. Nothing to hold: no effect."""
        return held_orthogonal_weights(self, accumulate_gradients)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.base_model.embeddings.word_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.base_model.embeddings.word_embeddings = value

    def _build_base_model(self, config: EncoderConfig, add_pooling_layer: bool) -> None:
        if self.base_model_class is None:
            raise TypeError(
                f"{type(self).__name__} has no backbone: give it `base_model_class = <Variant>Model` (the "
                "variant's `class <Variant>Model(<Variant>PreTrainedModel, EncoderModel)`)."
            )
        setattr(self, self.base_model_prefix, self.base_model_class(config, add_pooling_layer=add_pooling_layer))

    def _diagnostics_requested(self, output_diagnostics: bool | None) -> bool:
        return self.config.output_diagnostics if output_diagnostics is None else output_diagnostics

    def _head_fields(
        self, task_loss: torch.Tensor | None, outputs: EncoderOutput, output_diagnostics: bool | None
    ) -> dict[str, Any]:
        """The fields every head output shares: the loss (task loss plus the backbone's auxiliary
        loss, when there is a task loss), the backbone's hidden states and attentions and, when asked
        for, the auxiliary loss and diagnostics on their own."""
        loss = None if task_loss is None else _add_optional(task_loss, outputs.auxiliary_loss)
        requested = self._diagnostics_requested(output_diagnostics)
        return {
            "loss": loss,
            "hidden_states": outputs.hidden_states,
            "attentions": outputs.attentions,
            "auxiliary_loss": outputs.auxiliary_loss if requested else None,
            "diagnostics": outputs.diagnostics if requested else None,
        }

    def _run_backbone(self, input_ids: torch.Tensor | None, **inputs: Any) -> EncoderOutput:
        """The backbone on a head's inputs, always as the output object and with the auxiliary loss and
        diagnostics, which the head adds to its task loss and reports as asked (:meth:`_head_fields`)."""
        return self.base_model(input_ids, output_diagnostics=True, return_dict=True, **inputs)


class EncoderModel(EncoderPreTrainedModel):
    """The bare encoder: embeddings → layers → (pooler). Outputs :class:`EncoderOutput`."""

    def __init__(self, config: EncoderConfig, add_pooling_layer: bool = True) -> None:
        super().__init__(config)
        self.embeddings = self.embeddings_class(config)
        # Per-backbone modules of the token mixer (e.g. TransJect's eigenvalue estimator), built before
        # ``post_init`` so that they are initialised and loaded as usual.
        self.context_names = []
        for name, module in context_modules(config).items():
            setattr(self, name, module)
            self.context_names.append(name)
        self.encoder = EncoderStack(config)
        self.has_attentions = has_attention_probabilities(config)
        self.packing_error = document_packing_error(config)
        self.static_graph_error = static_graph_error(config)
        self.pooler = Pooler(config) if add_pooling_layer else None
        self.parametrized = any(parametrize.is_parametrized(m) for m in self.modules())
        self.post_init()

    @record_outputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_diagnostics: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> EncoderOutput:
        r"""``output_attentions`` / ``output_hidden_states`` (keyword arguments, default: the config's) add
        every layer's attention probabilities / hidden states (recorded by transformers' output hooks:
        :func:`record_outputs`); ``output_diagnostics`` the auxiliary loss and the pair's diagnostics;
        ``return_dict=False`` gives a tuple."""
        output_attentions = _requested_outputs(self.config, kwargs)
        if torch.compiler.is_exporting():
            self._check_exportable()
        if not self.training:
            check_finite_weights(self)
        with self._parametrized_weights_once():
            embeddings = self.embeddings(
                input_ids=input_ids,
                token_type_ids=token_type_ids,
                position_ids=position_ids,
                inputs_embeds=inputs_embeds,
            )
            padding_mask = key_padding_mask(attention_mask, embeddings.shape[:2])
            extra_inputs, auxiliary_loss, diagnostics = self.prepare_layer_inputs(embeddings, padding_mask)
            layout = self.token_layout(padding_mask, position_ids, embeddings)
            outputs = EncoderOutput(last_hidden_state=self.encoder(embeddings, layout, extra_inputs, output_attentions))
            layer_loss, layer_diagnostics = self.summarize_layers(padding_mask)
            if self._diagnostics_requested(output_diagnostics):
                outputs.auxiliary_loss = _add_optional(auxiliary_loss, layer_loss)
                outputs.diagnostics = {**diagnostics, **layer_diagnostics} or None
            if self.pooler is not None:
                outputs.pooler_output = self.pooler(outputs.last_hidden_state, padding_mask)
        if not self.training:
            check_finite_output(outputs.last_hidden_state, embeddings)
        return outputs

    def token_layout(
        self, padding_mask: torch.Tensor | None, position_ids: torch.Tensor | None, embeddings: torch.Tensor
    ) -> TokenLayout:
        """The padding, packed documents and rotary positions of this forward, which every layer shares. Rows
        hold several documents where ``position_ids`` restart inside them, as transformers reads packed
        sequences (``DataCollatorWithFlattening``); a pair that cannot keep them apart refuses them."""
        batch, seq_len = embeddings.shape[:2]
        documents = packed_documents(position_ids, batch)
        if self.packing_error is not None and not value_checks_enabled():
            documents = None  # compiled code cannot refuse by value: rows are read as one document each
        if documents is not None and self.packing_error is not None:
            raise ValueError(f"position_ids restart inside a row (packed documents), which this model cannot keep "
                             f"apart: {self.packing_error}")  # fmt: skip
        rotary = None
        if self.config.position_embedding_type == "rotary":
            positions = torch.arange(seq_len, device=embeddings.device)[None] if position_ids is None else position_ids
            rotary = rotary_code(positions, self.config.attention_head_size, self.config.rope_theta, embeddings.dtype)
        return TokenLayout(padding_mask, documents, rotary)

    def _check_exportable(self) -> None:
        """Refuse in one line, when ``torch.export`` (and so the ONNX exporter) traces this forward, what one static
        graph for serving cannot hold: a pair whose forward depends on its input's values (the N-ODE blocks'
        solver), or orthogonal weights computed at each call (a linear solve or matrix exponential, which ONNX has
        no operator for) rather than held as constants by :meth:`hold_parametrized_weights`."""
        if self.static_graph_error is not None:
            raise ValueError(f"{self.config.model_type} cannot be exported as a static graph: "
                             f"{self.static_graph_error}.")  # fmt: skip
        if self.parametrized and not weights_held(self):
            raise ValueError(f"{self.config.model_type}'s orthogonal weights are computed from its parameters at each "
                             "call (a linear solve, which ONNX has no operator for): export inside `with "
                             "torch.no_grad(), model.hold_parametrized_weights():`, which holds them as "
                             "constants.")  # fmt: skip

    def _parametrized_weights_once(self) -> contextlib.AbstractContextManager:
        """Parametrised weights computed once per forward pass, not once per use: together, outside the layers
        (:func:`held_orthogonal_weights`), except under activation checkpointing, whose recomputation in
        backward must see what the forward saw, so each layer computes its own (torch's ``cached``)."""
        if not self.parametrized:
            return contextlib.nullcontext()
        if self.training and any(getattr(layer, "gradient_checkpointing", False) for layer in self.encoder.layer):
            return parametrize.cached()
        return held_orthogonal_weights(self)

    def prepare_layer_inputs(self, embeddings: torch.Tensor, padding_mask: torch.Tensor | None) -> LayerInputs:
        """Extra per-forward tensors for every layer, plus an auxiliary loss and diagnostics, from the
        token mixer's context module (none for softmax, MGK and MLK attention)."""
        extra_inputs: tuple[torch.Tensor, ...] = ()
        auxiliary_loss, diagnostics = None, {}
        for name in self.context_names:
            inputs, loss, named = getattr(self, name).layer_inputs(embeddings, padding_mask)
            extra_inputs += inputs
            auxiliary_loss = _add_optional(auxiliary_loss, loss)
            diagnostics.update(named)
        return extra_inputs, auxiliary_loss, diagnostics

    def summarize_layers(
        self, padding_mask: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
        """What the layers kept of this forward pass → an auxiliary loss and diagnostics, by the layer scheme."""
        scheme = LAYER_SCHEMES.implementation(self.config.layer_scheme)
        return scheme.summarize_layers(self.config, list(self.encoder.layer), padding_mask)


# ------------------------------------------------------------------------------------------------
# Task heads. Each builds the variant's backbone under ``base_model_prefix`` and computes its loss
# with transformers' own loss functions (``transformers.loss.loss_utils``).
# ------------------------------------------------------------------------------------------------


class EncoderForMaskedLM(EncoderPreTrainedModel):
    """Masked language modelling head; the decoder is tied to the word embeddings when
    ``config.tie_word_embeddings`` (the default)."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        self._build_base_model(config, add_pooling_layer=False)
        self.lm_head = MaskedLMHead(config)
        # transformers 5's {target: source} form, under this variant's backbone attribute
        tied_source = f"{self.base_model_prefix}.embeddings.word_embeddings.weight"
        self._tied_weights_keys = {"lm_head.decoder.weight": tied_source}
        self.post_init()

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head.decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        self.lm_head.decoder = new_embeddings

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_diagnostics: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> EncoderMaskedLMOutput:
        r"""``labels``: ``(batch, seq_len)`` token ids, ``-100`` where no prediction is scored.

        With ``config.sparse_prediction`` and labels given, the head runs only at the scored
        positions (MosaicBERT-style): ``logits`` is ``(num_scored_tokens, vocab_size)`` in row-major
        order of the scored positions, and the loss equals the dense path's.
        """
        outputs = self._run_backbone(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            **kwargs,
        )
        hidden_states = outputs.last_hidden_state
        sparse = labels is not None and self.config.sparse_prediction
        if sparse:
            scored = labels != -100
            hidden_states, labels = hidden_states[scored], labels[scored]
        logits = self.lm_head(hidden_states)
        loss = None
        if labels is not None:
            loss = ForMaskedLMLoss(logits, labels, vocab_size=logits.shape[-1])
        result = EncoderMaskedLMOutput(logits=logits, **self._head_fields(loss, outputs, output_diagnostics))
        return result


class _ClassifierHeadMixin:
    """Dropout (``classifier_dropout`` or ``hidden_dropout_prob``) followed by a linear classifier."""

    def _build_classifier(self, config: EncoderConfig, num_outputs: int) -> None:
        rate = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(rate)
        self.classifier = nn.Linear(config.hidden_size, num_outputs)


class EncoderForSequenceClassification(_ClassifierHeadMixin, EncoderPreTrainedModel):
    """Pooled ``[CLS]`` → classifier. ``num_labels == 1`` is regression (MSE); integer labels give
    single-label cross-entropy; float multi-hot labels give multi-label BCE — as BERT does, and as
    ``config.problem_type`` pins once set."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self._build_base_model(config, add_pooling_layer=True)
        self._build_classifier(config, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_diagnostics: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> EncoderSequenceClassifierOutput:
        r"""``labels``: ``(batch,)`` class ids, floats for regression, or ``(batch, num_labels)`` multi-hot."""
        outputs = self._run_backbone(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output))
        loss = None
        if labels is not None:
            _check_class_labels(labels, self.num_labels, self.config.problem_type)
            loss = ForSequenceClassificationLoss(labels, logits, self.config)
        result = EncoderSequenceClassifierOutput(logits=logits, **self._head_fields(loss, outputs, output_diagnostics))
        return result


class EncoderForTokenClassification(_ClassifierHeadMixin, EncoderPreTrainedModel):
    """A classifier on every token's final hidden state (NER, POS tagging)."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        self.num_labels = config.num_labels
        self._build_base_model(config, add_pooling_layer=False)
        self._build_classifier(config, config.num_labels)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_diagnostics: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> EncoderTokenClassifierOutput:
        r"""``labels``: ``(batch, seq_len)`` class ids in ``[0, num_labels)``, ``-100`` to ignore."""
        outputs = self._run_backbone(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = None
        if labels is not None:
            _check_class_labels(labels, self.num_labels, "single_label_classification", ignore_index=-100)
            loss = ForTokenClassification(logits, labels, self.config)
        result = EncoderTokenClassifierOutput(logits=logits, **self._head_fields(loss, outputs, output_diagnostics))
        return result


class EncoderForQuestionAnswering(EncoderPreTrainedModel):
    """Extractive QA: a linear layer gives span start and end logits for every token."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        self._build_base_model(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        output_diagnostics: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> EncoderQuestionAnsweringOutput:
        r"""``start_positions``/``end_positions``: ``(batch,)`` token indices of the answer span
        (positions outside the sequence are ignored, as in BERT)."""
        outputs = self._run_backbone(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            **kwargs,
        )
        start_logits, end_logits = self.qa_outputs(outputs.last_hidden_state).split(1, dim=-1)
        start_logits = start_logits.squeeze(-1).contiguous()
        end_logits = end_logits.squeeze(-1).contiguous()
        loss = None
        if start_positions is not None and end_positions is not None:
            loss = ForQuestionAnsweringLoss(start_logits, end_logits, start_positions, end_positions)
        result = EncoderQuestionAnsweringOutput(
            start_logits=start_logits, end_logits=end_logits, **self._head_fields(loss, outputs, output_diagnostics)
        )
        return result


class EncoderForMultipleChoice(_ClassifierHeadMixin, EncoderPreTrainedModel):
    """Multiple choice (SWAG-style): inputs are ``(batch, num_choices, seq_len)``; each choice's pooled
    output gets one score and the choices compete in a softmax."""

    def __init__(self, config: EncoderConfig) -> None:
        super().__init__(config)
        self._build_base_model(config, add_pooling_layer=True)
        self._build_classifier(config, 1)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_diagnostics: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> EncoderMultipleChoiceOutput:
        r"""``labels``: ``(batch,)`` index of the correct choice in ``[0, num_choices)``."""
        reference = input_ids if input_ids is not None else inputs_embeds
        if reference is None or reference.dim() < 3:
            raise ValueError("Multiple-choice inputs must have shape (batch_size, num_choices, seq_len).")
        num_choices = reference.shape[1]

        def flat(tensor: torch.Tensor | None) -> torch.Tensor | None:
            return None if tensor is None else tensor.reshape(-1, *tensor.shape[2:])

        outputs = self._run_backbone(
            flat(input_ids),
            attention_mask=flat(attention_mask),
            token_type_ids=flat(token_type_ids),
            position_ids=flat(position_ids),
            inputs_embeds=flat(inputs_embeds),
            **kwargs,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output)).view(-1, num_choices)
        loss = None
        if labels is not None:
            _check_class_labels(labels, num_choices, "single_label_classification")
            loss = nn.functional.cross_entropy(logits.float(), labels.view(-1))
        result = EncoderMultipleChoiceOutput(logits=logits, **self._head_fields(loss, outputs, output_diagnostics))
        return result


def _requested_outputs(config: PretrainedConfig, kwargs: dict[str, Any]) -> bool:
    """``output_attentions`` from a forward's keyword arguments (default: the config's): the layers then
    compute attention probabilities (the eager path). ``output_hidden_states`` is the recorder's alone. Any
    other keyword argument is refused by name: ``**kwargs`` must not swallow a misspelt one."""
    unknown = sorted(set(kwargs) - {"output_attentions", "output_hidden_states"})
    if unknown:
        raise TypeError(f"forward() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}.")
    attentions = kwargs.get("output_attentions")
    return config.output_attentions if attentions is None else attentions


def _add_optional(first: torch.Tensor | None, second: torch.Tensor | None) -> torch.Tensor | None:
    if first is None or second is None:
        return second if first is None else first
    return first + second


def _check_class_labels(
    labels: torch.Tensor, num_classes: int, problem_type: str | None, ignore_index: int | None = None
) -> None:
    """Class-id labels must lie in ``[0, num_classes)`` (cross-entropy would fail obscurely, or on
    CUDA with a device-side assert). Skipped under torch.compile, like every check of input values."""
    is_class_ids = not labels.is_floating_point() and (problem_type in (None, "single_label_classification"))
    if not is_class_ids or num_classes == 1 or labels.numel() == 0 or not value_checks_enabled():
        return
    valid = labels[labels != ignore_index] if ignore_index is not None else labels
    if valid.numel() and (int(valid.min()) < 0 or int(valid.max()) >= num_classes):
        raise ValueError(
            f"labels contain class {int(valid.max()) if int(valid.max()) >= num_classes else int(valid.min())}, "
            f"outside [0, {num_classes}); check num_labels in the config."
        )
