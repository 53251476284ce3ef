"""Run a command under Nsight Systems and export the report to SQLite.

One subprocess wrapper returning a typed result; argument lists only. The
capture traces CUDA and NVTX and nothing else (``--sample=none
--cpuctxsw=none``: CPU sampling would write gigabytes for a tiny run), graph
kernels per node (``--cuda-graph-trace=node``: a graph replay's kernels stay
visible), and, by default, only between cudaProfilerStart/Stop, which the
runner places around its timed loop (JIT compilation and validation stay out
of the trace).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from traceattr.core.errors import NsysError
from traceattr.trace.nsys import export_command, run


@dataclass(frozen=True)
class CaptureResult:
    command: tuple[str, ...]
    returncode: int
    report: Path  # the raw .nsys-rep, kept
    sqlite: Path | None  # its export, when export ran
    output_tail: tuple[str, ...]  # last lines the profiled process and nsys printed


def profile_command(nsys: Path, output: Path, app: Sequence[str], *, capture_range: bool = True) -> list[str]:
    argv = [
        str(nsys), "profile",
        "--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--cuda-graph-trace=node",
        "--force-overwrite=true", f"--output={output}",
    ]  # fmt: skip
    if capture_range:
        argv += ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    return [*argv, *app]


def capture(
    nsys: Path,
    output: Path,
    app: Sequence[str],
    *,
    capture_range: bool = True,
    on_line: Callable[[str], None] | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> CaptureResult:
    """Profile *app*; stream its output lines to *on_line*; export to SQLite beside the report."""
    argv = profile_command(nsys, output, app, capture_range=capture_range)
    tail: list[str] = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail = [*tail[-199:], line]
            if on_line is not None:
                on_line(line)
        try:
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise NsysError(f"nsys profile did not finish within {timeout:.0f} s") from None
    report = output.with_suffix(".nsys-rep")
    if returncode != 0 or not report.exists():
        last = next((t for t in reversed(tail) if t.strip()), f"exit status {returncode}")
        raise NsysError(f"nsys profile failed ({'no report written' if not report.exists() else last}): {last}")
    sqlite = output.with_suffix(".sqlite")
    run(export_command(nsys, report, sqlite), what="nsys export", timeout=3600)
    return CaptureResult(tuple(argv), returncode, report, sqlite, tuple(tail))
