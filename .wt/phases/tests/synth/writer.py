"""Write polars frames into a new SQLite file in the exact nsys export DDL.

The DDL (``nsys_3_20_3.sql``) is copied verbatim from a real nsys 2025.3
export, so a synthetic trace goes through the same loader path as a real
one: it is how traceattr tests Blackwell kernels it cannot capture, writes
property-test traces, and builds the million-kernel benchmark.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from pathlib import Path

import polars as pl

DDL_FILE = "nsys_3_20_3.sql"


def ddl() -> str:
    return (Path(__file__).parent / DDL_FILE).read_text(encoding="utf-8")


def table_columns() -> dict[str, list[tuple[str, bool]]]:
    """Table → [(column, NOT NULL)] parsed from the DDL."""
    out: dict[str, list[tuple[str, bool]]] = {}
    for m in re.finditer(r"CREATE TABLE (\w+) \((.*?)\n\);", ddl(), re.S):
        cols = []
        for line in m.group(2).splitlines():
            line = line.split("--", 1)[0].strip().rstrip(",")
            if not line:
                continue
            parts = line.split()
            cols.append((parts[0], "NOT NULL" in line))
        out[m.group(1)] = cols
    return out


def write_export(path: str | Path, tables: Mapping[str, pl.DataFrame], *, overwrite: bool = False) -> Path:
    """Create *path* with the nsys DDL and fill *tables* (nsys column names).

    Only the tables given are created, as nsys's lazy export does. Columns a
    frame lacks are NULL, or 0 where the DDL says NOT NULL.
    """
    path = Path(path)
    if path.exists():
        if not overwrite:
            raise FileExistsError(path)
        path.unlink()
    known = table_columns()
    statements = {m.group(1): m.group(0) for m in re.finditer(r"CREATE TABLE (\w+) \(.*?\n\);", ddl(), re.S)}
    conn = sqlite3.connect(path)
    try:
        for table, frame in tables.items():
            if table not in known:
                raise KeyError(f"{table} is not in {DDL_FILE}")
            conn.execute(statements[table])
            cols = known[table]
            extra = set(frame.columns) - {c for c, _ in cols}
            if extra:
                raise KeyError(f"{table} has no columns {sorted(extra)}")
            filled = frame.with_columns(
                [pl.lit(0 if not_null else None).alias(c) for c, not_null in cols if c not in frame.columns]
            ).select([c for c, _ in cols])
            placeholders = ", ".join("?" * len(cols))
            conn.executemany(f"INSERT INTO {table} VALUES ({placeholders})", filled.iter_rows())
        conn.commit()
    finally:
        conn.close()
    return path
