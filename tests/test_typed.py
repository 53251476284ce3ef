"""traceattr.trace.typed: read columns cast to the loader's types, and the one line naming a value that
does not fit (never a traceback)."""

from __future__ import annotations

import polars as pl
import pytest

from traceattr.trace.typed import decode_utf8, int_of, misfit, typed_frame

SCHEMA = {"start": pl.Int64, "device_id": pl.UInt8, "name": pl.String}


def test_typed_frame_casts_and_decodes() -> None:
    raw = pl.DataFrame({"start": [1.0, 2.0], "device_id": [0, 3], "name": [b"fa3", b"\xffx"]})
    got = typed_frame(raw, SCHEMA)
    assert got.schema == pl.Schema(SCHEMA)
    assert got.rows() == [(1, 0, "fa3"), (2, 3, "\ufffdx")]  # whole floats kept, bad UTF-8 replaced


def test_a_fraction_in_an_integer_column_is_refused_and_named() -> None:
    raw = pl.DataFrame({"start": [1.0, 2.5, 3.5], "device_id": [0, 0, 0], "name": ["a", "b", "c"]})
    with pytest.raises(pl.exceptions.InvalidOperationError):
        typed_frame(raw, SCHEMA)
    assert misfit(raw, SCHEMA, "t.sqlite KERNEL") == (
        "t.sqlite KERNEL: start holds 2.5 in 2 rows, not a whole number (nsys writes integers there)"
    )


def test_misfit_names_a_value_past_its_type() -> None:
    raw = pl.DataFrame({"start": [1, 2], "device_id": [3, 300], "name": ["a", "b"]})  # 300 is no UInt8
    assert misfit(raw, SCHEMA, "t.sqlite") == "t.sqlite: device_id holds '300' in 1 rows, not a valid UInt8 value"
    text = pl.DataFrame({"start": ["x" * 50, "2"]})  # text in an integer column, shortened to 40 characters
    assert misfit(text, {"start": pl.Int64}, "t") == f"t: start holds '{'x' * 39}…' in 1 rows, not a valid Int64 value"
    fine = pl.DataFrame({"start": [1]})
    assert misfit(fine, {"start": pl.Int64, "absent": pl.Int64}, "t") == "t: values that do not fit their column types"


def test_decode_utf8_and_int_of() -> None:
    assert decode_utf8(pl.Series(["a"])).to_list() == ["a"]
    assert decode_utf8(pl.Series([b"caf\xc3\xa9", None])).to_list() == ["café", None]
    assert int_of(pl.Series([3, 9]).max()) == 9 and isinstance(int_of(pl.Series([3]).sum()), int)
