"""Help text that shows every argument's default and keeps the description's line breaks, and a parser
whose usage errors are two lines (not the whole usage of a command with forty flags)."""

from __future__ import annotations

import argparse


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """``(default: X)`` after every help line that has a default, the description as written."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "%(default)" in text:
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            return f"{text} (default: %(default)s)".strip()
        return text


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage error is a short usage line and the error (exit status 2);
    ``--help`` still shows everything."""

    def error(self, message: str) -> None:  # type: ignore[override]
        positionals = [(action.metavar or action.dest).upper() for action in self._actions
                       if not action.option_strings and action.help != argparse.SUPPRESS]  # fmt: skip
        usage = " ".join([self.prog, *map(str, positionals), "[options]"])
        self.exit(2, f"usage: {usage}  (--help lists them)\n{self.prog}: error: {message}\n")
