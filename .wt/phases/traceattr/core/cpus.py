"""How many CPUs this process may use."""

from __future__ import annotations

import os

# Set by a pool of worker processes (jobs.many_pool) to each worker's share of the CPUs: a worker's
# reading threads (ADBC) and the sqlite3 fallback's reading processes then fit in its share, instead of
# each of N workers starting one per CPU of the machine.
CPU_SHARE_ENV = "TRACEATTR_CPU_SHARE"


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity, which a container or ``taskset`` may set below
    the machine's count (``os.cpu_count()``), so threads and worker processes are not oversubscribed;
    at most its share (``TRACEATTR_CPU_SHARE``) when it is one of a pool's workers."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cpus = os.cpu_count() or 1
    share = os.environ.get(CPU_SHARE_ENV, "").strip()
    if share.isdigit() and int(share) >= 1:
        return min(cpus, int(share))
    return cpus
