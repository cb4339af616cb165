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


def model_seed_count() -> Callable[[str], str]:
    """A slow model's own seed count: ``model=N`` with N ≥ 2 (the fewest an interval needs); returned as written
    (:meth:`~hf_variants.settings.compare.CompareArguments.seeds_of` reads it)."""

    def parse(text: str) -> str:
        model, _, number = text.rpartition("=")
        if not model:
            raise argparse.ArgumentTypeError(f"{text!r} must be MODEL=N (a model of --models and its seed count)")
        if _number(int, number) < 2:
            raise argparse.ArgumentTypeError(f"{text}: a model needs at least 2 seeds for an interval")
        return text

    parse.__name__ = "a model's seeds"
    return parse


def task_margin() -> Callable[[str], str]:
    """An equivalence margin in points of a task's metric: ``2`` (every task) or ``task=2`` (one task),
    the number above 0; returned as written (:meth:`~hf_variants.settings.compare.CompareArguments.margin`
    reads it)."""

    def parse(text: str) -> str:
        task, _, number = text.rpartition("=")
        if "=" in text and not task:
            raise argparse.ArgumentTypeError(f"{text!r} names no task before '='")
        value = _number(float, number)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} must be greater than 0 points")
        return text

    parse.__name__ = "a margin"
    return parse
