"""Typer's coercion of a command's option values, without pydantic for the kinds our commands use.

typer ≥ 0.2x turns every value a command receives (given or default) into its annotated type through
a pydantic ``TypeAdapter`` built per option on first use: importing pydantic and building the
adapters cost ~0.15 s of every command that runs, a tenth of a whole `attribute` job on a large
trace. For the annotations our commands have (str, bool, int and float with typer's min/max, enums,
paths, lists of those) the conversion a value takes on success is plain: this module does that one,
and on anything else (a value it does not recognise, a value out of range, a path that fails its
checks) hands the value to typer's own coercion, which imports pydantic and answers exactly as it
always did: the same value, or the same one-line error. tests/test_coercion.py holds both paths equal
for every option of every command.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_origin

try:  # the coercion layer of typer ≥ 0.2x; on an older typer (plain click types) there is nothing to do
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_choice, routes_to_path
    from typer._typing import is_literal_type, literal_values
except ImportError:  # pragma: no cover
    RuntimeParam = None  # type: ignore[assignment,misc]

# A value taken as it comes from the command line: what pydantic's lax int / float parsing accepts for
# certain (anything else, e.g. " 5", "1_000", "inf", goes to pydantic, which decides).
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

Convert = Callable[[Any, Any, Any], Any]  # (value, param, ctx) -> the coerced value; raises if unsure


class _Unsure(Exception):
    """The quick conversion does not know this value: typer's coercion decides."""


def install(command: Any) -> None:
    """Give each parameter of *command* (a typer click command) the quick coercion, where it has a kind
    this module knows and none is built yet."""
    if RuntimeParam is None:  # pragma: no cover - older typer
        return
    for param in getattr(command, "params", ()):
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", 0) is not None:
            continue
        convert = converter(descriptor.annotation, descriptor.parameter_info, descriptor.file_annotation)
        if convert is not None:
            param._runtime_param = _Quick(
                annotation=descriptor.annotation, parameter_info=descriptor.parameter_info, convert=convert
            )


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class _Quick(RuntimeParam):
        """The plain conversion first; typer's (pydantic's) for whatever it is unsure of, errors included."""

        convert: Convert

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            try:
                return self.convert(value, param, ctx)
            except Exception:  # any doubt, and every error message, is typer's to give
                pass
            return build_runtime_param(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)


def converter(annotation: Any, info: Any, file_annotation: Any = None) -> Convert | None:
    """The quick conversion for values of *annotation* with typer's parameter *info*, or None where
    typer's own coercion must do it all (files, tuples, dates, custom parsers, clamped numbers...)."""
    if info.parser is not None or file_annotation is not None:
        return None
    origin = get_origin(annotation)
    if origin is list:
        (item_type,) = get_args(annotation)
        item = converter(item_type, info)
        if item is None:
            return None
        return lambda value, param, ctx: [
            item(v, param, ctx) for v in (value if isinstance(value, (list, tuple)) else [value])
        ]
    if origin is not None:
        return None
    if (isinstance(annotation, type) and issubclass(annotation, Enum)) or is_literal_type(annotation):
        choices = tuple(annotation) if isinstance(annotation, type) else literal_values(annotation)
        sensitive = info.case_sensitive
        return lambda value, _param, ctx: coerce_cli_choice(value, choices=choices, case_sensitive=sensitive, ctx=ctx)
    if annotation is bool:
        return _bool
    if annotation is str:
        return _str
    if annotation is int or annotation is float:
        if info.clamp:
            return None
        return _number(annotation, info.min, info.max)
    if routes_to_path(annotation, info):
        return _path(annotation, info)
    return None


def _bool(value: Any, _param: Any, _ctx: Any) -> bool:
    if type(value) is not bool:
        raise _Unsure
    return value


def _str(value: Any, _param: Any, _ctx: Any) -> str:
    if type(value) is not str:
        raise _Unsure
    return value


def _number(kind: type, low: float | None, high: float | None) -> Convert:
    def convert(value: Any, _param: Any, _ctx: Any) -> Any:
        text = type(value) is str and (_INT if kind is int else _FLOAT).fullmatch(value)
        if not (text or type(value) is kind or (kind is float and type(value) is int)):
            raise _Unsure
        number = kind(value)
        if (
            (kind is float and not math.isfinite(number))
            or (low is not None and number < low)
            or (high is not None and number > high)
        ):
            raise _Unsure  # out of range: typer's message
        return number

    return convert


def _path(annotation: Any, info: Any) -> Convert:
    from typer._param_types import coerce_cli_path

    path_type = info.path_type
    if path_type is None and isinstance(annotation, type) and issubclass(annotation, Path):
        path_type = annotation

    def convert(value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(path_type, type) and issubclass(path_type, Path) and not isinstance(value, path_type):
            # pydantic's lax Path from a str is the constructor's; an empty one it refuses
            if type(value) is not str or not value:
                raise _Unsure
            value = path_type(value)
        return coerce_cli_path(value, info, path_type=path_type, param=param, ctx=ctx)

    return convert
