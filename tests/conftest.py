"""Shared fixtures: the real exports in tests/data, decompressed once per session."""

from __future__ import annotations

import lzma
import shutil
from pathlib import Path

import polars as pl
import pytest

DATA = Path(__file__).parent / "data"
FIXTURES = sorted(p.name for p in DATA.iterdir() if p.is_dir())


def _export_xz(name: str) -> Path:
    hits = sorted((DATA / name).glob("*.sqlite.xz"))
    if len(hits) != 1:
        raise FileNotFoundError(f"tests/data/{name}: expected one .sqlite.xz, found {len(hits)}")
    return hits[0]


@pytest.fixture(scope="session")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """fixture name -> path of its decompressed .sqlite (read-only)."""
    root = tmp_path_factory.mktemp("exports")
    out = {}
    for name in FIXTURES:
        src = _export_xz(name)
        dst = root / name / src.name.removesuffix(".xz")
        dst.parent.mkdir()
        with lzma.open(src) as fin, dst.open("wb") as fout:
            shutil.copyfileobj(fin, fout)
        dst.chmod(0o444)
        out[name] = dst
    return out


def golden(name: str, report: str) -> pl.DataFrame | None:
    """nsys's own CSV for *report* on fixture *name*; None when nsys skipped it."""
    path = DATA / name / f"nsys_{report}.csv"
    if path.stat().st_size == 0:
        return None
    header = path.open(encoding="utf-8").readline()
    types = {"ParentId": pl.Int64, "Lvl": pl.Int64, "RangeId": pl.Int64, "Name": pl.String}
    return pl.read_csv(path, infer_schema_length=None, schema_overrides={k: v for k, v in types.items() if k in header})
