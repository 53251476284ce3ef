"""Read an nsys Arrow export (``nsys export --type arrowdir``) into the loader's frames.

nsys writes one Arrow IPC stream per table, ``<table>.arrow``, holding the same columns, values and row
order as its SQLite export (checked on nsys 2023.4's exports of 25 real reports, and on 2025.3.1 by an
H200 report); only the types are Arrow's (unsigned ids, ``Int32`` string ids). Producing and reading it
beats producing and reading the SQLite export of the same report (benchmarks/HISTORY.md, "`.nsys-rep` end
to end"), so a report is read this way (:func:`traceattr.trace.loader.load_report`); SQLite stays the
interchange (run folders, ``nsys stats``, recipes).

A table has no rowid here: the loader's NVTX ids are the rowids of the SQLite export, which nsys
numbers densely from 1 in row order, so an id is the row's position plus one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from traceattr.core.errors import TraceError
from traceattr.trace import schema as S
from traceattr.trace.nsys import ARROW_SUFFIX as SUFFIX
from traceattr.trace.nsys import is_arrow_export
from traceattr.trace.typed import misfit, typed_frame

if TYPE_CHECKING:
    from polars._typing import PolarsDataType  # a DataType or its class: schemas here hold classes (pl.Int64)


@dataclass(frozen=True)
class TableRead:
    """One table's columns to read: {our column: nsys column} (present ones only), typed by *schema*."""

    table: str
    columns: Mapping[str, str]
    schema: Mapping[str, PolarsDataType]
    what: str


class ArrowSource:
    """One Arrow export folder, read-only; knows its tables and columns. *shown_as* is the name errors
    and the trace's metadata carry (the report it was exported from), when the folder is temporary."""

    engine = "arrow"

    def __init__(self, folder: str | Path, shown_as: str | Path | None = None) -> None:
        self.folder = Path(folder)
        self.path = Path(shown_as) if shown_as is not None else self.folder
        if not is_arrow_export(self.folder):
            raise TraceError(self.path, f"is not an nsys Arrow export (no {S.STRINGS}{SUFFIX})")
        self.tables: frozenset[str] = frozenset(p.name[: -len(SUFFIX)] for p in self.folder.glob(f"*{SUFFIX}"))
        self._schemas: dict[str, pl.Schema] = {}

    def close(self) -> None:
        """Nothing stays open between reads (kept for the loader's one way of closing a source)."""

    def _file(self, table: str) -> Path:
        return self.folder / f"{table}{SUFFIX}"

    def _stream(self, table: str, what: str, **options: Any) -> pl.DataFrame:
        try:
            return pl.read_ipc_stream(self._file(table), **options)
        except (OSError, pl.exceptions.PolarsError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise TraceError(
                self.path, f"{table}{SUFFIX} cannot be read as an Arrow stream ({first}) while {what}"
            ) from None

    # -- schema ----------------------------------------------------------
    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> tuple[str, ...]:
        if table not in self._schemas:
            self._schemas[table] = self._stream(table, f"reading the columns of {table}", n_rows=0).schema
        return tuple(self._schemas[table])

    def has_column(self, table: str, column: str) -> bool:
        return self.has(table) and column in self.columns(table)

    # -- reading ---------------------------------------------------------
    def read(self, read: TableRead) -> pl.DataFrame:
        """The table's *read* columns, renamed and typed as the SQLite reader types them."""
        present = {a: c for a, c in read.columns.items() if self.has_column(read.table, c)}
        raw = self._stream(read.table, read.what, columns=list(dict.fromkeys(present.values())))
        raw = raw.select(_as_sqlite_stores(pl.col(c), raw.schema[c]).alias(a) for a, c in present.items())
        try:
            typed = typed_frame(raw, {a: read.schema[a] for a in present})
        except pl.exceptions.PolarsError:
            raise TraceError(self.path, misfit(raw, read.schema, read.what)) from None
        absent = [pl.lit(None, t).alias(a) for a, t in read.schema.items() if a not in present]
        return typed.with_columns(absent).select(list(read.schema))  # as the SQL reads: NULL AS column

    def read_all(self, reads: Sequence[TableRead]) -> list[pl.DataFrame]:
        """*reads*, one table after another: an IPC stream is read whole (it has no row index to cut it
        by), and tables read side by side held their raw and typed columns at once. On the sweep trace
        (2 cores) one at a time peaked at 554-572 MB against 618-659 MB on four threads, for 0.1 s more
        of a 1 s load."""
        return [self.read(r) for r in reads]

    def rows(self, table: str, columns: Sequence[str], what: str) -> list[tuple[Any, ...]]:
        """A small table's rows (metadata), *columns* in order, None where the table lacks one."""
        present = [c for c in dict.fromkeys(columns) if self.has_column(table, c)]
        frame = self._stream(table, what, columns=present) if present else pl.DataFrame()
        height = frame.height if present else self._stream(table, what).height
        values = [frame[c].to_list() if c in present else [None] * height for c in columns]
        return list(zip(*values, strict=True)) if values else [() for _ in range(height)]


def _as_sqlite_stores(column: pl.Expr, dtype: PolarsDataType) -> pl.Expr:
    """*column* as SQLite holds the same value: its integers are signed 64-bit, so nsys's unsigned
    64-bit ids keep their bits there (2**64 - 1 reads as -1); narrower unsigned ones fit as they are."""
    return column.reinterpret(signed=True) if dtype == pl.UInt64 else column


@dataclass(frozen=True)
class ArrowFrames:
    """The export's tables as the SQLite reader's queries return them (:func:`traceattr.trace.loader._read`)."""

    strings: pl.DataFrame
    ops: dict[str, pl.DataFrame]  # op table -> its rows in OP_READ_SCHEMA
    api: pl.DataFrame | None  # None without a runtime table
    nvtx: tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame] | None  # ranges, marks, domains, text


_NVTX_READ = {"event_type": "eventType", **S.NVTX_RANGE_COLUMNS, "text": "text"}


def read_frames(src: ArrowSource, op_tables: Sequence[str], launch_config: bool = True) -> ArrowFrames:
    """Every table the loader needs (the kernels' launch configuration only with *launch_config*); NVTX_EVENTS
    once, split as the SQLite reads split it."""
    payload = [c for c in S.NVTX_PAYLOAD_COLUMNS if src.has_column(S.NVTX, c)]
    reads = [
        TableRead(S.STRINGS, {"id": "id", "value": "value"}, S.STRINGS_READ_SCHEMA, f"reading {S.STRINGS}"),
        *(TableRead(t, S.op_columns(t, launch_config), S.OP_READ_SCHEMA, f"reading {t}") for t in op_tables),
    ]
    if src.has(S.RUNTIME):
        reads.append(TableRead(S.RUNTIME, S.API_COLUMNS, S.API_READ_SCHEMA, f"reading {S.RUNTIME}"))
    if src.has(S.NVTX):
        columns = {**_NVTX_READ, **{f"payload{i}": c for i, c in enumerate(payload)}}
        schema = {
            **S.NVTX_RANGE_READ_SCHEMA,
            "text": pl.String,
            **{f"payload{i}": pl.Int64 for i in range(len(payload))},
        }
        reads.append(TableRead(S.NVTX, columns, schema, "reading NVTX_EVENTS"))
    frames = src.read_all(reads)
    strings = frames[0].filter(pl.col("value").is_not_null())
    ops = dict(zip(op_tables, frames[1 : 1 + len(op_tables)], strict=True))
    api = frames[1 + len(op_tables)] if src.has(S.RUNTIME) else None
    nvtx = _split_nvtx(frames[-1], len(payload)) if src.has(S.NVTX) else None
    return ArrowFrames(strings, ops, api, nvtx)


def _split_nvtx(events: pl.DataFrame, payloads: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Ranges, marks, DomainCreate rows and inline text, as the SQLite reader's four NVTX queries."""
    row = pl.int_range(1, pl.len() + 1, dtype=pl.Int64)  # the rowid (module doc)
    payload = pl.coalesce(*(f"payload{i}" for i in range(payloads))) if payloads else pl.lit(None, pl.Int64)
    events = events.with_columns(row.alias("row"), payload.alias("payload"))
    kind = pl.col("event_type")
    ranges = events.filter(kind.is_in(S.RANGE_EVENT_TYPES)).select(
        pl.col("row").alias("range_id"), *(c for c in S.NVTX_RANGE_READ_SCHEMA if c != "range_id")
    )
    marks = events.filter(kind == S.NVTX_MARK).select(
        pl.col("row").alias("mark_id"), pl.col("start").alias("time"), "global_tid", "text_id", "domain_id"
    )
    domains = events.filter(kind == S.NVTX_DOMAIN_CREATE).select(list(S.NVTX_DOMAIN_READ_SCHEMA))
    text = events.filter(pl.col("text").is_not_null() & kind.is_in(S.NVTX_TEXT_EVENT_TYPES)).select("row", "text")
    return ranges, marks, domains, text
