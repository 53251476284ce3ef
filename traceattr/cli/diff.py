"""``traceattr diff``: what changed between two traces or run folders."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from traceattr.analysis.diff import diff
from traceattr.cli import app
from traceattr.core.output import ResultSet, check_out_folder
from traceattr.present.console import console
from traceattr.present.terminal import render_diff
from traceattr.session import Session

MANIFEST = "diff_run.json"  # names the set in --out DIR; see traceattr.core.output.ResultSet


@app.command("diff")
def diff_command(
    before: Annotated[Path, typer.Argument(help="The trace (.sqlite, .nsys-rep) or run folder before the change.")],
    after: Annotated[Path, typer.Argument(help="The trace or run folder after it.")],
    top: Annotated[int, typer.Option(help="Kernels and range names shown per table (0: all).")] = 15,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Write diff.csv and diff.json here.")] = None,
) -> None:
    """Per kernel, role and NVTX range name: instance count and GPU time before → after, largest changes first.

    Example: traceattr diff before.sqlite after.sqlite
    """
    if out is not None:  # refused before the work, not after it
        check_out_folder(out, command="diff", manifest=MANIFEST, inputs=(before, after))
    d = diff(Session(before).attribute(), Session(after).attribute())
    render_diff(d, console(), top)
    if out is not None:
        with ResultSet(out, command="diff", manifest=MANIFEST, inputs=(before, after)) as result:
            files = [result.table(d, "diff", "csv"), result.table(d, "diff", "json")]
            result.write_manifest({"inputs": [str(before), str(after)]})
        print(f"wrote {', '.join(map(str, files))}", file=sys.stderr)
