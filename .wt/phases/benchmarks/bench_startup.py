"""Start-up of the commands that need no trace, against importing polars: each a fresh process.

    python benchmarks/bench_startup.py [--repeat 15] [--json FILE]

Runs, interleaved in one loop so that a change in the machine's load hits all alike: ``python -c
"import polars"`` (the yardstick: any command that reads a trace pays it), ``python -c "pass"`` (the
interpreter alone), and ``traceattr --version``, ``traceattr --help``, ``traceattr shapes`` through
the installed console script (what a user types). Prints per contender the minimum and median wall
time of the repeats and their ratio to importing polars; issue 20's target is ≤ 2×.
Also checks, in one more process each, that those commands imported neither polars nor the
attribution stack.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bytecode import byte_compile  # beside this script

HEAVY = ("polars", "traceattr.attribution", "traceattr.trace", "pydantic", "numpy")


def _contenders() -> dict[str, list[str]]:
    script = shutil.which("traceattr") or str(Path(sys.executable).with_name("traceattr"))
    return {
        "python": [sys.executable, "-c", "pass"],
        "import polars": [sys.executable, "-c", "import polars"],
        "traceattr --version": [script, "--version"],
        "traceattr --help": [script, "--help"],
        "traceattr shapes": [script, "shapes"],
    }


def _time(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def _imported(args: list[str]) -> list[str]:
    """The heavy modules the CLI imports for *args*, in a fresh process."""
    probe = (
        "import contextlib, io, sys\n"
        f"sys.argv = ['traceattr', *{args!r}]\n"
        "from traceattr.cli import _main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    _main(None)\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    # run away from any source tree, so the installed traceattr is the one probed
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tempfile.gettempdir()
    ).stdout
    return out.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--json", type=Path, help="Write every run's seconds here.")
    args = parser.parse_args()
    contenders = _contenders()
    compiled = byte_compile(Path.cwd(), None)  # polars too: an install has its bytecode
    for argv in contenders.values():  # warm the file cache: the first run of each reads its files from disk
        _time(argv)
    runs: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(args.repeat):
        for name, argv in contenders.items():
            runs[name].append(_time(argv))
    base_min, base_median = min(runs["import polars"]), statistics.median(runs["import polars"])
    print(
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, {args.repeat} interleaved runs each, "
        f"{len(compiled)} packages byte-compiled first"
    )
    print(f"{'contender':22s} {'min':>8s} {'median':>8s} {'min/polars':>11s} {'median/polars':>14s}")
    for name, seconds in runs.items():
        low, mid = min(seconds), statistics.median(seconds)
        print(f"{name:22s} {low:7.3f}s {mid:7.3f}s {low / base_min:11.2f} {mid / base_median:14.2f}")
    for command in (["--version"], ["--help"], ["shapes"]):
        heavy = _imported(command)
        print(f"traceattr {' '.join(command)} imports: {', '.join(heavy) if heavy else 'none of ' + ', '.join(HEAVY)}")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
