"""Running many traces' :func:`attribute_trace` in parallel: local processes or a Dask cluster.

Results are yielded as they finish; a worker that dies (out of memory, a signal, a lost Dask
worker) fails the trace it held, not the run.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from traceattr.core import stopping
from traceattr.core.cpus import CPU_SHARE_ENV, usable_cpus
from traceattr.core.errors import TraceattrError
from traceattr.jobs.many_trace import TRACE_COLUMN, TraceResult, attribute_trace


@contextlib.contextmanager
def worker_threads(workers: int) -> Iterator[dict[str, str]]:
    """The environment of worker processes: N workers share the cores instead of each taking all, in
    polars' pool (POLARS_MAX_THREADS, read at import) and in the reads (ADBC's threads, the sqlite3
    fallback's processes: core.cpus.usable_cpus reads the share)."""
    share = str(max(1, usable_cpus() // workers))
    env = {"POLARS_MAX_THREADS": share, CPU_SHARE_ENV: share}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def leave_stops_to_the_parent() -> None:
    """A worker process ignores Ctrl-C and a closed terminal (SIGINT and SIGHUP reach every process of the
    terminal's group): the parent stops, terminates its workers and prints the one line. Otherwise each
    worker raised KeyboardInterrupt and printed its own message. Set after polars is loaded (with this
    module's imports), which arms its own SIGINT handler over an ignored one; until then the worker holds
    them blocked (it starts inside stopping.group_signals_held)."""
    stopping.leave_group_signals()


def failed_result(job: tuple[str, str, int], reason: str) -> TraceResult:
    path, name, i = job
    summary = {TRACE_COLUMN: name, "path": path, "ok": False, "error": reason}
    return TraceResult(i, name, path, summary, error=reason)


def in_processes(jobs, settings, parts, workers, done) -> Iterator[TraceResult]:  # type: ignore[no-untyped-def]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    # spawn, not fork: a forked child inherits polars' thread pool in whatever state it was
    with worker_threads(workers):
        with stopping.group_signals_held():  # the pool's resource tracker starts here
            pool = ProcessPoolExecutor(
                workers, mp_context=multiprocessing.get_context("spawn"), initializer=leave_stops_to_the_parent
            )
        try:
            # a stop landing inside submit() can interrupt the pool's own thread start, leaving a pool
            # whose shutdown raises RuntimeError instead of stopping: held until every job is queued (the
            # workers start here, on the first submits)
            with stopping.deferred(), stopping.group_signals_held():
                futures = {pool.submit(attribute_trace, *job, settings=settings, parts=parts): job for job in jobs}
            for fut in as_completed(futures):
                try:
                    result = fut.result()
                except BrokenProcessPool:  # a worker died (out of memory, a signal): the traces it held fail
                    result = failed_result(futures[fut], f"{futures[fut][0]}: the worker process died while reading it")
                done(result)
                yield result
        except BaseException:  # Ctrl-C or an error here: stop now rather than finish every queued trace
            # the workers and the pool's manager thread: no public way to reach them before Python 3.14
            procs = list((getattr(pool, "_processes", None) or {}).values())
            manager = getattr(pool, "_executor_manager_thread", None)
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.join(timeout=10)  # gone before the caller removes the parts they were writing
            if manager is not None and manager.is_alive():
                # it now closes the pool's queues, freeing their semaphores; done before the program's
                # os._exit, or the resource tracker reports them as leaked after our last line
                manager.join(timeout=10)
            raise
        pool.shutdown(wait=True)


def on_dask(jobs, settings, parts, address, workers, done) -> Iterator[TraceResult]:  # type: ignore[no-untyped-def]
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise TraceattrError("--dask needs Dask's distributed scheduler: pip install 'traceattr[multi]'") from None
    cluster = None
    try:
        if address == "local":
            # a stop while the cluster starts would leave its processes half-spawned, out of close()'s
            # reach (cluster still None): held until it is up (~1-2 s), then it is closed as usual
            with worker_threads(workers) as env, stopping.deferred(), stopping.group_signals_held():
                # silence_logs: the cluster is ours and a failed trace is reported as such; its own logs
                # (WARNING and up by default, in its processes and in this one's scheduler) turned every stop
                # into warnings and tracebacks of cancelled tasks and closed connections around our last line
                cluster = LocalCluster(
                    n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None, env=env,
                    silence_logs=logging.CRITICAL,
                )  # fmt: skip
            client = Client(cluster)
            client.run(leave_stops_to_the_parent)  # its workers are ours too (a remote cluster's are not)
        else:
            try:
                client = Client(address, timeout="10s")
            except (OSError, TimeoutError) as err:
                raise TraceattrError(f"--dask {address}: cannot reach the scheduler ({err})") from None
        with client:
            futures = client.map(
                attribute_trace,
                *zip(*jobs, strict=True),
                settings=settings,
                parts=parts,
                pure=False,
            )
            job_of = {f.key: job for f, job in zip(futures, jobs, strict=True)}
            for fut in as_completed(futures):
                try:
                    result = fut.result()
                except Exception as err:  # a worker lost with the task (KilledWorker) fails that trace only
                    result = failed_result(
                        job_of[fut.key], f"{job_of[fut.key][0]}: Dask worker failed: {type(err).__name__}"
                    )
                done(result)
                yield result
    finally:
        if cluster is not None:
            cluster.close()
