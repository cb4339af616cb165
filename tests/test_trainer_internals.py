"""The fine-tuning engine's use of transformers.Trainer internals: one adapter module, and every private name
it uses still where it expects it (this test runs at both ends of the supported transformers range)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import transformers.trainer
from transformers import Trainer

from hf_variants.training import trainer_internals

PACKAGE = Path(__file__).resolve().parents[1] / "hf_variants"


@pytest.mark.parametrize("name", trainer_internals.PRIVATE_METHODS)
def test_each_private_method_exists_with_the_arguments_used(name: str) -> None:
    method = getattr(Trainer, name, None)
    assert callable(method), f"transformers.Trainer no longer has {name}"
    expected = {"_save_checkpoint": {"model", "trial"}, "_get_output_dir": {"trial"}}[name]
    assert expected <= set(inspect.signature(method).parameters), f"Trainer.{name} takes other arguments"


@pytest.mark.parametrize("name", trainer_internals.PRIVATE_ATTRIBUTES)
def test_each_private_attribute_is_still_set_by_the_trainer(name: str) -> None:
    source = inspect.getsource(transformers.trainer)
    assert re.search(rf"self\.{name}\s*(\+)?=", source), f"transformers.Trainer no longer sets self.{name}"


def test_no_other_module_of_the_package_uses_a_trainer_internal() -> None:
    pattern = re.compile(r"\b(" + "|".join(trainer_internals.PRIVATE_NAMES) + r")\b")
    others = [path for path in PACKAGE.rglob("*.py") if path.name != "trainer_internals.py"]
    users = sorted(path.relative_to(PACKAGE).as_posix() for path in others if pattern.search(path.read_text("utf-8")))
    assert users == []
