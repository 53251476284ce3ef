"""``traceattr profile`` and ``traceattr shapes``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from traceattr.backends.arms import GENERIC_OPTIONS
from traceattr.cli import app, options_given
from traceattr.cli.options import protocol_options
from traceattr.core.errors import TraceattrError
from traceattr.core.progress import parse
from traceattr.core.protocol import PROFILE, Protocol
from traceattr.core.shapes import parse_shape
from traceattr.jobs.profile import ProfilePlan, ProfileResult, execute, make_plan, require_runnable
from traceattr.present.comparison import render_summary
from traceattr.present.console import console
from traceattr.present.terminal import render_plan

ShapeOpt = Annotated[
    list[str], typer.Option("--shape", "-s", help="Shape to time, e.g. q8_ctx900k (repeat for a sweep).")
]
ArmsOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--backend",
        "-b",
        "--arm",
        # \\[ keeps typer's rich help from reading [label=] and [options] as markup (and dropping them)
        help="Arm to time (repeatable): \\[label=]backend\\[options], e.g. fa3, 'fa3\\[splits=4]', "
        f"'flashmla\\[graphs]', cand=my_pkg.my_mod:MyBackend; options every backend takes: "
        f"{', '.join(o.name for o in GENERIC_OPTIONS)}. Default: every registered backend.",
    ),
]
ShuffleOpt = Annotated[bool, typer.Option("--shuffle-pages", help="Scatter each request's KV pages over the cache.")]
ValidateOpt = Annotated[bool, typer.Option(help="Check outputs against the torch reference before timing.")]
OutRootOpt = Annotated[Path, typer.Option("--out-root", help="Run folders are created here.")]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Print the plan (backends, tensors, nsys command) and stop.")
]
ArchOpt = Annotated[
    Optional[str],
    typer.Option(
        help="With --dry-run: plan for this GPU instead of this machine's (sm_100: a B200; sm_90: an H200), "
        "installed packages unchecked."
    ),
]
RanksOpt = Annotated[
    Optional[int],
    typer.Option(
        help="Real DCP ranks: one process per GPU under its own nsys, all-gather over NCCL and merge; "
        "the shape must say dcp<N> with N = --ranks; one trace per rank, attributed together."
    ),
]
# what the ranks runner does not take: it times eager calls with the flush only
_NOT_WITH_RANKS = ("graphs", "shuffle", "between", "order", "max_noise", "max_iters", "hold_us", "lead")


@app.command("profile")
@protocol_options("profile")
def profile_command(
    ctx: typer.Context, shape: ShapeOpt, backend: ArmsOpt = None, protocol: Protocol = PROFILE,
    shuffle: ShuffleOpt = False, validate: ValidateOpt = True, out_root: OutRootOpt = Path("reports"),
    dry_run: DryRunOpt = False, arch: ArchOpt = None, ranks: RanksOpt = None,
) -> None:  # fmt: skip
    """Time isolated MLA decode calls of every available backend under nsys, and attribute them.

    Example: traceattr profile --shape q8_ctx900k --shape q1_ctx131k
    Real ranks: traceattr profile --shape q8_ctx1m_dcp2 --ranks 2 (one GPU each)
    """
    shapes = [parse_shape(s) for s in shape]
    if arch is not None and (not dry_run or ranks is not None):
        raise TraceattrError(
            "--arch plans for a GPU this machine may not have: it goes with --dry-run (without --ranks)"
        )
    if ranks is not None:
        unused = options_given(ctx, _NOT_WITH_RANKS, changed=True)  # an option the ranks runner would ignore
        if unused:
            raise TraceattrError(f"--ranks does not take {', '.join(unused)} (each rank times eager calls after an "
                                 "L2 flush, --iters of them)")  # fmt: skip
        _profile_ranks(shapes, ranks, backend, protocol, validate=validate, out_root=out_root, dry_run=dry_run)
        return
    plan = make_plan(shapes, backend, protocol, shuffle=shuffle, validate=validate, out_root=out_root, arch=arch)
    con = console()
    if dry_run:
        render_plan(plan, con)
        return
    require_runnable(plan)
    render_plan(plan, con)
    with con.status("starting nsys …") as status:

        def show(line: str) -> None:
            event = parse(line)
            if event is not None:
                status.update(escape(event.text))
                con.print(line, style="dim", highlight=False, markup=False)

        result = execute(plan, on_line=show)
    _show_result(plan, result, con)


def _show_result(plan: ProfilePlan, result: ProfileResult, con: Console) -> None:
    """The summary table, every arm that did not run and why, a low-clock note, the run folder."""
    unavailable = [(a.shape, a.backend, a.reason) for a in plan.availability if a.reason]
    for shape_name, report in result.runner.shapes.items():
        for name, entry in report.backends.items():
            if entry.status in ("wrong", "failed"):
                unavailable.append((shape_name, name, f"{entry.status}: {entry.reason}"))
    render_summary(result.summary, con, unavailable)
    if result.runner.low_clock_mhz is not None:
        con.print(f"[yellow]note:[/yellow] median SM clock {result.runner.low_clock_mhz} MHz is below 90% of max")
    con.print(f"run folder: {result.folder}", markup=False, highlight=False)


def _profile_ranks(
    shapes: list, ranks: int, backend: list[str] | None, protocol: Protocol, *, validate: bool, out_root: Path,
    dry_run: bool,
) -> None:  # fmt: skip
    from traceattr.jobs.many import Settings, across_traces, combine, parts_folder, run_traces, write_combined
    from traceattr.jobs.rank_runs import execute_ranks, make_ranks_plan
    from traceattr.present.terminal import render_across, render_traces

    if len(shapes) != 1 or (backend is not None and len(backend) != 1):
        raise TraceattrError("--ranks runs one shape and one backend at a time")
    arm = backend[0] if backend else "fa3"
    plan = make_ranks_plan(shapes[0], ranks, arm, protocol=protocol, validate=validate, out_root=out_root)
    con = console()
    con.print(plan.describe(), markup=False, highlight=False)
    if dry_run:
        return
    _require_gpu(plan.nsys is not None)
    with con.status(f"{ranks} ranks under nsys …"):
        exports = execute_ranks(plan)
    with parts_folder(plan.folder) as parts:
        combined = combine(run_traces(exports, Settings(domain="traceattr"), workers=len(exports), parts=parts))
        written = write_combined(combined, plan.folder, "parquet")
    for reason in combined.failures:
        con.print(Text.assemble(("error:", "red"), f" {reason}"))
    render_traces(combined.traces, con)
    render_across(across_traces(combined.ranges, "name"), con, "name")
    con.print(f"run folder: {plan.folder} ({', '.join(w.name for w in written)})", markup=False, highlight=False)


def _require_gpu(nsys_found: bool) -> None:
    """Refused before nsys starts (no run folder, no rank logs) when this machine cannot run a capture."""
    from traceattr.backends import current_device

    hint = "without a GPU, analyse a capture made elsewhere with `traceattr attribute TRACE.sqlite`"
    device, problem = current_device()
    if device is None:
        raise TraceattrError(f"cannot profile: {problem}; {hint}")
    if not nsys_found:
        raise TraceattrError(f"cannot profile: Nsight Systems (nsys) not found (set TRACEATTR_NSYS); {hint}")
