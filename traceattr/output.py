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
        tmp.chmod(0o644)
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def write_text(path: Path, text: str) -> Path:
    """*text* to *path* atomically (a temp file beside it, renamed when complete); readable by all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        tmp.chmod(0o644)  # mkstemp makes it owner-only; results are meant to be shared
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_manifest(folder: Path, name: str, content: Mapping[str, Any]) -> Path:
    """``folder/name`` as indented JSON (inputs, outputs, versions, notes)."""
    return write_text(folder / name, json.dumps(content, indent=2, default=str) + "\n")
