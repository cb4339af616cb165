"""Small helpers shared by test modules."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


def free_port() -> int:
    """A TCP port nothing listens on now, for a launcher's rendezvous (``--main_process_port``), so that
    launcher tests can run side by side (pytest -n) instead of meeting on torchrun's fixed 29500."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def load_script(name: str) -> ModuleType:
    """Import ``scripts/<name>.py`` as a module (scripts are not a package; as when run, their folder is
    on ``sys.path`` so that they can import ``workspace``)."""
    if str(REPO_ROOT / "scripts") not in sys.path:
        sys.path.append(str(REPO_ROOT / "scripts"))
    path = REPO_ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"scripts_{name}", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
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
