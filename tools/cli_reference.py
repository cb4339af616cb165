"""The command-line reference (docs/cli.md), generated from the parsers the commands read their arguments with
(``hf_variants.cli.commands.COMMANDS``: each command's ``parser``), so that no flag goes undocumented and no
documented flag is stale; ``tests/test_docs.py`` fails when the committed page differs from what this writes.

    python tools/cli_reference.py           # writes docs/cli.md
    python tools/cli_reference.py --check   # exit 1 if docs/cli.md is not what the parsers give
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from hf_variants.cli.commands import COMMANDS

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
INTRODUCTION = """# Command line

`hf-variants COMMAND [options]`; `hf-variants COMMAND --help` prints the same flags with the same words. Flags may
be written with underscores or dashes (`--output_dir`, `--output-dir`). A usage error (a missing or malformed flag)
exits with status 2, a refusal or failure with status 1, each in one line; `HF_VARIANTS_DEBUG=1` shows the
traceback instead. Multi-process pretraining: `accelerate launch -m hf_variants.cli pretrain ...`.

This page is generated from the commands' parsers (`python tools/cli_reference.py`).
"""


def flags(action: argparse.Action) -> str:
    """The action's names, each spelling once (``--output_dir``, not also ``--output-dir``); a positional's
    metavar."""
    if not action.option_strings:
        return f"`{(action.metavar or action.dest).upper()}`"
    names = list(dict.fromkeys(name.replace("-", "_").replace("__", "--", 1) for name in action.option_strings))
    return ", ".join(f"`{name}`" for name in names)


def default(action: argparse.Action) -> str:
    if not action.option_strings:
        return "required"
    if action.required:
        return "required"
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction) or action.nargs == 0:
        return "a switch"
    if action.default is None or action.default == argparse.SUPPRESS:
        return "—"
    value = " ".join(map(str, action.default)) if isinstance(action.default, list | tuple) else str(action.default)
    return f"`{value}`"


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def command_section(name: str) -> str:
    """One command's section: its summary, description and a table of its flags."""
    command = COMMANDS[name]
    parser = command.parser()
    lines = [f"## `hf-variants {name}`", "", command.summary, ""]
    if parser.description:
        lines += ["```text", parser.description.strip("\n"), "```", ""]
    lines += ["| flag | default | what it does |", "|---|---|---|"]
    for action in parser._actions:  # argparse keeps its actions only there
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        help_text = (action.help or "").replace("%(default)s", str(action.default))
        required = help_text.endswith(" (required)")  # how a settings class marks a flag the command needs
        help_text = help_text.removesuffix(" (required)")
        choices = f" One of: {', '.join(f'`{choice}`' for choice in action.choices)}." if action.choices else ""
        shown_default = "required" if required else default(action)
        lines.append(f"| {flags(action)} | {shown_default} | {cell(help_text)}{choices} |")
    if parser.epilog:
        lines += ["", cell(parser.epilog)]
    return "\n".join(lines) + "\n"


def reference() -> str:
    """The whole page."""
    return "\n".join([INTRODUCTION, *(command_section(name) for name in COMMANDS)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="Exit 1 if docs/cli.md is not what the parsers give.")
    if parser.parse_args().check:
        if PAGE.read_text(encoding="utf-8") != reference():
            sys.exit(f"{PAGE} is out of date: run python tools/cli_reference.py")
        return
    PAGE.write_text(reference(), encoding="utf-8")
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
