"""Turn what the user named (an export, a report, a run folder) into an export path."""

from __future__ import annotations

from pathlib import Path

from traceattr.core.errors import TraceError
from traceattr.core.runfolder import TRACE as RUN_TRACE
from traceattr.trace.loader import report_export
from traceattr.trace.nsys import TRACE_SUFFIXES, export_sqlite, fresh_sqlite_export, is_arrow_export
from traceattr.trace.sqlite_source import check_file


def resolve_trace(path: str | Path) -> Path:
    """What :func:`~traceattr.trace.loader.load_trace` reads for *path*.

    ``.sqlite``/``.db`` files and nsys Arrow export folders are used as they are; a run folder of
    ``traceattr profile`` gives its ``trace.sqlite``; an ``.nsys-rep`` gives a fresh SQLite export
    beside it when there is one, else the report itself (the loader exports it to Arrow for the read;
    with ``TRACEATTR_REPORT_EXPORT=sqlite`` it is exported to SQLite here). The report is only read.
    """
    p = Path(path)
    if p.is_dir():
        if is_arrow_export(p):
            return p
        inside = p / RUN_TRACE
        if inside.is_file():
            return inside
        raise TraceError(
            p,
            f"is a directory without {RUN_TRACE}; expected an nsys .sqlite export, an nsys Arrow export folder "
            "or a traceattr run folder",
        )
    if p.suffix in TRACE_SUFFIXES:
        check_file(p)
        if report_export() == "sqlite":
            return export_sqlite(p)
        return fresh_sqlite_export(p) or p
    return p
