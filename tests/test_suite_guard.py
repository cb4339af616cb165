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


#: A launch that hangs: it starts a process in a session of its own that keeps the launch's output pipes open,
#: then waits forever itself (a worker that outlives a killed launcher leaves the pipes open the same way).
LEAVES_A_STRAGGLER = """
import subprocess, sys, threading
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
print("launched", flush=True)
threading.Event().wait()
"""


def test_a_hung_launch_fails_in_bounded_time_even_when_a_process_left_its_session(tmp_path: Path) -> None:
    """tests.helpers.run_launcher kills what the launch started, however far down and in whatever session, and the
    test fails with its output, instead of waiting on pipes a straggler holds open."""
    import time

    import psutil
    import pytest

    from .helpers import run_launcher

    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match=r"still ran after 3 s; its output, then its stacks:\nlaunched"):
        run_launcher([sys.executable, "-c", LEAVES_A_STRAGGLER], cwd=tmp_path, env={}, timeout=3)
    assert time.monotonic() - started < 60
    stragglers = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] and
                  p.info["cmdline"][-1] == "import time; time.sleep(600)"]  # fmt: skip
    assert not [p for p in stragglers if p.status() != psutil.STATUS_ZOMBIE]
