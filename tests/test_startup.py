"""The command line starts light: `--version`, `--help` and `shapes` import neither polars nor the
attribution stack (nor pydantic, which typer's coercion would pull in), and the lazily loaded
commands are listed exactly as they would be if they were all imported."""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("polars", "numpy", "pydantic", "traceattr.attribution", "traceattr.trace", "traceattr.analysis")


def _imported_by(*args: str) -> tuple[list[str], str]:
    probe = (
        "import contextlib, io, sys\n"
        f"sys.argv = ['traceattr', *{list(args)!r}]\n"
        "from traceattr.cli import _main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    _main(None)\n"
        f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
        "print(out.getvalue()[:200], file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    return done.stdout.split(), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args", [("--version",), ("--help",), ("shapes",), ()])
def test_light_commands_import_no_frame_library(args: tuple[str, ...]) -> None:
    heavy, shown = _imported_by(*args)
    assert heavy == [], f"traceattr {' '.join(args)} imported {heavy}"
    assert shown.strip(), "the command printed nothing"


@pytest.mark.slow
def test_a_trace_command_still_imports_what_it_needs() -> None:
    heavy, _ = _imported_by("attribute", "--help")
    assert "polars" in heavy  # the probe itself can see an import


def test_listed_summaries_are_the_commands_own() -> None:
    from traceattr.cli import COMMANDS, app, load_command

    for name in COMMANDS:
        command = load_command(name)
        assert command.help is not None
        assert inspect.cleandoc(command.help).split("\n\n")[0] == COMMANDS[name][1], name
    # every command a module registers is listed (none runs unlisted, none listed twice)
    for module in {m for m, _ in COMMANDS.values()}:
        importlib.import_module(f"traceattr.cli.{module}")
    assert sorted(i.name for i in app.registered_commands) == sorted(COMMANDS)


@pytest.mark.slow
def test_a_many_reports_worker_imports_no_statistics() -> None:
    """Each worker of ``attribute DIR -j N`` / ``compare A B`` imports the per-report code in a fresh process:
    scipy (the verdicts' intervals) takes seconds to import there and is not needed to read a report's calls."""
    code = "import sys, traceattr.jobs.many_trace; print(sorted(m for m in sys.modules if m.split('.')[0] == 'scipy'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


@pytest.mark.slow
def test_one_trace_attribute_imports_neither_pydantic_nor_the_many_reports_machinery(tmp_path) -> None:
    """The fixed cost of every `attribute` run: its options are coerced without pydantic
    (traceattr.cli.coercion), and one trace needs none of jobs.many's pools and combining."""
    trace = tmp_path / "missing.sqlite"  # the command stops at the missing file, after its imports
    code = (
        "import contextlib, io, sys\n"
        f"sys.argv = ['traceattr', 'attribute', {str(trace)!r}, '--out', {str(tmp_path / 'out')!r}, '-f', 'parquet']\n"
        "from traceattr.cli import _main\n"
        "with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    _main(None)\n"
        "print(sorted(m for m in ('pydantic', 'traceattr.jobs.many', 'traceattr.cli.many', 'rich') if m in sys.modules))\n"
        "print('traceattr.cli.attribute' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.split("\n")[:2] == ["[]", "True"], out


@pytest.mark.slow
def test_report_attributes_before_numpy_is_imported(tmp_path) -> None:
    """numpy (~10 MB resident) and the analysis come after report's attribution, whose windows are its peak: the
    probe stops report where the attribution starts and looks."""
    trace = Path(__file__).parent.parent / "examples" / "traces" / "h200_mla_sweep.sqlite"
    code = (
        "import contextlib, io, sys\n"
        "import traceattr.analysis.calls as calls\n"
        "def stop(*args, **kwargs):\n"
        "    print(sorted(m for m in ('numpy', 'scipy', 'plotly', 'traceattr.analysis.pipeline') if m in sys.modules))\n"
        "    raise SystemExit(0)\n"
        "calls.calls_to_read_again = stop\n"
        f"sys.argv = ['traceattr', 'report', {str(trace)!r}, '-o', {str(tmp_path / 'r.html')!r}]\n"
        "from traceattr.cli import _main\n"
        "with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    _main(None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.strip() == "[]", out
    assert not (tmp_path / "r.html").exists()


def _allocator_settings(**env: str) -> list[str]:
    """The jemalloc and pool settings polars sees in a `traceattr` process (after polars adds its own)."""
    probe = (
        "import os, sys\n"
        "sys.argv = ['traceattr', 'attribute', '--help']\n"
        "import traceattr.cli\n"
        "import polars\n"
        "print(os.environ['_RJEM_MALLOC_CONF'])\n"
        "print(os.environ['POLARS_MAX_THREADS'])\n"
        "print(os.environ['POLARS_IDEAL_SINK_MORSEL_SIZE_BYTES'])\n"
    )
    ours = ("_RJEM_MALLOC_CONF", "POLARS_MAX_THREADS", "POLARS_IDEAL_SINK_MORSEL_SIZE_BYTES")
    clean = {k: v for k, v in os.environ.items() if k not in ours}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60,
                          env={**clean, **env})  # fmt: skip
    return done.stdout.split()


def _last(conf: str, key: str) -> str | None:
    """jemalloc reads its options left to right, a later value winning: the value *key* ends with."""
    values = [item.split(":", 1)[1] for item in conf.split(",") if item.startswith(key + ":")]
    return values[-1] if values else None


@pytest.mark.slow
def test_the_program_sets_the_allocator_polars_uses() -> None:
    conf, threads, sink_bytes = _allocator_settings()
    assert _last(conf, "narenas") == "1"
    assert _last(conf, "muzzy_decay_ms") == "0", conf  # after polars' own muzzy_decay_ms, so it wins
    assert _last(conf, "dirty_decay_ms") == "100", conf  # and its dirty_decay_ms (500)
    assert 1 <= int(threads) <= 4
    assert int(sink_bytes) == 256 << 10  # writes below 1 MiB: small page-cache folios (cli.__init__)


@pytest.mark.slow
def test_settings_the_user_made_stay() -> None:
    conf, threads, sink_bytes = _allocator_settings(
        _RJEM_MALLOC_CONF="narenas:8", POLARS_MAX_THREADS="7", POLARS_IDEAL_SINK_MORSEL_SIZE_BYTES="999"
    )
    assert _last(conf, "narenas") == "8" and _last(conf, "muzzy_decay_ms") != "0"
    assert threads == "7"
    assert sink_bytes == "999"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's per-process I/O counters")
def test_the_tables_reach_the_file_in_small_writes(tmp_path: Path) -> None:
    """With polars' default sink morsels the kernel table went out in 2-6 MB writes (large page-cache
    folios, slow on a VM that hands memory back to its host); the program asks for 256 KiB morsels.
    Counted by the kernel for the process: bytes written over write calls."""
    polars = pytest.importorskip("polars")
    if int(polars.__version__.split(".")[0]) < 2:
        pytest.skip(f"polars {polars.__version__} has no sink morsel size to set")
    trace = tmp_path / "t.sqlite"
    maker = Path(__file__).resolve().parent.parent / "benchmarks" / "make_sweep_trace.py"
    subprocess.run([sys.executable, str(maker), str(trace), "--shape", "nested", "--calls", "8000"],
                   check=True, capture_output=True, timeout=120)  # fmt: skip
    probe = (
        "import sys\n"
        f"sys.argv = ['traceattr', 'attribute', {str(trace)!r}, '--format', 'csv', '--out', {str(tmp_path / 'o')!r}]\n"
        "import traceattr.cli as cli\n"
        "try:\n    cli._main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "io = dict(line.split(': ') for line in open('/proc/self/io').read().splitlines())\n"
        "print(io['wchar'], io['syscw'])\n"
    )
    clean = {k: v for k, v in os.environ.items() if k != "POLARS_IDEAL_SINK_MORSEL_SIZE_BYTES"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120,
                          env=clean)  # fmt: skip
    written, calls = map(int, done.stdout.split()[-2:])
    tables = sum(f.stat().st_size for f in (tmp_path / "o").glob("*.csv"))
    assert tables > 8 << 20  # enough to need many writes either way
    assert written >= tables and written / calls < 512 << 10, (written, calls)
