"""Every how-to guide runs as written in a fresh folder: a page's Python blocks one after the other, or, on a page
of commands, its shell blocks."""

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
    command = [sys.executable, str(script)] if python else ["bash", str(script)]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
