"""The phase records (:mod:`traceattr.phases`) in words and tables: the terminal, markdown and the files.

Every surface that shows phases reads one record and the wordings here: a run folder's
:class:`~traceattr.phases.report.PhaseReport` (``compare``, ``report``), a round's
:class:`~traceattr.phases.compare.RoundPhases` (the receipt's "which phase moved" in receipt.md, on the
terminal and on the round's page; the per-row phase tables) and ``diff``'s
:class:`~traceattr.phases.compare.DiffPhases`. The fixed-cost verdict stands next to the roofline share
compare shows (the applying memory or compute bound over the median call: one computation, :func:`roofline_of`),
the only bound the summary names otherwise. The tables go through the one table layer (:mod:`traceattr.present.columns`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from traceattr.analysis.roofline import bound_columns, device_compute_peak, peak_bandwidth, shape_work
from traceattr.analysis.rounds import Receipt
from traceattr.core.records import read_runner
from traceattr.core.runfolder import TRACE, has_stamps
from traceattr.phases.attribute import MedianCall
from traceattr.phases.compare import DiffPhases, PhaseComparison, PhaseDelta, RoundPhases, diff_phases, round_phases
from traceattr.phases.report import PhaseReport, Roofline, RowBound, phase_report
from traceattr.present import formats
from traceattr.present.columns import Column, dropped_line, fitted_table, print_wrapped
from traceattr.present.names import printable
from traceattr.trace.loader import read_devices

# -- the records, read once per surface -------------------------------------------------------------------------


def roofline_of(peak_bytes_per_s: float | None = None) -> Roofline:
    """The roofline compare computes (:func:`traceattr.analysis.roofline.bound_columns` at
    :func:`~traceattr.analysis.roofline.peak_bandwidth` and the dense peaks of the run folder's GPU), for the
    phase records: so a row's share in the phase verdict is compare's ``roofline`` column. The GPU is the one
    the folder's trace records; without a trace beside (a round whose traces were left behind), the one
    runner.json names, at its datasheet figures. *peak_bytes_per_s*: a command's ``--bandwidth``."""

    def roofline(folder: Path, calls: pl.DataFrame) -> pl.DataFrame:
        trace = folder / TRACE
        if trace.is_file():
            devices = read_devices(trace)
        else:
            runner = read_runner(folder)
            gpu = runner.facts("gpu") if runner is not None else None
            name = gpu.get("name") if isinstance(gpu, Mapping) else None
            devices = pl.DataFrame({"name": [name if isinstance(name, str) else None]}, schema={"name": pl.String})
        peak, _ = peak_bandwidth(devices, peak_bytes_per_s)
        work = shape_work(calls["shape"].unique(maintain_order=True).to_list())
        return calls.join(work, on="shape", how="left", maintain_order="left").with_columns(
            bound_columns(peak, device_compute_peak(devices))
        )

    return roofline


def load(path: Path, peak_bytes_per_s: float | None = None) -> PhaseReport | None:
    """The phases of run folder *path* (or of its trace.sqlite); None without stamps. *peak_bytes_per_s*: the
    bandwidth a command was given (``--bandwidth``), which its roofline takes too."""
    return phase_report(path, roofline_of(peak_bytes_per_s))


def load_round(receipt: Receipt, folder: Path) -> RoundPhases | None:
    """The phases of the round in *folder* (its receipt's arms and stamped captures); None without stamps."""
    h = receipt.header
    final = receipt.final.select("shape", "captures").drop_nulls()  # a receipt from before counts: every capture
    latest = dict(zip(final["shape"].to_list(), final["captures"].to_list(), strict=True))
    return round_phases(folder, str(h.get("baseline")), str(h.get("candidate")), receipt.captures,
                        roofline_of(), latest)  # fmt: skip


def load_diff(before: Sequence[Path], after: Sequence[Path]) -> DiffPhases | None:
    """``diff``'s phases: each side's stamped run folders; None unless both sides have stamps."""
    sides = [[r for r in (load(p) for p in paths if has_stamps(p)) if r is not None] for paths in (before, after)]
    return diff_phases(*sides)


# -- one wording for every surface ------------------------------------------------------------------------------


def us(ns: float) -> str:
    """Nanoseconds as µs with two decimals: ``1,234.56``."""
    return formats.us(ns / 1e3, 2)


def signed_us(ns: float) -> str:
    """A change in ns as µs, its sign always shown: ``+12.69``, ``-0.34``."""
    return formats.signed_ms(ns / 1e3, 2)  # unit-free: the sign and two decimals


def interval_us(low_ns: float, high_ns: float) -> str:
    return f"[{signed_us(low_ns)}, {signed_us(high_ns)}]"


def delta_text(d: PhaseDelta) -> str:
    """``split_kv:merged +12.69 µs [+12.42, +12.83]``."""
    return f"{d.phase} {signed_us(d.delta_ns)} µs {interval_us(d.low_ns, d.high_ns)}"


def moved_text(moved: Sequence[PhaseDelta]) -> str:
    """Which phases moved, largest change first (``no phase moved`` when none did)."""
    return " · ".join(map(delta_text, moved)) if moved else "no phase moved"


MOVED_HEAD = "Which phase moved"
MOVED_INTRO = (
    "per row, the phases whose change (candidate − baseline, medians over every capture's calls) has a 95% interval "
    "that excludes 0, the largest first"
)


def moved_rows(phases: RoundPhases, receipt: Receipt) -> list[tuple[str, str]]:
    """(row label, :func:`moved_text`) per row of the receipt (latest attempt) that both arms ran with stamps."""
    c = phases.comparison
    labels = dict(zip(receipt.final["shape"].to_list(), receipt.final["row"].to_list(), strict=True))
    ordered = [s for s in labels if s in c.shapes] + [s for s in c.shapes if s not in labels]
    return [(labels.get(s, s), moved_text(c.moved(s))) for s in ordered]


def row_labels(phases: RoundPhases, receipt: Receipt) -> dict[str, str]:
    """Shape → the receipt's row label (the shape itself where the receipt has none)."""
    labels = dict(zip(receipt.final["shape"].to_list(), receipt.final["row"].to_list(), strict=True))
    return {s: labels.get(s, s) for s in phases.comparison.shapes}


def bound_text(b: RowBound) -> str:
    """``empty floor 0.58 µs [0.58, 0.58] (50 reps); one_tile floor …; not fixed-cost bound: … · roofline
    3.3% (memory bound)``: what bounds an (arm, shape)."""
    parts = [f"{f.probe} floor {us(f.median_ns)} µs [{us(f.low_ns)}, {us(f.high_ns)}] ({f.reps} reps);"
             for f in b.floors]  # fmt: skip
    parts.append(b.fixed.describe() if b.fixed else "no tile probe: fixed cost not judged")
    if b.roofline_share is not None:
        parts.append(f"· roofline {formats.roofline_share(b.roofline_share, 1)} ({b.bound} bound)")
    return " ".join(parts)


def verdict_lines(report: PhaseReport) -> list[str]:
    """Per (arm, shape): floors, the fixed-cost verdict and the roofline share."""
    return [f"{b.arm} {b.shape}: {bound_text(b)}" for b in report.bounds]


def median_title(m: MedianCall) -> str:
    """The heading of an (arm, shape)'s phase table."""
    return f"{m.arm} · {m.shape}"


def sum_text(m: MedianCall) -> str:
    """The median call's check: Σ of its phase medians against the median nsys span."""
    return f"Σ phases {us(m.phase_sum_ns)} µs / nsys span {us(m.span_ns)} µs ({m.sum_error:+.2%})"


def clamped_text(report: PhaseReport) -> str | None:
    if not report.clamped:
        return None
    return f"{report.clamped} stamps were earlier than the one before them in their CTA: raised to it"


# -- files (--out) ----------------------------------------------------------------------------------------------

PHASES_SCHEMA = {
    "arm": pl.String, "shape": pl.String, "position": pl.Int64, "phase": pl.String, "median_us": pl.Float64,
    "low_us": pl.Float64, "high_us": pl.Float64, "share": pl.Float64, "calls": pl.Int64, "span_us": pl.Float64,
}  # fmt: skip
DELTAS_SCHEMA = {
    "baseline": pl.String, "candidate": pl.String, "shape": pl.String, "phase": pl.String,
    "baseline_us": pl.Float64, "candidate_us": pl.Float64, "delta_us": pl.Float64, "low_us": pl.Float64,
    "high_us": pl.Float64, "moved": pl.Boolean,
}  # fmt: skip


def median_frame(report: PhaseReport) -> pl.DataFrame:
    """phases.csv of a run folder: one row per (arm, shape, phase) of the median call (:data:`PHASES_SCHEMA`)."""
    rows = [(m.arm, m.shape, p.position, p.phase, p.median_ns / 1e3, p.low_ns / 1e3, p.high_ns / 1e3,
             p.median_ns / m.span_ns if m.span_ns else None, p.calls, m.span_ns / 1e3)
            for m in report.medians for p in m.phases]  # fmt: skip
    return pl.DataFrame(rows, schema=PHASES_SCHEMA, orient="row")


def deltas_frame(comparisons: Sequence[PhaseComparison]) -> pl.DataFrame:
    """The phase changes of *comparisons*, one row per (sides, shape, phase) (:data:`DELTAS_SCHEMA`)."""
    rows = [(c.baseline, c.candidate, d.shape, d.phase, d.baseline_ns / 1e3, d.candidate_ns / 1e3, d.delta_ns / 1e3,
             d.low_ns / 1e3, d.high_ns / 1e3, d.moved) for c in comparisons for d in c.deltas]  # fmt: skip
    return pl.DataFrame(rows, schema=DELTAS_SCHEMA, orient="row")


# -- the terminal -----------------------------------------------------------------------------------------------

MEDIAN_COLUMNS = (Column("phase", "left", wraps=True), Column("µs"), Column("95% interval", drop=2),
                  Column("share", drop=1))  # fmt: skip
ROUND_SIDES, DIFF_SIDES = ("baseline", "candidate"), ("before", "after")


def delta_columns(sides: tuple[str, str]) -> tuple[Column, ...]:
    """The phase-change table's columns: each side's median go first, then the interval; the change stays."""
    return (Column("phase", "left", wraps=True), Column(f"{sides[0]} µs", drop=3), Column(f"{sides[1]} µs", drop=2),
            Column("Δ µs"), Column("95% interval", drop=1), Column("moved", "left"))  # fmt: skip


def median_rows(m: MedianCall) -> list[list[str | Text]]:
    rows: list[list[str | Text]] = [
        [printable(p.phase), us(p.median_ns), f"[{us(p.low_ns)}, {us(p.high_ns)}]",
         f"{p.median_ns / m.span_ns:.1%}" if m.span_ns else "—"]
        for p in m.phases
    ]  # fmt: skip
    rows.append([Text("Σ phases", "bold"), Text(us(m.phase_sum_ns), "bold"), Text(f"span {us(m.span_ns)}", "bold"),
                 Text(f"{m.sum_error:+.2%}", "bold")])  # fmt: skip
    return rows


def render_phases(report: PhaseReport, con: Console) -> None:
    """A run folder's phases: the alignment, per (arm, shape) the median call's phases, then what bounds each."""
    print_wrapped(con, printable(report.alignment.describe()), "dim")
    clamped = clamped_text(report)
    if clamped:
        print_wrapped(con, clamped)
    tables = [median_rows(m) for m in report.medians]
    fit = [row for rows in tables for row in rows]  # one set of columns for every table
    dropped: list[str] = []
    for m, rows in zip(report.medians, tables, strict=True):
        print_wrapped(con, printable(median_title(m)), "bold")  # above the table: a table's title wraps at its width
        title = f"median call of {m.calls} (each phase's median, 95% interval)"
        table, gone = fitted_table(con, MEDIAN_COLUMNS, rows, title, fit_rows=fit)
        con.print(table)
        dropped += gone
    dropped_line(con, dropped)
    for line in verdict_lines(report):
        print_wrapped(con, printable(line), hang=2)


def delta_rows(deltas: Sequence[PhaseDelta]) -> list[list[str | Text]]:
    return [[printable(d.phase), us(d.baseline_ns), us(d.candidate_ns), signed_us(d.delta_ns),
             interval_us(d.low_ns, d.high_ns), "moved" if d.moved else ""] for d in deltas]  # fmt: skip


def render_comparison(c: PhaseComparison, con: Console, labels: dict[str, str] | None = None,
                      sides: tuple[str, str] = ROUND_SIDES) -> None:  # fmt: skip
    """Per row, each phase on both sides with the change and its 95% interval (one table per row)."""
    tables = {s: delta_rows(c.of(s)) for s in c.shapes}
    fit = [row for rows in tables.values() for row in rows]
    columns = delta_columns(sides)
    dropped: list[str] = []
    for shape, rows in tables.items():
        title = f"{(labels or {}).get(shape, shape)}: {sides[1]} − {sides[0]} per phase"
        table, gone = fitted_table(con, columns, rows, Text(printable(title)), fit_rows=fit)
        con.print(table)
        dropped += gone
    dropped_line(con, dropped)


def render_moved(rows: Sequence[tuple[str, str]], con: Console) -> None:
    """The round's "which phase moved", per row its phases packed into lines whole (the receipt's evidence)."""
    if not rows:
        return
    print_wrapped(con, f"{MOVED_HEAD}: {MOVED_INTRO}.", "bold")
    for label, text in rows:
        for line in _packed(f"  {label}: ", text.split(" · "), con.width):
            print_wrapped(con, printable(line), hang=4)


def _packed(head: str, items: Sequence[str], width: int) -> list[str]:
    """*items* after *head*, joined by `` · `` into lines of at most *width* (each line but the last ends in its
    ``·``): an item (a phase, its change and interval) is broken only when it is longer than a line."""
    lines, line = [], head + items[0]
    for item in items[1:]:
        if cell_len(line) + cell_len(f" · {item} ·") > width:
            lines.append(line + " ·")
            line = "    " + item
        else:
            line += " · " + item
    return [*lines, line]


def render_round_phases(phases: RoundPhases, receipt: Receipt, con: Console) -> None:
    """A round's phase tables per row, after its receipt (whose "which phase moved" they back)."""
    for r in phases.captures:
        print_wrapped(con, printable(f"{r.folder.name}: {r.alignment.describe()}"), "dim")
    render_comparison(phases.comparison, con, row_labels(phases, receipt))


def render_diff_phases(d: DiffPhases, con: Console) -> None:
    """``diff``'s phases: per arm and row, each phase before → after with the change and its interval."""
    print_wrapped(con, "Phases inside the kernel (in-kernel stamps): after − before, medians over each side's calls",
                  "bold")  # fmt: skip
    for c in d.comparisons:
        arms = f"{c.baseline} → {c.candidate}" if c.baseline != c.candidate else c.baseline
        print_wrapped(con, printable(arms), "bold")
        render_comparison(c, con, sides=DIFF_SIDES)
    if d.unmatched:
        print_wrapped(con, printable(f"arms with stamps on one side only: {', '.join(d.unmatched)}"), "dim")


# -- markdown ---------------------------------------------------------------------------------------------------


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def moved_markdown(rows: Sequence[tuple[str, str]]) -> list[str]:
    """receipt.md's "which phase moved": a heading line and one bullet per row."""
    if not rows:
        return []
    return ["", f"{MOVED_HEAD}: {MOVED_INTRO}.", "", *(f"- **{_md(label)}**: {_md(text)}" for label, text in rows)]


def deltas_markdown(c: PhaseComparison, labels: dict[str, str] | None = None) -> str:
    """A comparison's per-row phase changes as a markdown table (moved: the interval excludes 0)."""
    lines = [
        f"| row | phase | {_md(c.baseline)} µs | {_md(c.candidate)} µs | Δ µs [95%] | moved |",
        "|---|---|--:|--:|--:|---|",
    ]
    for d in c.deltas:
        lines.append(
            f"| {_md((labels or {}).get(d.shape, d.shape))} | {_md(d.phase)} | {us(d.baseline_ns)} | "
            f"{us(d.candidate_ns)} | {signed_us(d.delta_ns)} {interval_us(d.low_ns, d.high_ns)} | "
            f"{'yes' if d.moved else ''} |"
        )
    return "\n".join(lines) + "\n"


def round_markdown(phases: RoundPhases, receipt: Receipt) -> str:
    """A round's phase receipt (phases.md): alignment per capture, per-row phase changes, the first capture's
    floors and fixed-cost verdicts, and each median call's Σ of phases against its nsys span."""
    c = phases.comparison
    labels = row_labels(phases, receipt)
    out = [f"## Phases: {_md(c.candidate)} vs {_md(c.baseline)}\n"]
    out += [f"- {r.folder.name}: {r.alignment.describe()}; {r.clamped} stamps raised" for r in phases.captures]
    out += [*moved_markdown(moved_rows(phases, receipt)), "", deltas_markdown(c, labels)]
    first = phases.captures[0]
    out += [f"### Floors and fixed-cost verdicts ({first.folder.name})\n"]
    out += [f"- {_md(line)}" for line in verdict_lines(first)]
    out += [
        "",
        "### Median call: Σ phases against the nsys span\n",
        "| arm | row | calls | Σ phases µs | span µs | error |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for r in phases.captures:
        for m in r.medians:
            out.append(f"| {_md(m.arm)} | {_md(labels.get(m.shape, m.shape))} ({r.folder.name}) | {m.calls} | "
                       f"{us(m.phase_sum_ns)} | {us(m.span_ns)} | {m.sum_error:+.2%} |")  # fmt: skip
    return "\n".join(out) + "\n"
