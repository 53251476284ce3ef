"""One decision, every surface: the terminal, ``compare --json``, ``traceattr dispatch`` and the HTML report all
say the same winner, tie and dispatch per shape and family, on the cases where they used to disagree.

Each case is a constructed sweep trace (tests.test_dispatch_table.sweep: ABBA calls, 0.2% noise); the decision
is computed once by the library (``traceattr.open(path).decide()``) and every surface is read back and compared
with it, so a surface that decides on its own fails here.
"""

from __future__ import annotations

import html
import json
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import traceattr
from tests.helpers import run, sweep
from traceattr.analysis.decision import Decision
from traceattr.present.dispatch import backend_for
from traceattr.present.verdicts import family_line, shape_line

CTX = (8, 32, 131, 512, 900)


def _case_variant_at_one_ctx() -> dict[str, dict[str, float]]:
    """``concurrent/fa3`` measured at one ctx beside fa3 and flashmla at all (the terminal said "no rule")."""
    times = {f"q1_ctx{c}k": {"fa3": 20 + 0.3 * c, "flashmla": 30 + 0.35 * c} for c in CTX}
    times["q1_ctx131k"]["concurrent/fa3"] = (20 + 0.3 * 131) * 0.95  # faster there, measured nowhere else
    return times


def _case_same_program() -> dict[str, dict[str, float]]:
    """fa3 and fa3-per-token at q1 (one program; the per-token twin a hair faster at some ctx), flashmla slower."""
    out = {}
    for i, c in enumerate(CTX):
        t = 20 + 0.3 * c
        out[f"q1_ctx{c}k"] = {"fa3": t, "fa3-per-token": t * (0.997 if i % 2 else 1.003), "flashmla": t * 1.3}
    return out


def _case_three_backends() -> dict[str, dict[str, float]]:
    """Three backends, two switches along ctx: one line of three segments (the terminal printed two rules)."""
    out = {}
    for c in (8, 32, 64, 131, 262, 512, 900):
        out[f"q2_ctx{c}k"] = {"fa3-per-token": 10 + 0.50 * c, "flashmla": 25 + 0.30 * c, "fa3": 80 + 0.2 * c}
    return out


CASES = {"variant": _case_variant_at_one_ctx, "twins": _case_same_program, "three": _case_three_backends}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return run(*args, env={"COLUMNS": "200"})


EXAMPLES = Path(__file__).parents[1] / "examples" / "traces"
SHIPPED = sorted(p.name for p in EXAMPLES.glob("*.sqlite"))


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Decision]:
    path = sweep(tmp_path_factory.mktemp(request.param) / "s.sqlite", CASES[request.param]())
    return request.param, path, traceattr.open(path).decide()


@pytest.fixture(scope="module", params=SHIPPED)
def shipped(request: pytest.FixtureRequest) -> tuple[str, Path, Decision]:
    path = EXAMPLES / request.param
    return request.param, path, traceattr.open(path).decide()


def test_the_decision_is_what_each_case_needs(case: tuple[str, Path, Decision]) -> None:
    name, _, decision = case
    (fam,) = decision.families
    arms = [s.backend for s in fam.segments]
    if name == "variant":  # the partial arm is named beside the rule, not a reason for "no rule"
        assert arms == ["fa3"] and fam.outcome == "one backend"
        assert [(x.arm, x.why, x.measured, x.of) for x in fam.left_out] == [("concurrent/fa3", "partial", 1, 5)]
        assert "concurrent/fa3 measured at 1 of 5 ctx" in "\n".join(x.text() for x in fam.left_out)
    elif name == "twins":  # the plainest label stands for the program, whichever twin is a hair faster
        assert arms == ["fa3"] and [(x.arm, x.why, x.as_arm) for x in fam.left_out] == [
            ("fa3-per-token", "same program", "fa3")
        ]
        assert all(v.backend == "fa3" and v.outcome == "winner" and v.runner_up == "flashmla" for v in decision.shapes)
    else:  # one line, three segments, every switch decided
        assert arms == ["fa3-per-token", "flashmla", "fa3"] and fam.outcome == "rule" and len(fam.rules) == 2


def _every_surface_says(path: Path, decision: Decision, tmp_path: Path) -> None:
    """The terminal, compare --json, traceattr dispatch and the HTML report against the one decision."""
    # the terminal: each family's line and each shape's line, as the decision words them
    done = _run("compare", str(path), "--json", str(tmp_path / "v1.json"))
    assert done.returncode == 0, done.stderr
    terminal = done.stdout
    lined = [f for f in decision.families if len(f.ctx) > 1]
    for fam in lined:
        assert f"{fam.family}: {family_line(fam)}" in terminal
    for v in decision.shapes:
        assert shape_line(v) in " ".join(terminal.split()) or shape_line(v) in terminal, v.shape
    assert "no rule: no one backend" not in terminal
    # compare --json (dispatch/1) and traceattr dispatch (dispatch/2): the same segments, so the same backend
    v1 = json.loads((tmp_path / "v1.json").read_text(encoding="utf-8"))
    done = _run("dispatch", str(path), "-o", str(tmp_path / "v2.json"))
    assert done.returncode == 0, done.stderr
    v2 = json.loads((tmp_path / "v2.json").read_text(encoding="utf-8"))
    segments = {f.family: [(s.ctx_from, s.ctx_to, s.backend) for s in f.segments] for f in decision.families}
    for doc in (v1, v2):
        for f in doc["families"]:
            assert [(s["ctx_from"], s["ctx_to"], s["backend"]) for s in f["dispatch"]] == segments[f["family"]]
    for fam in decision.families:
        for ctx in (*fam.ctx, 4_000, 2_000_000):
            shape = next(p.shape for p in fam.points) if fam.points else None
            if shape is None:
                continue
            name = shape.replace(f"ctx{shape.split('ctx')[1].split('_')[0]}", f"ctx{ctx}")
            assert backend_for(v1, name) == fam.backend_at(ctx), name
            if any(f["family"] == fam.family for f in v2["families"]):
                assert backend_for(v2, name) == fam.backend_at(ctx), name
    # the HTML report: each family's line and every shape's answer, in the same words
    done = _run("report", str(path), "-o", str(tmp_path / "r.html"))
    assert done.returncode == 0, done.stderr
    page = html.unescape((tmp_path / "r.html").read_text(encoding="utf-8"))
    for fam in lined:
        assert family_line(fam) in page
    for v in decision.shapes:
        assert v.backend in page and (v.outcome != "winner" or f"next: {v.runner_up}" in page), v.shape


@pytest.mark.slow
def test_every_surface_says_the_decision(case: tuple[str, Path, Decision], tmp_path: Path) -> None:
    _, path, decision = case
    _every_surface_says(path, decision, tmp_path)


@pytest.mark.slow
def test_every_surface_says_the_decision_on_the_shipped_examples(
    shipped: tuple[str, Path, Decision], tmp_path: Path
) -> None:
    _, path, decision = shipped
    assert decision.shapes
    _every_surface_says(path, decision, tmp_path)


def test_the_decision_as_data(case: tuple[str, Path, Decision]) -> None:
    """The facade returns the record, and its JSON round-trips (what a notebook or CI reads)."""
    _, _, decision = case
    doc = json.loads(json.dumps(decision.to_json()))
    assert doc["schema"] == "traceattr.decision/1" and doc["same_within"] == 0.01
    (fam,) = doc["families"]
    assert [s["backend"] for s in fam["dispatch"]] == [s.backend for s in decision.families[0].segments]
    assert {s["shape"]: s["backend"] for s in doc["shapes"]} == {v.shape: v.backend for v in decision.shapes}


@pytest.mark.slow
def test_fail_on_exits_with_its_own_status(case: tuple[str, Path, Decision]) -> None:
    """A CI gate: the answer is printed, then each condition met is named and the status is 3 (not 1, a bug)."""
    name, path, decision = case
    loser = "flashmla"
    done = _run("compare", str(path), "--fail-on", f"loses:{loser}")
    slower = [
        v.shape for v in decision.shapes if v.outcome == "winner" and v.backend != loser and loser in v.medians_us
    ]
    assert done.returncode == (3 if slower else 0), done.stderr
    assert "Verdict" in done.stdout  # the answer first, whatever the gate says
    if slower:
        assert f"fail: --fail-on loses:{loser}: {loser} is really slower than the winner at" in done.stderr
    winner_everywhere = decision.families[0].segments[0].backend
    if name == "twins":  # fa3 wins everywhere (its twin never counts against it)
        assert _run("compare", str(path), "--fail-on", f"loses:{winner_everywhere}").returncode == 0
    if name == "variant":  # the partial arm wins where it was measured: fa3 loses there, and the gate says so
        assert _run("compare", str(path), "--fail-on", f"loses:{winner_everywhere}").returncode == 3
    bad = _run("compare", str(path), "--fail-on", "sometimes")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a condition" in bad.stderr


RECORD = "cudaEventRecordWithFlags_v11010"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul>>(int, T2, T3)"


def _flush_inside(path: Path, events: bool = False) -> Path:
    """q8 calls whose ranges hold a nested L2-flush range (a 79.8 µs fill kernel) before the attention: fa3 40.9 µs,
    FlashMLA 60 µs of split + combine (a trace layout from another tool)."""
    from tests.helpers import COMBINE, FA3, SPLIT
    from tests.synth.builder import TraceBuilder

    b = TraceBuilder()
    t, us = 1_000_000, 1_000
    rng = np.random.default_rng(3)
    for shape in ("q8_ctx32k", "q8_ctx131k"):
        scale = 1.0 if shape == "q8_ctx32k" else 3.0
        for it in range(12):
            for backend in ("fa3", "flashmla") if it % 2 == 0 else ("flashmla", "fa3"):
                jitter = 1 + 0.002 * rng.standard_normal()
                b.push_range(tid=1, start=t, end=t + 50 * us, message=f"backend={backend} shape={shape} iter={it}")
                if events:  # the tool's own CUDA events around the call, recorded inside its range
                    b.api_call(tid=1, start=t + 90 * us // 100, end=t + us, name=RECORD)
                    b.api_call(tid=1, start=t + 49 * us, end=t + 49 * us + 200, name=RECORD)
                b.push_range(tid=1, start=t + 1 * us, end=t + 2 * us, message="l2_flush")
                g = t + 100 * us
                b.launch(tid=1, start=t + 1 * us, end=t + 1 * us + 500, kernel=FILL, gpu_start=g, gpu_end=g + 79_800)
                g += 80_000
                if backend == "fa3":
                    d = int(40_900 * scale * jitter)
                    b.launch(tid=1, start=t + 3 * us, end=t + 3 * us + 500, kernel=FA3, gpu_start=g, gpu_end=g + d)
                else:
                    d = int(48_000 * scale * jitter)
                    b.launch(tid=1, start=t + 3 * us, end=t + 3 * us + 500, kernel=SPLIT, gpu_start=g, gpu_end=g + d)
                    b.launch(tid=1, start=t + 4 * us, end=t + 4 * us + 500, kernel=COMBINE, gpu_start=g + d - 2_000,
                             gpu_end=g + d + int(12_000 * scale * jitter))  # fmt: skip
                t += 1_500 * us
    return b.write(path)


@pytest.mark.slow
def test_a_flush_inside_the_calls_is_said_and_the_basis_is_chosen(tmp_path: Path) -> None:
    path = _flush_inside(tmp_path / "flush.sqlite")
    span = traceattr.open(path).decide()
    assert span.provenance.basis == "span" and span.provenance.note is not None
    assert "NVTX ranges nested inside them" in span.provenance.note and "--time attention" in span.provenance.note
    done = _run("compare", str(path))
    assert done.returncode == 0, done.stderr
    shown = " ".join(done.stdout.split())  # the terminal wraps the line
    assert f"note: {span.provenance.note}" in shown  # on screen, with the verdict
    att = traceattr.open(path).decide(basis="attention")
    for name in ("q8_ctx32k", "q8_ctx131k"):
        s, a = span.shape(name), att.shape(name)
        assert s is not None and a is not None and s.backend == a.backend == "fa3"
        assert s.margin is not None and a.margin is not None and s.margin.value is not None
        # span: (79.8 + 60) / (79.8 + 40.9) = 1.16 at 32k; attention alone: 60 / 40.9 = 1.47
        expected = (48_000 + 12_000) / 40_900
        assert a.margin.value == pytest.approx(expected, rel=0.01) and s.margin.value < a.margin.value - 0.1
        assert a.margin.low is not None and a.margin.low <= expected * 1.01 and a.margin.high >= expected * 0.99
    assert att.provenance.basis == "attention" and "attention and reduce kernels" in att.provenance.statistic
    done = _run("compare", str(path), "--time", "attention", "--json", str(tmp_path / "a.json"))
    assert done.returncode == 0 and "each call's attention time" in done.stdout
    assert json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))["basis"] == "attention"
    bad = _run("compare", str(path), "--time", "events")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no call has CUDA-event times" in bad.stderr


def test_a_nested_flush_marked_by_a_rule_leaves_the_work_basis(tmp_path: Path) -> None:
    """--rules marks the nested range's kernels as flush; --time work then compares the calls without them."""
    path = _flush_inside(tmp_path / "flush.sqlite")
    rules = tmp_path / "rules.toml"
    rules.write_text('version = 1\n\n[[rule]]\nrole = "flush"\nfamily = "their-flush"\nrange = \'l2_flush\'\n')
    work = traceattr.open(path).decide(basis="work", rules=rules)
    assert work.provenance.note is not None and "flush-role kernels" in work.provenance.note
    v = work.shape("q8_ctx32k")
    assert v is not None and v.margin is not None and v.margin.value == pytest.approx(60_000 / 40_900, rel=0.01)


@pytest.mark.slow
def test_no_printed_win_has_an_interval_touching_1() -> None:
    """Every 'wins by R× [L–H]' the shipped examples print has L visibly above 1 (enough digits to show it)."""
    import re

    from traceattr.present.formats import times_with_interval

    assert times_with_interval(1.02, 1.004, 1.136) == "1.020× [1.004–1.136]"  # 2 digits would read [1.00–1.14]
    assert times_with_interval(1.07, 1.06, 1.08) == "1.07× [1.06–1.08]"
    examples = Path(__file__).parents[1] / "examples" / "traces"
    seen = 0
    for trace in sorted(examples.glob("*.sqlite")):
        out = _run("compare", str(trace)).stdout
        for low in re.findall(r"wins by [0-9.]+× \[([0-9.]+)–", out):
            seen += 1
            assert float(low) > 1 and low.rstrip("0") != "1.", (trace.name, low)
    assert seen >= 5


def test_the_traces_own_cuda_events_are_a_basis(tmp_path: Path) -> None:
    """A trace with a cudaEventRecord pair inside each call: --time events compares start-to-stop event times
    (span + the stream's idle before the first op + the tail after the last), read from the trace itself."""
    path = _flush_inside(tmp_path / "events.sqlite", events=True)
    a = traceattr.open(path).analyse(basis="events")
    c = a.calls.with_columns((pl.col("gpu_span_ns") + pl.col("event_lead_ns") + pl.col("event_tail_ns")).alias("ev"))
    medians = dict(c.filter(pl.col("shape") == "q8_ctx32k").group_by("backend").agg(pl.col("ev").median()).iter_rows())
    v = a.decision.shape("q8_ctx32k") if a.decision is not None else None
    assert v is not None and v.margin is not None and a.decision is not None
    assert v.margin.value == pytest.approx(max(medians.values()) / min(medians.values()), rel=1e-6)
    assert a.decision.provenance.basis == "events" and "cudaEventRecord" in a.decision.provenance.statistic
