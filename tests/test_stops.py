"""Stops other than Ctrl-C, leftovers of runs killed outright, and result folders we must not trust (issue 19).

Built at test time from the example traces: SIGTERM and SIGHUP end a command as Ctrl-C does (no
``.partial`` left, workers gone, exit 128 + signal); partials of a killed run are removed by the next
one; a forged manifest replaces nothing; a full disk while writing parquet, an export that is no
export, and ``--out`` given as a symlink each end in one line or work as asked.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import IN_CI

EXAMPLES = Path(__file__).parent.parent / "examples" / "traces"
SWEEP = EXAMPLES / "h200_mla_sweep.sqlite"
OTHER = EXAMPLES / "h200_mla_fa2_fa3.sqlite"


def _traceattr(*args: object, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "traceattr", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, **kw)  # type: ignore[call-overload]  # fmt: skip


def _run(*args: object, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "traceattr", *map(str, args)], capture_output=True, text=True,
                          timeout=120, check=False, **kw)  # type: ignore[call-overload]  # fmt: skip


def _reports(tmp_path: Path, count: int) -> Path:
    """A folder of *count* copies of the two example traces, in turn: a many-report run's input."""
    folder = tmp_path / "reports"
    folder.mkdir()
    for i in range(count):
        shutil.copy(SWEEP if i % 2 else OTHER, folder / f"r{i}.sqlite")
    return folder


def _partials(root: Path) -> list[Path]:
    """The ``.partial`` files and folders under *root*, looked at while a command may be renaming or
    removing them: os.walk skips a folder that vanishes mid-walk, where Path.rglob raised
    FileNotFoundError (a red run seen once, the test's race, not the command's)."""
    found = []
    for folder, dirs, files in os.walk(root):
        found += [Path(folder) / name for name in dirs + files if ".partial" in name]
    return found


def _wait_for(cond, timeout: float = 60) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return False


def _one_line(rc: int, err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert all(n in lines[0] for n in needles), lines[0]


COMMANDS = {
    "attribute": lambda out: ("attribute", SWEEP, "--out", out, "-f", "parquet"),
    "compare": lambda out: ("compare", SWEEP, "--out", out),
    "report": lambda out: ("report", SWEEP, "-o", out.with_suffix(".html")),
}


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_sigterm_and_sighup_leave_no_partial(tmp_path: Path, command: str, signum: int) -> None:
    out = tmp_path / "res"
    proc = _traceattr(*COMMANDS[command](out))
    # the signal lands while the output is being written: its temporary copy exists
    _wait_for(lambda: bool(_partials(tmp_path)) or proc.poll() is not None)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    if proc.returncode != 0:  # it may have finished just before the signal
        assert proc.returncode == 128 + signum, err
        assert err.strip().splitlines()[-1] == f"traceattr: stopped by {signal.Signals(signum).name}", err
        assert "Traceback" not in err
    assert not _partials(tmp_path)


def _children(pid: int) -> set[int]:
    """Every live descendant of *pid* (from /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {c for c, p in parents.items() if p in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, OSError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone, only not yet reaped


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigterm_stops_the_worker_processes(tmp_path: Path) -> None:
    folder = _reports(tmp_path, 6)
    proc = _traceattr("attribute", folder, "-j", "2", "--out", tmp_path / "res", "-f", "csv")
    workers: set[int] = set()

    def started() -> bool:
        workers.update(_children(proc.pid))
        return len(workers) >= 2 or proc.poll() is not None

    assert _wait_for(started)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)  # would hang if a worker still held our stderr
    assert proc.returncode in (0, 143), err
    if proc.returncode == 143:  # nothing after the last line (multiprocessing's tracker once wrote there)
        assert err.strip().splitlines()[-1] == "traceattr: stopped by SIGTERM", err
    assert _wait_for(lambda: not any(_alive(p) for p in workers), timeout=5), [p for p in workers if _alive(p)]
    assert not _partials(tmp_path)


SCRIPT = Path(sys.executable).with_name("traceattr")  # the installed program, as users run it


def _script_run(tmp_path: Path, folder: Path, *extra: str) -> subprocess.Popen[str]:
    """``traceattr attribute FOLDER -j 2`` through the installed script, in a process group of its own (a
    terminal's signals are sent to the group)."""
    args = ["attribute", folder, "-j", "2", "--out", tmp_path / "res", "-f", "csv", *extra]
    return subprocess.Popen([SCRIPT, *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(not SCRIPT.exists(), reason="the traceattr script is not installed beside this Python")
@pytest.mark.parametrize(
    "stop", ["SIGTERM", "Ctrl-C", "hangup"], ids=["sigterm-to-traceattr", "ctrl-c-to-the-group", "hangup-to-the-group"]
)
@pytest.mark.parametrize("pool", ["processes", "dask"])
def test_a_stopped_many_report_run_says_so_once(tmp_path: Path, pool: str, stop: str) -> None:
    """Through the ``traceattr`` script, a many-report run stopped mid-way prints its one line, nothing else.

    Before: each spawned worker re-imported the script and set itself up as the program, so SIGTERM
    printed 'traceattr: stopped by a signal' once per worker above the real line; a terminal's Ctrl-C
    (SIGINT to every process of its group) made each worker say 'traceattr: interrupted', or print a
    KeyboardInterrupt traceback under Dask; and Dask's own logs printed cancelled tasks' warnings and
    closed connections' tracebacks. (``python -m traceattr`` never showed the first: multiprocessing does
    not re-import a package's ``__main__``.) A closed terminal (SIGHUP to the group) killed multiprocessing's
    resource tracker, and the cleanup printed its 'relaunching' warning and a KeyError traceback per
    semaphore."""
    if pool == "dask" and not IN_CI:
        pytest.importorskip("distributed", reason="the `multi` extra (Dask) is not installed")
    folder = _reports(tmp_path, 120)  # a few seconds of reports on two workers: the stop lands while they run
    proc = _script_run(tmp_path, folder, *(["--dask", "local"] if pool == "dask" else []))
    # a worker wrote its first report's part: reports are under way
    assert _wait_for(lambda: any(f.startswith("kernels-") for _, _, fs in os.walk(tmp_path) for f in fs))
    if stop == "SIGTERM":
        proc.send_signal(signal.SIGTERM)
    else:  # as a terminal sends Ctrl-C, or its hangup when closed: to the whole group
        os.killpg(proc.pid, signal.SIGINT if stop == "Ctrl-C" else signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    rc, line = {"SIGTERM": (143, "traceattr: stopped by SIGTERM"), "Ctrl-C": (130, "traceattr: interrupted"),
                "hangup": (129, "traceattr: stopped by SIGHUP")}[stop]  # fmt: skip
    assert (proc.returncode, err.splitlines()) == (rc, [line]), err
    assert not _partials(tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(not SCRIPT.exists(), reason="the traceattr script is not installed beside this Python")
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_ctrl_c_while_the_workers_start_says_so_once(tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the workers too, and one still importing (polars alone takes 0.15-0.5 s)
    has not yet been told to leave stops to the parent: it printed a KeyboardInterrupt traceback from
    its import above our line (seen once in six runs of the test above on a loaded machine). Workers now
    start with the terminal's signals blocked, and drop them once they ignore them."""
    proc = _script_run(tmp_path, _reports(tmp_path, 40))

    def importing() -> bool:  # a worker has loaded polars' library: it is importing, its setup still to come
        for pid in _children(proc.pid):
            with contextlib.suppress(OSError):
                maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
                # polars.abi3.so (1.x), _polars_runtime.abi3.so (2.x)
                if any("polars" in line.rsplit("/", 1)[-1] and ".so" in line for line in maps):
                    return True
        return proc.poll() is not None

    assert _wait_for(importing)
    assert proc.poll() is None, "the run ended before a worker was seen loading polars"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err.splitlines()) == (130, ["traceattr: interrupted"]), err
    assert not _partials(tmp_path)


def test_a_stop_while_the_pool_starts_its_thread_raises_stopped_and_ends_the_workers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The race CI once hit: SIGTERM landed inside ProcessPoolExecutor.submit, while the pool started its
    manager thread; the pool's shutdown then raised RuntimeError ('cannot join thread before it is
    started') over the stop, and the command ended in a traceback. Here the signal is sent at that exact
    point, every time."""
    import multiprocessing
    from concurrent.futures import process

    from traceattr.core import stopping
    from traceattr.jobs.many import Settings
    from traceattr.jobs.many_pool import in_processes

    real_start = process._ExecutorManagerThread.start

    def start_after_a_stop(thread: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # handled at the next bytecode: before the thread starts
        real_start(thread)  # type: ignore[arg-type]

    monkeypatch.setattr(process._ExecutorManagerThread, "start", start_after_a_stop)
    jobs = [(str(SWEEP if i % 2 else OTHER), f"r{i}", i) for i in range(4)]
    previous = signal.signal(signal.SIGTERM, stopping._raise_stop)
    try:
        with pytest.raises(stopping.Stopped):
            list(in_processes(jobs, Settings(), str(tmp_path), 2, lambda _r: None))
    finally:
        signal.signal(signal.SIGTERM, previous)
        stopping._received.clear()
    assert _wait_for(lambda: not multiprocessing.active_children(), timeout=10), multiprocessing.active_children()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
@pytest.mark.parametrize("again", [True, False], ids=["ignored-again", "left-to-polars"])
@pytest.mark.slow
def test_an_ignored_sigint_stays_ignored_once_polars_is_in(again: bool) -> None:
    """A script's background job starts with SIGINT ignored (Ctrl-C is for the foreground command).
    Importing polars (2.1) sets its own SIGINT handler over it, and a Ctrl-C then interrupted a background
    traceattr mid-run. Once the command's module is in, the program ignores it again. The second case
    shows the handler that the first one removes (where this polars sets one)."""
    program = (
        "import signal, sys\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a script's background job starts\n"
        "sys.argv[0] = 'traceattr'\n"
        "from traceattr import cli\n"
        "cli.load_command('attribute')  # polars comes in with the command's module\n"
        f"{'cli._imports_done()' if again else 'pass'}\n"
        "status = open('/proc/self/status').read()\n"
        "ignored = int(next(l for l in status.splitlines() if l.startswith('SigIgn')).split()[1], 16)\n"
        "print(bool(ignored & (1 << (signal.SIGINT - 1))))\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    if not again and out.stdout.strip() == "True":
        pytest.skip("this polars leaves an ignored SIGINT alone")
    assert out.stdout.strip() == str(again), out.stderr


@pytest.mark.parametrize("released", [True, False], ids=["released", "not-released"])
def test_a_pool_left_by_a_stop_leaves_no_semaphore_warning_after_the_last_line(released: bool) -> None:
    """After a stop the traceback still holds the process pool, and the program leaves through os._exit:
    multiprocessing's resource tracker then found the pool's named semaphores and printed 'There appear
    to be N leaked semaphore objects' after 'traceattr: stopped by SIGTERM' (seen in one stop in three).
    The not-released case shows the warning this test looks for does appear without the release."""
    program = (
        "import multiprocessing, os, sys\n"
        "from traceattr import cli\n"
        "held = multiprocessing.get_context('spawn').Queue()  # named semaphores, as a pool's queues\n"
        f"{'cli._release_semaphores()' if released else 'pass'}\n"
        "sys.stderr.write('traceattr: stopped by SIGTERM\\n'); sys.stderr.flush()\n"
        "os._exit(143)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 143, done.stderr
    if released:
        assert done.stderr.strip().splitlines() == ["traceattr: stopped by SIGTERM"], done.stderr
    else:
        assert "leaked semaphore" in done.stderr, done.stderr


@pytest.mark.slow
def test_partials_of_a_killed_run_are_removed_by_the_next(tmp_path: Path) -> None:
    out = tmp_path / "res"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)  # a process that has exited: its partials are stale
    stale_set = tmp_path / f".res.{dead_pid}.x1y2.partial"
    stale_set.mkdir()
    (stale_set / "ranges.parquet").write_bytes(b"half")
    live = tmp_path / f".res.{os.getpid()}.a1b2.partial"  # a run writing here right now (this process)
    live.mkdir()
    unrelated = tmp_path / ".res.notapid.partial"  # not named by traceattr's scheme: never touched
    unrelated.mkdir()
    report_stale = tmp_path / f".r.html.{dead_pid}.k3.partial"
    report_stale.write_text("half a report")
    assert _run("attribute", OTHER, "--out", out, "-f", "parquet").returncode == 0
    assert _run("report", OTHER, "-o", tmp_path / "r.html").returncode == 0
    assert not stale_set.exists() and not report_stale.exists()
    assert live.exists() and unrelated.exists()


@pytest.mark.slow
def test_a_forged_manifest_replaces_nothing(tmp_path: Path) -> None:
    out = tmp_path / "res"
    out.mkdir()
    (out / "precious.txt").write_text("my notes")
    forged = {"tool": "traceattr", "command": "attribute", "outputs": ["precious.txt", "ranges.csv"]}
    (out / "attribution.json").write_text(json.dumps(forged))
    result = _run("attribute", OTHER, "--out", out, "-f", "csv")
    _one_line(result.returncode, result.stderr, str(out), "did not write")
    assert (out / "precious.txt").read_text() == "my notes"
    assert sorted(p.name for p in out.iterdir()) == ["attribution.json", "precious.txt"]
    # a real earlier set is still replaced
    real = tmp_path / "real"
    assert _run("attribute", OTHER, "--out", real, "-f", "csv").returncode == 0
    assert _run("attribute", SWEEP, "--out", real, "-f", "json").returncode == 0
    assert sorted(p.name for p in real.iterdir()) == ["attribution.json", "kernels.json", "ranges.json"]


@pytest.mark.slow
def test_full_disk_while_writing_parquet_is_one_line_naming_the_output(tmp_path: Path) -> None:
    import resource

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of killing the process
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    out = tmp_path / "res"
    result = _run("attribute", SWEEP, "--out", out, "-f", "parquet", preexec_fn=limit)
    _one_line(result.returncode, result.stderr, "cannot be written", str(out / "ranges.parquet"))
    assert ".partial" not in result.stderr  # the output asked for, not the hidden staging folder
    assert not out.exists() and not _partials(tmp_path)


@pytest.mark.slow
def test_out_may_be_a_symlink_to_a_folder(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    for trace in (OTHER, SWEEP):  # a new set, then one replacing it
        result = _run("attribute", trace, "--out", link, "-f", "csv")
        assert result.returncode == 0, result.stderr
    assert link.is_symlink() and link.resolve() == real
    assert json.loads((real / "attribution.json").read_text())["input"].endswith(SWEEP.name)
    assert not _partials(tmp_path)


@pytest.mark.slow
def test_an_export_that_is_no_export_is_never_kept(tmp_path: Path) -> None:
    script = tmp_path / "nsys"
    script.write_text(f"#!{sys.executable}\nimport sys\n"
                      "open(sys.argv[sys.argv.index('--output') + 1], 'w').write('junk, exit 0')\n")  # fmt: skip
    script.chmod(0o755)
    folder = tmp_path / "run"
    folder.mkdir()
    rep = folder / "x.nsys-rep"
    rep.write_bytes(b"raw capture")
    env = {**os.environ, "TRACEATTR_NSYS": str(script)}
    for _ in range(2):  # the second run must not reuse anything the first one left
        result = _run("attribute", rep, env=env)
        _one_line(result.returncode, result.stderr, "no SQLite")
    assert sorted(p.name for p in folder.iterdir()) == ["x.nsys-rep"]
