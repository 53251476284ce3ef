"""The shape grammar: documented parts, published row names, round trips, one-line errors."""

from __future__ import annotations

import pytest

from traceattr.core.shapes import HEAD_PRESETS, PUBLISHED_ROWS, Shape, ShapeError, parse_shape


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("q8_ctx900k", Shape(q=8, ctx=900_000)),
        ("q1_ctx131k", Shape(q=1, ctx=131_000)),
        ("q1_ctx131072", Shape(q=1, ctx=131_072)),
        ("q8_ctx1m", Shape(q=8, ctx=1_000_000)),
        ("q8_ctx131k_h128", Shape(q=8, ctx=131_000, heads=128)),
        ("ctx900k_q8_fp8_p32_b4_ragged", Shape(q=8, ctx=900_000, kv_dtype="fp8", page=32, batch=4, pattern="ragged")),
        ("q4_kv64k_kimi-tp8", Shape(q=4, ctx=64_000, heads=12)),
        ("mtp_h96_b8_q4_kv342305", Shape(q=4, ctx=342_305, heads=96, batch=8, prefix="mtp")),
        ("trace_h12_b1_q1_kv76800", Shape(q=1, ctx=76_800, heads=12, prefix="trace")),
        ("mirror_h96_b2_q1_kv77699", Shape(q=1, ctx=77_699, heads=96, batch=2, prefix="mirror")),
        ("prefill_h12_b2_q512_kv32768", Shape(q=512, ctx=32_768, heads=12, batch=2, prefix="prefill")),
        ("q8_ctx900k_dcp8", Shape(q=8, ctx=900_000, dcp=8)),
        ("mtp_h96_b8_q4_kv342305_dcp2", Shape(q=4, ctx=342_305, heads=96, batch=8, prefix="mtp", dcp=2)),
    ],
)
def test_parse(text: str, expect: Shape) -> None:
    assert parse_shape(text) == expect


@pytest.mark.parametrize(
    "text",
    [
        *PUBLISHED_ROWS,
        "q8_ctx900k",
        "q3_ctx5000_h7_b3_fp8_p16_ragged",
        "q2_ctx4k_b2_row",
        "q8_ctx900k_dcp8",
        "q2_ctx4k_b2_row_dcp4",
    ],
)
def test_names_round_trip(text: str) -> None:
    shape = parse_shape(text)
    assert parse_shape(shape.name) == shape
    assert parse_shape(shape.short_name) == shape


def test_presets_cover_the_field() -> None:
    assert HEAD_PRESETS == {
        "kimi-tp1": 96,
        "kimi-tp4": 24,
        "kimi-tp8": 12,
        "kimi-tp16": 6,
        "deepseek-tp1": 128,
        "deepseek-tp8": 16,
    }
    assert parse_shape("q8_ctx900k_deepseek-tp8").heads == 16


def test_query_patterns() -> None:
    assert parse_shape("q4_ctx1k_b4_ragged").q_lens() == [1, 2, 3, 4]
    assert parse_shape("q4_ctx1k_b2").q_lens() == [4, 4]
    row = parse_shape("q3_ctx100_b2_row")
    assert row.q_lens() == [1] * 6 and row.kv_lens() == [98, 99, 100, 98, 99, 100]


def test_bytes_moved_counts_kv_once() -> None:
    s = parse_shape("q8_ctx900k")
    assert s.bytes_moved() == 900_000 * 576 * 2 + 8 * 16 * (576 + 512) * 2
    assert parse_shape("q8_ctx900k_fp8").bytes_moved() < s.bytes_moved()


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("q8", "missing ctx<N>"),
        ("ctx9k", "missing q<N>"),
        ("q8_ctx900x", "part 'ctx900x' is not one of"),
        ("q8_q9_ctx1k", "q given twice"),
        ("q0_ctx1k", "q must be ≥ 1"),
        ("q8_ctx4", "must hold at least the q"),
        ("q8_ctx1k_h16_kimi-tp8", "heads given twice"),
        ("q8_ctx1k_dcp0", "dcp must be ≥ 1"),
        ("q8_ctx60_dcp8", "last rank's shard \\(7 tokens\\) must hold"),
        ("q8_ctx1k_dcp2_dcp4", "dcp given twice"),
        ("", "empty shape name"),
    ],
)
def test_errors_say_which_part(text: str, needle: str) -> None:
    with pytest.raises(ShapeError, match=needle) as err:
        parse_shape(text)
    assert "\n" not in str(err.value)


def test_dcp_is_one_rank_share_plus_a_merge() -> None:
    s = parse_shape("q8_ctx900k_dcp8")
    assert s.name == "q8_ctx900k_h16_b1_bf16_p64_dcp8" and s.short_name == "q8_ctx900k_dcp8"
    assert s.family == "q8_ctx*_dcp8"  # a DCP sweep is its own family, not the dense one
    assert s.dcp_shards() == [112_500] * 8
    assert s.rank_share() == parse_shape("q8_ctx112500")
    odd = parse_shape("q1_ctx10_dcp4")
    assert odd.dcp_shards() == [3, 3, 2, 2] and odd.rank_share().ctx == 2  # the last rank holds the newest tokens
    merge = 8 * 16 * (8 * (512 * 2 + 4) + 512 * 2)
    assert s.bytes_moved() == parse_shape("q8_ctx112500").bytes_moved() + merge
