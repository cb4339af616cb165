"""Every how-to guide runs as written in a fresh folder: a page's Python blocks one after the other, or, on a page
of commands, its shell blocks. A guide that loads a Hub repository at a pinned commit runs offline against a Hub
cache holding that commit, planted as a download leaves it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO_ROOT

GUIDES = sorted(path for path in (REPO_ROOT / "docs" / "how-to").glob("*.md") if path.name != "index.md")
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
SHELL_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)
PINNED_REPOSITORY = re.compile(r'repo_id = "([\w-]+)/([\w-]+)"\nrevision = "([0-9a-f]{40})"')


def plant_hub_repository(cache: Path, owner: str, name: str, revision: str) -> None:
    """The repository a guide pins, as the Hub cache holds it after a download: the pinned commit (an export of a
    small Macaron-BERT, its code included) and a ``main`` that has moved on to a commit the cache does not hold, so
    that offline only a load pinned to the commit finds anything."""
    from transformers import AutoModel

    from hf_variants import MacaronBertConfig
    from hf_variants.hub import export_for_hub
    from hf_variants.tokenization import train_wordpiece_tokenizer

    repository = cache / f"models--{owner}--{name}"
    tokenizer = train_wordpiece_tokenizer(["an encoder pinned to the commit i read"] * 4, vocab_size=64,
                                          min_frequency=1)  # fmt: skip
    config = MacaronBertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=64)  # fmt: skip
    export_for_hub(AutoModel.from_config(config), repository / "snapshots" / revision, tokenizer)
    (repository / "refs").mkdir()
    (repository / "refs" / "main").write_text("f" * 40, encoding="utf-8")


def test_the_index_lists_every_guide() -> None:
    index = (REPO_ROOT / "docs" / "how-to" / "index.md").read_text(encoding="utf-8")
    assert sorted(re.findall(r"\]\(([\w-]+\.md)\)", index)) == sorted(path.name for path in GUIDES)


@pytest.mark.parametrize("guide", GUIDES, ids=lambda path: path.stem)
def test_a_guide_runs_as_written(guide: Path, tmp_path: Path) -> None:
    text = guide.read_text(encoding="utf-8")
    python, shell = PYTHON_BLOCK.findall(text), SHELL_BLOCK.findall(text)
    assert python or shell, f"{guide.name} has no block to run"
    script = tmp_path / ("guide.py" if python else "guide.sh")
    script.write_text("\n".join(python or ["set -euo pipefail", *shell]), encoding="utf-8")
    # the commands of this interpreter's environment (hf-variants, python) come first on the PATH
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PATH": path}
    if pinned := PINNED_REPOSITORY.search(text):
        plant_hub_repository(tmp_path / "hub", *pinned.groups())
        env |= {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    command = [sys.executable, str(script)] if python else ["bash", str(script)]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
