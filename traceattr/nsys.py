"""Finding and running the Nsight Systems CLI (``nsys``).

Search order: ``$TRACEATTR_NSYS``, ``nsys`` on PATH, then the standard
install folders, including the copy that ships inside Nsight Compute
(``/opt/nvidia/nsight-compute/<ver>/host/target-linux-x64/nsys``). Commands
are argument lists, never shell strings.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from traceattr.errors import NsysError

ENV_VAR = "TRACEATTR_NSYS"
_STANDARD_GLOBS = (
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
    "/usr/local/cuda*/bin/nsys",
    "/usr/local/cuda*/nsight-systems*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    "/opt/nsys*/target-linux-x64/nsys",
    "/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nsys",
)


def find_nsys() -> Path | None:
    """The nsys binary to use, or None when there is none."""
    env = os.environ.get(ENV_VAR)
    if env:
        path = Path(env)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    on_path = shutil.which("nsys")
    if on_path:
        return Path(on_path)
    for pattern in _STANDARD_GLOBS:
        # newest version folder first
        for hit in sorted(glob.glob(pattern), reverse=True):
            if os.access(hit, os.X_OK):
                return Path(hit)
    return None


def run(argv: Sequence[str], *, what: str, timeout: float | None = None, cwd: str | Path | None = None) -> str:
    """Run *argv*; return stdout, or raise :class:`NsysError` with nsys's own last words."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, cwd=cwd, check=False)
    except FileNotFoundError:
        raise NsysError(f"{what}: {argv[0]} cannot be executed") from None
    except subprocess.TimeoutExpired:
        raise NsysError(f"{what}: no answer after {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        reason = tail[-1] if tail else f"exit status {proc.returncode}"
        raise NsysError(f"{what} failed: {reason}")
    return proc.stdout


def export_command(nsys: Path, report: Path, sqlite: Path) -> list[str]:
    return [str(nsys), "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(sqlite), str(report)]


def export_sqlite(report: Path, sqlite: Path | None = None) -> Path:
    """Export *report* (.nsys-rep) to SQLite beside it, or reuse an up-to-date export.

    The raw report is only read. When its folder is not writable the export
    goes to ``~/.cache/traceattr``.
    """
    from traceattr.errors import TraceError

    if not report.is_file():
        raise TraceError(report, "no such file")
    target = sqlite or report.with_suffix(".sqlite")
    if target.exists() and target.stat().st_mtime >= report.stat().st_mtime:
        return target
    if not os.access(target.parent, os.W_OK):
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "traceattr"
        cache.mkdir(parents=True, exist_ok=True)
        target = cache / target.name
    nsys = find_nsys()
    if nsys is None:
        raise TraceError(
            report,
            f"is an nsys report and no nsys was found to export it; set {ENV_VAR}, or run "
            f"`nsys export --type sqlite {report}` and pass the .sqlite",
        )
    tmp = target.with_name(target.stem + ".partial.sqlite")
    try:
        run(export_command(nsys, report, tmp), what=f"nsys export of {report}", timeout=3600)
    except NsysError as err:
        tmp.unlink(missing_ok=True)
        raise TraceError(report, str(err)) from None
    tmp.replace(target)
    return target
