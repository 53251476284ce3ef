"""Byte-compile what a benchmark's contenders import, as installing a package does.

With PYTHONDONTWRITEBYTECODE set and packages unpacked without their bytecode (a device machine's copy
of the tree, its bundles of polars and ADBC), every timed process would otherwise compile them from
source: ~85 ms of CPU for traceattr, and 0.6 s for polars on the H200 host (`import polars` 0.89 s from
source, 0.27 s compiled), which an installed package never pays.
"""

from __future__ import annotations

import compileall
import os
import subprocess
import sys
from pathlib import Path


def byte_compile(work: Path, baseline: Path | None) -> list[str]:
    """Compile the traceattr package(s) the contenders import (the tree in *work*, and *baseline*'s),
    and every other package a traceattr command loads (polars, ADBC, typer, ...); the folders compiled."""
    # what attribute, compare and report load: left out, report's plotly, numpy, scipy and narwhals (~360
    # modules) were compiled from source in every timed run on the 16-core host, 0.87 s of report's 2.6 s
    # on the nested trace and 0.35 s of compare's 1.5 s (py-spy, 2026-12-07)
    probe = (
        "import os, sys, sysconfig\n"
        "import traceattr.cli.attribute, traceattr.cli.compare, traceattr.cli.report, traceattr.trace.loader\n"
        "import traceattr.attribution.engine, traceattr.analysis.pipeline, traceattr.present.report\n"
        "from traceattr.present.report import figures_compare, figures_decision, figures_phases, figures_timeline\n"
        "from traceattr.present.report import html, round, style, table\n"
        "try:\n    import scipy.special, scipy.stats\nexcept ImportError:\n    pass\n"  # where a fit or interval needs it
        "std = sysconfig.get_paths()['stdlib']\n"
        "tops = {m.split('.')[0] for m in list(sys.modules)}\n"
        "for name in sorted(tops):\n"
        "    f = getattr(sys.modules.get(name), '__file__', None) or ''\n"
        "    if f.endswith('__init__.py') and not f.startswith(std):\n"
        "        print(os.path.dirname(f))\n"
    )
    envs = [None, *([{**os.environ, "PYTHONPATH": str(baseline)}] if baseline is not None else [])]
    folders: list[str] = []
    for env in envs:
        found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=work, env=env)
        for folder in found.stdout.split("\n") if found.returncode == 0 else []:
            if folder and folder not in folders:
                compileall.compile_dir(folder, quiet=2)  # a read-only install (system site) stays as it is
                folders.append(folder)
    return folders
