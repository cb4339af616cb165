"""The code base stays ruff-clean (the rules are in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import REPO_ROOT


def test_ruff_check_passes() -> None:
    beside_python = Path(sys.executable).with_name("ruff")  # a virtual environment used without activating it
    ruff = str(beside_python) if beside_python.is_file() else shutil.which("ruff")
    if ruff is None:
        pytest.fail("ruff is not installed; install the dev extra: pip install -e .[dev]")
    result = subprocess.run([ruff, "check", "."], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
