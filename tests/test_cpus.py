"""traceattr.core.cpus: how many CPUs this process may use, and a pool worker's share."""

from __future__ import annotations

import os

from traceattr.trace import sqlite_source


def test_usable_cpus_follows_the_affinity(monkeypatch) -> None:
    from traceattr.core import cpus

    monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda _pid: {3}, raising=False)
    assert cpus.usable_cpus() == 1
    monkeypatch.delattr(cpus.os, "sched_getaffinity")
    monkeypatch.setattr(cpus.os, "cpu_count", lambda: 6)
    assert cpus.usable_cpus() == 6


def test_a_pool_worker_keeps_to_its_share_of_the_cpus(monkeypatch) -> None:
    from traceattr.core import cpus
    from traceattr.jobs.many_pool import worker_threads

    monkeypatch.setattr(cpus.os, "sched_getaffinity", lambda _pid: set(range(16)), raising=False)
    monkeypatch.delenv(cpus.CPU_SHARE_ENV, raising=False)
    with worker_threads(4) as env:  # what each of 4 spawned workers inherits
        assert env == {"POLARS_MAX_THREADS": "4", cpus.CPU_SHARE_ENV: "4"}
        assert cpus.usable_cpus() == 4
        assert sqlite_source.reading_threads("adbc") == 4  # not 8 threads in each of 4 workers
        assert sqlite_source.reading_processes(10**8) == 4
    assert cpus.usable_cpus() == 16 and cpus.CPU_SHARE_ENV not in os.environ  # restored after the pool
    with worker_threads(16):
        assert sqlite_source.reading_processes(10**8) == 0  # one CPU each: the fallback reads in the worker
    for bad in ("0", "-2", "two", ""):
        monkeypatch.setenv(cpus.CPU_SHARE_ENV, bad)
        assert cpus.usable_cpus() == 16
    monkeypatch.setenv(cpus.CPU_SHARE_ENV, "64")  # a share above the affinity: the affinity
    assert cpus.usable_cpus() == 16
