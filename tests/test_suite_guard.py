"""The suite's own guard against a hung test (pyproject.toml's ``timeout``): a test that waits forever fails by name,
with the line where it waited, after the timeout, once, and the rest of its module still runs under pytest-xdist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from .helpers import REPO_ROOT

HANGING = '''
import threading


def test_waits_forever():
    threading.Event().wait()  # a lock acquired without a timeout


def test_after_it():
    assert sum(range(4)) == 6
'''


def test_a_test_that_hangs_fails_by_name_and_the_suite_goes_on(tmp_path: Path) -> None:
    (tmp_path / "test_planted.py").write_text(HANGING)
    command = [sys.executable, "-m", "pytest", "-c", str(REPO_ROOT / "pyproject.toml"), "--rootdir", str(tmp_path),
               "-p", "no:cacheprovider", "-n", "2", "-o", "timeout=3", str(tmp_path / "test_planted.py")]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=120,
                            stdin=subprocess.DEVNULL)  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    assert "FAILED test_planted.py::test_waits_forever" in result.stdout
    assert re.search(r"Failed: Timeout \(?>3\.0s", result.stdout) and "threading.Event().wait()" in result.stdout
    assert "1 failed, 1 passed" in result.stdout  # once: not run again in another worker
