"""The reports behind what the user named: files, folders (of reports, or run folders) and glob patterns."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from traceattr.core.errors import TraceattrError
from traceattr.core.runfolder import TRACE as RUN_TRACE

_EXPORT_SUFFIXES = (".sqlite", ".db")
_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
_GLOB_CHARS = frozenset("*?[")


def expand_inputs(args: Sequence[str | Path]) -> list[Path]:
    """The reports behind what the user named: files, folders and glob patterns.

    A folder is a `traceattr profile` run folder (it holds ``trace.sqlite``) or
    a folder of reports: its ``*.sqlite`` exports, its ``*.nsys-rep`` reports
    that have no export beside them, and its run folders. A pattern that
    matches nothing is an error; a path that does not exist is kept, to fail
    alone with its reason.
    """
    found: list[Path] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir():
            found.extend([p] if (p / RUN_TRACE).is_file() else _reports_in(p))
        elif not p.exists() and _GLOB_CHARS & set(str(arg)):
            hits = sorted(glob.glob(str(arg)))
            if not hits:
                raise TraceattrError(f"{arg}: no file matches this pattern")
            found.extend(expand_inputs(hits))
        else:
            found.append(p)
    seen: set[Path] = set()
    unique = []
    for p in found:  # the same report named twice (a folder and a pattern) runs once
        try:
            key = p.resolve()
        except (OSError, RuntimeError):  # a symlink loop: kept, to fail alone with its reason
            key = p.absolute()
        if key not in seen:
            seen.add(key)
            unique.append(p)
    return unique


def _reports_in(folder: Path) -> list[Path]:
    children = sorted(folder.iterdir())
    exports = [c for c in children if c.suffix in _EXPORT_SUFFIXES and c.is_file() and ".partial" not in c.name]
    stems = {c.stem for c in exports}
    reports = [c for c in children if c.suffix in _REPORT_SUFFIXES and c.is_file() and c.stem not in stems]
    runs = [c for c in children if c.is_dir() and (c / RUN_TRACE).is_file()]
    hits = sorted([*exports, *reports, *runs])
    if not hits:
        raise TraceattrError(
            f"{folder}: is a directory without nsys exports (.sqlite), reports (.nsys-rep) or run folders"
        )
    return hits


def report_names(paths: Sequence[str | Path]) -> list[str]:
    """A short unique name per report: the file's stem (a run folder's name), else its path below the common folder."""
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
