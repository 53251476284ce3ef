"""Options shared by several commands, defined once (as nsys's Option enum and sqlite-utils' bundles do)."""

from __future__ import annotations

import math
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from traceattr.attribution.engine import MODES, Attributing, Attribution
from traceattr.core.callnames import check_regex as check_regex  # with the options it checks; defined in core
from traceattr.core.callnames import checked_group
from traceattr.core.errors import TraceattrError
from traceattr.trace.validate import MAX_MEMORY_BANDWIDTH, MIN_MEMORY_BANDWIDTH

# Exit statuses, one convention for every command (README: exit status): 0 the command answered;
# 1 a bug (a traceback); 2 refused input, or nothing to answer (nothing matched, nothing to compare);
# 128+N stopped by signal N (130: Ctrl-C).
NOTHING_TO_COMPARE = 2

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
        "range's message, or, where that reads nothing, its name as nsys shows it (domain:message, e.g. "
        "sweep:fa3|q1_ctx32768|3). Default: the presets traceattr, keyvalue, separated in turn. `traceattr shapes` "
        "lists them."
    ),
]
WideOpt = Annotated[
    bool,
    typer.Option(
        "--wide",
        help="Every table column, however wide the terminal (by default secondary columns give way, "
        "and a line says which). Piped output with no COLUMNS is wide too.",
    ),
]
RulesOpt = Annotated[Optional[Path], typer.Option(help="TOML kernel-role rules tried before the built-in ones.")]


def check_group(group: str | None) -> None:
    """A grouping preset, or a regex polars accepts with the named groups grouping needs; else one line."""
    if group is not None:
        checked_group(group)


def check_selected(att: Attribution | Attributing, domain: str | None, match: str | None) -> None:
    """One line, exit 2, when --domain/--match chose no range: an empty table would read as an answer, while
    ``[unattributed]`` holds every op."""
    if not att.selected or att.ranges["range_id"].is_not_null().any():
        return
    asked = " and ".join(f"{flag} {value!r}" for flag, value in (("--domain", domain), ("--match", match)) if value)
    every = att.trace.ranges
    domains = sorted(d for d in every["domain"].drop_nulls().unique().to_list())
    example = every["name"].drop_nulls().head(1).to_list()
    seen = (f"; domains here: {', '.join(map(repr, domains[:5]))}" if domains else "; no range here has a domain") + (
        f"; a name here reads {example[0][:120]!r}" if example else "; the trace has no NVTX ranges"
    )
    raise TraceattrError(f"{att.meta.path}: no NVTX range matches {asked}{seen}")


def check_bandwidth(tb_per_s: float | None) -> None:
    """--bandwidth (TB/s) within what a GPU can have (the bounds TARGET_INFO_GPU's is held to); else one line:
    1e-300 would print a roofline share of 10^300 %."""
    lo, hi = MIN_MEMORY_BANDWIDTH / 1e12, MAX_MEMORY_BANDWIDTH / 1e12
    if tb_per_s is not None and not (math.isfinite(tb_per_s) and lo <= tb_per_s <= hi):
        raise TraceattrError(f"--bandwidth must be a GPU's memory bandwidth in TB/s, {lo:g} to {hi:g}, got {tb_per_s}")
