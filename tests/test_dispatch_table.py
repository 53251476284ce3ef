"""traceattr.dispatch/2: breakpoints, regret, leave-one-out and the graph-safe choice on constructed sweeps and the
shipped example; backend_for reads v1 and v2."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from tests.helpers import CROSS, FakeSweep, linear_time, run, sweep, sweep_plan
from traceattr.analysis.decision import decide, frame_crossings
from traceattr.analysis.dispatch_table import (
    ShapePoint,
    build_segments,
    dispatch_table,
    graph_safe,
    leave_one_out,
    lookup,
    parse_histogram,
)
from traceattr.analysis.pipeline import analyse
from traceattr.analysis.sweep_points import dispatch_frames, usable
from traceattr.attribution.engine import attribute
from traceattr.core.errors import TraceattrError
from traceattr.core.records import SweepRecord
from traceattr.core.shapes import parse_shape
from traceattr.jobs.sweep import run_sweep
from traceattr.present.dispatch import SCHEMA_V2, backend_for, dispatch_rules, dispatch_table_doc
from traceattr.trace.loader import load_trace

EXAMPLE = Path(__file__).parents[1] / "examples" / "traces" / "h200_mla_sweep.sqlite"


def linear(ctx_k: float) -> dict[str, float]:
    return {"fa3": 25 + 0.45 * ctx_k, "flashmla": 36 + 0.39 * ctx_k}


CTX = (8, 32, 64, 131, 256, 512, 900)


def analysed(path: Path):  # type: ignore[no-untyped-def]
    a = analyse(attribute(load_trace(path)))
    return a.summary, a.crossovers


def test_known_crossover_gives_one_breakpoint_and_zero_in_sample_regret(tmp_path: Path) -> None:
    summary, cross = analysed(sweep(tmp_path / "s.sqlite", {f"q8_ctx{c}k": linear(c) for c in CTX}))
    table = dispatch_table(summary, cross)
    (fam,) = table.families
    assert [s.backend for s in fam.segments] == ["fa3", "flashmla"]
    assert 150_000 < fam.segments[1].ctx_from < 220_000  # the lines cross at 183k
    assert fam.segments[1].measured == (131_000, 256_000) and fam.segments[1].decided
    assert fam.regret.max == 0 and fam.regret.right == len(CTX)
    # always fa3: slower above the crossing; always flashmla: slower below it
    assert fam.baselines["fa3"].max > 0.05 and fam.baselines["flashmla"].max > 0.3
    # leave-one-out: the held-out points next to the crossing may flip, each within its small regret
    assert fam.loo_regret.shapes == len(CTX) and fam.loo_regret.max < 0.1
    gs = fam.graph_safe
    assert gs is not None and gs.backend in ("fa3", "flashmla") and gs.expected_regret > 0
    assert gs.per_ctx_us <= min(gs.expected_us_by_backend.values())
    assert fam.key["q"] == 8 and fam.key["heads"] == 16 and fam.key["kv_dtype"] == "bf16"


def test_one_backend_always_best(tmp_path: Path) -> None:
    times = {f"q1_ctx{c}k_b4": {"fa3": 10 + 0.2 * c, "fa2": 20 + 0.5 * c} for c in CTX}
    summary, cross = analysed(sweep(tmp_path / "s.sqlite", times))
    (fam,) = dispatch_table(summary, cross).families
    assert [(s.ctx_from, s.ctx_to, s.backend) for s in fam.segments] == [(None, None, "fa3")]
    assert fam.regret.max == 0 and fam.baselines["fa3"].max == 0 and fam.loo_regret.max == 0
    assert fam.graph_safe is not None and fam.graph_safe.backend == "fa3" and fam.graph_safe.expected_regret == 0
    assert fam.key["batch"] == 4


def test_tie_band_keeps_the_backend_chosen_before(tmp_path: Path) -> None:
    """Medians that flip-flop inside a tie do not make breakpoints: the choice switches once."""
    times = {}
    for i, c in enumerate(CTX):
        lead = 1.2 if c < 64 else (1.0 + (0.003 if i % 2 else -0.003)) if c < 512 else 0.85
        times[f"q8_ctx{c}k"] = {"fa3": 100.0, "flashmla": 100.0 * lead}
    summary, cross = analysed(sweep(tmp_path / "s.sqlite", times))
    (fam,) = dispatch_table(summary, cross).families
    assert [s.backend for s in fam.segments] == ["fa3", "flashmla"]
    # the rule's bracket: fa3 really faster at 32k, flashmla at 512k, only ties between
    assert fam.segments[1].measured == (32_000, 512_000) and fam.segments[1].decided
    assert fam.regret.max is not None and fam.regret.max < 0.01  # ties chosen the other way cost noise


def test_segments_lookup_and_loo_by_hand() -> None:
    def p(ctx: int, a: float, b: float, good: tuple[str, ...]) -> ShapePoint:
        return ShapePoint(ctx, f"q8_ctx{ctx}", {"a": a, "b": b}, frozenset(good))

    pts = [p(1000, 1.0, 2.0, ("a",)), p(10_000, 2.0, 2.0, ("a", "b")), p(100_000, 4.0, 2.0, ("b",))]
    segs = build_segments(pts)
    assert [s.backend for s in segs] == ["a", "b"]
    assert segs[1].ctx_from == round(math.sqrt(10_000 * 100_000))  # equal medians at 10k: the geometric mean
    assert lookup(segs, 999) == "a" and lookup(segs, 10**7) == "b"
    held = {h.ctx: h for h in leave_one_out(pts)}
    assert held[10_000].right and held[1000].extrapolated and held[100_000].extrapolated
    assert held[100_000].predicted == "a" and held[100_000].regret == pytest.approx(1.0)  # extrapolating a tie
    gs = graph_safe(pts, segs, [(100_000, 100_000, 1.0)])
    assert gs is not None and gs.backend == "b" and gs.expected_regret == pytest.approx(0)


def test_histogram_format() -> None:
    bins = parse_histogram("ctx_low ctx_high weight\n# lengths\n8k, 32k, 3\n131072 1\n1m 2m 0.5 # tail\n", "h.txt")
    assert bins == ((8000, 32000, 3.0), (131072, 131072, 1.0), (1_000_000, 2_000_000, 0.5))
    for bad, why in (("8k 4k 1", "ends before"), ("8k -1", "≥ 0"), ("abc 1", "context length"), ("", "no request"),
                     ("8k 1 2 3", "expected")):  # fmt: skip
        with pytest.raises(TraceattrError, match=why):
            parse_histogram(bad, "h.txt")


def test_shipped_sweep_v2_and_backend_for_reads_both(tmp_path: Path) -> None:
    summary, cross = analysed(EXAMPLE)
    table = dispatch_table(summary, cross)
    decision = decide(summary, frame_crossings(cross))
    assert dispatch_table(None, None, decision=decision) == table  # the decision's table, however it is asked
    doc = json.loads(json.dumps(dispatch_table_doc(decision, table, "example")))
    assert doc["schema"] == SCHEMA_V2
    (fam,) = doc["families"]
    assert [s["backend"] for s in fam["dispatch"]] == ["fa3", "flashmla"]
    assert fam["dispatch"][1]["ctx_from"] == 237574 and fam["dispatch"][1]["decided"] is True
    # the numbers the README writes down
    assert doc["regret"]["leave_one_out"] == {"mean": 0.0, "max": 0.0, "shapes": 5, "right": 5, "unmeasured": 0}
    assert fam["regret"]["always"]["fa3"]["max"] == pytest.approx(0.1033, abs=1e-3)
    assert fam["regret"]["always"]["flashmla"]["max"] == pytest.approx(0.4027, abs=1e-3)
    assert fam["graph_safe"]["backend"] == "flashmla"
    assert fam["graph_safe"]["expected_regret"] == pytest.approx(0.0417, abs=1e-3)
    v1 = dispatch_rules(summary, cross, "example")
    for shape in ("q8_ctx8k", "q8_ctx200k", "q8_ctx300k", "q8_ctx2m", "q4_ctx8k", "nonsense"):
        assert backend_for(doc, shape) == backend_for(v1, shape)
    with pytest.raises(ValueError, match="dispatch/2"):
        backend_for({"schema": "traceattr.dispatch/3"}, "q8_ctx8k")


@pytest.mark.slow
def test_dispatch_command(tmp_path: Path) -> None:
    out = tmp_path / "table.json"
    hist = tmp_path / "lengths.txt"
    hist.write_text("8k 64k 1\n512k 1m 1\n", encoding="utf-8")
    done = run("dispatch", str(EXAMPLE), "-o", str(out), "--ctx-dist", str(hist))
    assert done.returncode == 0, done.stderr
    assert "leave-one-out" in done.stdout and "graph-safe" in done.stdout
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["distribution"] == f"request lengths of {hist}"
    assert doc["families"][0]["graph_safe"]["outside_measured"] > 0  # 900k–1m lies beyond the sweep
    hist.write_text("8k x\n", encoding="utf-8")
    bad = run("dispatch", str(EXAMPLE), "--ctx-dist", str(hist))
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "lengths.txt:1" in bad.stderr


@pytest.mark.slow
def test_sweep_command_without_a_gpu(tmp_path: Path) -> None:
    dry = run("sweep", "-s", "q8_ctx*", "-b", "fa3", "-b", "flashmla", "--ctx-range", "8k:1m", "--dry-run",
              "--out-root", str(tmp_path))  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert "step-1" in dry.stdout and "q8_ctx1m_h16_b1_bf16_p64" in dry.stdout
    bad = run("sweep", "-s", "q8_ctx8k", "-b", "fa3", "-b", "flashmla", "--ctx-range", "8k:1m")
    assert bad.returncode == 2 and "ctx*" in bad.stderr and bad.stderr.count("\n") == 1
    bad = run("sweep", "-s", "q8_ctx*", "-b", "fa3", "-b", "flashmla", "--ctx-range", "1m:8k")
    assert bad.returncode == 2 and "--ctx-range" in bad.stderr


# -- tables from sweeps (traceattr sweep's sweep.json): the points that passed, with the sweep's verdicts ------
SWEEPS = Path(__file__).parents[1] / "examples" / "sweeps"
EAGER_LEAD = SWEEPS / "h200_q8_fa3_flashmla_eager_lead.json"


def searched(tmp_path: Path, t, **kw) -> SweepRecord:  # type: ignore[no-untyped-def]
    return run_sweep(sweep_plan(tmp_path, max_steps=16, **kw), FakeSweep(t))


@pytest.mark.slow
def test_search_known_crossover_table(tmp_path: Path) -> None:
    record = searched(tmp_path, linear_time)
    (fam,) = dispatch_table(*dispatch_frames(record)).families
    assert [s.backend for s in fam.segments] == ["fa3", "flashmla"]
    lo, hi = record.result["bracket"]  # type: ignore[index]
    assert lo <= CROSS <= hi and lo <= fam.segments[1].ctx_from <= hi and fam.segments[1].decided
    # right everywhere; a tie kept with the backend chosen below costs no more than the tie (within ±1%)
    assert fam.regret.max is not None and fam.regret.max < 0.01
    assert fam.regret.right == len(fam.points) == len(usable(record))
    assert fam.baselines["fa3"].max > 0.05 and fam.baselines["flashmla"].max > 0.1
    assert fam.loo_regret.max is not None and fam.loo_regret.max < 0.05  # the sweep measured densely at the crossing


@pytest.mark.slow
def test_search_tie_band_table(tmp_path: Path) -> None:
    def t(shape: str, arm: str) -> float:
        k = parse_shape(shape).ctx / 1000
        base = 25 + 0.45 * k
        return base if arm == "fa3" else base * (1.2 if k < 60 else 1.0 if k < 300 else 0.8)

    record = searched(tmp_path, t)
    assert record.result is not None and record.result["kind"] == "tie band"
    summary, cross = dispatch_frames(record)
    assert set(summary.filter(summary["verdict"] == "tie")["shape"]) == set(
        usable(record).filter(usable(record)["side"] == "same")["shape"]
    )
    (fam,) = dispatch_table(summary, cross).families
    assert [s.backend for s in fam.segments] == ["fa3", "flashmla"]  # one switch, none inside the tie
    assert 60_000 <= fam.segments[1].ctx_from <= 300_000 * 1.1
    assert fam.regret.max is not None and fam.regret.max < 0.01  # ties chosen either way cost noise


def test_search_one_backend_always_best_table(tmp_path: Path) -> None:
    record = searched(tmp_path, linear_time, arms=("fa3", "fa2"))
    (fam,) = dispatch_table(*dispatch_frames(record)).families
    assert [(s.ctx_from, s.ctx_to, s.backend) for s in fam.segments] == [(None, None, "fa3")]
    assert fam.regret.max == 0 and fam.baselines["fa2"].max > 1 and fam.loo_regret.max == 0


@pytest.mark.slow
def test_a_refused_point_never_reaches_the_table(tmp_path: Path) -> None:
    record = run_sweep(sweep_plan(tmp_path), FakeSweep(linear_time, low_clock=((1, 8000),)))
    assert usable(record).filter(usable(record)["ctx"] == 8000)["step"].to_list() == [2]  # the second, passed
    eager = SweepRecord.read(SWEEPS / "h200_q8_fa3_flashmla_eager.json")
    (fam,) = dispatch_table(*dispatch_frames(eager)).families
    assert [p.ctx for p in fam.points] == [32_000, 73_800, 112_000, 138_000, 170_000, 900_000]  # 153k refused


@pytest.mark.slow
def test_dispatch_command_on_the_h200_sweeps(tmp_path: Path) -> None:
    """The numbers examples/sweeps/README.md writes down."""
    out = tmp_path / "eager.json"
    done = run("dispatch", str(SWEEPS / "h200_q8_fa3_flashmla_eager.json"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    (fam,) = doc["families"]
    assert [(s["ctx_from"], s["backend"]) for s in fam["dispatch"]] == [(None, "fa3"), (162_794, "flashmla")]
    assert fam["dispatch"][1]["measured"] == [138_000, 170_000] and fam["dispatch"][1]["decided"] is True
    loo = doc["regret"]["leave_one_out"]
    assert (loo["shapes"], loo["right"]) == (6, 5) and loo["max"] == pytest.approx(0.0640, abs=1e-4)
    assert loo["mean"] == pytest.approx(0.0107, abs=1e-4)
    held = {p["ctx"]: p["loo"] for p in fam["regret"]["per_shape"]}
    assert held[170_000]["predicted"] == "fa3" and not held[170_000]["right"]  # the miss next to the crossing
    assert fam["regret"]["always"]["fa3"]["max"] == pytest.approx(0.105, abs=1e-3)
    assert fam["regret"]["always"]["flashmla"]["max"] == pytest.approx(0.267, abs=1e-3)
    assert fam["graph_safe"]["backend"] == "flashmla"
    assert fam["graph_safe"]["expected_regret"] == pytest.approx(0.0257, abs=1e-3)
    assert backend_for(doc, "q8_ctx100k") == "fa3" and backend_for(doc, "q8_ctx200k") == "flashmla"
    # a sweep folder reads as its sweep.json, and one written before the rename as its search.json
    folder = tmp_path / "sweep"
    folder.mkdir()
    shutil.copy(SWEEPS / "h200_q8_fa3_flashmla_eager.json", folder / "search.json")
    again = tmp_path / "again.json"
    assert run("dispatch", str(folder), "-o", str(again)).returncode == 0
    assert json.loads(again.read_text(encoding="utf-8"))["families"] == doc["families"]
    # the graphs search kept one point (its 32k end was refused): a table of one ctx
    graphs = tmp_path / "graphs.json"
    assert run("dispatch", str(SWEEPS / "h200_q8_fa3_flashmla_graphs.json"), "-o", str(graphs)).returncode == 0
    (fam,) = json.loads(graphs.read_text(encoding="utf-8"))["families"]
    assert fam["measured_ctx"] == [900_000] and [s["backend"] for s in fam["dispatch"]] == ["flashmla"]
    # eager and graphs: one table each, compared (tests/test_dispatch_modes.py); the graphs table of one point
    # picks flashmla at every ctx, so below the eager breakpoint the choice differs where graphs measured nothing
    both = run(
        "dispatch", str(SWEEPS / "h200_q8_fa3_flashmla_eager.json"), str(SWEEPS / "h200_q8_fa3_flashmla_graphs.json")
    )
    assert both.returncode == 0, both.stderr
    assert "the choice differs in: < 162,794: eager fa3, graphs flashmla (no graphs point inside)" in both.stdout
    # two sweeps of one family in one mode are still two answers to one question
    twice = run("dispatch", str(SWEEPS / "h200_q8_fa3_flashmla_eager.json"), str(EAGER_LEAD))
    assert twice.returncode == 2 and twice.stderr.count("\n") == 1 and "one sweep per family and mode" in twice.stderr


@pytest.mark.slow
def test_sweeps_and_traces_pool_by_family(tmp_path: Path) -> None:
    q1 = sweep(tmp_path / "q1.sqlite", {f"q1_ctx{c}k_b4": {"fa3": 10 + 0.2 * c, "fa2": 20 + 0.5 * c} for c in CTX})
    out = tmp_path / "t.json"
    done = run("dispatch", str(SWEEPS / "h200_q8_fa3_flashmla_eager.json"), str(q1), "-o", str(out))
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert sorted(f["family"] for f in doc["families"]) == ["q1_ctx*_b4", "q8_ctx*"]
    assert backend_for(doc, "q1_ctx64k_b4") == "fa3" and backend_for(doc, "q8_ctx900k") == "flashmla"
    # the same family from a sweep and a trace: pooled by shape (the bisection sees only its bracket)
    pooled = tmp_path / "pooled.json"
    same = run("dispatch", str(SWEEPS / "h200_q8_fa3_flashmla_eager.json"), str(EXAMPLE), "-o", str(pooled))
    assert same.returncode == 0, same.stderr
    assert "q8_ctx*: pooled the sweep's gated points with 3 other shapes of the traces" in same.stderr
    (fam,) = json.loads(pooled.read_text(encoding="utf-8"))["families"]
    # the sweep's six ctx, and the shipped sweep's 8k, 131k, 512k (its 32k and 900k: the sweep's points)
    assert fam["measured_ctx"] == [8_000, 32_000, 73_800, 112_000, 131_000, 138_000, 170_000, 512_000, 900_000]
    # a run folder that says it ran eager, beside a --graphs sweep of its family: not pooled, compared; the
    # 5-point eager trace puts the breakpoint at ≈238k, so under graphs it ships fa3 at 153k and 170k
    folder = tmp_path / "eager_run"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "trace.sqlite")
    (folder / "runner.json").write_text(json.dumps({"protocol": {"graphs": False}}), encoding="utf-8")
    modes = tmp_path / "modes.json"
    mixed = run("dispatch", str(SWEEPS / "h200_q8_fa3_flashmla_graphs_lead.json"), str(folder), "-o", str(modes))
    assert mixed.returncode == 0, mixed.stderr
    (fam,) = json.loads(modes.read_text(encoding="utf-8"))["families"]
    assert [(r["ctx_from"], r["ctx_to"], r["graphs_measured"]) for r in fam["flip_ranges"]] == [
        (151_809, 237_574, [153_000, 170_000])]  # fmt: skip
    assert fam["regret_under_graphs"]["eager_table"]["max"] == pytest.approx(108.367 / 102.1435 - 1)
    bad = tmp_path / "other.json"
    bad.write_text('{"schema": "traceattr.dispatch/2"}', encoding="utf-8")
    wrong = run("dispatch", str(bad))
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1 and "unreadable sweep record" in wrong.stderr
