"""``traceattr sweep``: find where the faster arm changes along ctx by bisection, one capture per step.

A sweep takes arms and a shape family with ctx left open (``q8_ctx*``) over a ctx range. Step 1
captures both ends in one ``traceattr profile`` run; the fastest arm (lowest median) at the low end
is ``below``, at the high end ``above``. Each later step captures the one ctx that
:func:`traceattr.analysis.sweep_steps.decide` asks for, until it answers (a crossover bracketed to the
width, a tie band, several crossovers, no crossover, a ctx refused twice, or the step budget spent).
Every point goes through a round's comparison and gates (:func:`traceattr.analysis.rounds.round_rows`:
ratio of medians with its interval over the paired calls, directional, clock, parity, both arms ran),
so a refused point is never used; it is measured once more, an end as an interior point. The arm
order alternates between steps, ABBA inside each. The step budget is
:func:`~traceattr.analysis.sweep_steps.default_steps` of the range and width unless ``max_steps`` caps it.

Captures go through an *executor* (:data:`traceattr.jobs.round.Executor`; default
:func:`~traceattr.jobs.round.profile_executor`, which needs a GPU and nsys), so the sweep is tested on
CPU with a fake. The sweep folder holds one run folder per step (``step-1``, …) and ``sweep.json``
(:class:`traceattr.core.records.SweepRecord`), rewritten after every step: an interrupted sweep
keeps its steps; a finished one has a ``result``. Eager and ``--graphs`` are separate sweeps.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from traceattr import __version__
from traceattr.analysis.rounds import Capture, Gates, Row, round_rows
from traceattr.analysis.sweep_steps import (
    RETRIES,
    RETRY_ROOM,
    Decision,
    Point,
    decide,
    default_steps,
    halvings,
    side_of,
)
from traceattr.core.errors import TraceattrError
from traceattr.core.output import write_manifest
from traceattr.core.protocol import SWEEP, Protocol
from traceattr.core.records import MAX_STEPS, SWEEP_FILE, SweepRecord
from traceattr.core.shapes import Shape, ShapeError, parse_shape
from traceattr.jobs.profile import ProfilePlan
from traceattr.jobs.round import TIMING, CaptureRequest, Executor, RoundPlan, arm_label, profile_executor

WIDTH = 0.1  # a sweep stops when the crossover is bracketed within ± this fraction of its ctx


def family_shape(family: str, ctx: int) -> Shape:
    """The shape of *family* (``q8_ctx*``: ctx left open as ``ctx*`` or ``kv*``) at *ctx*."""
    if len(re.findall(r"(?:^|_)(?:ctx|kv)\*(?:_|$)", family)) != 1:
        raise TraceattrError(f"--family {family!r}: leave ctx open once, as ctx* (e.g. q8_ctx*)")
    return parse_shape(re.sub(r"(^|_)(ctx|kv)\*(?=_|$)", rf"\g<1>ctx{ctx}", family))


def ctx_range(text: str) -> tuple[int, int]:
    """``8k:1m`` → (8000, 1000000), through the shape grammar's numbers."""
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ShapeError("expected LOW:HIGH")
        low, high = (parse_shape(f"q1_ctx{p.strip()}").ctx for p in parts)
    except ShapeError as err:
        raise TraceattrError(f"--ctx-range {text!r}: {str(err).split(': ')[-1]} (e.g. 8k:1m)") from None
    if low >= high:
        raise TraceattrError(f"--ctx-range {text!r}: the low end must be below the high end")
    return low, high


@dataclass(frozen=True)
class SweepPlan:
    family: str  # as given, ctx left open
    arms: tuple[str, ...]  # arm texts
    ctx_low: int
    ctx_high: int
    folder: Path
    width: float = WIDTH  # ± fraction of ctx
    max_steps: int | None = None  # captures, the ends' included; None: default_steps of the range and width
    protocol: Protocol = SWEEP  # each step is a one-round comparison, measured as a round measures
    gates: Gates = field(default_factory=Gates)

    def __post_init__(self) -> None:
        if len(self.arms) < 2 or len({arm_label(a) for a in self.arms}) != len(self.arms):
            raise TraceattrError("give two or more arms with distinct labels (-b fa3 -b flashmla)")
        if not 0 < self.width < 1:
            raise TraceattrError(f"--width must lie in (0, 1) (0.1: ±10% of ctx), got {self.width}")
        if not 2 <= self.budget <= MAX_STEPS:
            raise TraceattrError(f"--max-steps must lie in [2, {MAX_STEPS}] (step 1 measures both ends)")
        for ctx in (self.ctx_low, self.ctx_high):
            family_shape(self.family, ctx)  # the family and both ends parse
        self.round_plan  # noqa: B018 - a round's checks of the timing options, once, before any capture

    @property
    def budget(self) -> int:
        """The captures this sweep may run: ``max_steps`` as given, else what the range and width need."""
        if self.max_steps is not None:
            return self.max_steps
        return default_steps(self.ctx_low, self.ctx_high, self.width)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(arm_label(a) for a in self.arms)

    @property
    def graphs(self) -> bool:
        return self.protocol.graphs

    @property
    def round_plan(self) -> RoundPlan:
        """The capture settings as a one-round plan (what the executor reads)."""
        ends = tuple(Row(s.name, s.name) for s in self.shapes(self.ctx_low, self.ctx_high))
        return RoundPlan(rows=ends, baseline=self.arms[0], candidate=self.arms[1], folder=self.folder, captures=1,
                         protocol=self.protocol, gates=self.gates, rows_source=self.family)  # fmt: skip

    def describe(self) -> str:
        """One line: what is searched, over which range, to what width, in at most how many captures."""
        mode = "graphs" if self.graphs else "eager"
        return (f"sweep {self.family} over {self.ctx_low:,}–{self.ctx_high:,} ctx ({mode}): {', '.join(self.labels)}; "
                f"±{self.width:g} of ctx, at most {self.budget} captures; folder {self.folder}")  # fmt: skip

    def shapes(self, *ctx: int) -> tuple[Shape, ...]:
        return tuple(family_shape(self.family, c) for c in ctx)

    def request(self, step: int, ctx: tuple[int, ...]) -> CaptureRequest:
        """Step *step* (1-based): the arms reversed on even steps, as a round alternates them."""
        arms = self.arms if step % 2 else tuple(reversed(self.arms))
        shapes = tuple(s.name for s in self.shapes(*ctx))
        return CaptureRequest(step - 1, shapes, arms, "abba", self.folder / f"step-{step}")

    def header(self) -> dict[str, Any]:
        p = self.round_plan.protocol
        return {
            "tool": "traceattr", "version": __version__, "command": "sweep", "argv": sys.argv,
            "family": family_shape(self.family, self.ctx_low).family, "arms": list(self.arms),
            "labels": list(self.labels), "ctx_range": [self.ctx_low, self.ctx_high], "width": self.width,
            "max_steps": self.budget, "graphs": self.graphs,
            # the default budget: 1 (both ends) + halvings + retries; "--max-steps" when given
            "max_steps_from": "--max-steps" if self.max_steps is not None else "default",
            "halvings": halvings(self.ctx_low, self.ctx_high, self.width), "retry_room": RETRY_ROOM * RETRIES,
            "protocol": {"iters": p.iters, "warmup": p.warmup, "max_noise": p.max_noise, "max_iters": p.max_iters,
                         "hold_us": p.hold_us, "lead": p.lead, "between": p.between, "flush_bytes": p.flush_bytes,
                         "order": "abba, arm order alternating between steps", "seed": p.seed, "timing": TIMING},
            "gates": self.gates.to_json(),
        }  # fmt: skip


def plan_sweep(
    family: str, arms: tuple[str, ...], ctx_range_text: str, out_root: Path, *, width: float = WIDTH,
    max_steps: int | None = None, protocol: Protocol = SWEEP,
) -> SweepPlan:  # fmt: skip
    """The plan of ``traceattr sweep``: the sweep over ``LOW:HIGH``, its folder named for the family and mode."""
    low, high = ctx_range(ctx_range_text)
    mode = "graphs" if protocol.graphs else "eager"
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "", family.replace("*", ""))  # q8_ctx*: …_sweep_q8_ctx_eager, not ctxx
    folder = out_root / f"{time.strftime('%Y%m%d-%H%M%S')}_sweep_{safe}_{mode}"
    return SweepPlan(family=family, arms=arms, ctx_low=low, ctx_high=high, folder=folder, width=width,
                      max_steps=max_steps, protocol=protocol)  # fmt: skip


def first_step_plan(plan: SweepPlan) -> ProfilePlan:
    """Step 1's capture, both ends in one run folder (what ``--dry-run`` shows and the GPU check reads)."""
    from traceattr.jobs.profile import make_plan

    ends = (plan.ctx_low, plan.ctx_high)
    request = plan.request(1, ends)
    return replace(make_plan(list(plan.shapes(*ends)), request.arms, plan.protocol), folder=request.folder)


def medians_us(calls: pl.DataFrame, shape: str) -> dict[str, float]:
    """Each arm's median GPU span at *shape* (µs), fastest first."""
    per = (
        calls.filter(pl.col("shape") == shape)
        .group_by("backend")
        .agg((pl.col("gpu_span_ns").median() / 1e3).alias("us"))
        .drop_nulls()
        .sort("us", "backend")
    )
    return dict(per.iter_rows())


def measure_point(capture: Capture, shape: Shape, below: str, above: str, gates: Gates) -> tuple[Point, dict[str, Any]]:
    """The point at *shape* from *capture*: ``above`` against ``below`` with a round's gates; and its record."""
    row = round_rows([Row(shape.name, shape.name)], [capture], below, above, gates).row(0, named=True)
    passed = row["status"] == "pass"
    point = Point(
        shape.ctx,
        side_of(row["verdict"], passed),
        row["ratio"],
        row["low"],
        row["high"],
        "" if passed else row["refused_by"] or row["status"],
    )
    medians = medians_us(capture.calls, shape.name)
    record = {
        "ctx": shape.ctx, "shape": shape.name, "side": point.side, "status": row["status"],
        "refused_by": row["refused_by"], "verdict": row["verdict"], "ratio": row["ratio"], "low": row["low"],
        "high": row["high"], "pairs": row["pairs"], "noise": row["noise"], "medians_us": medians,
        "fastest": next(iter(medians), None),
        "gates": {k: row[k] for k in ("arms_gate", "arms_note", "directional", "directional_gate", "clock_fraction",
                                      "clock_mhz", "clock_gate", "parity", "parity_value", "parity_gate")},
    }  # fmt: skip
    return point, record


def run_sweep(
    plan: SweepPlan,
    executor: Executor = profile_executor,
    *,
    on_line: Callable[[str], None] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> SweepRecord:
    """Run the sweep of *plan* (module doc); sweep.json is rewritten after every step."""
    plan.folder.mkdir(parents=True, exist_ok=False)
    header = plan.header()
    protocol = plan.round_plan
    lines = on_line or (lambda _line: None)
    points: list[Point] = []
    steps: list[dict[str, Any]] = []
    below = above = ""
    ctx: tuple[int, ...] = (plan.ctx_low, plan.ctx_high)
    decision: Decision | None = None
    for step in range(1, plan.budget + 1):
        request = plan.request(step, ctx)
        started = time.time()
        capture = executor(request, protocol, lines)
        seconds = round(time.time() - started, 1)
        shapes = plan.shapes(*ctx)
        if step == 1:
            below, above = _pair(capture, shapes, plan.labels)
            header.update(below=below, above=above)
        recorded = []
        for shape in shapes:
            point, record = measure_point(capture, shape, below, above, plan.gates)
            points.append(point)
            recorded.append(record)
        decision = decide(points, plan.width, step, plan.budget)
        steps.append({"step": step, "folder": str(request.folder), "seconds": seconds, "points": recorded,
                      "decision": decision.to_json()})  # fmt: skip
        done = decision.done
        record = SweepRecord(header, tuple(steps), decision.to_json() if done else None)
        write_manifest(plan.folder, SWEEP_FILE, record.to_json())
        if on_step is not None:
            on_step(steps[-1])
        if done:
            return record
        ctx = (decision.next_ctx,)  # type: ignore[assignment]
    raise AssertionError("decide() ends a sweep when its steps are spent")  # pragma: no cover


def _pair(capture: Capture, ends: tuple[Shape, ...], labels: tuple[str, ...]) -> tuple[str, str]:
    """(below, above): the fastest arm at the low end, and at the high end (its runner-up there when the same)."""
    low, high = (medians_us(capture.calls, s.name) for s in ends)
    low = {b: t for b, t in low.items() if b in labels}
    high = {b: t for b, t in high.items() if b in labels}
    if not low or len(high) < 2:
        raise TraceattrError(
            f"{capture.folder}: step 1 timed too few arms at the ends ({', '.join(high) or 'none'}); see runner.json"
        )
    below = next(iter(low))
    above = next(b for b in high if b != below)
    return below, above
