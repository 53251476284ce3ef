"""Who wins a shape: the fastest backend, declared only where every other one is really slower.

The backend with the lowest median is the shape's *winner* only when, for
every other backend, the interval of the ratio of medians (other / fastest,
from the per-call spans; :func:`traceattr.analysis.stats.compare_samples`) says
``slower``. Otherwise the backends whose interval does not say so *tie* with
the fastest "within noise (±x%)", x being how far the widest of their
intervals reaches from 1. An arm that runs the same program as the fastest
(a :data:`SameProgram` fact its caller passes, :func:`traceattr.backends.arms.same_program` from
the commands: fa3-per-token at q = 1 is fa3) is no
competitor: it neither wins, nor ties, nor makes the fastest lose its title.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import polars as pl

from traceattr.analysis.calls import comparable
from traceattr.analysis.stats import Comparison, compare_samples

Samples = dict[tuple[str, str], np.ndarray]
# (arm, arm, shape) -> whether the two arms run one GPU program at that shape. The analysis knows no
# backends (it runs on traces from anywhere): the layer that does passes the fact in.
SameProgram = Callable[[str, str, str], bool]


def same_label(arm_a: str, arm_b: str, _shape: str) -> bool:
    """What the analysis knows by itself: an arm is the same program as itself (an A/A comparison)."""
    return arm_a == arm_b


VERDICT_SCHEMA = {
    "shape": pl.String,
    "backend": pl.String,
    "vs_best_low": pl.Float64,  # interval of ratio_to_best (median / the fastest backend's median)
    "vs_best_high": pl.Float64,
    "verdict": pl.String,  # winner | tie | slower | same program | alone
    "same_program_as": pl.String,  # the arm whose program this arm runs (the plainest label of the twins)
    "winner": pl.Boolean,  # a declared winner (verdict "winner")
    "tie_pct": pl.Float64,  # per shape, where no winner is declared: the ±x% of the tie
}


def call_samples(calls: pl.DataFrame, time: str = "gpu_span_ns") -> Samples:
    """Per-call times (ns; column *time*, the chosen basis: :data:`traceattr.analysis.bases.BASES`) of each
    (shape, backend) of *calls* (shape and backend filled).

    Only shapes measured with two or more backends: the others are never compared.
    """
    per = calls.lazy().select("shape", "backend", pl.col(time).cast(pl.Float64)).filter(comparable()).collect()
    # a frame per (shape, backend), each call in its row order, as arrays (not a list of Python floats per call)
    parts = per.partition_by("shape", "backend", as_dict=True, maintain_order=True)
    return {(s, b): part[time].drop_nulls().to_numpy().astype(float) for (s, b), part in parts.items()}


def compare_arms(samples: Samples, shape: str, baseline: str, candidate: str) -> Comparison:
    """*candidate* vs *baseline* at *shape*: ratio of median spans with its interval and verdict."""
    return compare_samples(samples[(shape, baseline)], samples[(shape, candidate)])


def shape_verdicts(summary: pl.DataFrame, samples: Samples, same_program: SameProgram = same_label) -> pl.DataFrame:
    """One row per (shape, backend) of *summary* (``shape, backend, median_us``): see :data:`VERDICT_SCHEMA`."""
    rows: list[tuple] = []
    ordered = summary.select("shape", "backend", "median_us").sort("shape", "median_us", "backend")
    # a shape measured with one backend only is "alone" (no comparison): done in one step, as foreign
    # traces may have thousands of such series
    several = comparable()
    alone = ordered.filter(~several).select(
        "shape", "backend", pl.lit(None, pl.Float64).alias("vs_best_low"), pl.lit(None, pl.Float64).alias("vs_best_high"),
        pl.lit("alone").alias("verdict"), pl.lit(None, pl.String).alias("same_program_as"), pl.lit(False).alias("winner"),
        pl.lit(None, pl.Float64).alias("tie_pct"),
    )  # fmt: skip
    for shape, backends in ordered.filter(several).group_by("shape", maintain_order=True).agg("backend").iter_rows():
        twin_of = _twins(backends, shape, same_program)
        best, *others = [b for b in backends if b not in twin_of]
        mine: list[tuple] = [(b, None, None, "same program", a) for b, a in twin_of.items()]
        noise = 0.0
        for other in others:
            cmp = compare_arms(samples, shape, best, other)
            # "slower": the interval lies above 1 + tolerance; anything else does not exclude a tie
            verdict = "slower" if cmp.verdict == "slower" else "tie"
            if verdict == "tie":
                noise = max(noise, cmp.noise) if math.isfinite(cmp.noise) else math.inf
            mine.append((other, cmp.low, cmp.high, verdict, None))
        competitors = [m for m in mine if m[3] != "same program"]
        tied = any(m[3] == "tie" for m in competitors)
        verdict = "alone" if not competitors else "tie" if tied else "winner"
        mine.insert(0, (best, 1.0, 1.0, verdict, None))
        tie_pct = 100 * noise if tied else None
        rows += [(shape, *m, m[3] == "winner", tie_pct) for m in mine]
    return pl.concat([pl.DataFrame(rows, schema=VERDICT_SCHEMA, orient="row"), alone.cast(VERDICT_SCHEMA)])  # type: ignore[arg-type]


def _twins(backends: list[str], shape: str, same_program: SameProgram) -> dict[str, str]:
    """Arm -> the arm whose program it runs, at *shape*. Of arms that run one program the plainest label (the
    shortest, then by name: fa3 before fa3-per-token) stands for the program, wherever the medians put the
    others: which twin is a hair faster is noise, and must not change the name a verdict or a dispatch gives."""
    canon = sorted(backends, key=lambda b: (len(b), b))
    twin_of: dict[str, str] = {}
    for i, b in enumerate(canon):
        owner = next((a for a in canon[:i] if a not in twin_of and same_program(a, b, shape)), None)
        if owner is not None:
            twin_of[b] = owner
    return twin_of
