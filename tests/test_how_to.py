"""Every how-to guide runs as written: a page's Python blocks, one after the other, in a fresh folder."""

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


def test_the_index_lists_every_guide() -> None:
    index = (REPO_ROOT / "docs" / "how-to" / "index.md").read_text(encoding="utf-8")
    assert sorted(re.findall(r"\]\(([\w-]+\.md)\)", index)) == sorted(path.name for path in GUIDES)


@pytest.mark.parametrize("guide", GUIDES, ids=lambda path: path.stem)
def test_a_guide_runs_as_written(guide: Path, tmp_path: Path) -> None:
    blocks = PYTHON_BLOCK.findall(guide.read_text(encoding="utf-8"))
    assert blocks, f"{guide.name} has no Python block"
    script = tmp_path / "guide.py"
    script.write_text("\n".join(blocks), encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, env=env,
                            timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
