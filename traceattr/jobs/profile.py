"""``traceattr profile``: plan, capture, attribute and summarise isolated MLA decode calls.

The plan is computed anywhere (``--dry-run``): which backends run and why
the others cannot, the tensors each shape needs, the nsys command. Executing
it needs a CUDA GPU and nsys: the runner (:mod:`traceattr.runner`) runs
under ``nsys profile``, then the export is attributed and summarised into a
run folder ``reports/<time>_<shape>/``.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl

from traceattr import __version__
from traceattr.analysis.pipeline import analyse
from traceattr.attribution.engine import Attribution, attribute
from traceattr.backends import current_device, planning_device
from traceattr.backends.arms import Arm, check_arm, default_arms, parse_arms, same_program
from traceattr.backends.base import Device
from traceattr.backends.layout import KvLayout
from traceattr.core import runfolder
from traceattr.core.errors import BackendUnsupported, TraceattrError
from traceattr.core.output import ResultSet
from traceattr.core.protocol import ORDERS, PROFILE, Protocol
from traceattr.core.records import RunnerRecord, RunRecord
from traceattr.core.shapes import Shape
from traceattr.jobs.capture import capture, profile_command
from traceattr.runner.plan import RunPlan, check_between, check_timing
from traceattr.trace.loader import load_trace
from traceattr.trace.nsys import find_nsys


@dataclass(frozen=True)
class Availability:
    shape: str
    backend: str  # the arm's label
    reason: str | None  # None: it runs
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProfilePlan:
    shapes: tuple[Shape, ...]
    arms: tuple[Arm, ...]
    device: Device | None
    device_problem: str | None
    nsys: Path | None
    availability: tuple[Availability, ...]
    run: RunPlan
    folder: Path
    tensors: dict[str, dict[str, int]] = field(default_factory=dict)  # per shape: bytes of kv, q, pages

    @property
    def backends(self) -> tuple[str, ...]:
        """The arms' labels, in A B … order."""
        return tuple(a.label for a in self.arms)

    @property
    def runnable(self) -> tuple[str, ...]:
        return tuple(b for b in self.backends if any(a.backend == b and a.reason is None for a in self.availability))

    def command(self) -> list[str]:
        nsys = self.nsys or Path("nsys")
        return profile_command(
            nsys, self.folder / runfolder.TRACE_STEM, self.app(), capture_range=self.run.capture_range
        )

    def app(self) -> list[str]:
        """The runner process nsys launches."""
        return [sys.executable, "-m", "traceattr.runner", str(self.folder / runfolder.PLAN), str(self.folder)]


def make_plan(
    shapes: Sequence[Shape],
    arms: Sequence[str | Arm] | None = None,
    protocol: Protocol = PROFILE,
    *,
    shuffle: bool = False,
    validate: bool = True,
    out_root: Path = Path("reports"),
    arch: str | None = None,
    **changes: Any,
) -> ProfilePlan:
    """The plan of a profile run: *arms* (texts of :mod:`traceattr.backends.arms` or parsed arms; default one per
    registered backend) on *shapes*, timed as *protocol* says (:class:`~traceattr.core.protocol.Protocol`:
    what runs between calls, in which order, how many iterations, the hold and the lead).

    *changes*: protocol fields to change (``iters=8``), as a shorthand for ``replace(protocol, …)``.
    *shuffle* scatters each request's KV pages; *validate* compares outputs with the torch reference. *arch*
    (``sm_100``): plan for that GPU instead of this machine's, the installed packages unchecked (``--dry-run
    --arch``: what a B200 user's run would do)."""
    protocol = replace(protocol, **changes)
    iters, warmup, max_noise, max_iters = protocol.iters, protocol.warmup, protocol.max_noise, protocol.max_iters
    hold_us, flush_bytes, order = protocol.hold_us, protocol.flush_bytes, protocol.order
    if not shapes:
        raise TraceattrError("give at least one --shape (traceattr shapes lists the grammar)")
    chosen = parse_arms(a.text if isinstance(a, Arm) else a for a in arms) if arms else default_arms()
    if flush_bytes is not None and flush_bytes <= 0:
        raise TraceattrError(f"--flush-mb must be positive, got {flush_bytes / (1 << 20):g}")
    if iters < 1 or warmup < 1:
        raise TraceattrError("--iters and --warmup must be at least 1 (warm-up compiles and validates)")
    if order not in ORDERS:
        raise TraceattrError(f"--order must be one of {', '.join(ORDERS)}, got {order!r}")
    check_timing(iters, max_noise, max_iters, hold_us)
    between = check_between(protocol.between)
    device, problem = (planning_device(arch), None) if arch else current_device()
    availability = []
    for shape in shapes:
        for arm in chosen:
            try:
                plan = check_arm(arm, shape, device, packages=arch is None)
                availability.append(Availability(shape.name, arm.label, None, plan.notes))
            except BackendUnsupported as err:
                availability.append(Availability(shape.name, arm.label, str(err).split(": ", 1)[-1]))
    l2 = device.l2_bytes if device else 0
    flush = flush_bytes or max(2 * l2, 128 << 20)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    label = shapes[0].short_name if len(shapes) == 1 else f"sweep{len(shapes)}_{shapes[0].short_name}"
    run = RunPlan.of(tuple(s.name for s in shapes), tuple(a.text for a in chosen), replace(protocol, between=between),
                     flush_bytes=flush, shuffle=shuffle, validate=validate)  # fmt: skip
    tensors = {}
    for s in shapes:
        layout = KvLayout(s.rank_share() if s.dcp > 1 else s)  # a DCP row holds the measured rank's shard
        kv_bytes = layout.num_pages * s.page * 576 * (1 if s.kv_dtype == "fp8" else 2)
        q_bytes = sum(s.q_lens()) * s.heads * 576 * 2
        tensors[s.name] = {
            "kv_bytes": kv_bytes,
            "q_bytes": q_bytes,
            "pages": layout.num_pages,
            "min_bytes_moved": s.bytes_moved(),
        }
    return ProfilePlan(
        tuple(shapes),
        chosen,
        device,
        problem,
        find_nsys(),
        tuple(availability),
        run,
        out_root / f"{stamp}_{label}",
        tensors,
    )


def require_runnable(plan: ProfilePlan) -> None:
    """One-line errors for what makes a capture impossible here."""
    hint = "without a GPU, analyse a capture made elsewhere with `traceattr attribute TRACE.sqlite`"
    if plan.device is None:
        raise TraceattrError(f"cannot profile: {plan.device_problem}; {hint}")
    if plan.nsys is None:
        raise TraceattrError(f"cannot profile: Nsight Systems (nsys) not found (set TRACEATTR_NSYS); {hint}")
    if not plan.runnable:
        reasons = "; ".join(f"{a.backend}: {a.reason}" for a in plan.availability if a.reason)
        raise TraceattrError(f"no backend can run here: {reasons}")


@dataclass(frozen=True)
class ProfileResult:
    folder: Path
    attribution: Attribution
    calls: pl.DataFrame
    summary: pl.DataFrame
    runner: RunnerRecord
    files: tuple[Path, ...]
    run: RunRecord | None = None  # run.json as written


def execute(plan: ProfilePlan, on_line: Callable[[str], None] | None = None, *, report: bool = True) -> ProfileResult:
    """Capture, attribute and summarise *plan* into its run folder; *report*: also write report.html."""
    require_runnable(plan)
    folder = plan.folder
    folder.mkdir(parents=True, exist_ok=False)
    plan.run.write(folder / runfolder.PLAN)
    started = time.time()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    result = capture(
        plan.nsys,
        folder / runfolder.TRACE_STEM,
        plan.app(),
        capture_range=plan.run.capture_range,
        on_line=on_line,
        env=env,
    )  # type: ignore[arg-type]
    captured = time.time()
    runner_file = folder / plan.run.results
    if not runner_file.exists():
        raise TraceattrError(f"{folder}: the runner wrote no {plan.run.results}; see the output above")
    runner = RunnerRecord.read(runner_file)
    if not runner.timed:
        reasons = "; ".join(
            f"{name}: {entry.reason}" for shape in runner.shapes.values() for name, entry in shape.backends.items()
        )
        raise TraceattrError(f"{folder}: nothing was timed ({reasons})")
    att = attribute(load_trace(result.sqlite))  # type: ignore[arg-type]
    events = list(runner.events)
    analysis = analyse(att, events=events, same_program=same_program)
    calls, summary = analysis.calls, analysis.summary
    bandwidth, source = analysis.peak_bytes_per_s, analysis.peak_source
    # the analysis outputs go in as one set, run.json last: a run folder with run.json is complete,
    # one without holds the raw capture only (an interrupted or failed analysis)
    with ResultSet(folder, command="profile", manifest=runfolder.RUN, replace=False) as outputs:
        files = [
            outputs.table(att.ranges, runfolder.RANGES, "parquet"),
            outputs.table(att.ops_lazy(), runfolder.KERNELS, "parquet"),
            outputs.table(calls, runfolder.CALLS, "csv"),
            outputs.table(summary, runfolder.SUMMARY, "csv"),
            outputs.table(summary, runfolder.SUMMARY, "json"),
        ]
        run_info = {
            "version": __version__, "argv": sys.argv, "nsys_command": shlex.join(result.command),
            "nsys_version": att.meta.nsys_version, "plan": asdict(plan.run), "gpu": runner.facts("gpu"),
            "versions": runner.facts("versions"), "clocks": runner.facts("clocks"), "arms": runner.facts("arms"),
            "protocol": runner.facts("protocol"), "backends": runner.facts("shapes"), "peak_bandwidth": bandwidth,
            "peak_bandwidth_source": source, "capture_seconds": round(captured - started, 1),
            "analysis_seconds": round(time.time() - captured, 1), "notes": list(att.notes),
            "outputs": [f.name for f in files] + [runfolder.TRACE_REPORT, runfolder.TRACE]
            + ([runfolder.REPORT] if report else []),
        }  # fmt: skip
        # the record as the manifest writes it: tool and command first, outputs as listed
        run = RunRecord.of({"tool": "traceattr", "command": "profile", **run_info})
        if report:
            files.append(_write_report(att, outputs, run, bandwidth, events))
        files.append(outputs.write_manifest(run.to_json()))
    return ProfileResult(folder, att, calls, summary, runner, tuple(files), run)


def _write_report(
    att: Attribution,
    outputs: ResultSet,
    run: RunRecord,
    bandwidth: float | None,
    events: list[dict[str, Any]],
) -> Path:
    from traceattr.present.report import write_report

    write_report(att, outputs.path(runfolder.REPORT), title=f"traceattr profile {outputs.folder.name}", run=run,
                 peak_bytes_per_s=bandwidth, events=events, same_program=same_program)  # fmt: skip
    return outputs.folder / runfolder.REPORT
