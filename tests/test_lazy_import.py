"""``import hf_variants`` is lazy and still registers every variant before any Auto lookup: each import
order a user can write is run in a fresh interpreter (registration state is per process)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from .helpers import run_python

HEAVY = ("torch", "transformers", "hf_variants.core", "hf_variants.training", "hf_variants.mgk_bert")


def fresh(script: str, tmp_path: Path) -> str:
    result = run_python(textwrap.dedent(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "could not register" not in result.stderr, result.stderr
    return result.stdout.strip().splitlines()[-1]


def test_import_loads_neither_torch_nor_the_models(tmp_path: Path) -> None:
    loaded = fresh(f"""
        import json, sys
        import hf_variants, hf_variants.settings.pretraining, hf_variants.settings.compare, hf_variants.cli.commands
        print(json.dumps([name for name in {HEAVY!r} if name in sys.modules]))
    """, tmp_path)  # fmt: skip
    assert json.loads(loaded) == []


LOOKUPS = {
    "AutoConfig after the package": """
        import hf_variants
        from transformers import AutoConfig
        print(type(AutoConfig.for_model("mgk_bert")).__name__)
    """,
    "AutoModel after modeling_utils": """
        import hf_variants
        import transformers.modeling_utils
        from transformers import AutoConfig, AutoModelForMaskedLM
        print(type(AutoModelForMaskedLM.from_config(AutoConfig.for_model("mgk_bert", hidden_size=32,
              num_attention_heads=2, num_hidden_layers=1, intermediate_size=64, vocab_size=50))).__name__)
    """,
    "transformers first": """
        from transformers import AutoConfig
        import hf_variants
        print(type(AutoConfig.for_model("mgk_bert")).__name__)
    """,
    "a core module first (mid-import when transformers arrives)": """
        from hf_variants.core import EncoderModel
        from transformers import AutoConfig
        print(type(AutoConfig.for_model("mgk_bert")).__name__)
    """,
    "the Trainer first": """
        import hf_variants
        from transformers import Trainer
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING
        print(CONFIG_MAPPING["mgk_bert"].__name__)
    """,
    "a name of the package": """
        import hf_variants
        print(hf_variants.MgkBertConfig.__name__ if len(hf_variants.VARIANTS) == 5 else sorted(hf_variants.VARIANTS))
    """,
}


@pytest.mark.parametrize("script", LOOKUPS.values(), ids=LOOKUPS.keys())
def test_every_variant_is_registered_before_an_auto_lookup(script: str, tmp_path: Path) -> None:
    assert fresh(script, tmp_path) in ("MgkBertConfig", "MgkBertForMaskedLM")


def test_the_registration_hook_removes_itself(tmp_path: Path) -> None:
    left = fresh("""
        import sys
        import hf_variants
        from hf_variants.auto_registration import RegisterAfterImports
        hooked = sum(isinstance(finder, RegisterAfterImports) for finder in sys.meta_path)
        from transformers import AutoConfig
        print(hooked, sum(isinstance(finder, RegisterAfterImports) for finder in sys.meta_path))
    """, tmp_path)  # fmt: skip
    assert left == "1 0"


def test_the_package_names_its_variants() -> None:
    import hf_variants

    assert set(hf_variants.VARIANT_MODEL_TYPES) == set(hf_variants.VARIANTS)
    assert {"MgkBertModel", "VARIANTS", "settings"} <= set(dir(hf_variants))
    with pytest.raises(AttributeError, match="no attribute 'NoSuchModel'"):
        hf_variants.NoSuchModel  # noqa: B018
