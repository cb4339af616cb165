"""Settings declared once: one dataclass field per setting, with its help text, its check and its group
in the field's metadata (:func:`setting`). The command line's parser is generated from the fields
(:func:`argument_parser`), the checks run on every construction, from a command line or from Python
(:class:`Settings`), and a command line with several mistakes is refused once, naming all of them
(:func:`parse_into`).

The metadata keys are those ``transformers.HfArgumentParser`` passes to ``argparse`` (``help``,
``choices``, ``aliases``) plus ``parse`` (the value's checked conversion, e.g. :func:`.checks.at_least`)
and ``group`` (the ``--help`` section), which only this module reads.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T", bound="Settings")


def setting(
    default: Any = dataclasses.MISSING,
    *,
    help: str,
    parse: Callable[[str], Any] | None = None,
    choices: Sequence[object] | None = None,
    group: str | None = None,
    aliases: Sequence[str] = (),
    metavar: str | None = None,
    positional: bool = False,
    default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field that is also a command-line flag ``--<name>`` (or, ``positional``, an argument without
    one, as ``hf-variants study NAME``): ``parse`` checks and converts a value (a command line's text, or ``str``
    of a value set in Python); no default makes it required."""
    metadata: dict[str, Any] = {"help": help}
    for key, value in (("parse", parse), ("choices", list(choices) if choices else None), ("group", group),
                       ("aliases", list(aliases)), ("metavar", metavar), ("positional", positional)):  # fmt: skip
        if value:
            metadata[key] = value
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


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

    def error(self, message: str) -> typing.NoReturn:  # type: ignore[override]
        positionals = [(action.metavar or action.dest).upper() for action in self._actions
                       if not action.option_strings and action.help != argparse.SUPPRESS]  # fmt: skip
        usage = " ".join([self.prog, *map(str, positionals), "[options]"])
        self.exit(2, f"usage: {usage}  (--help lists them)\n{self.prog}: error: {message}\n")


def _value_type(annotation: Any) -> tuple[Any, bool]:
    """``(type, is_list)`` of an annotation: ``X | None`` → ``X``; ``list[X]`` → ``(X, True)``."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    if typing.get_origin(annotation) is list:
        return typing.get_args(annotation)[0], True
    return annotation, False


def _parser_of(field: dataclasses.Field, annotation: Any) -> Callable[[str], Any] | None:
    """The field's conversion of one value: its declared ``parse``, else its type (``str`` needs none)."""
    kind, _ = _value_type(annotation)
    return field.metadata.get("parse") or (kind if kind in (int, float, Path) else None)


def _default(field: dataclasses.Field) -> Any:
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None if field.default is dataclasses.MISSING else field.default


def required_fields(settings_class: type) -> list[str]:
    """The fields without a default: flags a command line must give."""
    return [field.name for field in dataclasses.fields(settings_class)
            if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING]  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser, settings_class: type) -> argparse.ArgumentParser:
    """One flag per field of ``settings_class``, generated from the field: ``--name`` (and its aliases),
    the help text, the default, the choices, a ``list`` field as one or more values, a ``bool`` field as
    a switch (``--no_name`` turns off one that defaults to on); sections in the order of the class's
    ``HELP_GROUPS``, if it has one, else of the fields. Required fields are marked in the help
    and checked by :func:`parse_into`, which reports every missing one at once."""
    hints = typing.get_type_hints(settings_class)
    groups: dict[str | None, Any] = {None: parser}
    for title in getattr(settings_class, "HELP_GROUPS", ()):  # the sections' order, where the class sets one
        groups[title] = parser.add_argument_group(title)
    required = set(required_fields(settings_class))
    for field in dataclasses.fields(settings_class):
        group_name = field.metadata.get("group")
        if group_name not in groups:
            groups[group_name] = parser.add_argument_group(group_name)
        target = groups[group_name]
        flags = [f"--{field.name}", *field.metadata.get("aliases", [])]
        help_text = field.metadata["help"] + (" (required)" if field.name in required else "")
        kind, is_list = _value_type(hints[field.name])
        options: dict[str, Any] = {"dest": field.name, "help": help_text, "default": _default(field)}
        if field.metadata.get("positional"):  # its name, not a flag; argparse itself requires it
            flags = [options.pop("dest")]
            options["help"] = field.metadata["help"]
        if kind is bool:
            target.add_argument(*flags, action="store_true", **options)
            if field.default is True:
                target.add_argument(f"--no_{field.name}", action="store_false", dest=field.name,
                                    help=f"Turn --{field.name} off.")  # fmt: skip
            continue
        options["type"] = _parser_of(field, hints[field.name])
        if "choices" in field.metadata:
            options["choices"] = field.metadata["choices"]
        if "metavar" in field.metadata:
            options["metavar"] = field.metadata["metavar"]
        if is_list:
            options["nargs"] = "+"
        target.add_argument(*flags, **options)
    return parser


def argument_parser(settings_class: type, prog: str, description: str, epilog: str | None = None) -> ArgumentParser:
    """The command line of ``settings_class``, generated from its fields (:func:`add_arguments`)."""
    parser = ArgumentParser(prog=prog, description=description, epilog=epilog, formatter_class=HelpFormatter)
    return add_arguments(parser, settings_class)  # type: ignore[return-value]


def checked_value(settings_class: type, name: str, value: Any) -> Any:
    """``value`` for the field ``name`` of ``settings_class``, converted and checked by the field's declared ``parse``
    and ``choices`` as if it had come from the command line (each item of a list or tuple; its container kept);
    a ``ValueError`` saying what is wrong with it. ``None`` and booleans are returned as they are."""
    if value is None or isinstance(value, bool):
        return value
    field = next(field for field in dataclasses.fields(settings_class) if field.name == name)
    convert = _parser_of(field, typing.get_type_hints(settings_class)[name])
    values = list(value) if isinstance(value, list | tuple) else [value]
    try:
        checked = [convert(str(item)) if convert is not None else item for item in values]
    except (argparse.ArgumentTypeError, TypeError) as error:
        raise ValueError(str(error)) from None
    allowed = field.metadata.get("choices")
    wrong = [item for item in checked if allowed is not None and item not in allowed]
    if wrong:
        raise ValueError(f"invalid choice: {wrong[0]!r} (choose from {', '.join(map(str, allowed))})")
    return type(value)(checked) if isinstance(value, list | tuple) else checked[0]


def field_problems(settings: Any) -> list[str]:
    """Check and convert each field's value by its declared ``parse`` and ``choices`` (:func:`checked_value`), as
    if it had come from the command line (a value set in Python meets the same checks); the problems, one per
    field. A frozen settings class is converted in place too (its construction is not finished yet)."""
    problems = []
    for field in dataclasses.fields(settings):
        try:
            value = checked_value(type(settings), field.name, getattr(settings, field.name))
        except ValueError as error:
            problems.append(f"argument --{field.name}: {error}")
            continue
        object.__setattr__(settings, field.name, value)
    return problems


class Settings:
    """Base of a settings dataclass: every field checked by :func:`field_problems` and the combinations by
    :meth:`problems`, on every construction; a ``ValueError`` names all that is wrong at once."""

    def problems(self) -> list[str]:
        """The combinations of values a field's own check cannot see (none by default)."""
        return []

    def __post_init__(self) -> None:
        problems = field_problems(self)
        problems += self.problems() if not problems else []
        if problems:
            raise ValueError("; ".join(problems))


def underscored(argv: Sequence[str]) -> list[str]:
    """``--flag-name`` as ``--flag_name`` (the flags' own spelling), as transformers' ``HfArgumentParser``
    accepts both; values are left as they are."""
    return [
        "--" + item[2:].partition("=")[0].replace("-", "_") + "".join(item.partition("=")[1:])
        if item.startswith("--") and len(item) > 2 else item
        for item in argv
    ]


def parse_into(settings_class: type[T], parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> T:
    """The command line as typed settings (``settings_class(**flags)``). Every mistake is reported in one
    usage error: all missing required flags, then the combinations that are already wrong without them.
    Flags may be written with dashes (``--model-type``) or underscores."""
    namespace = parser.parse_args(underscored(sys.argv[1:] if argv is None else argv))
    values = vars(namespace)
    missing = [f"--{name}" for name in required_fields(settings_class) if values.get(name) is None]
    if missing:
        partial = object.__new__(settings_class)  # the given values, to name the other problems as well
        partial.__dict__.update(values)
        problems = field_problems(partial)
        parser.error("; ".join([f"the following arguments are required: {', '.join(missing)}",
                                *(problems or partial.problems())]))  # fmt: skip
    try:
        return settings_class(**values)
    except ValueError as error:
        parser.error(str(error))
