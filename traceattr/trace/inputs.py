"""Turn what the user named (an export, a report, a run folder) into an export path."""

from __future__ import annotations

from pathlib import Path

from traceattr.core.errors import TraceError
from traceattr.core.runfolder import TRACE as RUN_TRACE
from traceattr.trace.nsys import export_sqlite
from traceattr.trace.sqlite_source import check_file


def resolve_trace(path: str | Path) -> Path:
    """The SQLite export behind *path*.

    ``.sqlite``/``.db`` files are used as they are; an ``.nsys-rep`` is
    exported with the nsys found on this machine (the report is only read);
    a run folder of ``traceattr profile`` gives its ``trace.sqlite``.
    """
    p = Path(path)
    if p.is_dir():
        inside = p / RUN_TRACE
        if inside.is_file():
            return inside
        raise TraceError(
            p, f"is a directory without {RUN_TRACE}; expected an nsys .sqlite export or a traceattr run folder"
        )
    if p.suffix in (".nsys-rep", ".qdrep"):
        check_file(p)
        return export_sqlite(p)
    return p
