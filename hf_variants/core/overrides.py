"""Config fields written as text, ``key=value,...`` — the one parser and printer (``--config_overrides``
of pretraining and fine-tuning, and the model specs of the lab, e.g. ``macaron_bert:attention_type=mgk``).

Values are Python literals where they parse as one (``1``, ``1e-3``, ``None``, ``[1, 3]``) and strings
otherwise (``gelu``); commas inside brackets do not split."""

from __future__ import annotations

import ast
import difflib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

#: Fields that select which ideas (and so which further fields) a config has.
IDEA_SWITCHES = ("attention_type", "layer_scheme")


def parse_overrides(text: str | None) -> dict[str, Any]:
    """``"a=1,b=gelu,c=[1,3]"`` → ``{"a": 1, "b": "gelu", "c": [1, 3]}``; ``ValueError`` for an item
    that is not ``key=value``."""
    if not text:
        return {}
    overrides: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in _split_top_level(text))):
        if "=" not in item:
            raise ValueError(f"config override {item!r} is not key=value")
        key, value = (part.strip() for part in item.split("=", 1))
        try:
            overrides[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            overrides[key] = value
    return overrides


def check_override_fields(
    overrides: Mapping[str, Any], build_reference: Callable[..., Any], flag: str = "--config_overrides"
) -> None:
    """Refuse an override that names no field of the config it changes (``hidden_sise=32`` would be stored
    as a new attribute and change nothing). ``build_reference(**switches)`` builds that config with only the
    overrides that select ideas (:data:`IDEA_SWITCHES`), so that the fields of a newly selected idea count.
    A field of a registered idea that the config does not select is a name, not a typo, and passes: a
    matched control carries its variant's sized fields (e.g. ``num_experts`` beside ``layer_scheme=vanilla``)."""
    from .composition import idea_field_names

    for key in overrides:  # before any config is built: a method's or a dunder's name never reaches setattr
        if key in NOT_OVERRIDABLE or key.startswith("_") or not key.isidentifier():
            raise ValueError(f"{flag}: {key!r} is not a field a config override may set (fields only: no method, "
                             "no private or special name, not model_type).")  # fmt: skip
    reference = build_reference(**{key: overrides[key] for key in IDEA_SWITCHES if key in overrides})
    fields = declared_fields(reference) | idea_field_names()
    for key in overrides:
        if key not in fields:
            close = difflib.get_close_matches(key, sorted(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else "."
            raise ValueError(f"{flag}: {type(reference).__name__} has no field {key!r}{hint}")


def check_model_spec(text: str) -> str:
    """A model spec ``model_type[:key=value,...]`` (a study's ``pairs``, ``hf-variants compare --models``) returned as
    written when its model type is registered and each key a field its config declares and accepts the value;
    else a ``ValueError`` naming the spec and what is wrong (:func:`check_override_fields`)."""
    from transformers import AutoConfig  # importing the Auto classes registers the variants

    from .registration import VARIANTS

    model_type, _, overrides = text.partition(":")
    if model_type not in VARIANTS:
        raise ValueError(f"unknown model type {model_type!r} in {text!r}; choose from {sorted(VARIANTS)}")
    try:
        fields = parse_overrides(overrides)
        check_override_fields(fields, lambda **switches: AutoConfig.for_model(model_type, **switches), flag=repr(text))
        AutoConfig.for_model(model_type, **fields)
    except (ValueError, TypeError) as error:
        raise ValueError(str(error) if str(error).startswith(repr(text)) else f"{text!r}: {error}") from None
    return text


#: Fields of every config that name what it is rather than how it computes: never overridden.
NOT_OVERRIDABLE = frozenset({"model_type", "transformers_version", "architectures", "auto_map"})


def declared_fields(config: Any) -> set[str]:
    """The fields ``config`` declares: what it serialises (``to_dict``), the parameters of its ``__init__`` and
    its settable properties (``num_labels``) — never a method, a read-only property, or a private or special
    attribute."""
    parameters = inspect.signature(type(config).__init__).parameters.values()
    named = {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"}
    settable = {name for name, value in inspect.getmembers(type(config)) if isinstance(value, property) and value.fset}
    return {name for name in {*config.to_dict(), *named, *settable} if not name.startswith("_")} - NOT_OVERRIDABLE


def format_overrides(fields: Mapping[str, Any]) -> str:
    """The text :func:`parse_overrides` reads back as ``fields`` (for values that print as their literal
    or, for strings, as themselves)."""
    return ",".join(f"{key}={value}" for key, value in fields.items())


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets: ``"a=1,b=[1,3]"`` → ``["a=1", "b=[1,3]"]``."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    return [*parts, "".join(current)]
