"""Every command in a shell block of the README and the docs works as written, as far as it can be checked
offline without running it: each ``hf-variants`` subcommand exists and takes every flag given (also
after ``accelerate launch ... -m hf_variants.cli``), each ``accelerate launch`` flag is accelerate's,
each script and file named exists (or the page says from which commit to restore it), each extra named
in a ``pip install`` is declared. So the next renamed flag or removed script fails here, not for a user."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from .helpers import REPO_ROOT

PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]
SHELL_BLOCK = re.compile(r"```(?:bash|sh|shell|console)\n(.*?)```", re.DOTALL)
FLAG = re.compile(r"--[A-Za-z][\w-]*")


def shell_commands(text: str) -> list[list[str]]:
    """The commands of a page's shell blocks, as argument lists (continuations joined, comments dropped,
    ``&&``/``;``/``|`` split, leading ``NAME=value`` assignments removed)."""
    commands = []
    for block in SHELL_BLOCK.findall(text):
        for line in re.sub(r"\\\n", " ", block).splitlines():
            tokens = shlex.split(line, comments=True)
            current: list[str] = []
            for token in [*tokens, ";"]:
                if token in ("&&", ";", "|", "||"):
                    while current and re.fullmatch(r"[A-Z_]+=\S*", current[0]):
                        current.pop(0)
                    if current:
                        commands.append(current)
                    current = []
                else:
                    current.append(token)
    return commands


def page_commands() -> list[tuple[str, list[str]]]:
    return [(str(page.relative_to(REPO_ROOT)), command) for page in PAGES
            for command in shell_commands(page.read_text(encoding="utf-8"))]  # fmt: skip


@functools.cache
def subcommand_help(name: str) -> str:
    """What ``hf-variants NAME --help`` prints (``--help_all`` for finetune: with the Trainer's flags)."""
    flag = "--help_all" if name == "finetune" else "--help"
    result = subprocess.run([sys.executable, "-m", "hf_variants.cli", name, flag], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


@functools.cache
def accelerate_launch_help() -> str:
    result = subprocess.run([str(Path(sys.executable).with_name("accelerate")), "launch", "--help"],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


def unknown_flags(arguments: list[str], help_text: str) -> list[str]:
    """The flags of ``arguments`` that ``help_text`` does not list (``--a-b`` is read as ``--a_b``)."""
    listed = set(FLAG.findall(help_text))
    given = [token.split("=", 1)[0] for token in arguments if FLAG.fullmatch(token.split("=", 1)[0])]
    return [flag for flag in given if flag not in listed and flag.replace("-", "_").replace("__", "--") not in listed]


def check_hf_variants(arguments: list[str]) -> list[str]:
    from hf_variants.cli.commands import COMMANDS

    if not arguments or arguments[0].startswith("-"):
        return []
    if arguments[0] not in COMMANDS:
        return [f"no subcommand {arguments[0]!r}"]
    return [f"{arguments[0]} has no {flag}" for flag in unknown_flags(arguments[1:], subcommand_help(arguments[0]))]


def check_command(page: str, command: list[str]) -> list[str]:
    program = command[0]
    if program == "hf-variants":
        return check_hf_variants(command[1:])
    if program == "accelerate" and command[1:2] == ["launch"]:
        if "hf_variants.cli" not in command:
            return ["accelerate launch without -m hf_variants.cli"]
        split = command.index("hf_variants.cli")
        launcher = [token for token in command[2 : split - 1] if token != "..."]
        problems = [f"accelerate launch has no {flag}" for flag in unknown_flags(launcher, accelerate_launch_help())]
        return problems + check_hf_variants(command[split + 1 :])
    if program in ("python", "python3") and len(command) > 1 and command[1].endswith(".py"):
        script = command[1]
        return [] if (REPO_ROOT / script).is_file() else [f"{script} does not exist"]
    if program == "bash" and len(command) > 1:
        return [] if (REPO_ROOT / command[1]).is_file() else [f"{command[1]} does not exist"]
    if program == "pip" and command[1:2] == ["install"]:
        declared = set(metadata.metadata("hf-variants").get_all("Provides-Extra") or [])
        named = {extra.strip() for token in command if token.startswith(("hf-variants[", ".["))
                 for extra in token.split("[", 1)[1].split("]", 1)[0].split(",")}  # fmt: skip
        return [f"no extra {extra!r}" for extra in sorted(named - declared)]
    return []


def test_shell_blocks_are_found() -> None:
    commands = page_commands()
    programs = {command[0] for _, command in commands}
    assert {"hf-variants", "pip", "accelerate"} <= programs
    assert shell_commands("```bash\nA=1 hf-variants x --y \\\n  --z 2 && pip install a  # note\n```") == [
        ["hf-variants", "x", "--y", "--z", "2"], ["pip", "install", "a"]]
    assert unknown_flags(["--model-type", "--nope=3", "x"], "--model_type M") == ["--nope"]
    assert check_command("README.md", ["hf-variants", "pretrain", "--model-type", "x", "--nope"]) == [
        "pretrain has no --nope"]
    assert check_command("README.md", ["hf-variants", "pretrian"]) == ["no subcommand 'pretrian'"]
    assert check_command("README.md", ["python", "scripts/removed.py"]) == ["scripts/removed.py does not exist"]
    assert check_command("README.md", ["pip", "install", "hf-variants[lab,gpu]"]) == ["no extra 'gpu'"]


@pytest.mark.parametrize(("page", "command"), page_commands(), ids=lambda value: value if isinstance(value, str)
                         else " ".join(value)[:60])  # fmt: skip
def test_every_command_in_the_docs_works_as_written(page: str, command: list[str]) -> None:
    assert check_command(page, command) == []


#: What no documented command may do: check out another commit, pass a commit to record, or write into the
#: repository's pages or committed records (a reproduction writes into a fresh folder of the reader's choosing).
INTO_THE_REPOSITORY = re.compile(
    r"git (?:checkout|switch|reset)\b|--git_commit\b"
    r"|--output(?:_dir)?[ =](?:\./)?(?:docs|experiments|benchmarks/records|tools/records)\b"
)
CODE = re.compile(r"```.*?```|`[^`\n]+`", re.DOTALL)


def repository_writes(text: str) -> list[str]:
    """The code spans and blocks of a page that check out a commit or write into the repository."""
    return [match.group(0) for code in CODE.finditer(text) for match in INTO_THE_REPOSITORY.finditer(code.group(0))]


def test_no_documented_command_checks_out_a_commit_or_writes_into_the_repository() -> None:
    """Reproduction commands write into a fresh folder of the reader's choosing: none checks out an old commit,
    passes a commit flag, or writes into docs/, experiments/ or the committed records (the pages, the model cards,
    and the usage lines of the repository's scripts)."""
    package_cards = sorted((REPO_ROOT / "hf_variants" / "model_cards").glob("*.md"))
    scripts = [path for folder in ("scripts", "benchmarks", "tools", "experiments", "examples")
               for path in sorted((REPO_ROOT / folder).rglob("*.py"))]  # fmt: skip
    found = {f"{path.relative_to(REPO_ROOT)}: {hit}" for path in [*PAGES, *package_cards]
             for hit in repository_writes(path.read_text(encoding="utf-8"))}  # fmt: skip
    found |= {f"{path.relative_to(REPO_ROOT)}: {match.group(0)}" for path in scripts  # usage lines, whole text
              for match in INTO_THE_REPOSITORY.finditer(path.read_text(encoding="utf-8"))}  # fmt: skip
    assert found == set()
    assert repository_writes("run `git checkout ed7beb1 && x` then\n```bash\npython a.py --output_dir docs/x\n```") == [
        "git checkout", "--output_dir docs"]
    assert repository_writes("`python a.py --output_dir runs/docs` writes `docs/x`") == []
