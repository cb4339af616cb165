"""N-ODE Transformer (``model_type="node_transformer"``): every block an ODE solved with torchdiffeq."""

from ..core.registration import register_variant
from ..core.schemes.ode.modeling_ode import (
    NodeDynamics,
    NodeTransformerBlock,
    ODESolverError,
    TimeDependentLinear,
)
from ..core.schemes.vanilla.modeling_vanilla import VanillaTransformerBlock
from .configuration_node_transformer import NodeTransformerConfig
from .modeling_node_transformer import (
    NodeTransformerForMaskedLM,
    NodeTransformerForMultipleChoice,
    NodeTransformerForQuestionAnswering,
    NodeTransformerForSequenceClassification,
    NodeTransformerForTokenClassification,
    NodeTransformerModel,
    NodeTransformerPreTrainedModel,
)

VARIANT = register_variant(
    NodeTransformerConfig,
    NodeTransformerModel,
    NodeTransformerForMaskedLM,
    NodeTransformerForSequenceClassification,
    NodeTransformerForTokenClassification,
    NodeTransformerForQuestionAnswering,
    NodeTransformerForMultipleChoice,
)

__all__ = [
    "VARIANT",
    "NodeDynamics",
    "NodeTransformerBlock",
    "NodeTransformerConfig",
    "NodeTransformerForMaskedLM",
    "NodeTransformerForMultipleChoice",
    "NodeTransformerForQuestionAnswering",
    "NodeTransformerForSequenceClassification",
    "NodeTransformerForTokenClassification",
    "NodeTransformerModel",
    "NodeTransformerPreTrainedModel",
    "ODESolverError",
    "TimeDependentLinear",
    "VanillaTransformerBlock",
]
