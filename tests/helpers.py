"""Small helpers shared by test modules."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import psutil
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def free_port() -> int:
    """A TCP port nothing listens on now, for a launcher's rendezvous (``--main_process_port``), so that
    launcher tests can run side by side (pytest -n) instead of meeting on torchrun's fixed 29500."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def two_process_launch(command: str, *args: str) -> list[str]:
    """The documented data-parallel launch of an ``hf-variants`` command: ``accelerate launch --multi_gpu
    --num_processes 2`` (torchrun + gloo on a CPU-only machine), no mixed precision, a free rendezvous port."""
    return [str(Path(sys.executable).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "2",
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", str(free_port()), "-m", "hf_variants.cli", command, *args]  # fmt: skip


def run_launcher(
    command: list[str], *, cwd: Path, env: dict[str, str], timeout: int = 300
) -> subprocess.CompletedProcess:
    """Run a launcher command (``accelerate launch ...``) in a session of its own. If it still runs after
    ``timeout`` seconds, every process it started (launcher and workers, found by descent: one that left the session
    too) is sent SIGABRT, on which Python's faulthandler (switched on here) prints each one's stacks, then killed;
    the test fails with those stacks, so a hung launch fails in minutes and says where it hung, instead of holding
    an xdist worker — even when a process that outlives the kill keeps its output pipes open."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**env, "PYTHONFAULTHANDLER": "1"},
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        started = launched_processes(process.pid)  # before any dies: an orphan's parent is no longer the launcher
        stdout, stderr = "", ""
        for stop in (signal.SIGABRT, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):  # the session, and what left it
                os.killpg(process.pid, stop)
            for each in started:
                with contextlib.suppress(psutil.Error):  # it may end between the listing and the signal
                    each.send_signal(stop)
            try:
                stdout, stderr = process.communicate(timeout=30)
                break
            except subprocess.TimeoutExpired:
                continue
        pytest.fail(f"{' '.join(command[:2])} still ran after {timeout} s; its output, then its stacks:\n"
                    f"{stdout[-3000:]}\n{stderr[-12000:]}")  # fmt: skip
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def launched_processes(pid: int) -> list[psutil.Process]:
    """The process ``pid`` and every process it started, however far down and in whatever session."""
    with contextlib.suppress(psutil.Error):
        launcher = psutil.Process(pid)
        return [launcher, *launcher.children(recursive=True)]
    return []


def load_script(name: str) -> ModuleType:
    """Import the repository script ``<name>.py`` (``"tools/findings"``, ``"experiments/parity/parity"``) as a
    module; as when it runs, its folder is on ``sys.path`` so that it imports the modules beside it."""
    path = REPO_ROOT / f"{name}.py"
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    spec = importlib.util.spec_from_file_location(f"script_{name.replace('/', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module  # as an imported module is (dataclasses look their module up there)
    spec.loader.exec_module(module)
    return module


def run_python(script: str, *args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run ``script`` (source text) in a fresh interpreter, offline, with no standard input (so code that
    would ask a question at a prompt fails instead of waiting)."""
    path = cwd / "_snippet.py"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def poison_gradient(parameter, on_call: int):
    """Make ``parameter``'s gradient infinite on its ``on_call``-th backward pass (1-based) and only
    there — a fault in one named place, for the engines' non-finite checks. Returns the hook handle."""
    import torch

    calls = [0]

    def hook(gradient):
        calls[0] += 1
        return torch.full_like(gradient, float("inf")) if calls[0] == on_call else gradient

    return parameter.register_hook(hook)


def middle_parameter(model) -> tuple[str, object]:
    """The (name, parameter) in the middle of ``model.named_parameters()``."""
    named = list(model.named_parameters())
    return named[len(named) // 2]


@functools.cache
def _records_tool() -> ModuleType:
    return load_script("tools/records")


def committed_records(study: str) -> Path:
    """The committed records of ``experiments/<study>`` (its ``records/*.jsonl``) as the study's output folder,
    unpacked once per test session by ``tools/records.py`` into a temporary folder."""
    return _records_tool().unpacked(REPO_ROOT / "experiments" / study)


def files_below(folder: Path) -> list[str]:
    """The files below ``folder`` (links included), as paths relative to it, without hidden ones (a lock, a
    staging folder): what an export or an upload holds."""
    found = [path.relative_to(folder) for path in Path(folder).rglob("*") if path.is_file() or path.is_symlink()]
    return sorted(path.as_posix() for path in found if not any(part.startswith(".") for part in path.parts))
