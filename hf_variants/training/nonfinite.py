"""Non-finite means stop: one gradient check for every training loop, made *before* clipping.

Why before clipping: ``clip_grad_norm_`` scales every gradient by ``max_norm / total_norm``. With an
infinite total norm that is ``0 · inf = NaN`` in the offending gradients (and 0 elsewhere), with a NaN
norm NaN everywhere; AdamW then writes NaN into every weight and the failure surfaces steps later as
something else (in the N-ODE block: "underflow in dt", read as stiffness). So each engine asks, before
it clips, which parameters hold a non-finite gradient, and stops naming the step and those parameters
— or, when the user opted in (``--skip_nonfinite_steps``), leaves every weight as it was and counts the
step:

- the pretraining loop (:mod:`hf_variants.training.run_mlm`) calls :func:`nonfinite_gradients` before
  ``accelerator.clip_grad_norm_``;
- the Trainer (:mod:`hf_variants.training.run_glue`) gets :class:`StopOnNonFiniteGradients`, a
  callback that records each parameter's gradient as autograd accumulates it (before the Trainer
  clips) and decides in ``on_pre_optimizer_step``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import torch
from transformers import TrainerCallback

logger = logging.getLogger(__name__)

#: How many parameter names a message lists before "and N more".
NAMES_SHOWN = 8


class NonFiniteStepError(FloatingPointError):
    """A training step produced a non-finite loss or gradient; nothing was updated. ``parameters``
    names those whose gradient was non-finite."""

    def __init__(
        self, step: int, parameters: list[str], loss: str | None = None, hint: str = "", detail: str = ""
    ) -> None:
        self.step, self.parameters = step, parameters
        what = [f"training loss {loss}"] if loss is not None else []
        if parameters:
            what.append(f"gradient in {describe_parameters(parameters)}")
        elif loss is None:  # the norm overflowed float32, or (sharded) another process holds the non-finite part
            what.append("gradient norm (every gradient this process holds is finite)")
        self.summary = f"Step {step}: non-finite {'; '.join(what)}{detail}"
        super().__init__(f"{self.summary}. Nothing was updated{'; ' + hint if hint else '.'}")


def describe_parameters(names: list[str]) -> str:
    """``a, b, c and 5 more`` (the first :data:`NAMES_SHOWN` names)."""
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown if len(names) <= NAMES_SHOWN else f"{shown} and {len(names) - NAMES_SHOWN} more"


def nonfinite_gradients(named_parameters: Iterable[tuple[str, torch.nn.Parameter]]) -> list[str]:
    """Names of the parameters whose gradient holds NaN or ±inf, in order (one host sync, not one per
    parameter). Call it before clipping: clipping spreads an infinite norm as NaN."""
    named = [(name, parameter.grad) for name, parameter in named_parameters if parameter.grad is not None]
    if not named:
        return []
    finite = torch.stack([gradient.isfinite().all() for _, gradient in named])
    if bool(finite.all()):
        return []
    return [name for (name, _), ok in zip(named, finite.tolist(), strict=True) if not ok]


def drop_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """Set every gradient to ``None``: torch optimizers then leave those weights — and their moments and
    step counts — exactly as they were (a zero gradient would still decay them)."""
    for parameter in parameters:
        parameter.grad = None


class StopOnNonFiniteGradients(TrainerCallback):
    """The Trainer's non-finite gradient check, through its public hooks only.

    Autograd's post-accumulate-grad hook records, per parameter, whether its accumulated gradient is
    finite — before the Trainer clips. In ``on_pre_optimizer_step`` (after clipping, before the step) a
    non-finite gradient (or a loss given to :meth:`record_loss`) raises :class:`NonFiniteStepError`
    naming the step and the recorded parameters, or — with ``skip=True`` — drops every gradient so that
    the optimizer step changes nothing, and counts it in :attr:`skipped_steps`. The decision reads the
    gradients as the optimizer will see them (already reduced across processes, so every process decides
    alike); clipping keeps a non-finite gradient non-finite, so nothing escapes it.
    """

    def __init__(self, skip: bool = False, hint: str = "") -> None:
        self.skip = skip
        self.hint = hint
        self.skipped_steps = 0
        self._finite: dict[str, torch.Tensor] = {}
        self._handles: list[Any] = []
        self._loss: str | None = None

    def record_loss(self, loss: torch.Tensor, batch_size: int) -> None:
        """Called by the Trainer's ``compute_loss`` with each training micro-batch's loss: a non-finite loss stops
        the step too, even where its gradient stays finite (the Trainer would log a substitute)."""
        if self._loss is None and not bool(torch.isfinite(loss).all()):
            self._loss = f"{float(loss)} (batch of {batch_size} examples)"

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._remove_hooks()
        for name, parameter in model.named_parameters():
            if parameter.requires_grad:
                self._handles.append(parameter.register_post_accumulate_grad_hook(self._recorder(name)))

    def _recorder(self, name: str):
        def record(parameter: torch.nn.Parameter) -> None:
            self._finite[name] = parameter.grad.isfinite().all()  # no sync: read once per step

        return record

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        (recorded, self._finite), (loss, self._loss) = (self._finite, {}), (self._loss, None)
        if loss is None and not nonfinite_gradients(model.named_parameters()):
            return
        error = NonFiniteStepError(state.global_step + 1, [n for n, ok in recorded.items() if not bool(ok)], loss,
                                   self.hint)  # fmt: skip
        if not self.skip:
            self._remove_hooks()
            raise error
        drop_gradients(model.parameters())
        self.skipped_steps += 1
        logger.warning("%s; optimizer step skipped.", error.summary)

    def on_train_end(self, args, state, control, **kwargs):
        self._remove_hooks()

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles, self._finite = [], {}
