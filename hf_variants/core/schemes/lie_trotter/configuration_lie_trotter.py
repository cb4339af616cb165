"""Spec of ``layer_scheme="lie_trotter"``, BERT's layer: ``x̃ = x + MHSA(x)``, ``x' = x̃ + FFN(x̃)`` — the
Lie–Trotter splitting step of Lu et al. (2019), eq. (12)–(13), implemented by
:class:`~hf_variants.core.schemes.lie_trotter.modeling_lie_trotter.TransformerLayer`."""

from __future__ import annotations

from ...ideas import FeedForwardSchemeSpec


class LieTrotterSpec(FeedForwardSchemeSpec):
    """BERT's layer owns no config fields of its own (LayerNorm placement is the encoder's
    ``layer_norm_position``); it is every scheme's reference, so it has no control overrides."""
