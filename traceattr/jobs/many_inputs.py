"""The traces behind what the user named: files, folders (of traces, or run folders) and glob patterns."""

from __future__ import annotations

import glob
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from traceattr.core.errors import TraceattrError, TraceNote
from traceattr.core.runfolder import TRACE as RUN_TRACE
from traceattr.trace.nsys import TRACE_SUFFIXES, is_arrow_export

_EXPORT_SUFFIXES = (".sqlite", ".db")
_GLOB_CHARS = frozenset("*?[")


def expand_inputs(args: Sequence[str | Path]) -> list[Path]:
    """The traces behind what the user named: files, folders and glob patterns.

    A folder is a `traceattr profile` run folder (it holds ``trace.sqlite``), an nsys Arrow export, or
    a folder of traces: its ``*.sqlite`` exports, its ``*.nsys-rep`` nsys reports
    that have no export beside them, its run folders and its Arrow exports. A pattern that
    matches nothing is an error; a path that does not exist is kept, to fail
    alone with its reason.
    """
    found: list[Path] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            found.extend([p] if (p / RUN_TRACE).is_file() or is_arrow_export(p) else _traces_in(p))
        elif not p.exists() and _GLOB_CHARS & set(str(arg)):
            hits = sorted(glob.glob(str(arg)))
            if not hits:
                raise TraceattrError(f"{arg}: no file matches this pattern")
            found.extend(expand_inputs(hits))
        else:
            found.append(p)
    seen: dict[object, Path] = {}
    unique = []
    linked: list[tuple[Path, Path]] = []
    for p in found:  # the same trace named twice (a folder and a pattern, a link, a hard link) runs once
        key = _identity(p)
        if key not in seen:
            seen[key] = p
            unique.append(p)
        elif isinstance(key, tuple) and _identity_by_name(p) != _identity_by_name(seen[key]):
            linked.append((p, seen[key]))  # another name for a file already listed: the user should know
    if linked:
        copy, first = linked[0]
        warnings.warn(
            TraceNote(
                f"{len(linked)} trace(s) are hard links to one already listed (e.g. {copy} is {first}): "
                "each file is attributed once"
            ),
            stacklevel=2,
        )
    return unique


def _identity(p: Path) -> object:
    """What makes two names one trace: the file they reach (device, inode), so a hard-linked copy is
    not a second trace; the path when the file cannot be reached (it fails alone, with its reason)."""
    try:
        st = p.stat()
    except (OSError, RuntimeError):
        return _identity_by_name(p)
    return (st.st_dev, st.st_ino)


def _identity_by_name(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):  # a symlink loop: kept, to fail alone with its reason
        return p.absolute()


def _traces_in(folder: Path) -> list[Path]:
    children = sorted(folder.iterdir())
    exports = [c for c in children if c.suffix in _EXPORT_SUFFIXES and c.is_file() and ".partial" not in c.name]
    stems = {c.stem for c in exports}
    reports = [c for c in children if c.suffix in TRACE_SUFFIXES and c.is_file() and c.stem not in stems]
    runs = [c for c in children if c.is_dir() and ((c / RUN_TRACE).is_file() or is_arrow_export(c))]
    hits = sorted([*exports, *reports, *runs])
    if not hits:
        raise TraceattrError(
            f"{folder}: is a directory without nsys exports (.sqlite, Arrow folders), nsys reports (.nsys-rep) or run folders"
        )
    return hits


def trace_names(paths: Sequence[str | Path]) -> list[str]:
    """A short unique name per trace: the file's stem (a run folder's name), else its path below the common folder."""
    ps = [Path(p) for p in paths]

    def stem(p: Path) -> str:
        if p.name == RUN_TRACE or p.is_dir():
            return (p.parent if p.name == RUN_TRACE else p).name
        return p.stem

    names = [stem(p) for p in ps]
    if len(set(names)) == len(names):
        return names
    absolute = [p.resolve() for p in ps]
    root = Path(os.path.commonpath([str(a.parent) for a in absolute]))
    return [str(a.relative_to(root).with_suffix("")) for a in absolute]
