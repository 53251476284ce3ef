"""``python -m traceattr.cli.phases FOLDER``: the phases of a run folder (tables), or of a round folder (markdown).

A round folder (a receipt.json beside round-*/ captures) gives the phase receipt:
each capture's alignment, per row the baseline's and the candidate's median phases
pooled over the captures with the change and its interval, and the floors and
fixed-cost verdicts of the first capture. Bad input: one line, exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from traceattr.core.errors import TraceattrError


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m traceattr.cli.phases RUN_OR_ROUND_FOLDER", file=sys.stderr)
        return 2
    folder = Path(args[0])
    try:
        if not folder.is_dir():
            raise TraceattrError(f"{folder}: not a folder")
        if (folder / "receipt.json").is_file():
            from traceattr.present.phases import round_markdown

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
