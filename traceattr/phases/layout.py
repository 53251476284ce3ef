"""The stamp layout an instrumented kernel writes, and its reader (docs/phases.md).

A run folder's ``stamps/index.json`` lists one entry per (arm, shape)::

    {file: "000.npy", arm, shape, iters: [timed iteration of each call],
     layout: 1, width: W, kernels: [{kernel, boundaries: [name, ...], rows}, ...]}

``stamps/000.npy`` is int64 ``[calls, rows, W]``: call ``c`` is iteration
``iters[c]``; the kernels' rows follow each other in the order listed (the
first ``rows`` rows are the first kernel's CTAs, by program id); in a kernel's
row, column ``j`` is the ``%globaltimer`` stamp (GPU ns) at ``boundaries[j]``
and column ``W - 1`` the SM id. A zero stamp is one never written: the runner
zeroes the buffer after copying each call's stamps, so a CTA that did not run
(or did not reach a boundary) shows as zeros and is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from traceattr.core.errors import TraceattrError
from traceattr.core.runfolder import STAMPS_DIR, STAMPS_INDEX

LAYOUT_VERSION = 1


class StampError(TraceattrError):
    """Stamps that cannot be read or trusted: one line naming the file and the problem."""


@dataclass(frozen=True)
class KernelLayout:
    """One kernel's rows in a stamp array."""

    kernel: str  # matched against nsys's kernel name (equal, or contained in a demangled name)
    boundaries: tuple[str, ...]  # stamp columns, in program order
    rows: int  # CTAs (one row each)
    row0: int  # its first row in the array


@dataclass(frozen=True)
class StampFile:
    """One (arm, shape)'s stamps: every timed call of it."""

    path: Path
    arm: str
    shape: str
    iters: tuple[int, ...]
    width: int
    kernels: tuple[KernelLayout, ...]


def read_index(folder: Path) -> tuple[StampFile, ...]:
    """The stamp files of run folder *folder* (none when it holds no stamps)."""
    index = folder / STAMPS_DIR / STAMPS_INDEX
    if not index.is_file():
        return ()
    try:
        entries = json.loads(index.read_text(encoding="utf-8"))
        return tuple(_entry(folder / STAMPS_DIR, e) for e in entries)
    except (ValueError, KeyError, TypeError) as err:
        raise StampError(f"{index}: not a stamp index ({type(err).__name__}: {err})") from None


def _entry(base: Path, e: dict[str, object]) -> StampFile:
    if e["layout"] != LAYOUT_VERSION:
        raise ValueError(f"layout {e['layout']}, this traceattr reads {LAYOUT_VERSION}")
    kernels, row0 = [], 0
    for k in e["kernels"]:  # type: ignore[attr-defined]
        kernels.append(KernelLayout(str(k["kernel"]), tuple(k["boundaries"]), int(k["rows"]), row0))
        row0 += int(k["rows"])
    iters = tuple(int(i) for i in e["iters"])  # type: ignore[attr-defined]
    return StampFile(base / str(e["file"]), str(e["arm"]), str(e["shape"]), iters, int(e["width"]), tuple(kernels))  # type: ignore[call-overload]


def load_array(sf: StampFile) -> np.ndarray:
    """The int64 ``[calls, rows, width]`` array of *sf*, checked against its index entry."""
    try:
        a = np.load(sf.path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise StampError(f"{sf.path}: cannot read ({type(err).__name__}: {err})") from None
    rows = sum(k.rows for k in sf.kernels)
    if a.ndim != 3 or a.shape[0] != len(sf.iters) or a.shape[1] < rows or a.shape[2] != sf.width:
        raise StampError(
            f"{sf.path}: shape {list(a.shape)}, the index says [{len(sf.iters)} calls, ≥{rows} rows, {sf.width}]"
        )
    if any(len(k.boundaries) > sf.width - 1 for k in sf.kernels):
        raise StampError(f"{sf.path}: a kernel has more boundaries than the {sf.width - 1} stamp columns")
    return a.astype(np.int64, copy=False)


STAMP_SCHEMA = {
    "arm": pl.String, "shape": pl.String, "iter": pl.Int64, "kernel": pl.String, "cta": pl.Int64,
    "sm": pl.Int64, "boundary": pl.Int64, "name": pl.String, "t_ns": pl.Int64, "clamped": pl.Boolean,
}  # fmt: skip


def stamp_frame(sf: StampFile, a: np.ndarray | None = None) -> pl.DataFrame:
    """*sf*'s stamps, one row per (call, kernel, CTA, boundary) (:data:`STAMP_SCHEMA`).

    A CTA with a zero stamp is refused (it did not run, or did not reach that
    boundary). A stamp earlier than the one before it in the same CTA (a reordered
    write, or a clock read the compiler moved) is raised to it and flagged
    ``clamped``, so every phase is ≥ 0 and the count can be stated.
    """
    a = load_array(sf) if a is None else a
    parts = []
    for k in sf.kernels:
        nb = len(k.boundaries)
        block = a[:, k.row0 : k.row0 + k.rows, :nb]  # [calls, ctas, boundaries]
        missing = (block == 0).any(axis=2)
        if missing.any():
            c, cta = np.argwhere(missing)[0]
            raise StampError(
                f"{sf.path}: {sf.arm} {sf.shape} call iter {sf.iters[c]}: {int(missing[c].sum())} of {k.rows} "
                f"{k.kernel} CTAs wrote no stamps (first: CTA {int(cta)}); refusing a partial timeline"
            )
        ordered = np.maximum.accumulate(block, axis=2)
        calls, ctas = block.shape[0], block.shape[1]
        sm = np.broadcast_to(a[:, k.row0 : k.row0 + k.rows, sf.width - 1 : sf.width], block.shape)
        parts.append(
            pl.DataFrame(
                {
                    "iter": np.repeat(np.asarray(sf.iters, dtype=np.int64), ctas * nb),
                    "cta": np.tile(np.repeat(np.arange(ctas, dtype=np.int64), nb), calls),
                    "sm": sm.reshape(-1),
                    "boundary": np.tile(np.arange(nb, dtype=np.int64), calls * ctas),
                    "t_ns": ordered.reshape(-1),
                    "clamped": (ordered != block).reshape(-1),
                }
            ).with_columns(
                pl.lit(sf.arm).alias("arm"),
                pl.lit(sf.shape).alias("shape"),
                pl.lit(k.kernel).alias("kernel"),
                pl.col("boundary").replace_strict(dict(enumerate(k.boundaries)), return_dtype=pl.String).alias("name"),
            )
        )
    return pl.concat(parts).select(list(STAMP_SCHEMA)).cast(STAMP_SCHEMA)  # type: ignore[arg-type]


def read_stamps(folder: Path) -> pl.DataFrame:
    """Every stamp of run folder *folder* (an empty frame when it has none)."""
    frames = [stamp_frame(sf) for sf in read_index(folder)]
    return pl.concat(frames) if frames else pl.DataFrame(schema=STAMP_SCHEMA)
