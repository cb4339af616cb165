"""The ``hf-variants`` command: the subcommands and the dispatcher (the console script's entry point)."""

from __future__ import annotations

import argparse
import difflib
import errno
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata

from ..settings.arguments import ArgumentParser

DISTRIBUTION = "hf-variants"


@dataclass(frozen=True)
class Command:
    """A subcommand: its one-line summary, the function that parses its arguments and runs it, and the parser it
    reads them with (the command-line reference, docs/cli.md, is generated from it)."""

    summary: str
    run: Callable[[list[str]], object]
    parser: Callable[[], argparse.ArgumentParser] | None = None


def _parser(module: str, name: str) -> Callable[[], argparse.ArgumentParser]:
    """The parser factory ``name`` of ``hf_variants.<module>``, imported when called."""
    return lambda: getattr(importlib.import_module(f"hf_variants.{module}"), name)()


def _pretrain(argv: list[str]) -> object:
    from ..settings.pretraining import parse_args

    parse_args(argv)  # --help and argument errors before the engine is imported
    from ..training.run_mlm import main

    return main(argv)


def _finetune(argv: list[str]) -> object:
    from ..settings.finetuning import parse_or_help

    parse_or_help(argv)
    from ..training.run_glue import main

    return main(argv)


def _train_tokenizer(argv: list[str]) -> object:
    from ..settings.tokenizer import parse_args

    args = parse_args(argv)
    from ..training.train_tokenizer import train_tokenizer

    return train_tokenizer(args)


def _export(argv: list[str]) -> object:
    from .hub import export

    return export(argv)


def _push(argv: list[str]) -> object:
    from .hub import push

    return push(argv)


def _compare(argv: list[str]) -> object:
    from ..settings.compare import parse_args

    parse_args(argv)  # --help and argument errors before the lab is imported
    from ..lab import require_lab_extra

    try:
        require_lab_extra()  # before the first model is trained, not when the report draws its figures
    except ImportError as error:
        raise SystemExit(f"hf-variants compare: {error}") from None
    from ..lab.compare import main

    return main(argv)


def _study(argv: list[str]) -> object:
    from ..settings.study import parse_args

    parse_args(argv)  # --help and argument errors before the lab is imported
    from ..lab.study import main

    return main(argv)


def _verify(argv: list[str]) -> object:
    from .hub import verify

    return verify(argv)


def _info(argv: list[str]) -> object:
    from .info import run

    return run(argv)


COMMANDS: dict[str, Command] = {
    "pretrain": Command("Masked-language-model pretraining on accelerate (run_mlm).", _pretrain,
                        _parser("settings.pretraining", "build_parser")),
    "finetune": Command("GLUE-style fine-tuning on the transformers Trainer (run_glue).", _finetune,
                        _parser("settings.finetuning", "help_parser")),
    "train-tokenizer": Command("Train a WordPiece tokenizer on a corpus.", _train_tokenizer,
                               _parser("settings.tokenizer", "build_parser")),
    "export": Command("Write a checkpoint as a Hub folder (remote code and model card).", _export,
                      _parser("cli.hub", "export_parser")),
    "push": Command("Upload a Hub folder to the Hub (or to a local folder laid out like it).", _push,
                    _parser("cli.hub", "push_parser")),
    "compare": Command("The main job: each variant against its matched control on embedded tasks that can separate "
                       "models, with controls showing what it can detect.", _compare,
                       _parser("settings.compare", "build_parser")),
    "study": Command("Run a study file: each variant against its matched control on text-classification tasks, "
                     "records into a folder.", _study, _parser("settings.study", "build_parser")),
    "verify": Command("Check a folder hf-variants wrote against its manifest (sizes and SHA-256).", _verify,
                      _parser("cli.hub", "verify_parser")),
    "info": Command("Registered model types, library versions and the compute device.", _info,
                    _parser("cli.info", "info_parser")),
}


def version() -> str:
    """The installed distribution's version (pyproject.toml is its one source)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="hf-variants",
        description="Research Transformer encoders as HuggingFace models: pretrain, fine-tune, export, compare.",
        epilog="Run 'hf-variants COMMAND --help' for a command's arguments and their defaults. Multi-process: "
        "'accelerate launch -m hf_variants.cli pretrain ...'.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        # Each command parses its own arguments (and its own --help), so its parser here takes them all.
        commands.add_parser(name, help=command.summary, add_help=False, prefix_chars="\0")
    return parser


def run(argv: Sequence[str]) -> object:
    """Run ``hf-variants ARGV`` and return what the command's function returns (e.g. run_mlm's results)."""
    argv = list(argv)
    if argv and argv[0] in COMMANDS:
        return COMMANDS[argv[0]].run(argv[1:])
    parser = build_parser()
    if argv and not argv[0].startswith("-"):  # a misspelt command: name the closest
        close = difflib.get_close_matches(argv[0], list(COMMANDS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        parser.error(f"argument COMMAND: invalid choice: {argv[0]!r}{hint} (choose from {', '.join(COMMANDS)})")
    parser.parse_args(argv)  # --help, --version, or an error naming what is wrong
    return None  # pragma: no cover - parse_args exits for every argv that is not a command


#: Set to 1 to see the traceback of an error the command otherwise reports in one line.
DEBUG_ENV = "HF_VARIANTS_DEBUG"


def main(argv: Sequence[str] | None = None) -> None:
    """The console entry point (its return value would become the exit status, so it returns nothing).

    A refusal or failure caused by the user's input, files or folders — the package's ``ValueError``s
    (``CheckpointError``, bad settings, bad data cells), ``OSError``s (missing or unreadable files) and
    ``FloatingPointError``s (a non-finite training step) — is printed as one line naming the command, with
    exit status 1; ``HF_VARIANTS_DEBUG=1`` shows the traceback instead."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        run(argv)
    except Exception as error:
        full = disk_full(error)
        if not (full or isinstance(error, (ValueError, OSError, FloatingPointError))):
            raise
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            raise
        name = argv[0] if argv and argv[0] in COMMANDS else None
        message = describe_os_error(error) if isinstance(error, OSError) else " ".join(str(error).split())
        if full:
            message = f"the disk is full ({message}). Free some space and run the same command again: " + (
                RESUMES.get(name, "what it finished is kept"))  # fmt: skip
        print(f"hf-variants{' ' + name if name else ''}: error: {message or type(error).__name__} (set {DEBUG_ENV}=1 "
              "for the traceback)", file=sys.stderr)  # fmt: skip
        raise SystemExit(1) from None


#: What running a command again after a full disk does, said in its error.
RESUMES = {
    "pretrain": "the run resumes from its last complete checkpoint",
    "finetune": "the run resumes from its last complete checkpoint",
    "compare": "it resumes, keeping every finished stage",
    "study": "it resumes, keeping every finished run's record",
    "export": "the export is written again from the start (an unfinished one is never taken for finished)",
    "push": "only a complete, checked export is uploaded",
}
#: An operating-system error's plain cause, for the errors a user's paths meet.
OS_ERROR_CAUSES = {
    errno.EEXIST: "a file or folder is already there",
    errno.ENOTDIR: "a file stands where a folder is needed",
    errno.EISDIR: "a folder stands where a file is needed",
    errno.EACCES: "permission denied",
    errno.ENOENT: "no such file or folder",
    errno.ENAMETOOLONG: "the name is too long",
}


def describe_os_error(error: OSError) -> str:
    """An ``OSError`` as one line naming the path and the cause in words (``[Errno 20] Not a directory: 'x'`` →
    ``x: a file stands where a folder is needed``), never the raw ``[Errno N]``."""
    if error.errno is None or error.filename is None:
        return " ".join(str(error).split())
    paths = " → ".join(str(name) for name in (error.filename, error.filename2) if name is not None)
    return f"{paths}: {OS_ERROR_CAUSES.get(error.errno, error.strerror or str(error))}"


def disk_full(error: BaseException | None) -> bool:
    """Whether ``error`` or any error it was raised from is a full disk (``ENOSPC``), whatever its type:
    safetensors' and tokenizers' errors carry it only in their message."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno == errno.ENOSPC:
            return True
        if os.strerror(errno.ENOSPC) in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False
