"""Writing frames as csv / json / parquet, atomically, plus a JSON manifest.

Files are written under a temporary name in the target folder and renamed
when complete, so an interrupted run never leaves a half-written table that
looks whole.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl

FileFormat = Literal["csv", "json", "parquet"]
FILE_FORMATS: tuple[str, ...] = get_args(FileFormat)


def _csv_ready(frame: pl.LazyFrame) -> pl.LazyFrame:
    # CSV has no enum/categorical type: write their labels
    return frame.with_columns(pl.col(pl.Enum, pl.Categorical).cast(pl.String))


def write_table(frame: pl.DataFrame | pl.LazyFrame, folder: Path, stem: str, fmt: FileFormat) -> Path:
    """Write *frame* to ``folder/stem.fmt``; lazy frames are streamed where the format allows."""
    if fmt not in FILE_FORMATS:
        raise ValueError(f"format must be one of {list(FILE_FORMATS)}, got {fmt!r}")
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{stem}.{fmt}"
    fd, tmp_name = tempfile.mkstemp(prefix=f".{stem}.", suffix=f".{fmt}.partial", dir=folder)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        lazy = frame.lazy()
        if fmt == "parquet":
            lazy.sink_parquet(tmp)
        elif fmt == "csv":
            _csv_ready(lazy).sink_csv(tmp)
        else:
            lazy.collect().write_json(tmp)
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def write_manifest(folder: Path, name: str, content: Mapping[str, Any]) -> Path:
    """``folder/name`` as indented JSON (inputs, outputs, versions, notes)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    tmp = target.with_name(f".{name}.partial")
    tmp.write_text(json.dumps(content, indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(target)
    return target
