"""Read columns fitted to the loader's types, and the one line that names a value that does not fit.

Shared by the readers (SQLite, Arrow): both hand over columns as the export typed them, the loader's
frames hold narrower types (:mod:`traceattr.trace.schema`), and a value past its type is the export's
fault, named with its column and count, never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a DataType or its class: schemas here hold classes (pl.Int64)


def int_of(value: object) -> int:
    """An integer column's min, max or sum as an int: polars types such a value as any Python literal."""
    return int(cast(int, value))


def typed_frame(raw: pl.DataFrame, schema: Mapping[str, PolarsDataType]) -> pl.DataFrame:
    """*raw* (columns named as *schema*) cast to *schema*'s types; text decoded (:func:`decode_utf8`).

    Raises a polars error where a value does not fit (:func:`misfit` names it)."""
    # a REAL in an integer column (the whole column then reads as floats): a cast would cut a fraction
    floats = [c for c, t in schema.items() if t.is_integer() and raw[c].dtype.is_float()]
    if floats and not all(raw.select((pl.col(c) == pl.col(c).floor()).all() for c in floats).row(0)):
        raise pl.exceptions.InvalidOperationError("a fraction in an integer column")  # misfit names it
    return raw.with_columns(
        decode_utf8(raw[c]).alias(c) if t == pl.String else pl.col(c).cast(t) for c, t in schema.items()
    )


def decode_utf8(values: pl.Series) -> pl.Series:
    """Binary → String; invalid UTF-8 becomes U+FFFD instead of an error."""
    if values.dtype == pl.String:
        return values
    try:
        return values.cast(pl.String)
    except pl.exceptions.ComputeError:
        # Rare (old exports); only then pay for a per-value decode.
        return pl.Series(values.name, [text_of(v) if v is not None else None for v in values.to_list()], pl.String)


def misfit(raw: pl.DataFrame, schema: Mapping[str, PolarsDataType], what: str) -> str:
    """Which column holds a value no trace can hold (text in an integer column, an id past its type)."""
    for column, dtype in schema.items():
        if dtype == pl.String or column not in raw.columns:
            continue
        values = decode_utf8(raw[column]) if raw[column].dtype == pl.Binary else raw[column]  # a BLOB among ints
        if values.dtype.is_float() and dtype.is_integer():
            fractions = values.filter(values != values.floor())
            if len(fractions):
                return (f"{what}: {column} holds {fractions[0]!r} in {len(fractions):,} rows, "
                        "not a whole number (nsys writes integers there)")  # fmt: skip
        bad = values.filter(values.cast(dtype, strict=False).is_null() & values.is_not_null())
        if len(bad):
            shown = str(bad[0])
            shown = shown if len(shown) <= 40 else shown[:39] + "…"
            return f"{what}: {column} holds {shown!r} in {len(bad):,} rows, not a valid {dtype} value"
    return f"{what}: values that do not fit their column types"


def text_of(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
