"""The Trainer internals the fine-tuning engine needs, in one place: its public API has no hook around the
writing of a checkpoint (``TrainerCallback.on_save`` runs after the Trainer has already rotated the older
ones) and does not expose the training loss it accumulates. Every private name used is in
:data:`PRIVATE_NAMES`, and ``tests/test_trainer_internals.py`` fails naming the one a transformers release
moved, at both ends of the supported range."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import Trainer

#: The private members of ``transformers.Trainer`` this module uses: methods and attributes set in training.
PRIVATE_METHODS = ("_save_checkpoint", "_get_output_dir")
PRIVATE_ATTRIBUTES = ("_tr_loss", "_total_loss_scalar")
PRIVATE_NAMES = (*PRIVATE_METHODS, *PRIVATE_ATTRIBUTES)


class CheckpointHooks(Trainer):
    """A Trainer whose checkpoint writing is wrapped by two public-looking hooks:

    * :meth:`before_checkpoint` (``run_dir``, ``folder``) before the Trainer writes ``folder``;
    * :meth:`after_checkpoint` (``run_dir``, ``folder``, ``save_total_limit``) after it wrote it, with the
      rotation of older checkpoints left to this hook: the Trainer's own rotation is switched off for the save,
      so that the new checkpoint can be marked complete before an old one is removed.
    """

    def before_checkpoint(self, run_dir: Path, folder: Path) -> None:
        """Called before the Trainer writes ``folder`` (``run_dir / checkpoint-<step>``)."""

    def after_checkpoint(self, run_dir: Path, folder: Path, save_total_limit: int | None) -> None:
        """Called after the Trainer wrote ``folder``; rotates older checkpoints to ``save_total_limit``."""

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        run_dir = Path(self._get_output_dir(trial=trial))
        folder = run_dir / f"checkpoint-{self.state.global_step}"
        self.before_checkpoint(run_dir, folder)
        limit, self.args.save_total_limit = self.args.save_total_limit, None
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit
        self.after_checkpoint(run_dir, folder, limit)


def loss_since_last_log(trainer: Trainer) -> float:
    """The training loss summed over the steps since the last logged one (the Trainer's running sum)."""
    return float(trainer._tr_loss)


def logged_loss_sum(trainer: Trainer) -> float:
    """The training loss summed over the steps logged so far in this process (0 before training starts)."""
    return getattr(trainer, "_total_loss_scalar", 0.0)
