"""What an idea can say of a trained model, asked for without naming the idea: numbers its modules report
(``diagnostic_values``) and the ablation it offers (``ablated``: the module with its idea switched off), so that
a study measures "how much does the idea carry" for any model the same way.

A module takes part by defining, as :class:`~.schemes.injective.modeling_injective.InjectiveLayer` does::

    ABLATION = "identity_layers"                 # the ablation's name, in the records: accuracy_with_<name>
    def diagnostic_values(self) -> dict[str, float]: ...   # e.g. {"residual_weights": α_l}
    def ablated(self) -> ContextManager[None]: ...          # the module without its idea inside the block
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from torch import nn


def diagnostics(model: nn.Module) -> dict[str, list[float]]:
    """Every reporting module's numbers, gathered by name in module order (one entry per module); empty for a
    model whose modules report none."""
    gathered: dict[str, list[float]] = {}
    for module in model.modules():
        if callable(getattr(module, "diagnostic_values", None)):
            for name, value in module.diagnostic_values().items():
                gathered.setdefault(name, []).append(value)
    return gathered


def ablations(model: nn.Module) -> list[str]:
    """The names of the ablations ``model``'s modules offer (:func:`ablated`), in module order."""
    return list(dict.fromkeys(module.ABLATION for module in model.modules() if isinstance(getattr(module, "ABLATION",
                                                                                                 None), str)))


@contextlib.contextmanager
def ablated(model: nn.Module, name: str) -> Iterator[None]:
    """Inside the block, every module of ``model`` that offers the ablation ``name`` has its idea switched off;
    restored afterwards, also after an error. A ``ValueError`` when no module offers it."""
    modules = [module for module in model.modules() if getattr(module, "ABLATION", None) == name]
    if not modules:
        raise ValueError(f"{type(model).__name__} offers no ablation {name!r}; it offers {ablations(model) or 'none'}.")
    with contextlib.ExitStack() as stack:
        for module in modules:
            stack.enter_context(module.ablated())
        yield
