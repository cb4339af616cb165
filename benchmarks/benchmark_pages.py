#!/usr/bin/env python
"""How long a reader waits to run a documentation page as written: every code block of each page that states
its run time (the quickstart, the two tutorials), in order, in a fresh folder, with the installed
``hf-variants``, timed by the wall clock and by the CPU time of the processes it started.

    python benchmarks/benchmark_pages.py --output OUT/page_times.json

Run it with nothing else running: a page's wait is a user-facing number. Each page's stated run time is
rendered from this record (``tools/render_tables.py``), so a page never says longer or shorter than it took.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The pages whose run time the docs state: docs path → the blocks that make up the run ("python" or "bash").
PAGES = ("docs/quickstart.md", "docs/tutorial-csv.md", "docs/tutorial-pretraining.md")
BLOCK = re.compile(r"```(python|bash)\n(.*?)```", re.DOTALL)


def blocks_digest(text: str) -> str:
    """The SHA-256 of a page's code blocks in order (kind and code): what its run time was measured on. The
    rendered run time is refused once the page's blocks differ (``tools/render_tables.py``)."""
    return hashlib.sha256(json.dumps(BLOCK.findall(text)).encode("utf-8")).hexdigest()


def run_page(page: Path, folder: Path) -> dict[str, float]:
    """Every block of ``page`` in ``folder``, in order; the wall and child CPU seconds they took. A block that
    fails stops the benchmark with its error (a page that does not run has no run time)."""
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # fmt: skip
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    for number, (kind, code) in enumerate(BLOCK.findall(page.read_text(encoding="utf-8"))):
        command = [sys.executable, "-c", code] if kind == "python" else ["bash", "-e", "-c", code]
        result = subprocess.run(command, cwd=folder, capture_output=True, text=True, env=environment,
                                stdin=subprocess.DEVNULL, timeout=1200)  # fmt: skip
        if result.returncode:
            raise SystemExit(f"{page.name} block {number} ({kind}) failed:\n{result.stderr[-3000:]}")
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return {"wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "blocks_sha256": blocks_digest(page.read_text(encoding="utf-8"))}  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, required=True, help="The JSON record to write.")
    parser.add_argument("--pages", nargs="+", default=list(PAGES), help="Pages to time (paths from the repository).")
    args = parser.parse_args(argv)
    pages = {}
    for page in args.pages:
        with tempfile.TemporaryDirectory() as folder:
            pages[page] = run_page(ROOT / page, Path(folder))
        print(page, pages[page], flush=True)
    record = {"pages": pages, "cpu_count": os.cpu_count(), "python": platform.python_version()}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


if __name__ == "__main__":
    main()
