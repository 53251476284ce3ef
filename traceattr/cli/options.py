"""Options shared by several commands, defined once (as nsys's Option enum and sqlite-utils' bundles do)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from traceattr.attribution.engine import MODES
from traceattr.core.callnames import check_regex as check_regex  # with the options it checks; defined in core
from traceattr.core.callnames import checked_group

ModeChoice = Enum("ModeChoice", {m: m for m in MODES}, type=str)  # type: ignore[misc]

TraceArg = Annotated[Path, typer.Argument(help="nsys export (.sqlite), report (.nsys-rep) or traceattr run folder.")]
TracesArg = Annotated[
    list[Path],
    typer.Argument(
        help="nsys exports (.sqlite), reports (.nsys-rep), run folders, folders of them, or quoted glob patterns. "
        "Several reports are attributed in parallel and combined with a `report` column."
    ),
]
WorkersOpt = Annotated[
    Optional[int],
    typer.Option("--workers", "-j", min=1, help="Local worker processes for many reports (default: one per core)."),
]
DaskOpt = Annotated[
    Optional[str],
    typer.Option(help="Run many reports on this Dask scheduler (tcp://host:8786), or `local` for a local cluster."),
]
ModeOpt = Annotated[
    ModeChoice,  # type: ignore[valid-type]
    typer.Option(
        help="nsys: every enclosing range gets an op (as nsys stats); innermost: each op once, in its deepest range."
    ),
]
DomainOpt = Annotated[Optional[str], typer.Option(help="Only ranges of this NVTX domain.")]
MatchOpt = Annotated[Optional[str], typer.Option(help="Only ranges whose name matches this regex.")]
GroupOpt = Annotated[
    Optional[str],
    typer.Option(
        help="How call names read as backend + shape: a preset (traceattr, keyvalue, slash, pipe, dot, underscore, "
        "separated) or a regex with named groups backend, shape and optionally iter, arm, matched against each "
        "range's message. Default: the presets traceattr, keyvalue, separated in turn. `traceattr shapes` lists them."
    ),
]
RulesOpt = Annotated[Optional[Path], typer.Option(help="TOML kernel-role rules tried before the built-in ones.")]


def check_group(group: str | None) -> None:
    """A grouping preset, or a regex polars accepts with the named groups grouping needs; else one line."""
    if group is not None:
        checked_group(group)
