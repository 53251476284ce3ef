"""``python -m traceattr.cli.phases FOLDER``: an alias kept for the notes that name it (docs/phases.md).

The commands show phases themselves: ``compare``/``report`` on a stamped run folder (tables; the page's
"Inside the kernel"), a round's receipt (which phase moved) and its phases.md, ``diff`` of two stamped
sides. This prints what they do: a run folder's phase tables, or a round folder's phase receipt (phases.md,
markdown). Bad input: one line, exit 2.
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
            from traceattr.jobs.round import read_receipt
            from traceattr.present.phases import load_round, round_markdown

            receipt = read_receipt(folder)
            phases = load_round(receipt, folder)
            if phases is None:
                raise TraceattrError(f"{folder}: no capture of the round holds stamps")
            sys.stdout.write(round_markdown(phases, receipt))
            return 0
        from traceattr.present.console import console
        from traceattr.present.phases import load, render_phases

        report = load(folder)
        if report is None:
            raise TraceattrError(f"{folder}: holds no stamps (stamps/index.json)")
        render_phases(report, console())
        return 0
    except TraceattrError as err:
        print(f"traceattr phases: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
