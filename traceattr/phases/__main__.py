"""``python -m traceattr.phases FOLDER``: the phases of a run folder (tables), or of a round folder (markdown).

A round folder (a receipt.json beside round-*/ captures) gives the phase receipt:
each capture's alignment, per row the baseline's and the candidate's median phases
pooled over the captures with the change and its interval, and the floors and
fixed-cost verdicts of the first capture. Bad input: one line, exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from traceattr.core.errors import TraceattrError


def round_markdown(folder: Path) -> str:
    from traceattr.phases.report import phase_report, round_captures, round_deltas
    from traceattr.present.phases import deltas_markdown, verdict_lines

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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m traceattr.phases RUN_OR_ROUND_FOLDER", file=sys.stderr)
        return 2
    folder = Path(args[0])
    try:
        if not folder.is_dir():
            raise TraceattrError(f"{folder}: not a folder")
        if (folder / "receipt.json").is_file():
            sys.stdout.write(round_markdown(folder))
            return 0
        from traceattr.phases.report import phase_report
        from traceattr.present.console import console
        from traceattr.present.phases import render_phases

        report = phase_report(folder)
        if report is None:
            raise TraceattrError(f"{folder}: holds no stamps (stamps/index.json)")
        render_phases(report, console())
        return 0
    except TraceattrError as err:
        print(f"traceattr phases: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
