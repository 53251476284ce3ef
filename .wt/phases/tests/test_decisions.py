"""Winners and decision rules only from real differences: constructed per-call samples with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import traceattr
from traceattr.analysis.calls import CALL_COLUMNS
from traceattr.analysis.decision import Decision, crossovers
from traceattr.analysis.pipeline import analyse, analyse_calls
from traceattr.analysis.summary import summarize
from traceattr.attribution.calltime import EVENT_COLUMNS, EXPOSED_COLUMNS
from traceattr.attribution.engine import ROLE_COLUMNS
from traceattr.backends.arms import same_program
from traceattr.cli import main
from traceattr.present.dispatch import backend_for, dispatch_rules
from traceattr.present.formats import rule_text

CALLS = 20
SWEEP = Path(__file__).parents[1] / "examples" / "traces" / "h200_mla_sweep.sqlite"


def calls_frame(times_us: dict[tuple[str, str], float], noise: float = 0.003, seed: int = 1) -> pl.DataFrame:
    """CALLS calls per (shape, backend) around the given median µs, with relative noise *noise* (sd)."""
    rng = np.random.default_rng(seed)
    rows = []
    for (shape, backend), t in times_us.items():
        spans = t * 1e3 * (1 + rng.normal(0, noise, CALLS))
        for i, span in enumerate(spans):
            rows.append({"shape": shape, "backend": backend, "iter": i, "gpu_span_ns": int(span)})
    frame = pl.DataFrame(rows).with_columns(
        pl.int_range(pl.len()).alias("call_id"),
        pl.format("{} {}", "backend", "shape").alias("series"),
        pl.format("{} {}", "backend", "shape").alias("name"),
        pl.lit("A").alias("arm"),
        (pl.int_range(pl.len()) * 1_000_000).alias("gpu_start_ns"),
        *[pl.col("gpu_span_ns").alias(c) for c in ("busy_ns", "kernel_sum_ns", "gpu_sum_ns")],
        pl.lit(0).alias("gap_ns"),
        pl.lit(5_000).alias("launch_latency_ns"),
        pl.lit(1).alias("kernels"),
        pl.lit(1).alias("gpu_ops"),
        *[(pl.col("gpu_span_ns") if c == "attention_sum_ns" else pl.lit(0)).alias(c) for c in ROLE_COLUMNS],
        *[(pl.col("gpu_span_ns") if c == "attention_exposed_ns" else pl.lit(0)).alias(c) for c in EXPOSED_COLUMNS],
        pl.lit(5_000).alias("launch_overhead_ns"),
        *[pl.lit(0).alias(c) for c in ("queue_wait_ns", "stream_idle_before_ns")],
        *[pl.lit(None, pl.Int64).alias(c) for c in EVENT_COLUMNS],
        pl.col("gpu_span_ns").alias("work_span_ns"),
        pl.col("gpu_span_ns").alias("attention_span_ns"),
        pl.lit(0).alias("nested_ns"),
    )
    return frame.select(CALL_COLUMNS)


def decision_of(times: dict[tuple[str, str], float], **kw) -> Decision:
    """The decision record of constructed calls, as the commands compute it."""
    calls = calls_frame(times, **kw)
    return analyse_calls(calls, None, "constructed", same_program=same_program).decision  # type: ignore[return-value]


def decide(times: dict[tuple[str, str], float], **kw) -> tuple[pl.DataFrame, pl.DataFrame]:
    calls = calls_frame(times, **kw)
    summary = summarize(calls, None, same_program)  # the commands pass the backends' declarations
    return summary, crossovers(summary, calls, same_program=same_program)


def test_same_program_is_declared_by_the_backend() -> None:
    assert same_program("fa3", "fa3-per-token", "q1_ctx32k") and same_program("fa3-per-token", "fa3", "q1_ctx32k")
    assert not same_program("fa3", "fa3-per-token", "q8_ctx32k")  # 8 tokens folded vs 8 requests
    assert not same_program("fa3", "flashmla", "q1_ctx32k")
    assert same_program("fa3[splits=4]", "fa3-per-token[splits=4]", "q1_ctx32k")
    assert not same_program("fa3[splits=4]", "fa3-per-token", "q1_ctx32k")
    assert same_program("x", "x", "not a shape") and not same_program("fa3", "fa3-per-token", "not a shape")


def test_same_program_arms_never_make_a_rule() -> None:
    """q = 1: fa3 and fa3-per-token run one program; their medians cross back and forth by < 1%."""
    times = {}
    for k, ctx in enumerate(("32k", "131k", "512k", "900k")):
        t = {"32k": 20, "131k": 60, "512k": 230, "900k": 400}[ctx]
        times[(f"q1_ctx{ctx}", "fa3")] = t
        times[(f"q1_ctx{ctx}", "fa3-per-token")] = t * (0.99 if k % 2 else 1.01)  # alternating sub-1% "wins"
        times[(f"q1_ctx{ctx}", "fa2")] = t * 2
    summary, cross = decide(times, noise=0.001)
    assert cross.height == 0, cross
    same = summary.filter(pl.col("verdict") == "same program")
    assert same.height == 4 and set(same["same_program_as"]) | set(same["backend"]) == {"fa3", "fa3-per-token"}
    # fa2 is 2x slower everywhere: the fastest of the pair is the declared winner, its twin is no rival
    assert summary.filter(pl.col("winner")).height == 4


def test_a_twin_of_the_leader_does_not_hide_a_real_rule() -> None:
    """fa3-per-token leads by a hair at 32k (same program as fa3), FlashMLA wins by 10% at 512k: one rule, named
    after fa3 (the plainest label of the program: which twin is a hair faster is noise)."""
    times = {
        ("q1_ctx32k", "fa3"): 20.1, ("q1_ctx32k", "fa3-per-token"): 20.0, ("q1_ctx32k", "flashmla"): 22.0,
        ("q1_ctx512k", "fa3"): 250.0, ("q1_ctx512k", "fa3-per-token"): 251.0, ("q1_ctx512k", "flashmla"): 225.0,
    }  # fmt: skip
    _, cross = decide(times, noise=0.002)
    assert cross.height == 1
    row = cross.row(0, named=True)
    assert row["decided"] and row["faster_above"] == "flashmla" and row["faster_below"] == "fa3"
    assert rule_text(row).startswith("fa3 below ≈") and "measured at 32k and 512k" in rule_text(row)


def test_near_equal_backends_tie_instead_of_a_rule() -> None:
    """Distinct programs whose medians cross by 0.5% with ~1% call noise: a tie, not a rule or a winner."""
    times = {
        ("q1_ctx32k", "fa3"): 100.0, ("q1_ctx32k", "flashmla"): 100.5,
        ("q1_ctx131k", "fa3"): 300.0, ("q1_ctx131k", "flashmla"): 298.5,
    }  # fmt: skip
    summary, cross = decide(times, noise=0.01)
    assert not summary["winner"].any()
    assert set(summary["verdict"]) == {"tie"} and (summary["tie_pct"] > 0).all()
    # one backend ties with the fastest everywhere: the family's line is that backend, no breakpoint, no rule
    assert cross.height == 0
    (fam,) = decision_of(times, noise=0.01).families
    assert fam.outcome == "one backend" and [s.backend for s in fam.segments] == ["fa3"]


def test_rule_across_a_tie_zone_is_bracketed_by_the_decided_points() -> None:
    """fa3 really faster at 8k, a tie at 32k and 131k (medians crossing), FlashMLA really faster at 512k."""
    times = {
        ("q1_ctx8k", "fa3"): 20.0, ("q1_ctx8k", "flashmla"): 22.0,
        ("q1_ctx32k", "fa3"): 100.0, ("q1_ctx32k", "flashmla"): 100.3,
        ("q1_ctx131k", "fa3"): 300.0, ("q1_ctx131k", "flashmla"): 299.1,
        ("q1_ctx512k", "fa3"): 900.0, ("q1_ctx512k", "flashmla"): 810.0,
    }  # fmt: skip
    summary, cross = decide(times, noise=0.01)
    verdicts = dict(summary.filter(pl.col("backend") == "fa3").select("shape", "verdict").iter_rows())
    assert verdicts == {"q1_ctx8k": "winner", "q1_ctx32k": "tie", "q1_ctx131k": "tie", "q1_ctx512k": "slower"}
    assert cross.height == 1
    row = cross.row(0, named=True)
    assert row["decided"] and (row["faster_below"], row["faster_above"]) == ("fa3", "flashmla")
    assert (row["ctx_low"], row["ctx_high"]) == (8_000, 512_000) and 32_000 < row["crossover_ctx"] < 131_000
    assert row["ratio_at_low_lo"] > 1.01 and row["ratio_at_high_hi"] < 0.99
    assert "measured at 8k and 512k" in rule_text(row)


def test_clear_change_of_winner_is_a_rule() -> None:
    times = {
        ("q8_ctx131k", "fa3"): 87.6, ("q8_ctx131k", "flashmla"): 93.6,
        ("q8_ctx512k", "fa3"): 259.7, ("q8_ctx512k", "flashmla"): 238.2,
    }  # fmt: skip
    summary, cross = decide(times, noise=0.005)
    assert summary.filter(pl.col("winner"))["backend"].sort().to_list() == ["fa3", "flashmla"]
    row = cross.row(0, named=True)
    assert row["decided"] and row["ratio_at_low"] == pytest.approx(93.6 / 87.6, rel=0.01)
    assert 131_000 < row["crossover_ctx"] < 512_000
    assert (
        rule_text(row) == f"fa3 below ≈{row['crossover_ctx'] // 1000}k ctx, flashmla above (measured at 131k and 512k)"
    )


def test_one_backend_is_alone_not_a_winner() -> None:
    summary, cross = decide({("q8_ctx8k", "fa3"): 10.0})
    assert summary["verdict"].to_list() == ["alone"] and not summary["winner"].any() and cross.height == 0


@pytest.mark.slow
def test_json_rules_round_trip(tmp_path: Path) -> None:
    """compare --json writes the rules compare prints; the reference reader dispatches by them."""
    out = tmp_path / "rules.json"
    with pytest.raises(SystemExit) as done:
        main(["compare", str(SWEEP), "--json", str(out)])
    assert done.value.code == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["schema"] == "traceattr.dispatch/1" and doc["confidence"] == 0.95
    analysis = analyse(traceattr.open(SWEEP).attribute())
    expected = [
        (r["family"], r["faster_below"], r["faster_above"], [r["ctx_low"], r["ctx_high"]], r["crossover_ctx"])
        for r in analysis.crossovers.filter(pl.col("decided")).iter_rows(named=True)
    ]
    got = [(f["family"], r["below"], r["above"], r["measured"], r["ctx"]) for f in doc["families"] for r in f["rules"]]
    assert got == expected and len(got) == 1
    (fam,) = doc["families"]
    assert fam["measured_ctx"] == [8_000, 32_000, 131_000, 512_000, 900_000]
    rule = fam["rules"][0]
    assert rule["ratio_at_low"]["ci"][0] > 1 > rule["ratio_at_high"]["ci"][1]
    assert [s["backend"] for s in fam["dispatch"]] == ["fa3", "flashmla"]
    picks = {s: backend_for(doc, s) for s in ("q8_ctx8k", "q8_ctx131k", "q8_ctx512k", "q8_ctx2m", "q1_ctx8k")}
    assert picks == {"q8_ctx8k": "fa3", "q8_ctx131k": "fa3", "q8_ctx512k": "flashmla", "q8_ctx2m": "flashmla",
                     "q1_ctx8k": None}  # fmt: skip
    winners = {p["shape"]: p["winner"] for p in fam["points"]}
    assert winners == dict(analysis.summary.filter(pl.col("winner")).select("shape", "backend").iter_rows())


def test_json_ties_dispatch_the_backend_good_everywhere() -> None:
    """A family whose backends tie at every ctx still dispatches (one backend, never an empty dispatch)."""
    times = {
        ("q1_ctx32k", "fa3"): 100.0, ("q1_ctx32k", "flashmla"): 100.5,
        ("q1_ctx131k", "fa3"): 300.0, ("q1_ctx131k", "flashmla"): 298.5,
    }  # fmt: skip
    summary, cross = decide(times, noise=0.01)
    doc = json.loads(json.dumps(dispatch_rules(summary, cross, source="constructed")))
    (fam,) = doc["families"]
    assert fam["rules"] == [] and fam["ties"] == []
    assert [s["backend"] for s in fam["dispatch"]] == ["fa3"] and backend_for(doc, "q1_ctx64k") == "fa3"
