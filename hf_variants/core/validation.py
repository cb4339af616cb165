"""Checks of config values shared by every config field: each raises ``ValueError`` naming the field.

Torch-free, so that configuration code and every token mixer or layer scheme can use them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def require_positive_int(config: Any, name: str, maximum: int | None = None) -> None:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value!r}.")


def require_non_negative_int(config: Any, name: str) -> None:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}.")


def require_number(config: Any, name: str, *, minimum: float = 0.0, strict: bool = True) -> None:
    """A real number above ``minimum`` (``strict``) or at least ``minimum``."""
    value = getattr(config, name)
    valid = not isinstance(value, bool) and isinstance(value, (int, float))
    if not valid or (value <= minimum if strict else value < minimum):
        kind = "a positive number" if minimum == 0 and strict else f"a number {'>' if strict else '>='} {minimum}"
        if minimum == 0 and not strict:
            kind = "a non-negative number"
        raise ValueError(f"{name} must be {kind}, got {value!r}.")


def require_probability(config: Any, name: str) -> None:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1), got {value!r}.")


def require_bool(config: Any, name: str) -> None:
    value = getattr(config, name)
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}.")


def require_choice(config: Any, name: str, choices: Iterable[Any]) -> None:
    choices = list(choices)
    value = getattr(config, name)
    if value not in choices:
        shown = ", ".join(repr(c) for c in choices[:12]) + (", ..." if len(choices) > 12 else "")
        raise ValueError(f"{name} must be one of {shown}; got {value!r}.")
