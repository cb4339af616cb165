"""Implementation of ``attention_type="mlk"`` (spec: :mod:`.configuration_mlk`)."""

from __future__ import annotations

from ..mgk.modeling_mgk import MixtureOfKeysAttention


class LinearMixtureAttention(MixtureOfKeysAttention):
    """Transformer-MLK (§2.4): ``h_i = φ(q_i)ᵀ Σ_j k̄_j v_jᵀ / φ(q_i)ᵀ Σ_j k̄_j`` with
    ``k̄_j = Σ_r π_r φ(k_jr)`` and φ = elu + 1, in O(N) time and memory; MGK's module and parameters
    with the linear kernel."""

    linear = True
