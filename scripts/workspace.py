"""What the study scripts share that is about this workspace, not about the experiments: the data folder
(``../shared/data``, see its ``PROVENANCE.md``), the study options, and committing each finished result
file to git as it is written (so that a study spans sessions). The experiments themselves are in
:mod:`hf_variants.lab`; the scripts import this module from their own folder."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from hf_variants.lab.glue_after_pretraining import FineTuning

#: The project's data folder, relative to the checkout (README "The main job and the results").
DATA_DIR = Path("../shared/data")


def add_study_arguments(parser: argparse.ArgumentParser) -> None:
    """The options both studies share: data, fine-tuning protocol, workers, committing."""
    parser.add_argument("--data_dir", type=Path, default=DATA_DIR)
    parser.add_argument("--tasks", nargs="+", default=list(FineTuning.tasks))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(FineTuning.seeds))
    parser.add_argument("--learning_rates", type=float, nargs="+", default=list(FineTuning.learning_rates))
    parser.add_argument("--max_train_samples", type=int, default=FineTuning.max_train_samples)
    parser.add_argument("--workers", type=int, default=1, help="fine-tuning runs at a time, one CPU thread each")
    parser.add_argument("--git_commit", action="store_true", help="commit each finished run's result file")


def study_setup(args: argparse.Namespace, title: str) -> tuple[FineTuning, Callable[[list[Path], str], None]]:
    """The fine-tuning protocol of the parsed options, and a ``commit(paths, what)`` that commits result
    files with ``--git_commit``, with the pages they re-render (and does nothing without it). Sets the offline
    environment."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    protocol = FineTuning(tuple(args.tasks), tuple(args.seeds), tuple(args.learning_rates),
                          max_train_samples=args.max_train_samples)  # fmt: skip

    def commit(paths: list[Path], what: str) -> None:
        if args.git_commit:
            rendered = write_rendered_pages(Path.cwd(), rendered_pages())
            git_commit_files(Path.cwd(), [*paths, *rendered], f"{title}: {what}")

    return protocol, commit


def git_commit_files(repository: Path, paths: list[Path], message: str) -> None:
    """``git commit -- <paths>`` (when they changed), leaving anything else in the working tree alone."""
    names = [str(path) for path in paths]
    git(repository, "add", "--", *names)
    if git(repository, "diff", "--cached", "--quiet", "--", *names, check=False).returncode:
        git(repository, "commit", "-q", "-m", message, "--", *names)


def git(repository: Path, *arguments: str, check: bool = True, wait: float = 120.0) -> subprocess.CompletedProcess:
    """One git command, waiting up to ``wait`` seconds while another git process holds the index (two grids
    committing into one checkout, or a person's commit): a grid must not stop for a busy lock."""
    deadline = time.monotonic() + wait
    while True:
        result = subprocess.run(["git", *arguments], cwd=repository, capture_output=True, text=True)
        if "index.lock" not in result.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if check and result.returncode:
        raise subprocess.CalledProcessError(result.returncode, result.args, result.stdout, result.stderr)
    return result


def git_commit_record(
    repository: Path, render: Callable[[], dict[Path, str]] | None = None
) -> Callable[[Path], None]:
    """A callback that commits one cell's files as each run lands (and the task's fingerprint and data summary).
    With ``render`` (``render_tables.rendered_pages``: every generated page as the result files give it), the
    pages the new record changes go into the same commit, so that no commit leaves a table out of date with the
    records it is rendered from (``render_tables.py --check`` fails on such a commit). A page with uncommitted
    edits is someone's work in progress: it is left as it is, and a line says to re-render it before committing."""

    def commit(cell: Path) -> None:
        task_folder = cell.parent.parent
        paths = [cell, task_folder / "run_fingerprint.json", task_folder / "data.json"]
        if render is not None:
            paths += write_rendered_pages(repository, render())
        git_commit_files(repository, paths, f"Grid result: {task_folder.name} / {cell.parent.name} / {cell.name}")

    return commit


def rendered_pages() -> dict[Path, str]:
    """Every generated page as the committed result files give it (``scripts/render_tables.py``)."""
    from render_tables import rendered_pages as pages  # a script beside this one, imported only to commit

    return pages()


def write_rendered_pages(repository: Path, pages: dict[Path, str]) -> list[Path]:
    """Write each page whose text changed and whose file has no uncommitted edits; return those written."""
    written = []
    for path, text in pages.items():
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        if path.is_file() and git(repository, "diff", "--quiet", "HEAD", "--", str(path), check=False).returncode:
            print(f"{path} has uncommitted edits: its generated tables are left as they were; run "
                  "scripts/render_tables.py before committing it.", file=sys.stderr)  # fmt: skip
            continue
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
