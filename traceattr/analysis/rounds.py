"""Round receipts: is the candidate arm faster than the baseline over a set of rows, and may each row be trusted?

A round measures every row in ``N`` separate captures (each one ``traceattr
profile`` run: its calls and its runner.json), arm order alternating between
captures and ABBA inside each. Per row:

* over the paired calls (one pair per iteration per capture: the samples
  every number of the row comes from), each arm's median per capture, the
  median of those (the headline µs), ``ratio`` = candidate / baseline of the
  two, and its interval and verdict: all from one call of
  :func:`traceattr.analysis.stats.compare_samples`, grouped by capture;
* gates, each a status (``pass``, ``fail``, ``not measured``, ``off``) with
  its measured value, and a row is refused unless every gate passes or is off:

  - ``directional``: |median ratio of the pairs where the baseline ran first −
    median ratio of the pairs where the candidate ran first|; which arm ran
    first is read from the calls' GPU start times, not assumed from the plan;
  - ``clock``: the loaded SM clock while the row was timed (runner.json
    ``shapes[shape].clocks.fraction``, NVML median / max SM clock), the lowest
    over the captures;
  - ``parity``: outputs bitwise equal (``output_sha256``) when runner.json
    declares both arms the same ``program``; otherwise both arms passed the
    runner's check against the torch reference;
  - ``arms``: both arms ran in every capture.

``iters_captures`` and ``noise`` disclose the sampling: with a noise target the
runner adds iterations until each arm's median is that precise, so short noisy
rows get more calls than long steady ones; ``noise`` is the worst per-capture,
per-arm median noise of the spans themselves, and the receipt's markdown
(:mod:`traceattr.present.receipt`) notes a row above the target (its
interval is wider for it).

``sensitivity`` (optional, from captures run back to back instead of
interleaved): how far the ratio moves with the protocol; a faster/slower
verdict smaller than that is ``flagged``. Pure polars over frames and the
runner's records: the GPU side lives in :mod:`traceattr.jobs.round`, the
receipt.json format in :class:`traceattr.core.records.ReceiptRecord`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from traceattr.analysis.causes import cause_kinds, evidence, host_bound_refusal, row_evidence
from traceattr.analysis.stats import compare_samples, geomean
from traceattr.attribution.engine import Attribution
from traceattr.core.precision import median_noise
from traceattr.core.protocol import Gates as Gates  # the round's thresholds; defined with the protocol
from traceattr.core.records import RECEIPT_COLUMNS, ReceiptRecord, RunnerRecord, RunRecord

PASS, FAIL, NOT_MEASURED, OFF = "pass", "fail", "not measured", "off"
DEFAULT_GATES = Gates()
GATES = ("arms", "directional", "clock", "parity")

_DTYPES: dict[str, pl.DataType] = {"str": pl.String(), "int": pl.Int64(), "float": pl.Float64(),
                                   "bool": pl.Boolean(), "list[int]": pl.List(pl.Int64()),
                                   "list[float]": pl.List(pl.Float64()),
                                   "list[str]": pl.List(pl.String())}  # fmt: skip
# the receipt's columns (core.records.RECEIPT_COLUMNS names them and their JSON types) as a frame schema
RECEIPT_SCHEMA: dict[str, pl.DataType] = {name: _DTYPES[kind] for name, kind in RECEIPT_COLUMNS.items()}


@dataclass(frozen=True)
class Capture:
    """One capture of a round: its calls (analysis.calls) and the runner.json it wrote.

    ``attribution`` and ``run`` (its run.json) travel along when the capture was just made, so the
    round's report needs not read the trace again.
    """

    index: int  # 0-based, in the order they ran (-1: the back-to-back sensitivity capture)
    calls: pl.DataFrame
    runner: RunnerRecord
    folder: str | None = None
    order: str = "abba"  # "blocked": back to back (the sensitivity captures)
    attribution: Attribution | None = None
    run: RunRecord | None = None
    shapes: tuple[str, ...] | None = None  # the rows this capture was asked to time (None: every row)

    def has(self, shape: str) -> bool:
        return self.shapes is None or shape in self.shapes


@dataclass(frozen=True)
class Row:
    label: str  # as the user wrote it (a published row name, a shape)
    shape: str  # canonical shape name: what the runner and the calls carry


def samples(captures: Sequence[Capture], baseline: str, candidate: str) -> pl.DataFrame:
    """``capture, shape, iter, backend, arm, start_ns, t_us`` of both arms' calls over *captures* (``arm``: the
    call's letter in its capture, A for the arm listed and prepared first)."""
    parts = [
        c.calls.filter(pl.col("backend").is_in([baseline, candidate])).select(
            pl.lit(c.index, pl.Int64).alias("capture"),
            pl.col("shape").cast(pl.String),
            pl.col("iter").cast(pl.Int64),
            pl.col("backend").cast(pl.String),
            pl.col("arm").cast(pl.String),
            pl.col("gpu_start_ns").cast(pl.Int64).alias("start_ns"),
            (pl.col("gpu_span_ns") / 1e3).cast(pl.Float64).alias("t_us"),
        )
        for c in captures
    ]
    schema = {"capture": pl.Int64, "shape": pl.String, "iter": pl.Int64, "backend": pl.String, "arm": pl.String,
              "start_ns": pl.Int64, "t_us": pl.Float64}  # fmt: skip
    return pl.concat(parts) if parts else pl.DataFrame(schema=schema)


def pairs(s: pl.DataFrame, baseline: str, candidate: str) -> pl.DataFrame:
    """One row per (shape, capture, iter) where both arms ran: ``base_us, cand_us, ratio, first`` (arm that ran
    first), ``slot`` (1 when the baseline was not its capture's arm A: the captures alternate it)."""
    arm = pl.col("backend")
    return (
        s.group_by("shape", "capture", "iter")
        .agg(
            pl.col("t_us").filter(arm == baseline).first().alias("base_us"),
            pl.col("t_us").filter(arm == candidate).first().alias("cand_us"),
            arm.sort_by("start_ns").first().alias("first"),
            pl.col("arm").filter(arm == baseline).first().alias("_letter"),
        )
        .drop_nulls(["base_us", "cand_us"])
        .with_columns(
            (pl.col("cand_us") / pl.col("base_us")).alias("ratio"),
            (pl.col("_letter").fill_null("A") != "A").cast(pl.Int64).alias("slot"),
        )
        .drop("_letter")
        .sort("shape", "capture", "iter")
    )


def directional(p: pl.DataFrame, baseline: str, candidate: str) -> pl.DataFrame:
    """``shape, directional``: |median ratio (baseline first) − median ratio (candidate first)|; null if one order is missing."""
    first = pl.col("first")
    return p.group_by("shape").agg(
        (pl.col("ratio").filter(first == baseline).median() - pl.col("ratio").filter(first == candidate).median())
        .abs()
        .alias("directional")
    )


def span_noise(s: pl.DataFrame) -> dict[str, float]:
    """``{shape: worst median noise}`` over arms and captures, of the spans the verdict uses (NaN: too few calls).

    The runner's stopping rule reads CUDA events, which a slow host can widen; this is the noise of
    what the receipt reports.
    """
    worst: dict[str, float] = {}
    per = s.group_by("shape", "backend", "capture").agg(pl.col("t_us"))
    for shape, times in per.select("shape", "t_us").iter_rows():
        worst[shape] = max(worst.get(shape, 0.0), median_noise(times), key=lambda v: math.inf if math.isnan(v) else v)
    return worst


def round_medians(p: pl.DataFrame) -> pl.DataFrame:
    """``shape, capture, base_us, cand_us``: each arm's median per capture over the paired calls, in capture order."""
    return (
        p.group_by("shape", "capture")
        .agg(pl.col("base_us").median(), pl.col("cand_us").median())
        .sort("shape", "capture")
    )


def clock_gate(captures: Sequence[Capture], shape: str, min_clock: float) -> tuple[str, float | None, float | None]:
    """(status, lowest fraction over the captures, its SM clock MHz); any capture without a clock → not measured."""
    worst: tuple[float, float | None] | None = None
    missing = not captures
    for c in captures:
        clocks = c.runner.shape(shape).clocks
        fraction = clocks.loaded_fraction
        if fraction is None:
            missing = True
            continue
        if worst is None or fraction < worst[0]:
            worst = (fraction, clocks.mhz)
    value, mhz = worst if worst else (None, None)
    if min_clock <= 0:
        return OFF, value, mhz
    if missing:
        return NOT_MEASURED, value, mhz
    return (PASS if value is not None and value >= min_clock else FAIL), value, mhz


def arms_gate(
    captures: Sequence[Capture], shape: str, arms: Sequence[str], timed: set[tuple[int, str]]
) -> tuple[str, str]:
    """(status, why): both arms timed in every capture; *timed* holds (capture, arm) pairs seen in the calls."""
    problems = []
    for c in captures:
        for arm in arms:
            if (c.index, arm) in timed:
                continue
            entry = c.runner.check(shape, arm)
            why = entry.reason or entry.status or "no calls in the trace"
            problems.append(f"{arm} in capture {c.index + 1}: {why}")
    return (FAIL, "; ".join(dict.fromkeys(problems))) if problems else (PASS, "")


def parity_gate(
    captures: Sequence[Capture], shape: str, baseline: str, candidate: str, enabled: bool
) -> tuple[str, str, str]:
    """(status, mode, value): bitwise for arms declared the same program, else the runner's reference check."""
    programs = []
    for c in captures:
        b, k = c.runner.arms.get(baseline), c.runner.arms.get(candidate)
        programs.append(b is not None and k is not None and b.program is not None and b.program == k.program)
    bitwise = bool(captures) and all(programs)
    mode = "bitwise" if bitwise else "reference"
    if not enabled:
        return OFF, mode, ""
    if not captures:
        return NOT_MEASURED, mode, "no capture"
    if bitwise:
        for c in captures:
            sb = c.runner.check(shape, baseline).output_sha256
            sc = c.runner.check(shape, candidate).output_sha256
            if not sb or not sc:
                return NOT_MEASURED, mode, f"no output_sha256 in capture {c.index + 1}"
            if sb != sc:
                return FAIL, mode, f"outputs differ in capture {c.index + 1} ({str(sb)[:12]} vs {str(sc)[:12]})"
        return PASS, mode, "outputs bitwise equal"
    worst = 0.0
    for c in captures:
        for arm in (baseline, candidate):
            entry = c.runner.check(shape, arm)
            err = (
                entry.relative_error
                if entry.relative_error is not None and math.isfinite(entry.relative_error)
                else None
            )
            if entry.status == "wrong":
                return FAIL, mode, f"{arm}: {entry.reason if entry.reason is not None else 'wrong output'}"
            if err is None:
                return NOT_MEASURED, mode, f"{arm} not checked against the reference in capture {c.index + 1}"
            worst = max(worst, err)
    return PASS, mode, f"max relative error vs reference {worst:.2g}"


def _sensitivity(sens: Sequence[Capture], baseline: str, candidate: str) -> pl.DataFrame:
    """``shape, b_blocked, c_blocked``: each arm's median when timed back to back."""
    s = samples(sens, baseline, candidate)
    arm = pl.col("backend")
    return s.group_by("shape").agg(
        pl.col("t_us").filter(arm == baseline).median().alias("b_blocked"),
        pl.col("t_us").filter(arm == candidate).median().alias("c_blocked"),
    )


def round_rows(
    rows: Sequence[Row],
    captures: Sequence[Capture],
    baseline: str,
    candidate: str,
    gates: Gates = DEFAULT_GATES,
    *,
    sensitivity: Sequence[Capture] = (),
    attempt: int = 1,
    stopped: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """The receipt rows (:data:`RECEIPT_SCHEMA`) of one attempt at *rows* (see the module doc).

    A capture only covers the rows it was asked for (``Capture.shapes``): a row whose refusal was certain
    early is left out of the later captures, and *stopped* says why (row label → text).
    """
    if baseline == candidate:
        raise ValueError("baseline and candidate must be distinct arm labels")
    s = samples(captures, baseline, candidate)
    p = pairs(s, baseline, candidate)
    per_round = round_medians(p)
    dirs = dict(directional(p, baseline, candidate).iter_rows())
    timed = {(r, b, sh) for r, b, sh in s.select("capture", "backend", "shape").unique().iter_rows()}
    blocked = {sh: (b, c) for sh, b, c in _sensitivity(sensitivity, baseline, candidate).iter_rows()}
    noise = span_noise(s)
    split, hostbound = evidence(s, captures, baseline, candidate)
    out = []
    for row in rows:
        caps = [c for c in captures if c.has(row.shape)]
        sp = p.filter(pl.col("shape") == row.shape)
        rounds_us = per_round.filter(pl.col("shape") == row.shape)
        # one ratio of medians: the headline µs, their ratio and its interval, all over the paired calls
        # both arm orders of the captures weigh alike (stats.compare_samples: slots), however many each had
        cmp = compare_samples(sp["base_us"].to_numpy(), sp["cand_us"].to_numpy(), paired=True,
                              groups=sp["capture"].to_numpy(), slots=sp["slot"].to_numpy(),
                              confidence=gates.confidence, same_within=gates.same_within)  # fmt: skip
        b_us, c_us = _finite(cmp.baseline), _finite(cmp.candidate)
        ratio = _finite(cmp.ratio) if b_us and c_us else None
        seen = {(r, b) for r, b, sh in timed if sh == row.shape}
        iters_captures = sp.group_by("capture").len().sort("capture")["len"].to_list()
        a_status, a_note = arms_gate(caps, row.shape, (baseline, candidate), seen)
        d = dirs.get(row.shape)
        d_status = NOT_MEASURED if d is None else (PASS if d <= gates.directional_limit else FAIL)
        k_status, k_frac, k_mhz = clock_gate(caps, row.shape, gates.min_clock)
        p_status, p_mode, p_value = parity_gate(caps, row.shape, baseline, candidate, gates.parity)
        refused = []
        if a_status != PASS:
            refused.append(f"arms: {a_note}")
        if d_status != PASS:
            refused.append(
                f"directional {d:.4f} > {gates.directional_limit}" if d is not None else "directional not measured"
            )
        if k_status not in (PASS, OFF):
            refused.append(f"clock {k_frac:.2f} < {gates.min_clock}" if k_status == FAIL else "clock not measured")
        if p_status not in (PASS, OFF):
            refused.append(f"parity ({p_mode}): {p_value}")
        sens = b_shift = c_shift = None
        if row.shape in blocked and ratio is not None:
            bb, cb = blocked[row.shape]
            if bb and cb:
                sens = abs(cb / bb - ratio)
                b_shift, c_shift = bb / b_us - 1, cb / c_us - 1
        flagged = bool(sens is not None and ratio is not None and cmp.decided and abs(ratio - 1) < sens)
        mine = s.filter(pl.col("shape") == row.shape)
        spans = {side: mine.filter(pl.col("backend") == arm)["t_us"].to_numpy()
                 for side, arm in (("baseline", baseline), ("candidate", candidate))}  # fmt: skip
        facts = row_evidence(row.shape, [c.index for c in caps], split, hostbound, caps, baseline, candidate, spans)
        # calls that waited for their own launches time the host, not the kernels: no verdict on them
        host = host_bound_refusal(facts, {"baseline": baseline, "candidate": candidate})
        if host:
            refused.append(host)
        out.append({
            "row": row.label, "shape": row.shape, "attempt": attempt,
            "status": "refused" if refused else "pass", "refused_by": "; ".join(refused),
            "baseline_us": b_us, "candidate_us": c_us, "ratio": ratio,
            "low": _finite(cmp.low), "high": _finite(cmp.high), "verdict": cmp.verdict,
            "captures": len({r for r, _ in seen}), "pairs": sp.height, "iters_captures": iters_captures,
            "noise": _finite(noise.get(row.shape, math.nan)),
            "baseline_captures_us": rounds_us["base_us"].to_list(), "candidate_captures_us": rounds_us["cand_us"].to_list(),
            "arms_gate": a_status, "arms_note": a_note,
            "directional": d, "directional_gate": d_status,
            "clock_fraction": k_frac, "clock_mhz": k_mhz, "clock_gate": k_status,
            "parity": p_mode, "parity_value": p_value, "parity_gate": p_status,
            "sensitivity": sens, "baseline_shift": b_shift, "candidate_shift": c_shift, "flagged": flagged,
            "cause": None, "stopped": (stopped or {}).get(row.label), **facts,
        })  # fmt: skip
        record = out[-1]
        record["causes"] = cause_kinds(record, gates.directional_limit) if refused else None
    return pl.DataFrame(out, schema=RECEIPT_SCHEMA, orient="row") if out else pl.DataFrame(schema=RECEIPT_SCHEMA)


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


# -- stopping early: rows whose refusal the captures so far already make certain --------------------
CERTAIN_CAPTURES = 2  # captures a row needs before its refusal may be called certain (both arm orders first)
CERTAIN_FACTOR = 3.0  # directional disagreement this many times the limit in every capture so far


def directional_by_capture(p: pl.DataFrame, baseline: str, candidate: str) -> pl.DataFrame:
    """``shape, capture, directional``: the directional disagreement inside each capture (ABBA has both orders)."""
    first = pl.col("first")
    return (
        p.group_by("shape", "capture")
        .agg(
            (pl.col("ratio").filter(first == baseline).median() - pl.col("ratio").filter(first == candidate).median())
            .abs()
            .alias("directional")
        )
        .sort("shape", "capture")
    )


def certain_refusals(
    rows: Sequence[Row], captures: Sequence[Capture], baseline: str, candidate: str, gates: Gates = DEFAULT_GATES
) -> dict[str, str]:
    """``{row label: why}`` for the rows whose refusal more captures cannot undo.

    The clock gate takes the lowest clock over the captures, the arms gate needs every capture and
    bitwise parity every output: one failed capture refuses the row for good. The directional gate
    pools the captures, so it is called certain only when the disagreement is more than
    :data:`CERTAIN_FACTOR` times the limit in each of at least :data:`CERTAIN_CAPTURES` captures (each
    capture's ABBA holds both orders). Rows measured in fewer captures are never certain.
    """
    out: dict[str, str] = {}
    covered = [r for r in rows if sum(c.has(r.shape) for c in captures) >= CERTAIN_CAPTURES]
    if not covered:
        return out
    s = samples(captures, baseline, candidate)
    per_round = directional_by_capture(pairs(s, baseline, candidate), baseline, candidate)
    timed = set(s.select("capture", "backend", "shape").unique().iter_rows())
    limit = CERTAIN_FACTOR * gates.directional_limit
    for row in covered:  # the gates alone: no bootstrap here (this runs after every capture)
        caps = [c for c in captures if c.has(row.shape)]
        seen = {(r, b) for r, b, sh in timed if sh == row.shape}
        hard = [
            name
            for name, status in (
                ("arms", arms_gate(caps, row.shape, (baseline, candidate), seen)[0]),
                ("clock", clock_gate(caps, row.shape, gates.min_clock)[0]),
                ("parity", parity_gate(caps, row.shape, baseline, candidate, gates.parity)[0]),
            )
            if status == FAIL
        ]
        if hard:
            out[row.label] = f"refusal certain after {len(caps)} captures ({', '.join(hard)} gate failed)"
            continue
        d = per_round.filter(pl.col("shape") == row.shape)["directional"]
        if d.len() >= CERTAIN_CAPTURES and d.null_count() == 0 and bool((d > limit).all()):
            values = ", ".join(f"{v:.3f}" for v in d.to_list())
            out[row.label] = (
                f"refusal certain after {len(caps)} captures: directional {values} in each round, over "
                f"{CERTAIN_FACTOR:g}× the limit {gates.directional_limit}"
            )
    return out


@dataclass(frozen=True)
class Receipt:
    """A round's result: what was compared and how (``header``), and one row per (row, attempt)."""

    header: dict[str, Any]
    rows: pl.DataFrame
    captures: tuple[str, ...] = field(default=())

    @property
    def final(self) -> pl.DataFrame:
        """The latest attempt of every row, in the order rows were first listed."""
        order = self.rows.select("row").unique(maintain_order=True).with_row_index("_order")
        return (
            self.rows.sort("attempt")
            .group_by("row", maintain_order=True)
            .last()
            .join(order, on="row")
            .sort("_order")
            .drop("_order")
        )

    @property
    def passing(self) -> pl.DataFrame:
        return self.final.filter(pl.col("status") == "pass")

    @property
    def geomean(self) -> float:
        """Geometric mean of candidate/baseline over the passing rows (their latest attempt)."""
        return geomean(self.passing["ratio"].drop_nulls().to_numpy())

    @property
    def refused(self) -> pl.DataFrame:
        return self.final.filter(pl.col("status") != "pass")

    def summary(self) -> dict[str, Any]:
        final = self.final
        counts = final.group_by("verdict").len()
        passing = self.passing
        return {
            "rows": final.height,
            "passing": passing.height,
            "geomean": _finite(self.geomean),
            "verdicts": {v: n for v, n in counts.iter_rows()},
            "passing_verdicts": {v: n for v, n in passing.group_by("verdict").len().iter_rows()},
        }

    def retry_rows(self) -> list[Row]:
        """The rows whose latest attempt was refused."""
        return [Row(label, shape) for label, shape in self.refused.select("row", "shape").iter_rows()]

    def with_attempt(self, rows: pl.DataFrame, captures: Sequence[str] = ()) -> Receipt:
        """This receipt plus a new attempt's *rows* (a retry keeps both results)."""
        last = self.rows["attempt"].max()
        attempt = (last if isinstance(last, int) else 0) + 1
        merged = pl.concat([self.rows, rows.with_columns(pl.lit(attempt, pl.Int64).alias("attempt"))])
        return Receipt(self.header, merged, (*self.captures, *captures))

    # -- receipt.json (core.records.ReceiptRecord) ------------------------------------------
    def to_record(self) -> ReceiptRecord:
        return ReceiptRecord(self.header, tuple(self.rows.to_dicts()), self.captures, self.summary())

    @classmethod
    def from_record(cls, record: ReceiptRecord) -> Receipt:
        rows = list(record.rows)
        frame = pl.DataFrame(rows, schema=RECEIPT_SCHEMA, orient="row") if rows else pl.DataFrame(schema=RECEIPT_SCHEMA)
        return cls(dict(record.header), frame, record.captures)

    def to_json(self) -> dict[str, Any]:
        return self.to_record().to_json()

    @classmethod
    def from_json(cls, content: Mapping[str, Any]) -> Receipt:
        return cls.from_record(ReceiptRecord.from_json(content))

    def csv_frame(self) -> pl.DataFrame:
        """The rows with every list as ``;``-joined text (CSV has no lists; µs to 3 decimals)."""
        lists = [name for name, dtype in self.rows.schema.items() if isinstance(dtype, pl.List)]
        return self.rows.with_columns(
            (
                pl.col(c).list.eval(pl.element().round(3).cast(pl.String))
                if self.rows.schema[c] == pl.List(pl.Float64)
                else pl.col(c).cast(pl.List(pl.String))
            ).list.join(";")
            for c in lists
        )
