"""Why a round refused a row: which mechanism its captures show, as evidence columns and cause kinds.

A gate says *that* a row may not be trusted (the ratio depends on which arm
ran first, the clock was low …); this module says *why*, from the same
captures, per row:

* **host-bound**: calls that waited for their own launches
  (:mod:`traceattr.analysis.hostbound`), counted per arm and capture, and the
  hold's numbers from runner.json (``shapes[shape].hold``: timeouts, the GPU's
  wait for the host per group);
* **predecessor**: each arm's median when it followed itself and when it
  followed the other arm, with 95% intervals. ABBA gives both: the first
  call of each group follows the previous group's last call (the same arm),
  the second follows the other arm; so the split is also first vs second in
  the group (right after the hold, or not);
* **clock**: the NVML loaded SM clock (the clock gate's value);
* **drift**: each arm's per-capture medians moving between captures by more
  than the directional limit and more than the captures' own noise;
* **bimodal**: an arm's spans (pooled over captures) fall into two groups: a gap
  in the sorted spans, away from the tails, much wider than the spacing
  around it;
* **arms** / **parity**: the gate's own note.

The words with the numbers are :func:`traceattr.present.receipt.cause_text`'s
(the analysis layer formats nothing a reviewer reads). Pure polars/numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import polars as pl

from traceattr.analysis.hostbound import HOST_SHARE, host_bound_calls
from traceattr.core.precision import median_interval
from traceattr.core.records import RunnerRecord


class Capture(Protocol):
    """What this module reads of a round's capture (:class:`traceattr.analysis.rounds.Capture`)."""

    @property
    def index(self) -> int: ...
    @property
    def calls(self) -> pl.DataFrame: ...
    @property
    def runner(self) -> RunnerRecord: ...


SPLIT_SHARE = 0.5  # a predecessor split counts above this share of the directional limit (and intervals apart)
DRIFT_NOISE = 3.0  # per-capture medians drift when they spread by more than this many times the captures' noise
BIMODAL_GAP = 0.03  # a gap in the sorted spans of at least this share of the median …
BIMODAL_SPACING = 8.0  # … and this many times the median spacing of the spans around it
BIMODAL_TAIL = 0.10  # each of the two groups holds at least this share of the calls

KINDS = ("arms", "parity", "clock", "host-bound", "predecessor", "drift", "bimodal")

# what the receipt gains per row (core.records.RECEIPT_COLUMNS declares them too)
SPLITS = ("baseline_after_self", "baseline_after_other", "candidate_after_self", "candidate_after_other")


def predecessor_split(s: pl.DataFrame) -> pl.DataFrame:
    """``shape, backend, after ("self"/"other"), median, low, high, n`` over the calls *s* (analysis.rounds.samples).

    A call's predecessor is the timed call before it in its capture and row (the first call has none).
    """
    ordered = s.sort("capture", "shape", "start_ns").with_columns(
        pl.col("backend").shift(1).over("capture", "shape").alias("_before")
    )
    after = (
        ordered.filter(pl.col("_before").is_not_null())
        .with_columns(
            pl.when(pl.col("_before") == pl.col("backend"))
            .then(pl.lit("self"))
            .otherwise(pl.lit("other"))
            .alias("after")
        )
        .group_by("shape", "backend", "after")
        .agg(pl.col("t_us"))
    )
    rows = []
    for shape, backend, where, values in after.iter_rows():
        v = np.asarray(values, dtype=float)
        low, high = median_interval(v)
        rows.append((shape, backend, where, float(np.median(v)), _finite(low), _finite(high), len(v)))
    schema = {"shape": pl.String, "backend": pl.String, "after": pl.String, "median": pl.Float64,
              "low": pl.Float64, "high": pl.Float64, "n": pl.Int64}  # fmt: skip
    return pl.DataFrame(rows, schema=schema, orient="row")


def host_bound_by_capture(captures: Sequence[Capture], arms: Sequence[str]) -> pl.DataFrame:
    """``capture, backend, shape, calls, host_bound, share, gap_us_median`` of *arms*' calls in every capture."""
    parts = [
        c.calls.filter(pl.col("backend").is_in(list(arms)))
        .select("backend", "shape", "queue_wait_ns", "gap_ns", "gpu_span_ns")
        .with_columns(pl.lit(c.index, pl.Int64).alias("capture"))
        for c in captures
        if {"queue_wait_ns", "gap_ns"} <= set(c.calls.columns)
    ]
    if not parts:
        return pl.DataFrame(schema={"capture": pl.Int64, "backend": pl.String, "shape": pl.String, "calls": pl.UInt32,
                                    "host_bound": pl.UInt32, "share": pl.Float64, "gap_us_median": pl.Float64})  # fmt: skip
    return host_bound_calls(pl.concat(parts, how="vertical_relaxed"), by=("capture", "backend", "shape"))


def hold_numbers(captures: Sequence[Capture], shape: str) -> tuple[int | None, float | None]:
    """(hold timeouts over the captures, the median of their GPU-wait medians in µs); None where none recorded."""
    timeouts, waits, seen = 0, [], False
    for c in captures:
        hold = c.runner.shape(shape).hold
        if not hold.groups:
            continue
        seen = True
        timeouts += hold.timeouts
        if hold.gpu_wait_us is not None and math.isfinite(hold.gpu_wait_us):
            waits.append(hold.gpu_wait_us)
    return (timeouts if seen else None), (float(np.median(waits)) if waits else None)


def bimodal(values: Sequence[float] | np.ndarray) -> tuple[float, float, float] | None:
    """(median of the lower group, of the upper group, share of calls in the upper) when the spans split in two."""
    v = np.sort(np.asarray(values, dtype=float))
    v = v[np.isfinite(v)]
    n = len(v)
    k = max(2, math.ceil(BIMODAL_TAIL * n))
    if n < 2 * k + 1:
        return None
    gaps = np.diff(v)
    inner = gaps[k - 1 : n - k]  # a gap with at least k calls on each side
    i = int(np.argmax(inner)) + k - 1
    median = float(np.median(v))
    spacing = float(np.median(gaps[gaps > 0])) if (gaps > 0).any() else 0.0
    if median <= 0 or gaps[i] < BIMODAL_GAP * median or gaps[i] < BIMODAL_SPACING * spacing:
        return None
    return float(np.median(v[: i + 1])), float(np.median(v[i + 1 :])), (n - i - 1) / n


def evidence(
    s: pl.DataFrame, captures: Sequence[Capture], baseline: str, candidate: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the predecessor split, the host-bound counts) of a round, computed once for all its rows."""
    return predecessor_split(s), host_bound_by_capture(captures, (baseline, candidate))


def row_evidence(
    shape: str,
    order: Sequence[int],
    split: pl.DataFrame,
    hostbound: pl.DataFrame,
    captures: Sequence[Capture],
    baseline: str,
    candidate: str,
    spans: Mapping[str, Sequence[float] | np.ndarray],
) -> dict[str, Any]:
    """The evidence columns of one row (see :data:`SPLITS`; host-bound counts per capture in *order* (capture indices)).

    *spans*: each arm's µs pooled over the captures (``baseline``/``candidate``), for the two-group test.
    """
    out: dict[str, Any] = {}
    for arm in ("baseline", "candidate"):
        modes = bimodal(spans.get(arm, ()))
        out[f"{arm}_modes"] = None if modes is None else list(modes)
    mine = split.filter(pl.col("shape") == shape)
    for column in SPLITS:
        arm = baseline if column.startswith("baseline") else candidate
        where = "self" if column.endswith("self") else "other"
        hit = mine.filter((pl.col("backend") == arm) & (pl.col("after") == where))
        # too few calls for an interval: no split to show
        values = [hit["median"][0], hit["low"][0], hit["high"][0]] if hit.height else [None]
        out[column] = None if None in values else values
    hb = hostbound.filter(pl.col("shape") == shape)
    for arm, column in ((baseline, "host_bound_baseline"), (candidate, "host_bound_candidate")):
        counts = dict(hb.filter(pl.col("backend") == arm).select("capture", "host_bound").iter_rows())
        out[column] = [int(counts.get(r, 0)) for r in order] if hb.height else None
    calls = dict(hb.group_by("capture").agg(pl.col("calls").max()).iter_rows())
    out["calls_captures"] = [int(calls.get(r, 0)) for r in order] if hb.height else None
    out["hold_timeouts"], out["hold_gpu_wait_us"] = hold_numbers(captures, shape)
    return out


def cause_kinds(row: Mapping[str, Any], directional_limit: float) -> list[str]:
    """The mechanisms a receipt row's evidence shows, in :data:`KINDS` order."""
    kinds = []
    if row.get("arms_gate") not in (None, "pass", "off"):
        kinds.append("arms")
    if row.get("parity_gate") not in (None, "pass", "off"):
        kinds.append("parity")
    if row.get("clock_gate") not in (None, "pass", "off"):
        kinds.append("clock")
    if _host_bound(row):
        kinds.append("host-bound")
    if any(predecessor_shift(row, arm, directional_limit) is not None for arm in ("baseline", "candidate")):
        kinds.append("predecessor")
    if any(drift(row, arm, directional_limit) is not None for arm in ("baseline", "candidate")):
        kinds.append("drift")
    if any(row_values(row, f"{side}_modes") for side in ("baseline", "candidate")):
        kinds.append("bimodal")
    return kinds


def _host_bound_shares(row: Mapping[str, Any]) -> Iterator[tuple[float, str, int, int, int]]:
    """(share, side, host-bound calls, calls, capture index) of every arm and capture above :data:`HOST_SHARE`."""
    calls = row_values(row, "calls_captures")
    for side in ("baseline", "candidate"):
        for i, (n, total) in enumerate(zip(row_values(row, f"host_bound_{side}"), calls, strict=False)):
            if total and n / total > HOST_SHARE:
                yield n / total, side, n, total, i


def host_bound_refusal(row: Mapping[str, Any], names: Mapping[str, str]) -> str | None:
    """The round's host-bound gate: where more than :data:`HOST_SHARE` of an arm's calls in a capture waited
    for their own launches, the host set the row's time (``refused_by`` text, the worst capture), else None."""
    worst = max(_host_bound_shares(row), default=None, key=lambda s: s[0])
    if worst is None:
        return None
    _, side, n, total, i = worst
    return f"host-bound: {n} / {total} {names[side]} calls in capture {i + 1}"


def _host_bound(row: Mapping[str, Any]) -> bool:
    return next(_host_bound_shares(row), None) is not None or bool(row.get("hold_timeouts"))


def predecessor_shift(row: Mapping[str, Any], arm: str, directional_limit: float) -> float | None:
    """after-other / after-self − 1 of *arm* ("baseline"/"candidate") when it counts (see module doc), else None."""
    self_, other = row.get(f"{arm}_after_self"), row.get(f"{arm}_after_other")
    if not self_ or not other or None in (*self_, *other) or not self_[0]:
        return None
    shift = other[0] / self_[0] - 1
    apart = other[1] > self_[2] or other[2] < self_[1]
    return shift if apart and abs(shift) > SPLIT_SHARE * directional_limit else None


def drift(row: Mapping[str, Any], arm: str, directional_limit: float) -> float | None:
    """max / min − 1 of *arm*'s per-capture medians when they drift (see module doc), else None."""
    medians = [v for v in row_values(row, f"{arm}_captures_us") if v is not None and v > 0]
    if len(medians) < 2:
        return None
    spread = max(medians) / min(medians) - 1
    noise = row.get("noise")
    noise = 0.0 if noise is None else noise
    return spread if spread > directional_limit and spread > DRIFT_NOISE * noise else None


def row_values(row: Mapping[str, Any], column: str) -> Sequence[Any]:
    """A list column of a receipt row (RECEIPT_COLUMNS); null, or absent in a receipt written before the column
    existed, reads as no values."""
    values = row.get(column)
    return () if values is None else values


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
