"""traceattr.core.callnames: the call-name grammar (writer = reader), grouping presets and regex checks."""

from __future__ import annotations

import re

import polars as pl
import pytest

from traceattr.core.callnames import (
    GROUP_PRESETS,
    MESSAGE_PATTERN,
    CallName,
    check_regex,
    checked_group,
    group_fields,
    group_pattern,
    parse_message,
    series_and_iteration,
    shape_runs,
    without_counters,
)
from traceattr.core.errors import TraceattrError


def test_writer_and_reader_share_one_grammar() -> None:
    name = CallName("fa3[splits=4]", "q8_ctx900k_h16_b1_bf16_p64", "B", 12)
    assert name.message == "backend=fa3[splits=4] shape=q8_ctx900k_h16_b1_bf16_p64 arm=B iter=12"
    assert parse_message(name.message) == name
    assert re.fullmatch(MESSAGE_PATTERN, name.message) and GROUP_PRESETS["traceattr"][0] == MESSAGE_PATTERN
    assert pl.Series([name.message]).str.extract_groups(MESSAGE_PATTERN).struct.unnest().row(0) == (
        "fa3[splits=4]", "q8_ctx900k_h16_b1_bf16_p64", "B", "12",
    )  # fmt: skip
    assert parse_message("flush") is None and parse_message("backend=x shape=y") is None


def test_group_pattern_checks_named_groups() -> None:
    assert group_pattern("pipe") == GROUP_PRESETS["pipe"][0]
    with pytest.raises(TraceattrError, match="missing shape"):
        group_pattern("(?P<backend>.+)")


def test_counters_and_iterations_read_once() -> None:
    names = pl.Series(
        ["aten::mm, seq = 12", "aten::mm, op_id = 3", "backend=fa3 shape=q1 arm=A iter=4", "decode:3", "x"]
    )
    assert names.to_frame("n").select(without_counters(pl.col("n")))["n"].to_list() == [
        "aten::mm", "aten::mm", "backend=fa3 shape=q1", "decode:3", "x",
    ]  # fmt: skip
    parts = names.to_frame("n").select(series_and_iteration(pl.col("n")).alias("p")).unnest("p")
    assert parts.row(3) == ("decode", "3") and parts.row(4) == (None, None)


def test_regex_checks_name_the_option() -> None:
    check_regex(None)
    with pytest.raises(TraceattrError, match=r"^--match: invalid regular expression"):
        check_regex("(")
    with pytest.raises(TraceattrError, match=r"^--group: invalid regular expression"):
        checked_group("(?P<backend>x)(?P<shape>(")
    assert checked_group("slash").startswith("^(?P<backend>")


def test_call_names_round_trip() -> None:
    name = CallName("flashmla", "q8_ctx900k_h16_b1_bf16_p64", "C", 7)
    assert parse_message(name.message) == name
    assert parse_message("flush") is None and parse_message("backend=x shape=y") is None


@pytest.mark.parametrize(
    ("preset", "name", "want"),
    [
        ("keyvalue", "backend=fa3|shape=q8_ctx900k|arm=A|iter=3", ("fa3", "q8_ctx900k", "3", "A")),
        ("keyvalue", "backend=fa3, shape=q8_ctx900k", ("fa3", "q8_ctx900k", None, None)),
        ("slash", "fa3/q8_ctx900k:3", ("fa3", "q8_ctx900k", "3", None)),
        ("slash", "fa3/q8_ctx900k#3", ("fa3", "q8_ctx900k", "3", None)),
        ("pipe", "fa3|q8_ctx900k", ("fa3", "q8_ctx900k", None, None)),
        ("dot", "fa3.q8_ctx900k.3", ("fa3", "q8_ctx900k", "3", None)),
        ("underscore", "fa3_pertoken_q8_ctx900k_3", ("fa3_pertoken", "q8_ctx900k", "3", None)),  # "_" in a backend
        ("separated", "probe:fa2_q1_ctx131072", ("probe:fa2", "q1_ctx131072", None, None)),
    ],
)
def test_each_preset_reads_its_example(preset: str, name: str, want: tuple[str | None, ...]) -> None:
    pattern = group_pattern(preset)
    assert group_fields(pattern)[:2] == ["backend", "shape"]
    got = pl.Series([name]).str.extract_groups(pattern).struct.unnest()
    assert tuple(got[g][0] if g in got.columns else None for g in ("backend", "shape", "iter", "arm")) == want


def test_group_fields_and_shape_runs() -> None:
    assert group_fields(r"(?P<shape>\S+) (?P<backend>\S+) (?P<iter>\d+)") == ["backend", "shape", "iter"]
    assert group_fields(MESSAGE_PATTERN) == ["backend", "shape", "iter", "arm"]
    runs = pl.Series(["fa3_q8_ctx900k_3", "no shape here"]).to_frame("n").select(shape_runs(pl.col("n")))["n"]
    assert runs.to_list() == ["_q8_ctx900k_", ""]
