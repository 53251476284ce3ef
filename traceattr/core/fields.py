"""Field checks for the JSON files traceattr reads: each returns the value or raises :class:`Invalid`
naming the field; :func:`reading` turns that into one :class:`TraceError` line naming the file.

The records (:mod:`traceattr.core.records`, :mod:`traceattr.core.protocol`) read their files through
these, so a bad value is refused the same way in every file.
"""

from __future__ import annotations

import json
import math
import stat
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from traceattr.core.errors import TraceError


class Invalid(ValueError):
    """A field of a record that cannot be used; ``from_json`` turns it into a TraceError naming the file."""


# -- reading a JSON file as input ---------------------------------------------------------


def read_object(path: Path, what: str = "JSON") -> dict[str, Any]:
    """*path* as a JSON object; a TraceError (``unreadable WHAT (why)``) for anything else.

    A FIFO or device is refused before it is opened (reading one could block forever), and
    nesting too deep for the parser is a bad file, not a crash.
    """
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise TraceError(path, f"unreadable {what} (not a regular file)")
        content = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise TraceError(path, f"unreadable {what} ({err})") from None
    except RecursionError:
        raise TraceError(path, f"unreadable {what} (nested too deeply)") from None
    if not isinstance(content, dict):
        raise TraceError(path, f"unreadable {what} (expected a JSON object)")
    return content


def _read_in(folder: Path, name: str) -> dict[str, Any] | None:
    """``folder/name`` as a JSON object; None when *folder* is not a folder or has no such file."""
    path = Path(folder) / name
    if not Path(folder).is_dir() or not path.exists():
        return None
    return read_object(path)


# -- field checks: each returns the value or raises Invalid naming the field ---------------------

_MISSING = object()


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _field(obj: Mapping[str, Any], key: str, check: Callable[[Any, str], Any], where: str = "",
           default: Any = _MISSING) -> Any:  # fmt: skip
    """``obj[key]`` through *check*; *default* when absent or null (no default: required)."""
    name = f"{where}{key}"
    value = obj.get(key)
    if value is None:
        if default is _MISSING:
            raise Invalid(f"{name} is missing")
        return default
    return check(value, name)


def _str(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{name} must be text, got {_kind(value)}")
    return value


def _one_of(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def check(value: Any, name: str) -> str:
        if _str(value, name) not in choices:
            raise Invalid(f"{name} must be one of {', '.join(choices)}, got {value!r:.40}")
        return value

    return check


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"{name} must be true or false, got {_kind(value)}")
    return value


INT64 = (-(1 << 63), (1 << 63) - 1)  # what a table column holds: an integer beyond is refused, not overflowed


def _int(low: int | None = None, high: int | None = None) -> Callable[[Any, str], int]:
    def check(value: Any, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(f"{name} must be an integer, got {_kind(value)} {value!r:.40}")
        if not INT64[0] <= value <= INT64[1]:
            raise Invalid(f"{name} must be a 64-bit integer, got {_shown(value)}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise Invalid(f"{name} must lie in [{low if low is not None else '…'}, "
                          f"{high if high is not None else '…'}], got {_shown(value)}")  # fmt: skip
        return value

    return check


def _number(low: float = -math.inf, high: float = math.inf, *, open_low: bool = False,
            open_high: bool = False) -> Callable[[Any, str], float]:  # fmt: skip
    """A finite number in the range (ints accepted: JSON writes 2.0 as 2 in other tools)."""

    def check(value: Any, name: str) -> float:
        v = _float(value, name)
        inside = math.isfinite(v) and (v > low if open_low else v >= low) and (v < high if open_high else v <= high)
        if not inside:
            raise Invalid(f"{name} must lie in {'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}, "
                          f"got {_shown(value)}")  # fmt: skip
        return v

    return check


def _shown(value: Any) -> str:
    """A value in a message: an integer of 400 digits as its size, anything else cut to 40 characters."""
    if isinstance(value, int) and abs(value) >= 10**40:
        return f"a {len(str(abs(value)))}-digit integer"
    return f"{value!r:.40}"


def _float(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(f"{name} must be a number, got {_kind(value)} {value!r:.40}")
    try:
        return float(value)
    except OverflowError:  # an integer beyond any float (10**400 written out)
        raise Invalid(f"{name} must be a finite number, got {_shown(value)}") from None


def _any_number(value: Any, name: str) -> float:
    """A number as the runner measured it: finite, or NaN ("not measured" is decided by the reader); an
    infinity (1e400 reads as one) is no measurement."""
    v = _float(value, name)
    if math.isinf(v):
        raise Invalid(f"{name} must be a finite number, got {value!r:.40}")
    return v


def _positive(value: Any, name: str) -> float:
    """A measured time or ratio: finite and above 0, or NaN (not measured)."""
    v = _any_number(value, name)
    if not (math.isnan(v) or v > 0):
        raise Invalid(f"{name} must be above 0, got {value!r:.40}")
    return v


def _as_written(check: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    """*check*, keeping the value as the file holds it (an int stays an int when printed)."""

    def keep(value: Any, name: str) -> Any:
        check(value, name)
        return value

    return keep


def _object(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise Invalid(f"{name} must be an object, got {_kind(value)}")
    return value


def _list(item: Callable[[Any, str], Any]) -> Callable[[Any, str], list[Any]]:
    def check(value: Any, name: str) -> list[Any]:
        if not isinstance(value, list):
            raise Invalid(f"{name} must be a list, got {_kind(value)}")
        return [item(v, f"{name}[{i}]") for i, v in enumerate(value)]

    return check


def _objects(item: Callable[[Any, str], Any]) -> Callable[[Any, str], dict[str, Any]]:
    """An object whose every value goes through *item*."""

    def check(value: Any, name: str) -> dict[str, Any]:
        return {str(k): item(v, f"{name}.{k}") for k, v in _object(value, name).items()}

    return check


def _check_schema(content: Mapping[str, Any], schema: str, *older: str) -> None:
    """Absent (written before schemas), this version or an *older* name of it (a record renamed, same
    fields); a later version is refused, not misread."""
    found = content.get("schema", schema)
    if found != schema and found not in older:
        raise Invalid(f"schema is {found!r:.60}; this traceattr reads {schema!r}")


def _reading(path: Path | str, what: str, read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Invalid as err:
        raise TraceError(path, f"unreadable {what} ({err})") from None


def _not_null(obj: Mapping[str, Any], keys: Iterable[str], where: str) -> None:
    """Fields that may be absent (a default applies) but never null."""
    for key in keys:
        if key in obj and obj[key] is None:
            raise Invalid(f"{where}{key} must not be null")


def section(content: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """The object at *key* of a record's content (a header's ``protocol``, ``gates``, ``runner`` …); absent, in
    a file written before that part existed, it reads as empty: its fields' own defaults then apply."""
    value = content.get(key)
    return value if isinstance(value, Mapping) else {}
