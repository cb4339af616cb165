"""Argument types that check a value's range where it is parsed, so that a bad value is an error naming
the argument (argparse: ``argument --x: invalid ...``) instead of a hang, a silent change of meaning or
a bare ``ZeroDivisionError`` later. One function per kind of range; each says what it accepts."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def _number(kind: type, text: str) -> int | float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def at_least(minimum: int | float, kind: type = int) -> Callable[[str], int | float]:
    """A number ≥ ``minimum``."""

    def parse(text: str) -> int | float:
        value = _number(kind, text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text} is below {minimum}; it must be at least {minimum}")
        return value

    parse.__name__ = f"at least {minimum}"
    return parse


def above(minimum: float, kind: type = float) -> Callable[[str], int | float]:
    """A number > ``minimum``."""

    def parse(text: str) -> int | float:
        value = _number(kind, text)
        if value <= minimum:
            raise argparse.ArgumentTypeError(f"{text} must be greater than {minimum}")
        return value

    parse.__name__ = f"above {minimum}"
    return parse


def open_interval(low: float, high: float) -> Callable[[str], float]:
    """A number strictly between ``low`` and ``high``."""

    def parse(text: str) -> float:
        value = _number(float, text)
        if not low < value < high:
            raise argparse.ArgumentTypeError(f"{text} must lie strictly between {low} and {high}")
        return value

    parse.__name__ = f"between {low} and {high}"
    return parse


def half_open_interval(low: float, high: float) -> Callable[[str], float]:
    """A number in ``[low, high)``."""

    def parse(text: str) -> float:
        value = _number(float, text)
        if not low <= value < high:
            raise argparse.ArgumentTypeError(f"{text} must lie in [{low}, {high})")
        return value

    parse.__name__ = f"in [{low}, {high})"
    return parse
