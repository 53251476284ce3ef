"""``traceattr attribute``: GPU time per NVTX range and per kernel role."""

from __future__ import annotations

import sys
import time
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import polars as pl
import typer

from traceattr import __version__
from traceattr.attribution.engine import Attributing, Attribution, RangeFilter, attribute
from traceattr.attribution.roles import RoleRules
from traceattr.cli import app
from traceattr.cli.options import (
    DaskOpt,
    DomainOpt,
    GroupOpt,
    MatchOpt,
    ModeChoice,
    ModeOpt,
    RulesOpt,
    TracesArg,
    WideOpt,
    WorkersOpt,
    check_group,
    check_regex,
    check_selected,
)
from traceattr.core.errors import TraceattrError
from traceattr.core.output import ResultSet, csv_text
from traceattr.jobs.many_inputs import expand_inputs  # jobs.many (pools, combining) only for several
from traceattr.trace.inputs import resolve_trace
from traceattr.trace.loader import load_trace

if TYPE_CHECKING:
    from collections.abc import Callable

    from traceattr.jobs.many import Combined, Settings
    from traceattr.present.steps import Steps

MANIFEST = "attribution.json"  # names the set in --out DIR; see traceattr.core.output.ResultSet
Format = Enum("Format", {f: f for f in ("table", "csv", "json", "parquet")}, type=str)  # type: ignore[misc]


@app.command("attribute")
def attribute_command(
    traces: TracesArg,
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="Write ranges.<fmt> and kernels.<fmt> here.")
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", "-f", help="table (terminal), csv, json or parquet.")
    ] = Format.table,  # type: ignore[attr-defined]
    mode: ModeOpt = ModeChoice.nsys,  # type: ignore[attr-defined]
    domain: DomainOpt = None,
    match: MatchOpt = None,
    rules: RulesOpt = None,
    limit: Annotated[int, typer.Option(help="Rows shown on the terminal (0: all).", min=0, max=1 << 31)] = 30,
    each_range: Annotated[
        bool,
        typer.Option(
            "--ranges",
            help="On the terminal, one row per range (every instance) instead of one per call series "
            "(the name without iter=, arm=, PyTorch's seq=/op_id=).",
        ),
    ] = False,
    wide: WideOpt = False,
    workers: WorkersOpt = None,
    dask: DaskOpt = None,
    group: GroupOpt = None,
) -> None:
    """Attribute GPU ops to the NVTX ranges that launched them.

    Example: traceattr attribute run.sqlite --match 'traceattr:' --out results/

    Many traces (traceattr attribute ranks/ -o out/ -f parquet): each is attributed in its own
    process (or on Dask with --dask), the tables are concatenated with a `trace` column, and
    traces.<fmt> (one row per trace) and across_traces.<fmt> (per range name: the traces'
    medians, spread, slowest trace) are added. A trace that cannot be read fails alone: its
    reason is printed, the others are written, and the exit status is 2.
    """
    started = time.time()
    role_rules = RoleRules.load(rules)
    check_regex(match)
    check_group(group)
    paths = expand_inputs(traces)
    if len(paths) > 1:
        from traceattr.jobs.many import Settings

        settings = Settings(mode.value, domain, match, str(rules) if rules else None)
        _attribute_many(paths, settings, out, fmt.value, limit, workers, dask, started, wide)
        return
    path = resolve_trace(paths[0])
    fmt_value = fmt.value
    if out is None and fmt_value == "parquet":
        raise TraceattrError("--format parquet needs --out DIR")
    from traceattr.present.steps import attributing, steps  # on stderr, a terminal only: seconds per step

    if out is None:
        with steps() as step:
            step(f"read {path}")
            trace = load_trace(path)
            step(attributing(trace))
            att = attribute(trace, mode=mode.value, rules=role_rules, select=RangeFilter(domain, match))
            check_selected(att, domain, match)
            tables = _render(att, limit, each_range, wide, group, step) if fmt_value == "table" else None
        if tables is not None:
            tables()
        elif fmt_value == "csv":
            sys.stdout.write(csv_text(att.ranges))
        else:
            sys.stdout.write(att.ranges.write_json() + "\n")
        return
    file_fmt = "csv" if fmt_value == "table" else fmt_value
    # opened before the work, so a --out that cannot be used is refused at once
    with ResultSet(out, command="attribute", manifest=MANIFEST, inputs=(paths[0], path)) as result, steps() as step:
        step(f"read {path}")
        trace = load_trace(path)
        step(f"{attributing(trace)}, writing ranges.{file_fmt}")
        run = Attributing(
            trace, mode=mode.value, rules=role_rules, select=RangeFilter(domain, match), keep_calls=fmt_value == "table"
        )
        del trace  # only the run holds the trace: `del run` below frees its frames before kernels are written
        check_selected(run, domain, match)
        shown = None
        if fmt_value == "table":  # the terminal table after the files: the range table is held whole
            shown = run.result(pl.concat(list(run.range_rows())))
            ranges_file = result.table(shown.ranges, "ranges", file_fmt)
        else:  # each window's range rows written as they are attributed, none held
            ranges_file = result.table(run.ranges_lazy(), "ranges", file_fmt)
        step(f"write kernels.{file_fmt}")
        manifest = {
            "version": __version__, "input": str(path), "nsys_version": run.meta.nsys_version,
            "schema_version": run.meta.schema_version, "engine": run.meta.engine, "mode": run.mode, "domain": domain,
            "match": match, "rules": str(rules) if rules else None, "notes": list(run.notes),
        }  # fmt: skip
        # the kernel table holds the ops, their placement and the range names; the trace's other frames go
        # before it is written
        kernels = run.ops_lazy()
        del run
        kernels_file = result.table(kernels, "kernels", file_fmt)
        result.write_manifest({
            **manifest, "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
            "seconds": round(time.time() - started, 3),
        })  # fmt: skip
        tables = _render(shown, limit, each_range, wide, group, step) if shown is not None else None
    if tables is not None:
        tables()
    print(f"wrote {ranges_file}, {kernels_file}", file=sys.stderr)


def _render(
    att: Attribution, limit: int, each_range: bool, wide: bool, group: str | None, step: Steps
) -> Callable[[], None]:
    """The tables of *att*, made as one more step (a million ranges take seconds), and the call that prints them
    once the steps are gone from the terminal; with no steps drawn, printed as they are made (a reader that leaves
    early, `| head`, stops the work)."""
    # rich's table machinery is imported only when a table is shown: `--out` never pays for it
    from traceattr.present.console import console
    from traceattr.present.terminal import render_attribution

    con = console(wide)
    if not step.drawn:
        render_attribution(att, con, limit, ranges=each_range, group=group)
        return lambda: None
    step("make the tables")
    with con.capture() as made:
        render_attribution(att, con, limit, ranges=each_range, group=group)
    return lambda: con.file.write(made.get())


def _attribute_many(
    paths: list[Path], settings: Settings, out: Path | None, fmt: str, limit: int,
    workers: int | None, dask: str | None, started: float, wide: bool,
) -> None:  # fmt: skip
    from traceattr.cli.many import attribute_many, exit_status
    from traceattr.jobs.many import write_combined

    if out is None and fmt == "parquet":
        raise TraceattrError("--format parquet needs --out DIR")
    if out is None:
        with attribute_many(paths, settings, workers=workers, dask=dask, out=None) as combined:
            if fmt == "table":
                _render_many(combined, limit, wide)
            elif fmt == "csv":
                sys.stdout.write(csv_text(combined.ranges))
            else:
                sys.stdout.write(combined.ranges.write_json() + "\n")
        raise typer.Exit(exit_status(combined))
    # one set: the tables and the manifest go into DIR together (see traceattr.core.output.ResultSet)
    with ResultSet(out, command="attribute", manifest=MANIFEST, inputs=paths) as result:
        with attribute_many(paths, settings, workers=workers, dask=dask, out=result.staging) as combined:
            written = write_combined(combined, result.staging, "csv" if fmt == "table" else fmt)  # type: ignore[arg-type]
        result.files += [w.name for w in written]
        result.write_manifest({
            "version": __version__, "inputs": [str(p) for p in paths], "mode": settings.mode,
            "domain": settings.domain, "match": settings.match, "rules": settings.rules, "workers": workers,
            "dask": dask, "failed": list(combined.failures),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
            "seconds": round(time.time() - started, 3),
        })  # fmt: skip
    if fmt == "table":
        _render_many(combined, limit, wide)
    print(f"wrote {', '.join(str(result.folder / w.name) for w in written)}", file=sys.stderr)
    raise typer.Exit(exit_status(combined))


def _render_many(combined: Combined, limit: int, wide: bool) -> None:
    from traceattr.jobs.many import across_traces
    from traceattr.present.console import console
    from traceattr.present.terminal import render_across, render_traces

    con = console(wide)
    render_traces(combined.traces, con)
    with_ops = combined.ranges.filter(pl.col("gpu_ops") > 0)
    if with_ops.height:
        render_across(across_traces(with_ops, "name"), con, "name", limit)
