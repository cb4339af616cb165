"""Spec of orthogonally parametrised weights, shared by every idea that has them (TransJect's orthogonal
attention, §3.1, and its injective scheme's orthogonal FFN, eq. 6): the ``orthogonal_map`` field and its
validation. Torch-free, as every spec; the modules are in :mod:`.modeling_orthogonal_weights`."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from .ideas import ConfigurableIdea
from .validation import require_choice

if TYPE_CHECKING:
    from .configuration_encoder import EncoderConfig

ORTHOGONAL_MAPS = ("matrix_exp", "cayley", "householder")


def validate_orthogonal_map(config: EncoderConfig) -> None:
    require_choice(config, "orthogonal_map", ORTHOGONAL_MAPS)


class OrthogonalWeightsSpec(ConfigurableIdea):
    """An idea whose weights include orthogonally parametrised linears: ``orthogonal_map`` is a
    parametrisation field (the same matrices under another map are other parameters, so a checkpoint
    loads with its saved map and ``model.reparametrize(orthogonal_map=...)`` switches exactly)."""

    parametrization_fields: ClassVar[frozenset[str]] = frozenset({"orthogonal_map"})
