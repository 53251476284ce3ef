"""traceattr.attribution.placement: per op its innermost range and that range's root, the launching thread
and call start, and its role (decided on the whole trace's innermost range when a selection is placed)."""

from __future__ import annotations

import polars as pl

from traceattr.attribution.placement import placement_of

PID = 3 << 24  # globalTid = <PID:24><TID:24>: the op table shows the TID part


class ByRangeName:
    """A stand-in for the role rules: "attention" inside a range named attn, else "other"."""

    def classify(self, ops: pl.DataFrame, ranges: pl.DataFrame) -> pl.DataFrame:
        name = ops.select("range_id").join(ranges, on="range_id", how="left", maintain_order="left")["range_name"]
        role = pl.Series("role", ["attention" if n == "attn" else "other" for n in name])
        return ops.hstack([role, role.alias("family")])


KEYS = pl.DataFrame({"op_id": [0, 1, 2, 3], "name_key": [5, 5, 6, 7]})  # op_id == row
# range 1 "step" (level 0) holds 2 "attn" (level 1) holds 3 "inner" (level 2)
RANGES = pl.DataFrame({"range_id": [1, 2, 3], "level": [0, 1, 2], "root_id": [1, 1, 1],
                       "name": ["step", "attn", "inner"]})  # fmt: skip


def frame(rows: list[tuple], schema: list[str]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=dict.fromkeys(schema, pl.Int64), orient="row")


def test_each_op_gets_its_innermost_range_root_thread_and_call_start() -> None:
    launches = frame([(0, 100, PID + 11), (1, 200, PID + 12), (2, 300, PID + 11)], ["op_id", "api_start", "global_tid"])
    deepest = frame([(0, 2), (1, 3)], ["op_id", "range_id"])  # op 2: launched outside every range; op 3: no launch
    got = placement_of(KEYS, launches, deepest, RANGES, ByRangeName())  # type: ignore[arg-type]
    assert got["op_id"].to_list() == [0, 1, 2, 3]  # op_id order, one row per op
    assert got.select("api_start_ns", "tid", "range_id", "outer_range_id", "role").rows() == [
        (100, 11, 2, 1, "attention"),
        (200, 12, 3, 1, "other"),
        (300, 11, None, None, "other"),
        (None, None, None, None, "other"),
    ]
    assert got.schema["tid"] == pl.Int32


def test_a_call_logged_twice_shows_its_latest_row_and_deepest_range() -> None:
    # op 0's call has two runtime rows (old exports), each reaching a range: the deeper one (3) and the later
    # call start (the inner of the duplicated rows) are shown
    launches = frame([(0, 100, PID + 11), (0, 104, PID + 12)], ["op_id", "api_start", "global_tid"])
    deepest = frame([(0, 2), (0, 3)], ["op_id", "range_id"])
    got = placement_of(KEYS.head(1), launches, deepest, RANGES, ByRangeName())  # type: ignore[arg-type]
    assert got.select("api_start_ns", "tid", "range_id").row(0) == (104, 12, 3)


def test_roles_of_a_selection_are_decided_on_the_whole_trace() -> None:
    """Placed in a selection (only range 1 kept), op 0 shows range 1 but keeps the role its innermost range
    in the whole trace (2, "attn") gives it."""
    launches = frame([(0, 100, PID + 11)], ["op_id", "api_start", "global_tid"])
    selection = RANGES.filter(pl.col("range_id") == 1)
    roles = ByRangeName()
    got = placement_of(
        KEYS.head(1), launches, frame([(0, 1)], ["op_id", "range_id"]), selection, roles,  # type: ignore[arg-type]
        roles_from=(frame([(0, 2)], ["op_id", "range_id"]), RANGES),
    )  # fmt: skip
    assert got.select("range_id", "role").row(0) == (1, "attention")
    alone = placement_of(KEYS.head(1), launches, frame([(0, 1)], ["op_id", "range_id"]), selection, roles)  # type: ignore[arg-type]
    assert alone["role"].to_list() == ["other"]  # without the whole trace: the selection's range decides
