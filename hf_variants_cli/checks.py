"""Argument types that check a value's range where it is parsed, so that a bad value is an error naming
the argument (argparse: ``argument --x: invalid ...``) instead of a hang, a silent change of meaning or
a bare ``ZeroDivisionError`` later. One function per kind of range; each says what it accepts."""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def _number(kind: type, text: str) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _ranged(kind: type, accepts: Callable[[float], bool], problem: str, name: str) -> Callable[[str], int | float]:
    """An argparse type: a number of ``kind`` that ``accepts`` (else ``"<text> <problem>"``), shown as ``name``."""

    def parse(text: str) -> int | float:
        value = _number(kind, text)
        if not accepts(value):
            raise argparse.ArgumentTypeError(f"{text} {problem}")
        return value

    parse.__name__ = name
    return parse


def at_least(minimum: int | float, kind: type = int) -> Callable[[str], int | float]:
    """A number ≥ ``minimum``."""
    return _ranged(kind, lambda value: value >= minimum, f"is below {minimum}; it must be at least {minimum}",
                   f"at least {minimum}")  # fmt: skip


def above(minimum: float, kind: type = float) -> Callable[[str], int | float]:
    """A number > ``minimum``."""
    return _ranged(kind, lambda value: value > minimum, f"must be greater than {minimum}", f"above {minimum}")


def open_interval(low: float, high: float) -> Callable[[str], float]:
    """A number strictly between ``low`` and ``high``."""
    return _ranged(float, lambda value: low < value < high, f"must lie strictly between {low} and {high}",
                   f"between {low} and {high}")  # fmt: skip


def half_open_interval(low: float, high: float) -> Callable[[str], float]:
    """A number in ``[low, high)``."""
    return _ranged(float, lambda value: low <= value < high, f"must lie in [{low}, {high})", f"in [{low}, {high})")


def seed_range() -> Callable[[str], int]:
    """A seed: an integer in [0, 2**32), the range every generator a run seeds accepts (NumPy's is the narrowest)."""
    return _ranged(int, lambda value: 0 <= value < 2**32, "is not a seed; a seed is an integer from 0 to 2**32 - 1",
                   "a seed")  # fmt: skip


def field_defaults(settings_class: type) -> dict[str, Any]:
    """Every default of a settings dataclass, for ``parser.set_defaults`` (its flags then show them)."""
    return {
        field.name: field.default if field.default_factory is dataclasses.MISSING else field.default_factory()
        for field in dataclasses.fields(settings_class)
        if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
    }


def check_fields(settings: Any, parser: argparse.ArgumentParser) -> None:
    """Check and convert each field of a settings dataclass by its flag's own type and choices, as if it had
    been given on the command line; a bad value is a ``ValueError`` naming the field."""
    for action in parser._actions:
        value = getattr(settings, action.dest, None)
        if action.dest == "help" or value is None or isinstance(value, bool):
            continue
        try:
            checked = action.type(str(value)) if action.type is not None else value
        except (argparse.ArgumentTypeError, ValueError) as error:
            raise ValueError(f"{action.dest}={value!r}: {error}") from None
        if action.choices is not None and checked not in action.choices:
            raise ValueError(f"{action.dest}={value!r}: choose from {', '.join(map(str, action.choices))}")
        setattr(settings, action.dest, Path(value) if action.type is Path else checked)


def underscored(argv: list[str]) -> list[str]:
    """``--flag-name`` as ``--flag_name`` (the flags' own spelling), as transformers' ``HfArgumentParser``
    accepts both; values are left as they are."""
    return [
        "--" + item[2:].partition("=")[0].replace("-", "_") + "".join(item.partition("=")[1:])
        if item.startswith("--") and len(item) > 2 else item
        for item in argv
    ]


def parse_into(settings_class: type[T], parser: argparse.ArgumentParser, argv: list[str] | None) -> T:
    """The command line as typed settings (``settings_class(**flags)``); a bad value or combination, which
    the settings class refuses with a ``ValueError``, is argparse's usage error naming it. Flags may be
    written with dashes (``--model-type``) or underscores."""
    namespace = parser.parse_args(underscored(sys.argv[1:] if argv is None else argv))
    try:
        return settings_class(**vars(namespace))
    except ValueError as error:
        parser.error(str(error))
