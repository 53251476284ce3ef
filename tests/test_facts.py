"""traceattr.attribution.facts: the per-op facts the range metrics need, and which sums need a running sum."""

from __future__ import annotations

import polars as pl

from traceattr.attribution.facts import SumPlan, op_facts
from traceattr.attribution.roles import ROLES


def gpu_ops(pids: list[int | None], ids: list[int]) -> pl.DataFrame:
    n = len(ids)
    return pl.DataFrame({"start": list(range(n)), "end": [i + 1 for i in range(n)], "kind": ["kernel"] * (n - 1) + ["memcpy"],
                         "device_id": [0] * (n - 1) + [1], "stream_id": [7] * n, "global_pid": pids,
                         "correlation_id": ids}, schema_overrides={"global_pid": pl.Int64})  # fmt: skip


def placement(n: int) -> pl.DataFrame:
    return pl.DataFrame({"role": ["attention"] * n})


def test_a_launch_is_counted_once_per_process() -> None:
    # one process: ids 5, 5, 6 are launches 5 (two kernels, a graph launch) and 6
    one = op_facts(gpu_ops([1, 1, 1], [5, 5, 6]), placement(3))
    assert one["first_of_launch"].to_list() == [True, False, True]
    # two processes reuse id 5: each process's first op of it is a launch
    two = op_facts(gpu_ops([1, 2, 1], [5, 5, 5]), placement(3))
    assert two["first_of_launch"].to_list() == [True, True, False]


def test_facts_hold_kind_stream_and_role() -> None:
    got = op_facts(gpu_ops([None, None], [5, 6]), placement(2))
    assert got.columns == ["start", "end", "is_kernel", "stream", "device_id", "first_of_launch", "role"]
    assert got["is_kernel"].to_list() == [True, False]
    assert got["stream"].to_list() == [7, (1 << 32) + 7]  # one key per (device, stream)


def rows(first: list[bool], kernel: list[bool], role: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"first_of_launch": first, "is_kernel": kernel, "role": role})


def test_sum_plan_sums_only_what_it_cannot_derive() -> None:
    plain = SumPlan.of(rows([True, True], [True, True], ["attention", "attention"]))
    assert plain == SumPlan(True, True, frozenset({"attention"}))
    assert plain.summed(pl.col("_dur")) == {}  # every sum follows from the count and gpu_sum_ns
    count, gpu_sum = pl.Series([2, 1]), pl.Series([30, 10])
    derived = plain.derived(count, gpu_sum)
    assert derived["gpu_ops"].to_list() == [2, 1] and derived["kernel_sum_ns"].to_list() == [30, 10]
    assert derived["attention_sum_ns"].to_list() == [30, 10] and derived["reduce_sum_ns"].to_list() == [0, 0]
    assert set(derived) == {"gpu_ops", "kernels", "kernel_sum_ns", *(f"{r}_sum_ns" for r in ROLES)}


def test_sum_plan_of_mixed_ops() -> None:
    mixed = SumPlan.of(rows([True, False], [True, False], ["attention", "copy"]))
    summed = mixed.summed(pl.col("_dur"))
    assert set(summed) == {"gpu_ops", "kernels", "kernel_sum_ns", "attention_sum_ns", "copy_sum_ns"}
    derived = mixed.derived(pl.Series([2]), pl.Series([30]))
    # what is summed is not derived; the roles no op has are zero
    assert set(derived) == {f"{r}_sum_ns" for r in ROLES} - {"attention_sum_ns", "copy_sum_ns"}
    assert all(s.to_list() == [0] for s in derived.values())
