"""The lab's one executor: runs side by side in worker processes that die with the study and share its CPU
threads, or one after another in this process (:func:`executor`). The lab's protocol
(:func:`~.protocol.run_protocol`) submits every comparison's runs to it."""

from __future__ import annotations

import contextlib
import os
import sys
from concurrent.futures import Executor, Future
from pathlib import Path

import torch

from ..storage.files import make_folder, open_for_append


def die_with(parent_pid: int) -> None:
    """On Linux, have this process killed when ``parent_pid`` (the study) ends, even by SIGKILL: an orphaned
    worker would keep training and hold its run folder's lock against the re-run."""
    import ctypes
    import signal

    if not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the study ended before the request took effect
        os._exit(1)


class InlineExecutor(Executor):
    """Runs each call in this process (``--workers 1``): a submitted one at once, a mapped one when its result is
    taken."""

    def map(self, fn, *iterables, timeout=None, chunksize=1):
        """One call after another as the results are taken (a caller records each before the next runs)."""
        return (fn(*args) for args in zip(*iterables, strict=True))

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # handed to the caller by future.result(), as a pool would
            future.set_exception(error)
        return future


def executor(workers: int) -> Executor:
    """``workers`` processes sharing this process's CPU threads, or :class:`InlineExecutor` for one."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if workers == 1:
        return InlineExecutor()
    threads = max(1, torch.get_num_threads() // workers)
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=start_worker, initargs=(threads, os.getpid()))  # fmt: skip


def start_worker(threads: int, study_pid: int) -> None:
    """A worker process: it dies with the study (:func:`die_with`), takes its share of the threads, and has
    the libraries' bars off as in the main process."""
    import datasets
    from transformers.utils import logging as transformers_logging

    die_with(study_pid)
    torch.set_num_threads(threads)
    datasets.disable_progress_bars()
    transformers_logging.disable_progress_bar()


@contextlib.contextmanager
def quiet_libraries():
    """No dataset-casting or weight-loading bars while the comparison runs: the console shows one bar per
    stage (pretraining, fine-tuning) and one for the whole run; the grid's log, none."""
    import datasets
    from transformers.utils import logging as transformers_logging

    datasets_were_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers_logging.enable_progress_bar()
        if datasets_were_enabled:
            datasets.enable_progress_bars()


@contextlib.contextmanager
def console_to_file(path: Path, quiet: bool, *, within: Path):
    """With ``quiet``, what a stage prints to stdout (metric tables, result dicts) goes to ``path``
    instead of the console, where only the progress bars (stderr) remain. The file is appended to: a resumed or
    re-entered run adds to its log, never replaces what its earlier part wrote."""
    if not quiet:
        yield
        return
    make_folder(path.parent, within=within)
    with open_for_append(path, within=within) as handle, contextlib.redirect_stdout(handle):
        yield
