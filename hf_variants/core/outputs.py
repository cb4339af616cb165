"""Model outputs: transformers' output classes plus two fields every hf-variants model reports.

* ``auxiliary_loss``: a variant's extra training objective, already weighted by its config
  (TransJect's eigen-reconstruction loss, the N-ODE kinetic regulariser). Heads add it to the task
  loss when labels are given and also return it on its own.
* ``diagnostics``: named tensors a variant reports for inspection (unweighted losses, solver
  function evaluations per block, ...); never part of the loss.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)


@dataclass
class AuxiliaryOutputs:
    """The fields shared by every output below (listed after the transformers fields)."""

    auxiliary_loss: torch.FloatTensor | None = None
    diagnostics: dict[str, torch.Tensor] | None = None


@dataclass
class EncoderOutput(AuxiliaryOutputs, BaseModelOutputWithPooling):
    """``last_hidden_state``, ``pooler_output``, ``hidden_states``, ``attentions`` + auxiliary fields."""


@dataclass
class EncoderMaskedLMOutput(AuxiliaryOutputs, MaskedLMOutput):
    """``loss`` (task loss + auxiliary loss), ``logits``, ... + auxiliary fields."""


@dataclass
class EncoderSequenceClassifierOutput(AuxiliaryOutputs, SequenceClassifierOutput):
    """``loss`` (task loss + auxiliary loss), ``logits``, ... + auxiliary fields."""


@dataclass
class EncoderTokenClassifierOutput(AuxiliaryOutputs, TokenClassifierOutput):
    """``loss`` (task loss + auxiliary loss), ``logits``, ... + auxiliary fields."""


@dataclass
class EncoderQuestionAnsweringOutput(AuxiliaryOutputs, QuestionAnsweringModelOutput):
    """``loss`` (task loss + auxiliary loss), ``start_logits``, ``end_logits``, ... + auxiliary fields."""


@dataclass
class EncoderMultipleChoiceOutput(AuxiliaryOutputs, MultipleChoiceModelOutput):
    """``loss`` (task loss + auxiliary loss), ``logits``, ... + auxiliary fields."""
