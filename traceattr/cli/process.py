"""What the ``traceattr`` program sets up in its own process before the libraries load, and undoes after.

Only when this process is the program (not a library user importing the CLI, nor a worker that
multiprocessing spawned): the stop signals answered in one line while the libraries load, polars'
allocator and thread pool settings (read when polars loads, so they are set here, before any command
module is imported), and the garbage collector off during the imports. :mod:`traceattr.cli` imports
this module first; its ``main`` calls :func:`imports_done` once a command's module is in and
:func:`release_semaphores` before it leaves.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import io
import os
import resource
import signal
import sys

from traceattr.core import stopping
from traceattr.core.cpus import usable_cpus
from traceattr.core.encoding import TERMINAL_ERRORS

POOL_THREADS = 4  # polars' threads at most (below)


def interrupted_while_starting(signum: int, _frame: object) -> None:
    # Ctrl-C (or SIGTERM, SIGHUP) while the libraries load: nothing is open yet, so leave at once, in one line
    os.write(2, b"traceattr: interrupted\n" if signum == signal.SIGINT else b"traceattr: stopped by a signal\n")
    os._exit(128 + signum)


def spawned_worker() -> bool:
    """Whether this is a worker process that multiprocessing spawned: it re-imports the program's script as
    ``__mp_main__``, with the program's argv, and must not set itself up as the program (its stop messages
    were printed once per worker, and the garbage collector stayed off for its whole life). It has
    multiprocessing loaded and named before that import; the program itself has not loaded it yet."""
    mp = sys.modules.get("multiprocessing")
    return mp is not None and mp.current_process().name != "MainProcess"


# only when this process is the `traceattr` program, not a library user importing the CLI nor a worker
AS_PROGRAM = (
    os.path.basename(sys.argv[0]) == "traceattr" or sys.argv[0].endswith(os.path.join("traceattr", "__main__.py"))
) and not spawned_worker()


# The status of a program that wrote to a pipe whose reader had gone (128 + SIGPIPE), as a shell reports
# one killed by SIGPIPE: the answer did not all arrive. With the whole answer written, the status is 0.
PIPE_CLOSED = 128 + 13


class _Guarded(io.RawIOBase):
    """Descriptor 1 or 2 as the program writes to it. A pipe whose reader went away (``| head -1``) ends
    the program as SIGPIPE would (:data:`PIPE_CLOSED`, no traceback: click and rich would each turn it
    into exit 1); a stream closed from the start (``>&-``) is written to /dev/null, stdout's bytes
    counted, so the end can say the answer was lost."""

    def __init__(self, fd: int, closed: bool) -> None:
        super().__init__()
        self.fd, self.closed_at_start, self.lost = fd, closed, 0

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return not self.closed_at_start and os.isatty(self.fd)

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        if self.closed_at_start or self.lost:
            self.lost += len(data)
            return len(data)
        try:
            return os.write(self.fd, data)
        except BrokenPipeError:
            self.lost += len(data)
            _to_devnull(self.fd)  # the rest goes nowhere, as after a SIGPIPE
            raise SystemExit(PIPE_CLOSED) from None


def _to_devnull(fd: int) -> None:
    null = os.open(os.devnull, os.O_WRONLY)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


GUARDED: dict[int, _Guarded] = {}


def streams() -> None:
    """Standard output and error as the program needs them, whatever it was started with.

    A closed one (``>&-``, ``2>&-``): its descriptor is taken by /dev/null at once, so that no file opened
    later gets descriptor 1 or 2 and receives the program's printing. A broken pipe ends the program as
    SIGPIPE does (:class:`_Guarded`). Any encoding: characters it cannot carry are spelled in ASCII
    (:mod:`traceattr.core.encoding`), never a UnicodeEncodeError.
    """
    for fd, name in ((1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            closed = False
        except OSError:
            _to_devnull(fd)
            closed = True
        old = getattr(sys, name)
        encoding = getattr(old, "encoding", None) or "utf-8"
        raw = GUARDED[fd] = _Guarded(fd, closed)
        tty = raw.isatty()
        stream = io.TextIOWrapper(
            io.BufferedWriter(raw), encoding=encoding, errors=TERMINAL_ERRORS, line_buffering=tty or fd == 2,
            write_through=fd == 2,
        )  # fmt: skip
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def answer_lost() -> bool:
    """Whether the program printed to a standard output that was closed when it started."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    out = GUARDED.get(1)
    return out is not None and out.closed_at_start and out.lost > 0


# The least the program runs with. Below these, polars, jemalloc and OpenBLAS fail while they load or start
# their threads, where no Python code can catch it (a Rust panic, SIGABRT "background thread creation
# failed", a segfault, once a hang; 2 cores: 900 MB of address space failed, 1 GB ran the example sweep):
# refused at start in one line naming the limit.
MIN_OPEN_FILES = 64
MIN_ADDRESS_SPACE = 2 << 30


def _soft_limit(which: int, least: int) -> int:
    """The soft limit *which*, raised to *least* where the hard limit allows (no privilege needed)."""
    soft, hard = resource.getrlimit(which)
    if soft != resource.RLIM_INFINITY and soft < least and (hard == resource.RLIM_INFINITY or hard >= least):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (least, hard))
            soft = least
    return soft


def limits_refused() -> str | None:
    """Why this process's resource limits are too small for traceattr, in one line; None when they do."""
    files = _soft_limit(resource.RLIMIT_NOFILE, MIN_OPEN_FILES)
    if files != resource.RLIM_INFINITY and files < MIN_OPEN_FILES:
        return f"the open-file limit is {files} (ulimit -n); traceattr needs at least {MIN_OPEN_FILES}"
    space = _soft_limit(resource.RLIMIT_AS, MIN_ADDRESS_SPACE)
    if space != resource.RLIM_INFINITY and space < MIN_ADDRESS_SPACE:
        return (f"the address-space limit is {space >> 20} MiB (ulimit -v {space >> 10}); traceattr needs at least "
                f"{MIN_ADDRESS_SPACE >> 20} MiB")  # fmt: skip
    return None


def limit_reached(err: BaseException) -> str | None:
    """A failure that a resource limit explains, as one line naming the limit; None for any other."""
    if isinstance(err, OSError) and err.errno in (errno.EMFILE, errno.ENFILE):
        files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return f"too many open files (the limit is {files}: ulimit -n)"
    if isinstance(err, MemoryError) or (isinstance(err, OSError) and err.errno == errno.ENOMEM):
        space = resource.getrlimit(resource.RLIMIT_AS)[0]
        shown = "none" if space == resource.RLIM_INFINITY else f"{space >> 20} MiB: ulimit -v"
        return f"out of memory (the address-space limit is {shown})"
    if type(err).__name__ == "PanicException":  # polars (pyo3) gives up, e.g. a thread it could not start
        return f"a library stopped ({str(err).splitlines()[0][:120] if str(err) else 'panic'}); check ulimit -n and -v"
    return None


def start() -> None:
    """The program's settings, made before any library loads (each explained where it is made)."""
    streams()
    refused = limits_refused()
    if refused is not None:
        os.write(2, f"traceattr: error: {refused}\n".encode())
        os._exit(2)
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        # OpenBLAS (scipy) reserves a buffer per thread it starts, one per core: under an address-space
        # limit one thread is what the fits need
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL),
                            (getattr(signal, "SIGHUP", None), signal.SIG_DFL)):  # fmt: skip
        if signum is not None and signal.getsignal(signum) is default:  # an ignored signal stays ignored
            signal.signal(signum, interrupted_while_starting)
    # polars allocates through its own jemalloc, read from this variable when polars loads (a command's
    # module imports it, after this). By default jemalloc gives each thread one of 4 × CPUs arenas, and
    # memory freed into one arena is not reused by a thread of another: the reading threads' and polars'
    # pool threads' freed buffers pile up side by side, more of them the more cores (2 cores: `attribute
    # --out` peaks 360 -> 330 MB on the nested trace with one arena, same CPU time). muzzy_decay_ms:0:
    # polars lets freed pages turn "muzzy" (MADV_FREE) after 0.5 s and keeps them so for 1 s more (1.28:
    # for ever), all the while counted in the resident set; at 0 they are given back when they would turn
    # muzzy (2 cores, 3 runs each: nested 287 -> 267 MB, sweep 648 -> 627 MB, the same wall time).
    # dirty_decay_ms:100: freed pages stay "dirty" (reused as they are, resident) 0.1 s, not polars' 0.5 s.
    # report imports its analysis and figures, and allocates outside jemalloc (Python, numpy), just as its
    # attribution's windows have freed their scratch: with 0.5 s that scratch was still resident under them
    # (2 cores, nested trace, paired: report 234-251 -> 225-232 MB, nsys stats 235; sweep 566-573 ->
    # 535-544 MB; attribute and compare 0-20 MB lower; walls and CPU time within run-to-run noise). At 0
    # every freed page is refaulted when reused: +0.4-0.6 s of system time on the nested trace. A value the
    # user set stays as it is.
    os.environ.setdefault("_RJEM_MALLOC_CONF", "narenas:1,muzzy_decay_ms:0,dirty_decay_ms:100")
    # polars' pool: one thread per CPU by default, and its streaming sinks hold buffers per thread. On the
    # 16-core H200 host (benchmarks/README.md) 4 threads against 16: `attribute --out` on the nested trace
    # 307-329 MB against 535-537 MB at the same wall time; on the 1.25 M-kernel sweep 872-892 against 962-973
    # MB for 10% more wall time (3.10 s against 2.81 s; nsys stats: 34 s). A value the user set stays.
    os.environ.setdefault("POLARS_MAX_THREADS", str(min(usable_cpus(), POOL_THREADS)))
    # polars' streaming sinks write what they serialised of a morsel at once: 2-6 MB per write for the
    # kernel table. Linux gives a write that large page-cache folios of about its size, and on a VM that
    # hands freed memory back to its host (free page reporting, the 2-core box) those high-order pages
    # are the ones faulted in anew: 1 MiB writes cost ~2 ms/MB there, 128-512 KiB ones ~0.2 ms/MB. With
    # 256 KiB sink morsels (polars 2.x reads this; older versions ignore it), 2 cores, nested trace, 6
    # interleaved pairs: 1.72 against 2.00 s started cold, 1.72 against 1.94 s warm; peak 218-224 against
    # 225-235 MB; files byte-identical. A value the user set stays.
    os.environ.setdefault("POLARS_IDEAL_SINK_MORSEL_SIZE_BYTES", str(256 << 10))
    # Importing typer, polars and a command's modules makes ~10^5 long-lived objects and no garbage
    # cycles: the collector's passes over them cost 15-25 ms of every command. Off until the command's
    # module is in, then those objects are frozen out of every later collection (imports_done).
    gc.disable()


def imports_done() -> None:
    """The collector back on, for the command's own work, once the start-up's objects are frozen; the
    signals ignored at start ignored again."""
    if AS_PROGRAM and not gc.isenabled():
        gc.freeze()
        gc.enable()
    still_ignored()


def still_ignored() -> None:
    """Ignore again the stop signals this program was started with ignored (a script's background job
    ignores SIGINT, so that Ctrl-C stops only the foreground command): importing polars (2.1) sets its own
    SIGINT handler over an ignored SIGINT, while Python still reports SIG_IGN, and a Ctrl-C then
    interrupted a background traceattr. Every command but ``shapes`` has polars once its module is
    imported, which is when this runs."""
    if AS_PROGRAM:
        for signum in stopping.STOP_SIGNALS:
            if signal.getsignal(signum) is signal.SIG_IGN:
                signal.signal(signum, signal.SIG_IGN)  # Python's record, set again at the C level


def release_semaphores() -> None:
    """Unlink the named semaphores of worker pools still referenced (after a stop the traceback holds
    the pool; its workers are already ended, jobs.many_pool). os._exit skips multiprocessing's exit
    hook: its resource-tracker process would then unlink them itself and print a 'leaked semaphore
    objects' warning after our last line."""
    util = sys.modules.get("multiprocessing.util")
    if util is not None:
        with contextlib.suppress(Exception):
            util._run_finalizers(0)  # the hook's first step, without its joins; no public way to call it


if AS_PROGRAM:  # at import: traceattr.cli imports this module before typer, polars and the commands
    start()
