"""How a command's options read in ``--help``: as nsys's do, a word for what the value is, no Python types.

typer labels every option with its annotation (``<bool>`` on each flag, ``<list[Path]>``, ``<int range>
[0<=x<=2147483648]``); those say how the value is parsed, not what to give. Here a flag shows nothing, a choice
its values (``table|csv|json``), a number ``N`` or ``X``, a path ``PATH``, text ``TEXT``, a list its element
(it may be repeated), and a range only where it is a real bound the help does not state.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

_WORDS = {bool: None, int: "N", float: "X", str: "TEXT", Path: "PATH"}


def _label(param: Any) -> str | None:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or getattr(param, "param_type_name", "") == "argument":
        return None  # an argument is shown by its name already
    if descriptor.is_choice:
        return "|".join(str(getattr(c, "value", c)) for c in descriptor.choices or ())
    annotation = descriptor.annotation
    args = getattr(annotation, "__args__", None)
    if descriptor.is_list and args:
        annotation = args[0]
    if descriptor.is_path:
        return "PATH"
    for kind, word in _WORDS.items():
        if annotation is kind or (isinstance(annotation, type) and issubclass(annotation, kind)):
            return word
    return "VALUE"


def _range(param: Any) -> str | None:
    """The bound as the help shows it, or none where it is only the type's (2**31, ±inf)."""
    low, high = getattr(param, "min", None), getattr(param, "max", None)
    real = [b for b in (low, high) if b is not None and not (isinstance(b, float) and math.isinf(b)) and abs(b) < 2**31]
    if not real:
        return None
    if low is not None and low in real and (high is None or high not in real):
        return f"≥ {low}"
    if high is not None and high in real and (low is None or low not in real):
        return f"≤ {high}"
    return f"{low} to {high}"


def paragraphs(text: str) -> str:
    """*text* (a docstring) with each paragraph on one line: rich keeps a docstring's single line breaks, so
    source lines wrapped at 120 columns would read as ragged lines on any terminal; rich wraps a paragraph
    well. A paragraph marked verbatim (click's ``\\b``) is kept as written."""
    blocks = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(b if b.startswith("\b") else " ".join(b.split("\n")) for b in blocks)


def plain_help(command: Any, ctx: Any) -> None:
    """Give each option of *command* (a typer click command), its help flag too, the labels above, for
    ``--help`` only; its help text as paragraphs."""
    if getattr(command, "help", None):
        command.help = paragraphs(command.help)
    for param in [*getattr(command, "params", ()), command.get_help_option(ctx)]:
        if param is None or getattr(param, "type_descriptor", None) is None:
            continue
        label = _label(param)
        param.display_type_rich = lambda ctx=None, label=label: label
        param.display_type = lambda ctx=None, label=label: label or ""
        bound = _range(param)
        param._get_number_range_help_str = lambda bound=bound: bound
        if param.type_descriptor.is_choice and getattr(param, "_runtime_param", None) is not None:
            param._runtime_param = _PlainChoice(param._runtime_param, label or "")


class _PlainChoice:
    """A choice's coercion whose refusal reads in words (``--format 'xml': one of table, csv, json``) rather
    than as pydantic's ``Value error, 'xml' is not one of …``; everything else is the coercion's own."""

    def __init__(self, inner: Any, choices: str) -> None:
        self._inner, self._choices = inner, choices.replace("|", ", ")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        from typer._click.exceptions import BadParameter, UsageError

        try:
            return self._inner.coerce(value, param=param, ctx=ctx)
        except UsageError:
            raise BadParameter(f"{value!r} is not one of {self._choices}", ctx=ctx, param=param) from None
