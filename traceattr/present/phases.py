"""The phase breakdown on the terminal and in markdown: median calls, floors, fixed-cost verdicts, round deltas.

``show_phases(trace, wide, fmt)`` is what ``compare`` calls on a run folder: nothing when it
holds no stamps. The fixed-cost verdict stands next to the HBM roofline share (KV
bytes over the median call at the GPU's datasheet bandwidth), the only bound the
summary names otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from traceattr.analysis.roofline import PEAK_BANDWIDTH
from traceattr.core.errors import TraceattrError
from traceattr.phases.attribute import MedianCall
from traceattr.phases.floor import fixed_cost
from traceattr.phases.report import PhaseDelta, PhaseReport, phase_report, round_captures, round_deltas
from traceattr.present.names import printable


def _us(ns: float) -> str:
    return f"{ns / 1e3:.2f}"


def roofline_share(folder: Path, m: MedianCall) -> float | None:
    """The median call's share of the HBM roofline: the row's KV bytes at the datasheet bandwidth / its span."""
    try:
        runner = json.loads((folder / "runner.json").read_text(encoding="utf-8"))
        kv_bytes = float(runner["shapes"][m.shape]["kv_bytes"])
        gpu = str(runner["gpu"]["name"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    peak = next((bw for name, bw in PEAK_BANDWIDTH if name in gpu), None)
    return kv_bytes / peak / (m.span_ns * 1e-9) if peak else None


def median_table(report: PhaseReport, m: MedianCall) -> Table:
    """One (arm, shape)'s median call: each critical-path phase with its 95% interval and share."""
    # Text, not markup: an arm label's [options] would read as a style tag
    t = Table(title=Text(printable(f"{m.arm} · {m.shape} · median of {m.calls} calls")), title_justify="left")
    for name, just in (("phase", "left"), ("µs", "right"), ("95% interval", "right"), ("share", "right")):
        t.add_column(name, justify=just)  # type: ignore[arg-type]
    for p in m.phases:
        t.add_row(
            printable(p.phase),
            _us(p.median_ns),
            f"[{_us(p.low_ns)}, {_us(p.high_ns)}]",
            f"{p.median_ns / m.span_ns:.1%}",
        )
    t.add_row(
        "Σ phases / nsys span", f"{_us(m.phase_sum_ns)} / {_us(m.span_ns)}", "", f"{m.sum_error:+.2%}", style="bold"
    )
    return t


def verdict_lines(report: PhaseReport) -> list[str]:
    """Per (arm, shape): floors, the fixed-cost verdict and the roofline share."""
    lines = []
    for m in report.medians:
        probes = {f.probe: f for f in report.floors if f.arm == m.arm and f.shape == m.shape}
        parts = [f"{m.arm} {m.shape}:"]
        for name, f in sorted(probes.items()):
            parts.append(f"{name} floor {_us(f.median_ns)} µs [{_us(f.low_ns)}, {_us(f.high_ns)}] ({f.reps} reps);")
        verdict = fixed_cost(m.arm, m.shape, m.span_ns, report.floors)
        parts.append(verdict.describe() if verdict else "no one-tile probe: fixed cost not judged")
        share = roofline_share(report.folder, m)
        if share is not None:
            parts.append(f"· HBM roofline share {share:.1%}")
        lines.append(" ".join(parts))
    return lines


def render_phases(report: PhaseReport, con: Console) -> None:
    con.print(Text(printable(report.alignment.describe()), "dim"))
    if report.clamped:
        con.print(Text(f"{report.clamped} stamps were earlier than the one before them in their CTA: raised to it"))
    for m in report.medians:
        con.print(median_table(report, m))
    for line in verdict_lines(report):
        con.print(Text(printable(line)))


def show_phases(trace: Path, wide: bool, fmt: str) -> None:
    """The phase breakdown of the run folder of *trace* when it holds stamps, as a table (compare calls this)."""
    if fmt != "table":
        return
    from traceattr.present.console import console

    report = phase_report(trace if trace.is_dir() else trace.parent)
    if report is not None:
        render_phases(report, console(wide))


def deltas_markdown(deltas: tuple[PhaseDelta, ...], baseline: str, candidate: str) -> str:
    """A round's per-row phase changes as a markdown table (moved: the interval excludes 0)."""
    lines = [
        f"| row | phase | {baseline} µs | {candidate} µs | Δ µs [95%] | moved |",
        "|---|---|--:|--:|--:|---|",
    ]
    for d in deltas:
        lines.append(
            f"| {d.shape.split('_h')[0]} | {d.phase} | {_us(d.baseline_ns)} | {_us(d.candidate_ns)} | "
            f"{d.delta_ns / 1e3:+.2f} [{d.low_ns / 1e3:+.2f}, {d.high_ns / 1e3:+.2f}] | {'yes' if d.moved else ''} |"
        )
    return "\n".join(lines) + "\n"


def round_markdown(folder: Path) -> str:
    """A round folder's phase receipt: alignment per capture, per-row phase deltas, floors, Σ-phase checks."""
    baseline, candidate, captures = round_captures(folder)
    reports = [r for r in map(phase_report, captures) if r is not None]
    if not reports:
        raise TraceattrError(f"{folder}: no capture of the round holds stamps")
    out = [f"## Phases: {candidate} vs {baseline}\n"]
    out += [f"- {r.folder.name}: {r.alignment.describe()}; {r.clamped} stamps raised" for r in reports]
    out += ["", deltas_markdown(round_deltas(reports, baseline, candidate), baseline, candidate)]
    out += ["### Floors and fixed-cost verdicts (" + reports[0].folder.name + ")\n"]
    out += [f"- {line}" for line in verdict_lines(reports[0])]
    out += [
        "",
        "### Median call: Σ phases against the nsys span\n",
        "| arm | row | calls | Σ phases µs | span µs | error |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for r in reports:
        for m in r.medians:
            out.append(
                f"| {m.arm} | {m.shape.split('_h')[0]} ({r.folder.name}) | {m.calls} | {m.phase_sum_ns / 1e3:.2f} | {m.span_ns / 1e3:.2f} | {m.sum_error:+.2%} |"
            )
    return "\n".join(out) + "\n"
