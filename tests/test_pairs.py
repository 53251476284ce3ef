"""traceattr.attribution.pairs: a range's metrics from its (op, range) pairs, held to a plain per-range
computation on small hand-made ops (overlaps, an op in two ranges, several streams and roles)."""

from __future__ import annotations

import polars as pl
import pytest

from traceattr.attribution.columns import METRICS_SCHEMA
from traceattr.attribution.pairs import pair_metrics
from traceattr.attribution.roles import ROLES

# per op (row == op_id): start, end, kernel?, stream key, device, first op of its launch?, role
OPS = [
    (100, 110, True, 7, 0, True, "attention"),
    (105, 120, True, 7, 0, True, "attention"),  # overlaps op 0
    (130, 135, False, 8, 0, True, "copy"),  # a memcpy on another stream
    (140, 150, True, 7, 0, False, "reduce"),  # a second kernel of an earlier launch: no new launch
    (200, 260, True, 7, 0, True, "attention"),
]
# op -> (range, launch call start); op 4 is in both ranges 1 and 2
ASSIGN = [(0, 1, 90), (1, 1, 95), (2, 1, 125), (3, 1, 125), (4, 1, 150), (4, 2, 150)]


def facts(ops: list[tuple] = OPS) -> pl.DataFrame:
    return pl.DataFrame(ops, schema={"start": pl.Int64, "end": pl.Int64, "is_kernel": pl.Boolean,
                                     "stream": pl.Int64, "device_id": pl.Int64, "first_of_launch": pl.Boolean,
                                     "role": pl.String}, orient="row")  # fmt: skip


def assign(rows: list[tuple] = ASSIGN) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"op_id": pl.Int64, "range_id": pl.Int64, "api_start": pl.Int64}, orient="row")


def reference(assigned: pl.DataFrame, f: pl.DataFrame) -> dict[int, dict[str, int]]:
    """The metrics per range by their definitions, one range at a time."""
    out = {}
    for rid in sorted(set(assigned["range_id"])):
        mine = [(f.row(o, named=True), api) for o, r, api in assigned.iter_rows() if r == rid]
        ops = sorted((o for o, _ in mine), key=lambda o: o["start"])
        busy, reach = 0, None
        for o in ops:  # the union of [start, end]
            lo = o["start"] if reach is None else max(o["start"], reach)
            busy += max(0, o["end"] - lo)
            reach = o["end"] if reach is None else max(reach, o["end"])
        start, end = min(o["start"] for o in ops), max(o["end"] for o in ops)
        out[rid] = {
            "gpu_start_ns": start, "gpu_end_ns": end, "gpu_span_ns": end - start,
            "op_records": len(ops), "gpu_ops": sum(o["first_of_launch"] for o in ops),
            "kernels": sum(o["is_kernel"] for o in ops),
            "kernel_sum_ns": sum(o["end"] - o["start"] for o in ops if o["is_kernel"]),
            "gpu_sum_ns": sum(o["end"] - o["start"] for o in ops),
            "busy_ns": busy, "gap_ns": end - start - busy,
            "launch_latency_ns": start - min(api for _, api in mine),
            "streams": len({o["stream"] for o in ops}), "devices": len({o["device_id"] for o in ops}),
            **{f"{role}_sum_ns": sum(o["end"] - o["start"] for o in ops if o["role"] == role) for role in ROLES},
        }  # fmt: skip
    return out


def by_range(metrics: pl.DataFrame) -> dict[int, dict[str, int]]:
    return {r.pop("range_id"): r for r in metrics.iter_rows(named=True)}


def test_metrics_are_the_definitions() -> None:
    got = pair_metrics(assign(), facts())
    assert got.schema == pl.Schema(METRICS_SCHEMA)
    assert by_range(got) == reference(assign(), facts())
    one = by_range(got)[1]  # read off the table above, so a wrong reference cannot pass with the code
    assert (one["busy_ns"], one["gap_ns"], one["gpu_ops"], one["streams"], one["launch_latency_ns"]) == (
        20 + 5 + 10 + 60, 160 - 95, 4, 2, 10,
    )  # fmt: skip


@pytest.mark.parametrize("order", ["reversed", "api_start desc"])
def test_pairs_in_any_order_give_the_same_metrics(order: str) -> None:
    rows = ASSIGN[::-1] if order == "reversed" else sorted(ASSIGN, key=lambda r: -r[2])
    assert by_range(pair_metrics(assign(rows), facts())) == by_range(pair_metrics(assign(), facts()))


def test_one_role_one_stream_every_op_a_kernel_and_a_launch() -> None:
    """The shortcuts (a flag on every op, a single role, one stream in the trace) give the same numbers."""
    plain = [(s, e, True, 7, 0, True, "attention") for s, e, *_ in OPS]
    got = by_range(pair_metrics(assign(), facts(plain)))
    assert got == reference(assign(), facts(plain))
    assert got[1]["attention_sum_ns"] == got[1]["gpu_sum_ns"] == 10 + 15 + 5 + 10 + 60 and got[1]["reduce_sum_ns"] == 0


def test_no_pairs_is_an_empty_table_of_the_schema() -> None:
    got = pair_metrics(assign([]), facts())
    assert got.height == 0 and got.schema == pl.Schema(METRICS_SCHEMA)
